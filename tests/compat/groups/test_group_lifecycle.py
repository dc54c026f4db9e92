"""Real clients form consumer groups: confluent-kafka (range, roundrobin, cooperative-sticky), kafka-python
(range, roundrobin, sticky), aiokafka (range) and our own consumer (all four assignors), each member in its own
process.

One scenario per client and assignor, while records flow (members simulate processing time, so every
rebalance happens mid-stream):

1. A alone takes every partition; B joins: the group splits the partitions between A and B (join);
2. C joins, then is killed with SIGKILL: A and B take its partitions back after its session timeout (crash);
3. B leaves with ``close()``: A owns everything (leave); then A leaves too;
4. more records arrive and a fresh member D starts: it resumes from the committed offsets and finishes.

Members commit synchronously after every batch. From what they report (their own rebalance callbacks and
commits, with system-wide monotonic times) the harness checks that no partition ever had two owners at
once, that every acknowledged commit came from the partition's owner, that each new owner started at the
last acknowledged commit (or one a killed member had in flight) with no gap after it, and that the records
processed are exactly the records produced; at the end the group's committed offsets are the log ends.
"""

from __future__ import annotations

import pytest
from group_harness import (
    Members,
    check_group,
    create_topic,
    end_offsets,
    produce,
    unique,
    wait_for,
)

from groupstream.client.admin import Admin
from support.brokers import BrokerProcess

pytestmark = [pytest.mark.compat, pytest.mark.slow]

PARTITIONS = 6
FIRST_BATCH = 3000  # ~50 s of work for one slow member: the phases below happen while it flows
LATER_BATCH = 600
SESSION_TIMEOUT_MS = 6000  # Kafka's group.min.session.timeout.ms: the crash phase waits this long

CASES = [
    ("confluent", "range"),
    ("confluent", "roundrobin"),
    ("confluent", "cooperative-sticky"),
    ("kafka-python", "range"),
    ("kafka-python", "roundrobin"),
    ("kafka-python", "sticky"),
    ("aiokafka", "range"),
    ("groupstream", "range"),
    ("groupstream", "roundrobin"),
    ("groupstream", "sticky"),
    ("groupstream", "cooperative-sticky"),
]


@pytest.mark.parametrize(("client", "strategy"), CASES, ids=[f"{c}-{s}" for c, s in CASES])
def test_group_join_crash_leave_resume(
    group_broker: BrokerProcess, members: Members, client: str, strategy: str
) -> None:
    scenario(group_broker.bootstrap, members, client, strategy)


OUR_STRATEGIES = ["range", "roundrobin", "sticky", "cooperative-sticky"]


@pytest.mark.parametrize("strategy", OUR_STRATEGIES)
def test_our_consumer_on_tansu(tansu_broker: BrokerProcess, members: Members, strategy: str) -> None:
    """Our client must work against any Kafka broker: the same scenario with Tansu as the broker (run by
    ``make test``, unlike the Tansu self-check of the cases above)."""
    scenario(tansu_broker.bootstrap, members, "groupstream", strategy)


def scenario(bs: str, members: Members, client: str, strategy: str, protocol: str = "classic") -> None:
    """With ``protocol="consumer"`` (KIP-848) the broker assigns with ``strategy`` and must be started with
    a session timeout of ``SESSION_TIMEOUT_MS``."""
    topic, group = unique(f"grp-{client}"), unique(f"g-{client}-{strategy}")
    create_topic(bs, topic, PARTITIONS)
    produced = produce(bs, topic, FIRST_BATCH, PARTITIONS, "first")
    all_parts = {(topic, p) for p in range(PARTITIONS)}
    members.common.update(
        client=client, protocol=protocol, bootstrap=bs, group=group, topics=[topic], strategy=strategy,
        session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_ms=500, max_records=10, batch_delay_s=0.1,
    )  # fmt: skip

    a = members.start("A")
    members.wait_split([a], all_parts)
    wait_for(lambda: len(a.processed) >= 30, 30, "A to process records")

    b = members.start("B")  # join
    members.wait_split([a, b], all_parts)

    c = members.start("C")
    members.wait_split([a, b, c], all_parts)
    wait_for(lambda: len(c.processed) > 0, 30, "C to process records")
    c.kill9()  # crash: A and B get its partitions once its session times out
    members.wait_split([a, b], all_parts, timeout=SESSION_TIMEOUT_MS / 1000 + 30)

    b.close()  # leave
    members.wait_split([a], all_parts)
    wait_for(lambda: bool(a.of("commit")) and a.of("commit")[-1]["t"] > b.of("closed")[-1]["t"], 30,
             "A to commit after B left")
    a.close()

    consumed_before = {r for m in members.all for r in m.processed}
    assert len(consumed_before) < len(produced), "the first batch finished before the phases: slow members down"
    produced |= produce(bs, topic, LATER_BATCH, PARTITIONS, "later")
    ends = end_offsets(produced)
    d = members.start("D", batch_delay_s=0, max_records=500)  # resume from the committed offsets
    members.wait_split([d], all_parts)

    with Admin({"bootstrap.servers": bs}) as admin:

        def committed() -> dict[tuple[str, int], int]:
            return {tp: om.offset for tp, om in admin.list_group_offsets(group).items()}

        wait_for(lambda: committed() == ends, 60, f"the group's committed offsets to reach the log ends {ends}")
        d.close()
        check_group(members.all, produced)
        assert committed() == ends
