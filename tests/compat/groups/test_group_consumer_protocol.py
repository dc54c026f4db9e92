"""KIP-848 ``consumer`` groups on our broker with real members in their own processes: confluent-kafka
(librdkafka 2.16, ``group.protocol=consumer``) and our own consumer, with the broker's ``uniform`` and
``range`` assignors (``group.remote.assignor``).

- The lifecycle scenario of the classic tests (`test_group_lifecycle.scenario`): joins, a member killed with
  SIGKILL and fenced after the session timeout, a leave, and a fresh member resuming from the commits; no
  partition has two owners, commits come from owners, nothing is lost or read twice.
- ``kill -9`` of the broker under a live group: the group is replayed from ``__consumer_offsets`` with its
  member ids and epochs, so the members go on heartbeating without a revocation and read what comes next.
- Ten members on 60 partitions while records flow; an eleventh joins: only the partitions it receives are
  revoked (from their previous owners), and no other partition's consumption pauses for longer than one
  heartbeat interval.
"""

from __future__ import annotations

import itertools
import time
from collections import defaultdict

import pytest
from group_harness import (
    Members,
    TopicPart,
    check_exclusive_ownership,
    check_group,
    create_topic,
    produce,
    unique,
    wait_for,
)
from test_group_lifecycle import SESSION_TIMEOUT_MS, scenario

from groupstream.client.admin import Admin
from support.brokers import BrokerFactory, BrokerKind, BrokerProcess
from support.feed import Feed

pytestmark = [pytest.mark.compat, pytest.mark.slow, pytest.mark.broker_ours]

HEARTBEAT_MS = 500


def consumer_protocol_broker(factory: BrokerFactory, heartbeat_ms: int = HEARTBEAT_MS) -> BrokerProcess:
    return factory(BrokerKind.GROUPSTREAM, settings={
        "group.initial.rebalance.delay.ms": "0",
        "group.consumer.session.timeout.ms": str(SESSION_TIMEOUT_MS),
        "group.consumer.heartbeat.interval.ms": str(heartbeat_ms),
    })  # fmt: skip


CASES = [("confluent", "uniform"), ("confluent", "range"), ("groupstream", "uniform"), ("groupstream", "range")]


@pytest.mark.parametrize(("client", "assignor"), CASES, ids=[f"{c}-{a}" for c, a in CASES])
def test_consumer_group_join_crash_leave_resume(
    broker_factory: BrokerFactory, members: Members, client: str, assignor: str
) -> None:
    broker = consumer_protocol_broker(broker_factory)
    scenario(broker.bootstrap, members, client, assignor, protocol="consumer")


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_consumer_group_survives_broker_kill9(broker_factory: BrokerFactory, members: Members, assignor: str) -> None:
    broker = consumer_protocol_broker(broker_factory)
    bs = broker.bootstrap
    topic, group = unique("cg-restart"), unique("g-cg-restart")
    partitions = 6
    create_topic(bs, topic, partitions)
    all_parts = {(topic, p) for p in range(partitions)}
    produced = produce(bs, topic, 600, partitions, "before")
    members.common.update(client="confluent", protocol="consumer", bootstrap=bs, group=group, topics=[topic],
                          strategy=assignor, max_records=200, batch_delay_s=0)  # fmt: skip
    a, b = members.start("A"), members.start("B")
    members.wait_split([a, b], all_parts)
    wait_for(lambda: {r for m in (a, b) for r in m.processed} == produced, 30, "the first records consumed")
    with Admin({"bootstrap.servers": bs}) as admin:
        before = admin.describe_groups([group])[group]
    owned = {m.name: m.owned for m in (a, b)}

    killed_at = time.monotonic()
    broker.restart(kill=True)

    later = produce(bs, topic, 600, partitions, "after")
    wait_for(lambda: {r for m in (a, b) for r in m.processed} >= later, 45, "the records produced after the restart")
    for m in (a, b):
        assert m.revocations_after(killed_at) == 0, f"{m.name} was revoked after the broker restart"
        assert m.owned == owned[m.name]
    with Admin({"bootstrap.servers": bs}) as admin:
        after = admin.describe_groups([group])[group]
    assert after.state == "Stable", after
    assert sorted(m.member_id for m in after.members) == sorted(m.member_id for m in before.members)
    a.close(), b.close()
    check_group(members.all, produced | later)


