"""Our client through node failures of a 3-node Apache Kafka cluster (replication factor 3,
``min.insync.replicas=2``): what one node never shows.

1. kill -9 of the node that leads a partition while our idempotent ``acks=all`` Producer writes and our
   Consumer (a KIP-848 group of one) reads: the controller fences the node and another replica leads; the
   producer and the consumer follow the metadata change. The node comes back, catches up, and a preferred
   leader election hands the partitions back to it, so the interim leaders answer NOT_LEADER_OR_FOLLOWER.
   Every acknowledged record is in the log exactly once (an independent reader checks it, with the high
   watermarks), the consumer read each one exactly once, and nothing was refused.
2. kill -9 of the node hosting a group's coordinator while two of our consumers (member subprocesses: classic
   cooperative-sticky, and ``group.protocol=consumer`` with ``uniform``) consume and commit a live feed: the
   group's ``__consumer_offsets`` partition gets a new leader, the members find the new coordinator, their
   commits succeed there; the node returns and a preferred election moves the coordinator back, so the one in
   between answers NOT_COORDINATOR. The group survives without a rebalance (nobody loses a partition), no
   partition has two owners, each record produced is processed, and the committed offsets reach the log ends.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from apache_helpers import Feeder, create_topic, unique
from group_harness import Members, check_group, end_offsets, wait_for

from groupstream import Consumer
from groupstream.broker.group_routing import partition_for
from groupstream.client.admin import Admin
from support.apache_kafka import ApacheKafkaCluster
from support.compat import Consumed, check_read_equals_acked, confluent_read
from support.waiting import wait_until

pytestmark = [pytest.mark.broker_apache, pytest.mark.compat, pytest.mark.slow]

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_PARTITIONS = 50  # offsets.topic.num.partitions: Kafka's default, the test cluster's too


class Reader(threading.Thread):
    """Our Consumer in a group of one (``group.protocol=consumer``), collecting every record it polls."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        super().__init__(name=f"reader-{topic}", daemon=True)
        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
             "auto.offset.reset": "earliest", "enable.auto.commit": True, "reconnect.backoff.max.ms": 500}
        )  # fmt: skip
        self.consumer.subscribe([topic])
        self.records: list[Consumed] = []
        self.failure: BaseException | None = None
        self._stop_event = threading.Event()

    def run(self) -> None:
        try:
            while not self._stop_event.is_set():
                self.records += [
                    Consumed(r.partition, r.offset, r.key, r.value) for r in self.consumer.poll(0.2)
                ]
        except BaseException as e:
            self.failure = e
        finally:
            self.consumer.close(10)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(30)
        assert not self.is_alive(), "the reader did not stop"

    def max_offset(self, partition: int) -> int:
        return max((c.offset for c in list(self.records) if c.partition == partition), default=-1)


def _leaders(cluster: ApacheKafkaCluster, topic: str) -> dict[int, int]:
    return {ps.partition: ps.leader for ps in cluster.partitions(topic)}


def _led_by_preferred(cluster: ApacheKafkaCluster, topic: str, partition: int) -> int:
    """Move the partition's leadership to its preferred (first) replica and return that node. An earlier kill in
    the module may have left it elsewhere; from the preferred replica, a kill and a preferred election later
    move it away and back for certain."""
    (ps,) = [ps for ps in cluster.partitions(topic) if ps.partition == partition]
    preferred = ps.replicas[0]
    if ps.leader != preferred:
        with Admin({"bootstrap.servers": cluster.bootstrap}) as admin:
            admin.elect_leaders([(topic, partition)])
        wait_until(lambda: _leaders(cluster, topic).get(partition) == preferred, 30,
                   f"{topic}-{partition} led by its preferred replica {preferred}")  # fmt: skip
    return preferred


def test_partition_leader_killed_while_producing_and_consuming(apache_nodes: ApacheKafkaCluster) -> None:
    cluster, bs = apache_nodes, apache_nodes.bootstrap
    topic, group, partitions = unique("leader-kill"), unique("g-leader-kill"), 3
    create_topic(bs, topic, partitions)
    coordinator = cluster.group_coordinator(group)
    leaders = _leaders(cluster, topic)
    # a partition led by a node that is not the group's coordinator: this test is about the data path
    victim_partition = next((p for p, n in sorted(leaders.items()) if n != coordinator), 0)
    victim = leaders[victim_partition]

    feeder, reader = Feeder(bs, topic), Reader(bs, topic, group)
    feeder.start()
    reader.start()
    try:
        wait_until(
            lambda: reader.max_offset(victim_partition) >= 300, 60, "records read from the victim's partition"
        )
        cluster.kill9(victim)
        acked_at_kill = feeder.last_acked_offset(victim_partition)
        wait_until(lambda: _leaders(cluster, topic)[victim_partition] not in (-1, victim), 30,
                   f"a new leader of partition {victim_partition} after node {victim} was killed")  # fmt: skip
        wait_until(lambda: reader.max_offset(victim_partition) > acked_at_kill + 300, 60,
                   "records written through the new leader to be produced and read")  # fmt: skip

        cluster.start_node(victim)
        wait_until(
            lambda: cluster.fully_replicated(topic, partitions), 60, f"node {victim} back in every ISR"
        )
        with Admin({"bootstrap.servers": bs}) as admin:
            admin.elect_leaders([(topic, p) for p in range(partitions)])
        wait_until(lambda: _leaders(cluster, topic)[victim_partition] == victim, 30,
                   f"node {victim} leading partition {victim_partition} again")  # fmt: skip
        moved_at = feeder.last_acked_offset(victim_partition)
        wait_until(lambda: reader.max_offset(victim_partition) > moved_at + 300, 60,
                   "records produced and read after the leadership moved back")  # fmt: skip
    finally:
        feeder.stop()
    acked = feeder.acked()
    wait_until(lambda: len(reader.records) >= len(acked) or reader.failure is not None, 60,
               f"the reader to read all {len(acked)} acknowledged records (has {len(reader.records)})")  # fmt: skip
    reader.stop()
    assert reader.failure is None, f"the consumer raised {reader.failure!r}"
    feeder.check_all_acknowledged()
    check_read_equals_acked(feeder.sent, acked, reader.records, partitions)
    logged, ends = confluent_read(bs, topic, partitions, len(acked))
    check_read_equals_acked(feeder.sent, acked, logged, partitions, end_offsets=ends)
    print(
        f"\n{len(acked)} records; node {victim} (leader of partition {victim_partition}) killed and restarted"
    )


