"""confluent-kafka (librdkafka) produces then consumes (assign mode) 100k keyed records, split over every codec
with acks=1 and with idempotent acks=all, on a 6-partition topic created with its AdminClient."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from support.brokers import BrokerProcess
from support.compat import (
    Acked,
    Consumed,
    Scenario,
    check_round_trip,
    position,
    produce_then_consume,
    scenarios,
)
from support.waiting import wait_until

pytestmark = [pytest.mark.compat, pytest.mark.slow]


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # stays referenced until its futures resolve
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    assert futures[topic].result(timeout=30) is None

    def visible() -> bool:
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        return md is not None and md.error is None and len(md.partitions) == partitions

    wait_until(visible, 30, f"metadata to show {topic} with {partitions} partitions")


def produce(bootstrap: str, topic: str, scenario: Scenario, records: list[tuple[bytes, bytes]]) -> list[Acked]:
    acked: list[Acked] = []
    errors: list[str] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked.append(Acked(*position(msg), msg.key(), msg.value()))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": scenario.acks,
            "enable.idempotence": scenario.idempotent,
            "compression.type": scenario.codec,
            "linger.ms": 5,
            "partitioner": "murmur2_random",  # the Java client's partitioner, checked on read
            "message.timeout.ms": 60_000,
        }
    )
    for i, (key, value) in enumerate(records):
        while True:
            try:
                producer.produce(topic, value=value, key=key, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.1)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0, "records still in flight after 60 s"
    assert not errors, f"{len(errors)} delivery errors, e.g. {errors[:3]}"
    return acked


def consume(
    bootstrap: str, topic: str, partitions: int, expected: dict[int, int]
) -> tuple[list[Consumed], dict[int, int]]:
    """Everything in ``topic`` from offset 0 (until ``expected`` records per partition are read, plus one
    short poll that must find nothing more), and the high watermarks."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}-reader",  # required by the Python binding; never joined (assign mode)
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in tps}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got: list[Consumed] = []
        need = sum(expected.values())
        deadline = time.monotonic() + 60
        while len(got) < need and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=10_000, timeout=0.5):
                err = m.error()
                assert err is None, f"consume error: {err}"
                got.append(Consumed(*position(m), m.key(), m.value()))
        # anything beyond the high watermark would be a bug too: one more short poll must return nothing
        extra = consumer.consume(num_messages=10, timeout=0.2)
        got += [Consumed(*position(m), m.key(), m.value()) for m in extra if m.error() is None]
        return got, ends
    finally:
        consumer.close()


@pytest.mark.parametrize("scenario", scenarios(), ids=str)
def test_confluent_produce_consume(broker: BrokerProcess, scenario: Scenario) -> None:
    check_round_trip(broker, "confluent", scenario, produce_then_consume(create_topic, produce, consume))
