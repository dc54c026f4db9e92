"""kafka-python produces then consumes (assign mode) 100k keyed records, split over every codec with acks=1 and
with idempotent acks=all, on a 6-partition topic created with its KafkaAdminClient."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from support.brokers import BrokerProcess
from support.compat import Acked, Consumed, Scenario, check_round_trip, produce_then_consume, scenarios
from support.waiting import wait_until

pytestmark = [pytest.mark.compat, pytest.mark.slow]


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="compat-admin")
    try:
        admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])

        def visible() -> bool:
            described = admin.describe_topics([topic])
            return bool(described) and len(described[0]["partitions"]) == partitions

        wait_until(visible, 30, f"metadata to show {topic} with {partitions} partitions")
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, scenario: Scenario, records: list[tuple[bytes, bytes]]) -> list[Acked]:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks=1 if scenario.acks == "1" else "all",
        enable_idempotence=scenario.idempotent,  # kafka-python 3 defaults to True; acks=1 needs it off
        compression_type=None if scenario.codec == "none" else scenario.codec,
        linger_ms=5,
        request_timeout_ms=30_000,
    )
    try:
        futures = [producer.send(topic, key=key, value=value) for key, value in records]
        producer.flush(timeout=60)
        acked = []
        for (key, value), f in zip(records, futures, strict=True):
            md = f.get(timeout=10)
            acked.append(Acked(md.partition, md.offset, key, value))
        return acked
    finally:
        producer.close(timeout=10)


def consume(
    bootstrap: str, topic: str, partitions: int, expected: dict[int, int]
) -> tuple[list[Consumed], dict[int, int]]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        ends = {tp.partition: off for tp, off in consumer.end_offsets(tps).items()}
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        got: list[Consumed] = []
        need = sum(expected.values())
        deadline = time.monotonic() + 60
        while len(got) < need and time.monotonic() < deadline:
            for tp, msgs in consumer.poll(timeout_ms=500, max_records=10_000).items():
                got += [Consumed(tp.partition, m.offset, m.key, m.value) for m in msgs]
        for tp, msgs in consumer.poll(timeout_ms=200).items():  # must find nothing more
            got += [Consumed(tp.partition, m.offset, m.key, m.value) for m in msgs]
        return got, ends
    finally:
        consumer.close()


@pytest.mark.parametrize("scenario", scenarios(), ids=str)
def test_kafka_python_produce_consume(broker: BrokerProcess, scenario: Scenario) -> None:
    check_round_trip(broker, "kafkapython", scenario, produce_then_consume(create_topic, produce, consume))
