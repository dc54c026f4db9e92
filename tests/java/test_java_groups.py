"""Java consumer groups (``KafkaConsumer`` 4.x) on our broker, each member in its own JVM, alone and mixed with
our own consumer.

The lifecycle scenario of ``tests/compat/groups`` (``test_group_lifecycle.scenario``), with the same checks:
joins while records flow, a member killed with SIGKILL whose partitions return after its session (or, under
``consumer``, is fenced), a leave, and a fresh member resuming from the last commits. No partition ever has
two owners, every acknowledged commit comes from the partition's owner, each owner starts at the last commit,
and every produced record is processed.
"""

from __future__ import annotations

import time

import pytest
from group_harness import (
    check_commits_by_owner,
    check_group,
    check_resumption,
    create_topic,
    ownership_intervals,
    produce,
    unique,
    wait_for,
)
from java_harness import JavaMember, MixedMembers
from test_group_lifecycle import scenario

from support.brokers import BrokerProcess

pytestmark = [pytest.mark.compat, pytest.mark.slow, pytest.mark.broker_ours]

PARTITIONS = 6
SESSION_S = 6  # the broker's group.consumer.session.timeout.ms (conftest), and the classic members' session

# (protocol, assignor, clients of members A..D: Java only, or Java and ours taking turns)
JAVA = {"A": "java", "B": "java", "C": "java", "D": "java"}
MIXED = {"A": "java", "B": "groupstream", "C": "java", "D": "groupstream"}
CASES = [
    ("classic", "range", JAVA),
    ("classic", "cooperative-sticky", MIXED),
    ("consumer", "uniform", JAVA),
    ("consumer", "range", MIXED),
]


@pytest.mark.parametrize(
    ("protocol", "assignor", "clients"),
    CASES,
    ids=[f"{p}-{a}-{'mixed' if c is MIXED else 'java'}" for p, a, c in CASES],
)
def test_java_group_join_crash_leave_resume(
    java_broker: BrokerProcess, members: MixedMembers, protocol: str, assignor: str, clients: dict[str, str]
) -> None:
    members.clients.update(clients)
    scenario(java_broker.bootstrap, members, "java", assignor, protocol=protocol)


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_java_static_member_bounce_causes_no_revocation(
    java_broker: BrokerProcess, members: MixedMembers, protocol: str
) -> None:
    """KIP-345 static membership: a member that closes and comes back with its ``group.instance.id`` within the
    session takes its old partitions back, and the others see no revocation (classic: Java's static member
    sends no LeaveGroup; ``consumer``: it leaves with epoch -2, which keeps its assignment)."""
    bs = java_broker.bootstrap
    topic, group = unique("java-static"), unique(f"g-java-static-{protocol}")
    create_topic(bs, topic, PARTITIONS)
    all_parts = {(topic, p) for p in range(PARTITIONS)}
    produced = produce(bs, topic, 3000, PARTITIONS)
    members.common.update(
        client="java", protocol=protocol, bootstrap=bs, group=group, topics=[topic],
        strategy="range", session_timeout_ms=15_000, max_records=10, batch_delay_s=0.05,
    )  # fmt: skip
    s1, s2, s3 = (members.start(f"S{i}", instance_id=f"i{i}") for i in (1, 2, 3))
    members.wait_split([s1, s2, s3], all_parts, timeout=40)
    wait_for(
        lambda: all(m.of("owned")[-1]["t"] < time.monotonic() - 2 for m in (s1, s2, s3)),
        30,
        "two seconds without an assignment change",
    )
    before = {m.name: m.owned for m in (s1, s2, s3)}
    bounce_started = time.monotonic()

    s2.close()
    s2b = members.start("S2b", instance_id="i2")
    wait_for(lambda: s2b.owned == before["S2"], 14, f"S2's replacement to get S2's partitions {before['S2']}")
    wait_for(lambda: len(s2b.processed) > 0, 15, "the replacement to process records")
    for m in (s1, s3):
        changes = [
            e for e in m.snapshot() if e["ev"] in ("revoked", "assigned", "lost") and e["t"] > bounce_started
        ]
        assert m.revocations_after(bounce_started) == 0, (
            f"{m.name} lost partitions during the bounce: {changes} (S2 closed at {s2.of('closed')[-1]['t']:.3f}, "
            f"S2b started at {s2b.of('assigned')[0]['t'] if s2b.of('assigned') else None})\n{members.describe()}"
        )
        assert m.owned == before[m.name]
    for m in (s1, s3, s2b):
        m.close()
    intervals = ownership_intervals(members.all)
    check_commits_by_owner(members.all, intervals)
    check_resumption(members.all, intervals)
    assert {r for m in members.all for r in m.processed} <= produced


@pytest.mark.parametrize(("protocol", "regex"), [("consumer", "broker"), ("classic", "client")])
def test_java_regex_subscription_takes_a_topic_created_later(
    java_broker: BrokerProcess, members: MixedMembers, protocol: str, regex: str
) -> None:
    """A regular-expression subscription: under ``consumer`` a ``SubscriptionPattern`` that the broker resolves
    (KIP-848), under ``classic`` a ``java.util.regex.Pattern`` the client matches against metadata. Only the
    matching topics are assigned, a matching topic created later is assigned and read, and a member stopped
    with SIGTERM closes cleanly: it leaves, so the other takes its partitions well within the session."""
    bs = java_broker.bootstrap
    tag = unique("rx")
    a, b, c, other = f"{tag}-a", f"{tag}-b", f"{tag}-c", f"{tag}x-other"
    for t in (a, b, other):
        create_topic(bs, t, 3)
    produced = produce(bs, a, 300, 3, "a") | produce(bs, b, 300, 3, "b")
    produce(bs, other, 30, 3, "other")  # never to be read: the pattern does not match it
    members.common.update(
        client="java", protocol=protocol, bootstrap=bs, group=unique("g-java-rx"), pattern=f"{tag}-.*",
        regex=regex, strategy="uniform" if protocol == "consumer" else "cooperative-sticky", max_records=100,
    )  # fmt: skip
    j1, j2 = members.start("J1"), members.start("J2")
    members.wait_split([j1, j2], {(t, p) for t in (a, b) for p in range(3)}, timeout=40)

    create_topic(bs, c, 3)
    abc = {(t, p) for t in (a, b, c) for p in range(3)}
    members.wait_split([j1, j2], abc, timeout=30)
    produced |= produce(bs, c, 300, 3, "c")
    wait_for(lambda: {r for m in (j1, j2) for r in m.processed} >= produced, 30, "every matching record read")

    stopped = time.monotonic()
    assert isinstance(j2, JavaMember)
    j2.terminate()  # returns once the JVM has exited; its last lines may still be on their way through the pipe
    wait_for(lambda: bool(j2.of("closed")), 5, "J2's closed event", explain=j2.stderr_tail)
    members.wait_split([j1], abc, timeout=SESSION_S - 1)
    assert time.monotonic() - stopped < SESSION_S - 1, "J1 took J2's partitions only after the session"
    j1.close()
    check_group(members.all, produced)
