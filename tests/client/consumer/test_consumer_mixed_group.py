"""Mixed groups (issue 5): our consumers and confluent-kafka consumers in one group on our broker, with the classic
and with the ``consumer`` (KIP-848) protocol, split the partitions between them, never own one partition at the
same time, and consume every record once."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer as ConfluentConsumer

from groupstream import Consumer
from groupstream.client.admin import Admin, NewTopic
from support.brokers import BrokerProcess
from support.records import Out, produce_records
from support.waiting import wait_until

pytestmark = pytest.mark.broker_ours

PARTITIONS = 6


CLASSIC = {"partition.assignment.strategy": "range", "session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
KIP848 = {"group.protocol": "consumer", "group.remote.assignor": "uniform"}


class Ours:
    def __init__(self, bs: str, group: str, topic: str, settings: dict[str, Any]) -> None:
        self.owned: set[int] = set()
        self.records: list[tuple[int, int]] = []
        self.consumer = Consumer({"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
                                  "auto.commit.interval.ms": 200, **settings})  # fmt: skip
        self.consumer.subscribe([topic], listener=self)
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run)
        self.thread.start()

    def on_partitions_assigned(self, parts: list[Any]) -> None:
        self.owned |= {p.partition for p in parts}

    def on_partitions_revoked(self, parts: list[Any]) -> None:
        self.owned -= {p.partition for p in parts}

    def _run(self) -> None:
        while not self.stop_event.is_set():
            self.records.extend((r.partition, r.offset) for r in self.consumer.poll(0.2))
        self.consumer.close()

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(60)


class Theirs(Ours):
    def __init__(self, bs: str, group: str, topic: str, settings: dict[str, Any]) -> None:  # librdkafka inside
        self.owned = set()
        self.records = []
        self.consumer = ConfluentConsumer({"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
                                           "auto.commit.interval.ms": 200, **settings})  # fmt: skip
        self.consumer.subscribe([topic], on_assign=lambda _c, ps: self.on_partitions_assigned(ps),
                                on_revoke=lambda _c, ps: self.on_partitions_revoked(ps),
                                on_lost=lambda _c, ps: self.on_partitions_revoked(ps))  # fmt: skip
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop_event.is_set():
            for m in self.consumer.consume(num_messages=500, timeout=0.2):
                if m.error() is None:
                    self.records.append((m.partition(), m.offset()))
        self.consumer.close()


def test_our_consumers_and_confluent_consumers_share_a_group(groupstream_broker: BrokerProcess) -> None:
    share_a_group(groupstream_broker.bootstrap, CLASSIC)


def test_our_consumers_and_confluent_consumers_share_a_consumer_protocol_group(kip848_broker: BrokerProcess) -> None:
    share_a_group(kip848_broker.bootstrap, KIP848)


def share_a_group(bs: str, settings: dict[str, Any]) -> None:
    topic, group = f"mixed-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    with Admin({"bootstrap.servers": bs}) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS)])
    produce_records(bs, topic, [Out(b"v%d" % i, partition=i % PARTITIONS) for i in range(3000)])
    members: list[Ours] = [Ours(bs, group, topic, settings), Theirs(bs, group, topic, settings)]
    try:
        wait_until(lambda: all(m.owned for m in members) and sum(len(m.owned) for m in members) == PARTITIONS,
                   60, "our consumer and confluent's to split the partitions")  # fmt: skip
        members.append(Ours(bs, group, topic, settings))
        wait_until(lambda: all(m.owned for m in members) and sum(len(m.owned) for m in members) == PARTITIONS,
                   60, "three members to split the partitions")  # fmt: skip
        owned = [m.owned for m in members]
        assert all(not (a & b) for i, a in enumerate(owned) for b in owned[i + 1 :]), owned
        everything = {(p, o) for p in range(PARTITIONS) for o in range(500)}
        wait_until(lambda: {r for m in members for r in m.records} >= everything, 60, "every record consumed")
    finally:
        for m in members:
            m.stop()
    seen = [r for m in members for r in m.records]
    assert set(seen) == everything
    assert len(seen) == len(everything), f"{len(seen) - len(everything)} records were consumed twice"