CASES = [("classic", "cooperative-sticky"), ("consumer", "uniform")]


def _committed_since(members: list[Any], t: float) -> bool:
    """Every member had a commit acknowledged that it sent after ``t``."""
    return all(any(e["ok"] and e["sent"] > t for e in m.of("commit")) for m in members)


@pytest.mark.parametrize(("protocol", "strategy"), CASES, ids=[f"{p}-{s}" for p, s in CASES])
def test_group_coordinator_node_killed_while_the_group_consumes(
    apache_nodes: ApacheKafkaCluster, members: Members, protocol: str, strategy: str
) -> None:
    cluster, bs = apache_nodes, apache_nodes.bootstrap
    topic, group, partitions = unique(f"coord-kill-{protocol}"), unique(f"g-coord-kill-{protocol}"), 6
    create_topic(bs, topic, partitions)
    all_parts = {(topic, p) for p in range(partitions)}
    offsets_partition = partition_for(group, OFFSETS_PARTITIONS)
    feeder = Feeder(bs, topic)
    feeder.start()
    members.common.update(client="groupstream", protocol=protocol, bootstrap=bs, group=group, topics=[topic],
                          strategy=strategy, session_timeout_ms=6000, heartbeat_ms=500, max_records=200,
                          batch_delay_s=0)  # fmt: skip
    try:
        a, b = members.start("A"), members.start("B")
        members.wait_split([a, b], all_parts, timeout=60)
        wait_for(lambda: _committed_since([a, b], 0), 30, "both members to commit")
        coordinator = _led_by_preferred(cluster, OFFSETS_TOPIC, offsets_partition)
        wait_for(
            lambda: cluster.group_coordinator(group) == coordinator, 30, f"node {coordinator} coordinating"
        )
        settled = time.monotonic()
        wait_for(
            lambda: _committed_since([a, b], settled), 30, f"both members to commit to node {coordinator}"
        )

        killed_at = time.monotonic()
        cluster.kill9(coordinator)
        wait_for(lambda: cluster.group_coordinator(group) not in (-1, coordinator), 30,
                 f"a new coordinator after node {coordinator} was killed")  # fmt: skip
        wait_for(lambda: _committed_since([a, b], killed_at), 60,
                 f"both members to commit to the new coordinator\n{members.describe()}")  # fmt: skip

        cluster.start_node(coordinator)
        wait_for(
            lambda: cluster.fully_replicated(topic, partitions), 60, f"node {coordinator} back in the ISRs"
        )
        wait_for(lambda: all(set(ps.isr) == set(ps.replicas) for ps in cluster.partitions(OFFSETS_TOPIC)
                             if ps.partition == offsets_partition), 60, "the group's offsets partition in sync")  # fmt: skip
        moved_at = time.monotonic()
        with Admin({"bootstrap.servers": bs}) as admin:
            admin.elect_leaders([(OFFSETS_TOPIC, offsets_partition), *sorted(all_parts)])
        wait_for(lambda: cluster.group_coordinator(group) == coordinator, 30,
                 f"node {coordinator} coordinating the group again")  # fmt: skip
        wait_for(lambda: _committed_since([a, b], moved_at), 60,
                 f"both members to commit after the coordinator moved back\n{members.describe()}")  # fmt: skip
    finally:
        feeder.stop()
    feeder.check_all_acknowledged()
    produced = {(topic, ack.partition, ack.offset) for ack in feeder.acked()}
    wait_for(lambda: {r for m in (a, b) for r in m.processed} >= produced, 60,
             f"every acknowledged record processed\n{members.describe()}")  # fmt: skip
    for m in (a, b):
        assert m.revocations_after(killed_at) == 0, (
            f"{m.name} lost partitions: the group rebalanced\n{members.describe()}"
        )
    ends = end_offsets(produced)
    with Admin({"bootstrap.servers": bs}) as admin:
        wait_for(lambda: {tp: om.offset for tp, om in admin.list_group_offsets(group).items()} == ends, 30,
                 "the committed offsets to reach the log ends")  # fmt: skip
    a.close(), b.close()
    check_group(members.all, produced)
    print(f"\n{len(produced)} records; coordinator node {coordinator} killed, restarted, coordinating again")
