"""Online migration (Kafka 4, KIP-848) on our broker with real members in their own processes: a rolling
upgrade of a classic group of six confluent-kafka members (cooperative-sticky; three with range) consuming a
steady stream, one by one replaced by ``group.protocol=consumer`` members (confluent-kafka and ours
alternately), then rolled back to classic members. The group is converted by the first consumer member (classic members keep working inside the
consumer group) and back when the last one leaves. Every record is consumed, commits come from owners, and no
partition ever has two owners (`group_harness.check_group`), and a partition that stays with its owner
keeps flowing (no gap of 2 heartbeat intervals).
"""

from __future__ import annotations

import itertools
import json
import subprocess
import time

import pytest
from group_harness import Member, Members, check_group, create_topic, ownership_intervals, unique, wait_for

from groupstream.client.admin import Admin
from support.brokers import BrokerFactory, BrokerKind, groupstream_command
from support.feed import Feed

pytestmark = [pytest.mark.compat, pytest.mark.slow, pytest.mark.broker_ours]

CLASSIC = {"client": "confluent", "protocol": "classic", "strategy": "cooperative-sticky"}
CONSUMER = {"client": "confluent", "protocol": "consumer", "strategy": "uniform"}
OURS = {"client": "groupstream", "protocol": "consumer", "strategy": "uniform"}
HEARTBEAT_S = 0.5  # the classic members' heartbeat.interval.ms (group_member's default) and the broker's


def _describe_members(bootstrap: str, group: str) -> list[dict[str, str]]:
    """``groupstream groups describe --members --verbose`` as a user runs it, its rows as JSON."""
    out = subprocess.run([*groupstream_command(), "groups", "describe", group, "--members", "--verbose", "--format",
                          "json", "--bootstrap-server", bootstrap], capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    return [row for line in out.stdout.splitlines() if line.startswith("{") for row in json.loads(line)["rows"]]


def _end_offsets(bootstrap: str, topic: str, partitions: int) -> set[tuple[str, int, int]]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("watermarks")})
    try:
        out = set()
        for p in range(partitions):
            low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            out.update((topic, p, o) for o in range(low, high))
        return out
    finally:
        c.close()


def _group_type(bootstrap: str, group: str) -> str | None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        listed = {g.group_id: g for g in admin.list_groups()}
    return None if group not in listed else (listed[group].group_type or "classic").lower()


@pytest.mark.parametrize("strategy", ["cooperative-sticky", "range"])
def test_rolling_upgrade_to_the_consumer_protocol_and_back(
    broker_factory: BrokerFactory, members: Members, strategy: str
) -> None:
    broker = broker_factory(BrokerKind.GROUPSTREAM, settings={
        "group.initial.rebalance.delay.ms": "0",
        "group.consumer.session.timeout.ms": "6000",
        "group.consumer.heartbeat.interval.ms": str(int(HEARTBEAT_S * 1000)),
    })  # fmt: skip
    # The six members for the cooperative case; three for range (eager: every rebalance revokes all).
    n = 6 if strategy == "cooperative-sticky" else 3
    worst = rolling_upgrade(broker.bootstrap, members, classic={**CLASSIC, "strategy": strategy}, n=n)
    print(f"\nworst gap of a partition under one owner during the migrations: {worst * 1000:.0f} ms")
    # Partitions that do not move keep flowing: under 2 heartbeat intervals (500 ms, classic and consumer).
    assert worst < 2 * HEARTBEAT_S, f"a partition was not consumed for {worst * 1000:.0f} ms under one owner"