def _batch_times(members: Members) -> dict[TopicPart, list[float]]:
    """When each partition's records were handed to the application (one time per polled batch)."""
    times: dict[TopicPart, list[float]] = defaultdict(list)
    for m in members.all:
        for e in m.of("recs"):
            for tp in {(t, p) for t, p, _o in e["recs"]}:
                times[tp].append(e["t"])
    return {tp: sorted(ts) for tp, ts in times.items()}


def test_an_eleventh_member_takes_partitions_without_pausing_the_others(
    broker_factory: BrokerFactory, members: Members
) -> None:
    heartbeat_ms = 1000
    broker = consumer_protocol_broker(broker_factory, heartbeat_ms)
    bs = broker.bootstrap
    topic, group = unique("cg-eleven"), unique("g-cg-eleven")
    partitions = 60
    create_topic(bs, topic, partitions)
    all_parts = {(topic, p) for p in range(partitions)}
    members.common.update(client="confluent", protocol="consumer", bootstrap=bs, group=group, topics=[topic],
                          strategy="uniform", max_records=500, batch_delay_s=0)  # fmt: skip
    feed = Feed(bs, topic, batch=240, pace_s=0.1)  # ~4 records per partition every 0.1 s
    feed.start()
    try:
        ten = [members.start(f"M{i}") for i in range(10)]
        members.wait_split(ten, all_parts, timeout=90)
        wait_for(lambda: all(len(m.of("recs")) >= 20 for m in ten), 60, "the ten members to consume")
        before = {m.name: m.owned for m in ten}
        joined_at = time.monotonic()
        eleventh = members.start("M10")
        members.wait_split([*ten, eleventh], all_parts, timeout=60)
        settled_at = time.monotonic()
        # consumption goes on after the rebalance: every partition is read again past this point
        wait_for(lambda: all(any(t > settled_at + 1 for t in ts) for ts in _batch_times(members).values())
                 and len(_batch_times(members)) == partitions, 30, "every partition to be read after the rebalance")  # fmt: skip
    finally:
        feed.stop_event.set()
        feed.join(30)

    received = eleventh.owned
    assert 5 <= len(received) <= 6, received  # uniform: 60 partitions over 11 members
    revoked = {tp for m in ten for e in m.of("owned") if e["why"] == "revoke" and e["t"] > joined_at
               for tp in before[m.name] - {(t, p) for t, p in e["parts"]}}  # fmt: skip
    assert revoked == received, f"revoked {sorted(revoked - received)} that M10 did not receive"
    for m in ten:
        assert m.owned == before[m.name] - received, f"{m.name} owns {sorted(m.owned)}, had {sorted(before[m.name])}"

    gaps = {}
    for tp, ts in _batch_times(members).items():
        if tp in received:
            continue
        window = [t for t in ts if joined_at - 2 <= t <= settled_at + 2]
        gaps[tp] = max((b - a for a, b in itertools.pairwise(window)), default=float("inf"))
    worst = max(gaps, key=lambda tp: gaps[tp])
    assert gaps[worst] <= heartbeat_ms / 1000, (
        f"{worst} was not consumed for {gaps[worst]:.3f} s during the rebalance "
        f"(heartbeat interval {heartbeat_ms} ms); joined {joined_at:.3f}, settled {settled_at:.3f}"
    )
    check_exclusive_ownership(members.all)
    print(f"\nworst gap of an unaffected partition {gaps[worst] * 1000:.0f} ms; rebalance took "
          f"{(settled_at - joined_at) * 1000:.0f} ms")  # fmt: skip
