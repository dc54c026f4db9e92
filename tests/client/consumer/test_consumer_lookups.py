"""What a Spark task asks of its Consumer besides records, on our broker: fresh topic metadata (existence and
topic id, seen at once after a delete and a create, not from the cache) and an assign that starts partitions at
given offsets with ``auto.offset.reset=none`` (an assign then a seek could fail in between)."""

from __future__ import annotations

import uuid

from groupstream import Consumer, Producer
from groupstream.assignment.types import TopicPartition
from groupstream.client.admin import Admin, NewTopic
from groupstream.protocol.error_codes import ErrorCode
from support.brokers import BrokerProcess
from support.waiting import wait_until


def make_topic(admin: Admin, name: str, partitions: int) -> None:
    admin.create_topics([NewTopic(name, partitions)])
    wait_until(lambda: name in admin.list_topics(), 20, f"topic {name} to appear")


def test_describe_topics_asks_the_broker_now(groupstream_broker: BrokerProcess) -> None:
    bs = groupstream_broker.bootstrap
    name = f"d-{uuid.uuid4().hex[:8]}"
    with Admin({"bootstrap.servers": bs}) as admin, Consumer({"bootstrap.servers": bs}) as consumer:
        make_topic(admin, name, 3)
        first = consumer.describe_topics([name, "no-such-topic"], timeout=20)
        desc = first.topics[name]
        assert desc.partition_count == 3 and desc.topic_id is not None
        assert first.topics["no-such-topic"].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert first.brokers, "the answer names the brokers"
        admin.delete_topics([name])
        wait_until(lambda: name not in admin.list_topics(), 20, f"topic {name} to go")
        make_topic(admin, name, 1)
        again = consumer.describe_topics([name], timeout=20).topics[name]
        assert again.partition_count == 1 and again.topic_id not in (None, desc.topic_id)
        assert name not in consumer.describe_topics([], timeout=20).topics


def test_assign_with_offsets_starts_there_even_with_no_reset(groupstream_broker: BrokerProcess) -> None:
    bs = groupstream_broker.bootstrap
    name = f"a-{uuid.uuid4().hex[:8]}"
    with Admin({"bootstrap.servers": bs}) as admin:
        make_topic(admin, name, 1)
    with Producer({"bootstrap.servers": bs}) as producer:
        for i in range(50):
            producer.produce(name, b"v%d" % i, partition=0)
        assert producer.flush(30) == 0
    tp = TopicPartition(name, 0)
    with Consumer({"bootstrap.servers": bs, "auto.offset.reset": "none"}) as consumer:
        consumer.assign([tp], offsets={tp: 40})
        got: list[int] = []

        def ten() -> bool:
            got.extend(r.offset for r in consumer.poll(0.2))
            return len(got) >= 10

        wait_until(ten, 20, "records 40..49")
        assert got == list(range(40, 50))
        assert consumer.position(tp) == 50