def rolling_upgrade(
    bs: str, members: Members, split_timeout: float = 60, classic: dict[str, str] = CLASSIC, n: int = 3
) -> float:
    """The scenario, on the broker at ``bs`` (ours here, Apache Kafka in tests/apache), with ``n`` ``classic``
    members on ``2 n`` partitions. Returns the worst gap (s) in the consumption of a partition while one member
    owned it: partitions that do not move keep flowing."""
    topic, group = unique("migrate"), unique("g-migrate")
    partitions = 2 * n
    create_topic(bs, topic, partitions)
    every = {(topic, p) for p in range(partitions)}
    members.common.update(bootstrap=bs, group=group, topics=[topic], max_records=200, batch_delay_s=0)
    feed = Feed(bs, topic, batch=60, pace_s=0.1)
    feed.start()
    started = time.monotonic()
    try:
        live = [members.start(f"C{i}", **classic) for i in range(n)]
        members.wait_split(live, every, timeout=split_timeout)
        assert _group_type(bs, group) == "classic"
        rolling_from = time.monotonic()
        # consumer members alternate confluent-kafka and ours; then back: classic members in the consumer group,
        # until the last consumer member leaves
        plan = [(f"C{i}", f"N{i}", OURS if i % 2 else CONSUMER, "consumer") for i in range(n)]
        plan += [(f"N{i}", f"R{i}", classic, "consumer" if i < n - 1 else "classic") for i in range(n)]
        for step, (old_name, new_name, conf, kind) in enumerate(plan):
            new = members.start(new_name, **conf)
            old = next(m for m in live if m.name == old_name)
            live = [*live, new]
            members.wait_split(live, every, timeout=split_timeout)
            old.close()
            live.remove(old)
            members.wait_split(live, every, timeout=split_timeout)
            assert _group_type(bs, group) == kind, step
            if kind == "consumer":  # each member's protocol, as ConsumerGroupDescribe v1 tells it
                with Admin({"bootstrap.servers": bs}) as admin:
                    described = admin.describe_consumer_groups([group])[group]
                types = {m.client_id: m.member_type for m in described.members}
                assert types == {m.name: "classic" if m.config["protocol"] == "classic" else "consumer"
                                 for m in live}, types  # fmt: skip
                if step == 0:  # one consumer member among classic ones: the tool's UPGRADED column, as Kafka's
                    rows = _describe_members(bs, group)
                    assert {r["CLIENT-ID"]: r["UPGRADED"] for r in rows} == {
                        name: "true" if kind == "consumer" else "false" for name, kind in types.items()}  # fmt: skip
            print(f"step {step}: {old_name} -> {new_name} at {time.monotonic() - started:.1f} s")
    finally:
        feed.stop_event.set()
        feed.join(30)
        fed_until = time.monotonic()
    produced = _end_offsets(bs, topic, partitions)
    assert len(produced) == feed.produced
    wait_for(lambda: {r for m in members.all for r in m.processed} >= produced, 60,
             "every record to be consumed")  # fmt: skip
    for m in live:
        m.close()
    check_group(members.all, produced)
    return _worst_gap(members, rolling_from, fed_until)


def _worst_gap(members: Members, since: float, until: float) -> float:
    """The longest time between two batches of one partition handed to the member that owned it throughout,
    during the rolling upgrade and back (from ``since``, the group formed, while records kept arriving)."""
    worst = 0.0
    by_name = {m.name: m for m in members.all}
    for tp, intervals in ownership_intervals(members.all).items():
        for iv in intervals:
            times = sorted(e["t"] for e in by_name[iv.member].of("recs")
                           if max(iv.start, since) <= e["t"] <= min(iv.end, until) and any((t, p) == tp for t, p, _ in e["recs"]))  # fmt: skip
            for a, b in itertools.pairwise(times):
                worst = max(worst, b - a)
    return worst


@pytest.mark.parametrize("replaced", ["confluent", "groupstream"])
def test_a_classic_process_replacing_the_last_consumer_static_member_makes_the_group_classic(
    broker_factory: BrokerFactory, members: Members, replaced: str
) -> None:
    broker = broker_factory(BrokerKind.GROUPSTREAM, settings={
        "group.initial.rebalance.delay.ms": "0",
        "group.consumer.session.timeout.ms": "20000",  # the stopped member's partitions wait for the new process
        "group.consumer.heartbeat.interval.ms": str(int(HEARTBEAT_S * 1000)),
    })  # fmt: skip
    static_replacement(broker.bootstrap, members, consumer=CONSUMER if replaced == "confluent" else OURS)


def static_replacement(
    bs: str, members: Members, classic: dict[str, str] = CLASSIC, consumer: dict[str, str] = CONSUMER,
    timeout: float = 60, describe_groups: bool = True,
) -> None:  # fmt: skip
    """Kafka's downgrade on a static member's replacement, on the broker at ``bs`` (ours here, Apache Kafka in
    tests/apache): two ``classic`` static members and a ``consumer``-protocol static member (which converted
    the group) consume a steady stream; that member stops (a static leave: its partitions wait for its
    instance id) and a classic confluent-kafka process starts under its ``group.instance.id``. The group is a
    classic group again at once, the new process gets the stopped member's partitions, and the others keep
    theirs (no rebalance, as in Kafka); every record is consumed once, never by two owners at a time. While the
    group mixes protocols, confluent-kafka's ``describe_consumer_groups`` (and with ``describe_groups``, ours
    through DescribeGroups, which Kafka 4 does not answer for a consumer group) shows what each member owns."""
    topic, group = unique("replace"), unique("g-replace")
    create_topic(bs, topic, 6)
    every = {(topic, p) for p in range(6)}
    members.common.update(bootstrap=bs, group=group, topics=[topic], max_records=200, batch_delay_s=0)
    feed = Feed(bs, topic, batch=60, pace_s=0.1)
    feed.start()
    try:
        old = [members.start(f"C{i}", **classic, instance_id=f"i-C{i}") for i in range(2)]
        members.wait_split(old, every, timeout=timeout)
        n = members.start("N", **consumer, instance_id="i-N")
        members.wait_split([*old, n], every, timeout=timeout)
        assert _group_type(bs, group) == "consumer"

        def stable() -> bool:
            with Admin({"bootstrap.servers": bs}) as admin:
                return admin.describe_consumer_groups([group])[group].state == "Stable"

        wait_for(stable, timeout, "the consumer group to be Stable")
        wait_for(lambda: _described_as_owned(bs, group, topic, [*old, n], describe_groups), timeout,
                 "the admin clients to describe what the members own")  # fmt: skip
        held = n.owned
        n.close()
        assert _group_type(bs, group) == "consumer"  # a static leave: still its instance id's, no downgrade yet
        replacing = time.monotonic()
        r = members.start("R", **classic, instance_id="i-N")
        wait_for(lambda: r.owned == held, timeout, f"R to take {sorted(held)}")
        members.wait_split([*old, r], every, timeout=timeout)
        assert _group_type(bs, group) == "classic"
        assert [c.revocations_after(replacing) for c in old] == [0, 0], members.describe()
    finally:
        feed.stop_event.set()
        feed.join(30)
    produced = _end_offsets(bs, topic, 6)
    assert len(produced) == feed.produced
    wait_for(lambda: {x for m in members.all for x in m.processed} >= produced, 60, "every record to be consumed")
    for m in [*old, r]:
        m.close()
    check_group(members.all, produced)


