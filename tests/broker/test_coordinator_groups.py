"""The runtime with the real coordinator shard: a confluent-kafka group on our broker, commits and static
members that survive a restart, and a coordinator failover (unload/reload) that a live consumer rides out."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from coordinator_kit import LoopBroker, wait_until

from groupstream.broker.coordinator_runtime import ShardStatus
from groupstream.broker.offsets_topic import OFFSETS_TOPIC
from groupstream.protocol.consumer_protocol import (
    ConsumerAssignment,
    ConsumerSubscription,
    encode_assignment,
    encode_subscription,
)
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.group_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    decode_record,
)
from groupstream.protocol.messages import by_name
from groupstream.protocol.records import iter_record_batches

pytestmark = pytest.mark.compat

PROPS = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "10"}
TOPIC = "events"
PARTITIONS = 4


def start(tmp_path: Path) -> LoopBroker:
    return LoopBroker(tmp_path / "data", None, **PROPS).start()


def make_topic_with_records(bootstrap: str, n: int, first: int = 0) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if TOPIC not in admin.list_topics(timeout=10).topics:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(10)
    produce(bootstrap, n, first)


def produce(bootstrap: str, n: int, first: int = 0) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(first, first + n):
        p.produce(TOPIC, key=b"%d" % i, value=b"v%d" % i)
    assert p.flush(20) == 0


def consumer(bootstrap: str, group: str, **extra: Any) -> Consumer:
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
        **extra,
    }
    c = Consumer(conf)
    c.subscribe([TOPIC])
    return c


def poll_into(c: Consumer, seen: set[tuple[int, int]], timeout: float = 0.2) -> None:
    m = c.poll(timeout)
    if m is not None and m.error() is None:
        seen.add((m.partition(), m.offset()))


def consume_until(c: Consumer, seen: set[tuple[int, int]], n: int, timeout: float = 60) -> None:
    """Poll until ``n`` distinct records were seen."""
    deadline = time.monotonic() + timeout
    while len(seen) < n:
        poll_into(c, seen)
        assert time.monotonic() < deadline, len(seen)


def consume_and_commit(c: Consumer, seen: set[tuple[int, int]], n: int, timeout: float = 60) -> None:
    """Poll until ``n`` records were seen and a synchronous commit succeeds: after a coordinator move the
    consumer must find the coordinator again before its commits land (NOT_COORDINATOR meanwhile).

    _NO_OFFSET means an earlier asynchronous commit already landed every position, which counts too; the
    callers check what the broker holds afterwards."""
    deadline = time.monotonic() + timeout
    while True:
        poll_into(c, seen)
        if len(seen) >= n:
            try:
                c.commit(asynchronous=False)
                return
            except KafkaException as e:
                if e.args[0].code() == KafkaError._NO_OFFSET:
                    return
        assert time.monotonic() < deadline, len(seen)


def committed_total(bootstrap: str, group: str) -> dict[int, int]:
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = probe.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=20)
    finally:
        probe.close()
    return {tp.partition: tp.offset for tp in tps}


def committed_by(lb: LoopBroker, group: str) -> dict[int, int]:
    """What the shard holds (read on the loop, not through a client that would wait for the coordinator)."""

    def read() -> dict[int, int]:
        shard = lb.runtime.shard(lb.runtime.partition_for(group))
        if shard is None:
            return {}
        out = {}
        for p in range(PARTITIONS):
            found = shard.committed_offset(group, TOPIC, p)
            if found is not None:
                out[p] = found.offset
        return out

    return lb.call(read)


def offsets_records(lb: LoopBroker, partition: int) -> list[Any]:
    plog = lb.broker.catalog.log(OFFSETS_TOPIC, partition)
    data = lb.call(lambda: plog.read(plog.log_start_offset, 1 << 24).records)
    return [decode_record(r.key, r.value) for b in iter_record_batches(data) for r in b]


def test_a_confluent_group_forms_and_its_commits_survive_a_restart(tmp_path: Path) -> None:
    lb = start(tmp_path)
    try:
        bs = f"127.0.0.1:{lb.port}"
        make_topic_with_records(bs, 200)
        a, b = consumer(bs, "cg"), consumer(bs, "cg")
        seen: set[tuple[int, int]] = set()
        deadline = time.monotonic() + 60
        while True:
            poll_into(a, seen)
            poll_into(b, seen)
            owned_a = {tp.partition for tp in a.assignment()}
            owned_b = {tp.partition for tp in b.assignment()}
            split = owned_a and owned_b and not owned_a & owned_b and owned_a | owned_b == set(range(PARTITIONS))
            if split and len(seen) == 200:
                break
            assert time.monotonic() < deadline, f"group did not settle: {owned_a} {owned_b} {len(seen)}"
        for c in (a, b):
            c.commit(asynchronous=False)
            c.close()
        before = committed_total(bs, "cg")
        assert sum(before.values()) == 200
        # the group's records sit in its __consumer_offsets partition and decode as Kafka's formats
        p = lb.runtime.partition_for("cg")
        keys = [r.key for r in offsets_records(lb, p)]
        assert GroupMetadataKey("cg") in keys
        assert {k for k in keys if isinstance(k, OffsetCommitKey)} == {
            OffsetCommitKey("cg", TOPIC, i) for i in range(PARTITIONS)}
    finally:
        lb.stop()
    lb = start(tmp_path)
    try:
        bs = f"127.0.0.1:{lb.port}"
        assert committed_total(bs, "cg") == before
        produce(bs, 50, first=200)
        c = consumer(bs, "cg")
        seen = set()
        deadline = time.monotonic() + 60
        while len(seen) < 50:
            poll_into(c, seen)
            assert time.monotonic() < deadline
        end = time.monotonic() + 1.0
        while time.monotonic() < end:  # nothing already committed comes back
            poll_into(c, seen)
        assert len(seen) == 50
        assert all(off >= before[part] for part, off in seen)
        c.close()
    finally:
        lb.stop()


def _join(conn: Any, member_id: str, instance: str) -> Any:
    Req = by_name("JoinGroup").Request
    sub = encode_subscription(ConsumerSubscription(topics=(TOPIC,)))
    return conn.request("JoinGroup", Req(
        group_id="static", session_timeout_ms=30_000, rebalance_timeout_ms=10_000, member_id=member_id,
        group_instance_id=instance, protocol_type="consumer",
        protocols=[Req.JoinGroupRequestProtocol(name="range", metadata=sub)]), version=5)


def test_a_static_member_and_its_assignment_survive_a_restart(tmp_path: Path) -> None:
    lb = start(tmp_path)
    try:
        conn = lb.connect("static-client")
        joined = _join(conn, "", "instance-1")
        assert joined.error_code == 0 and joined.leader == joined.member_id
        Sync = by_name("SyncGroup").Request
        assignment = encode_assignment(ConsumerAssignment(partitions=((TOPIC, 0), (TOPIC, 1))))
        synced = conn.request("SyncGroup", Sync(
            group_id="static", generation_id=joined.generation_id, member_id=joined.member_id,
            group_instance_id="instance-1",
            assignments=[Sync.SyncGroupRequestAssignment(member_id=joined.member_id, assignment=assignment)]),
            version=3)
        assert synced.error_code == 0 and bytes(synced.assignment) == assignment
        values = [r.value for r in offsets_records(lb, lb.runtime.partition_for("static"))
                  if isinstance(r.value, GroupMetadataValue)]
        assert values[-1].members[0].group_instance_id == "instance-1"
    finally:
        lb.stop()
    lb = start(tmp_path)
    try:
        conn = lb.connect("static-client")
        described = conn.request("DescribeGroups", {"groups": ["static"]}, version=4).groups[0]
        assert described.group_state == "Stable"
        assert [(m.member_id, m.group_instance_id) for m in described.members] == [
            (joined.member_id, "instance-1")]
        # the instance rejoins with a new member id and takes over without a rebalance
        again = _join(conn, "", "instance-1")
        assert again.error_code == 0 and again.generation_id == joined.generation_id
    finally:
        lb.stop()


def test_a_consumer_rides_out_a_coordinator_unload_and_reload(tmp_path: Path) -> None:
    lb = start(tmp_path)
    try:
        bs = f"127.0.0.1:{lb.port}"
        make_topic_with_records(bs, 100)
        c = consumer(bs, "failover")
        seen: set[tuple[int, int]] = set()
        consume_until(c, seen, 100)
        c.commit(asynchronous=False)
        p = lb.runtime.partition_for("failover")
        assert sum(committed_by(lb, "failover").values()) == 100
        plog = lb.broker.catalog.log(OFFSETS_TOPIC, p)
        written = lb.call(lambda: plog.log_end_offset)
        lb.call(lb.runtime.unload, p)
        conn = lb.connect()
        find = conn.request("FindCoordinator", {"key": "failover", "key_type": 0}, version=3)
        assert find.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        produce(bs, 40, first=100)
        # the consumer keeps fetching while its coordinator is gone; heartbeats meet NOT_COORDINATOR and the
        # lookups COORDINATOR_NOT_AVAILABLE, so nothing it commits can land until the reload
        end = time.monotonic() + 2.0
        while time.monotonic() < end:
            poll_into(c, seen)
        c.commit(asynchronous=True)
        assert lb.call(lambda: plog.log_end_offset) == written
        lb.run(_reload(lb, p))
        assert lb.runtime.status(p) is ShardStatus.ACTIVE
        consume_and_commit(c, seen, 140)  # the consumer finds the coordinator again and its commits land
        assert len(seen) == 140
        c.close()
        wait_until(lambda: sum(committed_total(bs, "failover").values()) == 140, what="the commits after reload")
    finally:
        lb.stop()


async def _reload(lb: LoopBroker, partition: int) -> None:
    await lb.runtime.reload(partition)