def _described_as_owned(bs: str, group: str, topic: str, live: list[Member], describe_groups: bool) -> bool:
    """Whether confluent-kafka's ``describe_consumer_groups`` (ConsumerGroupDescribe) and, with
    ``describe_groups``, our Admin's ``describe_groups`` (DescribeGroups: each classic member's own JoinGroup
    metadata, decoded, and its assignment as its SyncGroup gets it) show every member owning what it says."""
    from confluent_kafka.admin import AdminClient

    owned = {m.name: m.owned for m in live}
    client = AdminClient({"bootstrap.servers": bs})  # held: the future never completes once it is collected
    theirs = client.describe_consumer_groups([group])[group].result(timeout=30)
    if {m.client_id: {(tp.topic, tp.partition) for tp in m.assignment.topic_partitions} for m in theirs.members} != owned:
        return False
    if not describe_groups:
        return True
    with Admin({"bootstrap.servers": bs}) as admin:
        ours = admin.describe_groups([group])[group]
    assert all(m.subscription is not None and tuple(m.subscription.topics) == (topic,) for m in ours.members), ours
    return {m.client_id: set(m.assigned_partitions) for m in ours.members} == owned


@pytest.mark.parametrize("new", ["confluent", "groupstream"])
def test_a_consumer_process_taking_a_classic_static_members_place_upgrades_the_group_at_once(
    broker_factory: BrokerFactory, members: Members, new: str
) -> None:
    broker = broker_factory(BrokerKind.GROUPSTREAM, settings={
        "group.initial.rebalance.delay.ms": "0",
        "group.consumer.heartbeat.interval.ms": str(int(HEARTBEAT_S * 1000)),
    })  # fmt: skip
    static_upgrade(broker.bootstrap, members, consumer=CONSUMER if new == "confluent" else OURS)


def static_upgrade(
    bs: str, members: Members, classic: dict[str, str] = CLASSIC, consumer: dict[str, str] = CONSUMER,
    timeout: float = 60,
) -> None:  # fmt: skip
    """A rolling upgrade of static members, on the broker at ``bs`` (ours here, Apache Kafka in tests/apache):
    a ``classic`` static member stops without leaving, and a ``consumer``-protocol process starts under its
    ``group.instance.id``. As in Kafka it takes the place at once (ours used to refuse it with
    UNRELEASED_INSTANCE_ID, fatal to librdkafka): the group becomes a consumer group, the new process gets the
    old one's partitions and the other member loses none; every record consumed once by one owner at a time."""
    topic, group = unique("upgrade-static"), unique("g-upgrade-static")
    create_topic(bs, topic, 6)
    every = {(topic, p) for p in range(6)}
    members.common.update(bootstrap=bs, group=group, topics=[topic], max_records=200, batch_delay_s=0)
    feed = Feed(bs, topic, batch=60, pace_s=0.1)
    feed.start()
    try:
        # a 20 s session: the stopped process's place waits for the new one, not for a rebalance
        old = [members.start(f"C{i}", **classic, instance_id=f"i-C{i}", session_timeout_ms=20_000) for i in range(2)]
        members.wait_split(old, every, timeout=timeout)
        held = old[1].owned
        old[1].close()
        replacing = time.monotonic()
        n = members.start("N", **consumer, instance_id="i-C1")
        wait_for(lambda: n.owned == held, timeout, f"N to take {sorted(held)}")
        members.wait_split([old[0], n], every, timeout=timeout)
        assert _group_type(bs, group) == "consumer"
        assert old[0].revocations_after(replacing) == 0, members.describe()
        assert not n.of("error"), n.of("error")
    finally:
        feed.stop_event.set()
        feed.join(30)
    produced = _end_offsets(bs, topic, 6)
    assert len(produced) == feed.produced
    wait_for(lambda: {x for m in members.all for x in m.processed} >= produced, 60, "every record to be consumed")
    for m in (old[0], n):
        m.close()
    check_group(members.all, produced)
