"""Our Producer, Consumer and Admin against a 3-node Apache Kafka 4.x cluster (replication factor 3,
``min.insync.replicas=2``), where, unlike on our one-node broker, partition leaders and group coordinators
sit on different nodes and every request must find its way to the right one.

- Our idempotent ``acks=all`` Producer, each codec: every acknowledged record is read back exactly once by an
  independent reader (confluent-kafka), in order, at the partition Java's murmur2 picks, and the high
  watermarks equal what was acknowledged; the partitions it wrote were led by all three nodes.
- Our Consumer in assign mode reads the same records back (from the beginning, from a seek, by timestamp).
- Our Admin: cluster and topic descriptions (replicas, ISR, leaders spread), configs, partitions added,
  records deleted below an offset on each leader, list offsets, group offsets altered, listed, deleted, and
  groups listed, described and deleted on their coordinators.
- Our CLI bootstrapped from one node: ``topics create|list|describe`` (three replicas, all in sync) and
  ``groups list|describe`` (offsets, ``--members --verbose``, ``--state`` with the coordinator Kafka chose) of
  a live KIP-848 group of our consumers, whose ``reset-offsets`` is refused while it has members.
- Our Admin's ``describe_producers`` and ``abort_transaction`` at the leaders of three partitions, each on
  another node: an open transaction's ABORT markers written there, each LSO then at its log end.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import Future

import pytest
from apache_helpers import create_topic, unique

from groupstream import Consumer, Producer
from groupstream.client.admin import AbortTransactionSpec, Admin, ConsumerGroupDescription, NewTopic
from groupstream.client.producer import RecordMetadata
from support.apache_kafka import ApacheKafkaCluster, ExternalKafkaCluster
from support.brokers import groupstream_command
from support.compat import CODECS, Acked, Consumed, check_read_equals_acked, confluent_read, make_records
from support.waiting import wait_until

pytestmark = [pytest.mark.broker_apache, pytest.mark.compat]

Cluster = ApacheKafkaCluster | ExternalKafkaCluster
PARTITIONS = 6


@pytest.fixture
def producers() -> Iterator[list[Producer]]:
    made: list[Producer] = []
    yield made
    for p in made:
        p.close(5)


@pytest.mark.slow
def test_idempotent_producer_each_codec_read_back_exactly(
    apache_cluster: Cluster, producers: list[Producer]
) -> None:
    bs = apache_cluster.bootstrap
    for codec in CODECS:
        topic = unique(f"codec-{codec}")
        create_topic(bs, topic, PARTITIONS)
        records = make_records(codec, 12_000)
        p = Producer(
            {"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True, "compression.type": codec}
        )
        producers.append(p)
        futures: list[Future[RecordMetadata]] = [p.produce(topic, v, key=k) for k, v in records]
        assert p.flush(120) == 0, f"{codec}: records still in flight after 120 s"
        acked = [
            Acked(f.result(0).partition, f.result(0).offset, k, v)
            for f, (k, v) in zip(futures, records, strict=True)
        ]
        consumed, ends = confluent_read(bs, topic, PARTITIONS, len(records))
        check_read_equals_acked(records, acked, consumed, PARTITIONS, end_offsets=ends)
        with Admin({"bootstrap.servers": bs}) as admin:
            leaders = {p.leader for p in admin.describe_topics([topic])[topic].partitions}
        assert len(leaders) >= min(3, PARTITIONS), (
            f"{codec}: all partitions led by {leaders}: nothing crossed nodes"
        )


def test_assign_mode_consumer_reads_back_seeks_and_finds_offsets_by_time(
    apache_cluster: Cluster, producers: list[Producer]
) -> None:
    bs = apache_cluster.bootstrap
    topic = unique("assign")
    create_topic(bs, topic, PARTITIONS)
    records = make_records("assign", 6_000)
    base_ts = 1_700_000_000_000
    p = Producer({"bootstrap.servers": bs})
    producers.append(p)
    futures = [p.produce(topic, v, key=k, timestamp=base_ts + i) for i, (k, v) in enumerate(records)]
    assert p.flush(60) == 0
    acked = [
        Acked(f.result(0).partition, f.result(0).offset, k, v)
        for f, (k, v) in zip(futures, records, strict=True)
    ]

    with Consumer({"bootstrap.servers": bs, "auto.offset.reset": "earliest"}) as c:
        c.assign([(topic, q) for q in range(PARTITIONS)])
        got: list[Consumed] = []
        deadline = time.monotonic() + 60
        while len(got) < len(records) and time.monotonic() < deadline:
            got += [Consumed(r.partition, r.offset, r.key, r.value) for r in c.poll(0.5)]
        got += [Consumed(r.partition, r.offset, r.key, r.value) for r in c.poll(0.3)]
        ends = {tp.partition: o for tp, o in c.end_offsets([(topic, q) for q in range(PARTITIONS)]).items()}
        check_read_equals_acked(records, acked, got, PARTITIONS, end_offsets=ends)

        # offsets_for_times finds the first record at or after a timestamp; a seek reads from there again
        middle = acked[len(acked) // 2]
        found = c.offsets_for_times({(topic, middle.partition): base_ts + len(acked) // 2})
        assert list(found.values()) == [(middle.offset, base_ts + len(acked) // 2)], found
        c.assign([(topic, middle.partition)])
        c.seek((topic, middle.partition), middle.offset)
        again: list[Consumed] = []
        deadline = time.monotonic() + 30
        while not again and time.monotonic() < deadline:
            again = [Consumed(r.partition, r.offset, r.key, r.value) for r in c.poll(0.5)]
        assert again and again[0] == Consumed(middle.partition, middle.offset, middle.key, middle.value), (
            again[:1]
        )


def test_admin_against_the_cluster(apache_cluster: Cluster, producers: list[Producer]) -> None:
    bs = apache_cluster.bootstrap
    topic, group = unique("admin"), unique("g-admin")
    with Admin({"bootstrap.servers": bs}) as admin:
        cluster = admin.describe_cluster()
        ids = {b.node_id for b in cluster.brokers}
        assert len(ids) >= 3 and cluster.controller_id in ids | {-1}, cluster

        admin.create_topics([NewTopic(topic, 4)])
        wait_until(lambda: topic in admin.list_topics(), 30, f"{topic} listed")
        wait_until(
            lambda: all(len(p.isr) == 3 for p in admin.describe_topics([topic])[topic].partitions),
            30,
            "every replica in sync",
        )
        desc = admin.describe_topics([topic])[topic]
        assert desc.topic_id is not None and desc.partition_count == 4
        assert all(len(p.replicas) == 3 and set(p.isr) == set(p.replicas) for p in desc.partitions), desc
        assert len({p.leader for p in desc.partitions}) >= 2, f"leaders not spread: {desc.partitions}"
        configs = admin.describe_configs(topic)
        assert configs["min.insync.replicas"].value == "2", configs["min.insync.replicas"]
        assert configs["cleanup.policy"].value == "delete"

        admin.create_partitions(topic, 6)
        wait_until(lambda: admin.describe_topics([topic])[topic].partition_count == 6, 30, "6 partitions")

        p = Producer({"bootstrap.servers": bs})
        producers.append(p)
        for q in range(6):
            for i in range(50):
                p.produce(topic, b"v%d-%d" % (q, i), partition=q)
        assert p.flush(60) == 0
        ends = admin.list_offsets({(topic, q): "latest" for q in range(6)})
        assert {tp: o.offset for tp, o in ends.items()} == {(topic, q): 50 for q in range(6)}

        # records below an offset deleted on each partition's leader (they are spread over the nodes)
        starts = admin.delete_records({(topic, q): 10 + q for q in range(6)})
        assert starts == {(topic, q): 10 + q for q in range(6)}
        earliest = admin.list_offsets({(topic, q): "earliest" for q in range(6)})
        assert {tp: o.offset for tp, o in earliest.items()} == starts

        # group offsets on the group's coordinator
        admin.alter_group_offsets(group, {(topic, q): 20 + q for q in range(6)})
        assert {tp: om.offset for tp, om in admin.list_group_offsets(group).items()} == {
            (topic, q): 20 + q for q in range(6)
        }
        lag = admin.consumer_lag(group)
        assert {tp: (lg.committed, lg.log_end) for tp, lg in lag.items()} == {
            (topic, q): (20 + q, 50) for q in range(6)
        }
        listed = {g.group_id: g for g in admin.list_groups()}
        assert group in listed and listed[group].state == "Empty", listed.get(group)
        described = admin.describe_groups([group])[group]
        assert described.state == "Empty" and not described.members
        assert described.coordinator_id in ids
        if isinstance(apache_cluster, ApacheKafkaCluster):
            assert described.coordinator_id == apache_cluster.group_coordinator(group)

        admin.delete_group_offsets(group, topic, [0, 1])
        assert set(admin.list_group_offsets(group)) == {(topic, q) for q in range(2, 6)}
        admin.delete_groups([group])
        assert group not in {g.group_id for g in admin.list_groups()}

        admin.delete_topics([topic])
        wait_until(lambda: topic not in admin.list_topics(), 30, f"{topic} gone")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The ``groupstream`` console script, on a terminal wide enough that 36-character member ids are not cut
    short in the 11-column ``--members --verbose`` table."""
    return subprocess.run([*groupstream_command(), *args], capture_output=True, text=True, timeout=60, check=False,
                          env=dict(os.environ, COLUMNS="400", NO_COLOR="1"))  # fmt: skip


def ok(*args: str) -> str:
    """Stdout of a ``groupstream`` command that must succeed."""
    proc = cli(*args)
    assert proc.returncode == 0, f"groupstream {' '.join(args)} exited {proc.returncode}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout


def _stable_consumer_group(bs: str, group: str, topic: str, per_partition: int) -> list[Consumer]:
    """Two of our consumers (``group.protocol=consumer``, the broker's ``uniform`` assignor) that own the
    topic's partitions between them, have read every record and committed."""
    conf = {"bootstrap.servers": bs, "group.id": group, "group.protocol": "consumer",
            "group.remote.assignor": "uniform", "auto.offset.reset": "earliest", "enable.auto.commit": False}  # fmt: skip
    members = [Consumer({**conf, "client.id": f"m{i}"}) for i in range(2)]
    for m in members:
        m.subscribe([topic])

    def at_end(m: Consumer) -> bool:
        return all(m.position(tp) == per_partition for tp in m.assignment())

    deadline = time.monotonic() + 60
    try:
        with Admin({"bootstrap.servers": bs}) as admin:
            while True:
                for m in members:
                    m.poll(0.05)
                found = admin.describe_consumer_groups_or_errors([group])[
                    group
                ]  # not found before a heartbeat
                if (
                    isinstance(found, ConsumerGroupDescription)
                    and found.stable
                    and len(found.members) == 2
                    and all(m.assignment() and at_end(m) for m in members)
                ):
                    break
                assert time.monotonic() < deadline, f"no stable group of two that read everything: {found}"
        for m in members:
            m.commit(asynchronous=False)
    except BaseException:
        for m in members:
            m.close()
        raise
    return members


def test_cli_topics_and_groups_against_the_cluster(
    apache_cluster: Cluster, producers: list[Producer]
) -> None:
    """``groupstream topics`` and ``groupstream groups list|describe`` bootstrapped from one node of the
    cluster: topics with three replicas, and a live KIP-848 group whose coordinator is found wherever it is."""
    from test_cli_consumer_groups import _parts, _table

    first = apache_cluster.bootstrap.split(",")[0]
    bs = ("--bootstrap-server", first)
    topic, group, classic = unique("cli"), unique("g-cli"), unique("g-cli-classic")
    partitions, per_partition = 4, 5

    assert f"created topic {topic!r} with 4 partitions" in ok(
        "topics", "create", topic, "--partitions", "4", *bs
    )
    with Admin({"bootstrap.servers": first}) as admin:
        wait_until(
            lambda: all(len(p.isr) == 3 for p in admin.describe_topics([topic])[topic].partitions),
            30,
            "every replica in sync",
        )
        admin.alter_group_offsets(classic, {(topic, 0): 2})  # a classic group (Empty) beside it
    listed = {r["TOPIC"]: r for r in _table(ok("topics", "list", *bs))}
    assert listed[topic]["PARTITIONS"] == "4"
    out = ok("topics", "describe", topic, *bs)
    rows = [r for r in _table(out.split("configs of")[0]) if r.get("PARTITION")]
    assert sorted(int(r["PARTITION"]) for r in rows) == list(range(partitions))
    for r in rows:
        replicas, isr = set(r["REPLICAS"].split(",")), set(r["ISR"].split(","))
        assert len(replicas) == 3 and isr == replicas and r["LEADER"] in replicas, r

    p = Producer({"bootstrap.servers": first})
    producers.append(p)
    for i in range(partitions * per_partition):
        p.produce(topic, b"v%d" % i, partition=i % partitions)
    assert p.flush(30) == 0

    members = _stable_consumer_group(first, group, topic, per_partition)
    try:
        with Admin({"bootstrap.servers": first}) as admin:
            desc = admin.describe_consumer_groups([group])[group]
        epoch = str(desc.group_epoch)
        by_id = {m.member_id: m for m in desc.members}

        listed_groups = {r["GROUP"]: r for r in _table(ok("groups", "list", *bs))}
        assert [listed_groups[group][c] for c in ("TYPE", "STATE")] == ["consumer", "Stable"]
        assert [listed_groups[classic][c] for c in ("TYPE", "STATE")] == ["classic", "Empty"]

        owners = desc.owners()
        rows = _table(ok("groups", "describe", group, *bs))
        assert sorted(int(r["PARTITION"]) for r in rows) == list(range(partitions))
        for r in rows:
            owner = owners[(r["TOPIC"], int(r["PARTITION"]))]
            assert [r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"]] == [str(per_partition)] * 2 + ["0"], r
            assert r["CONSUMER-ID"] == owner.member_id

        rows = _table(ok("groups", "describe", group, "--members", "--verbose", *bs))
        assert sorted(r["CONSUMER-ID"] for r in rows) == sorted(by_id)
        seen: set[tuple[str, int]] = set()
        for r in rows:
            assert (r["CURRENT-EPOCH"], r["TARGET-EPOCH"], r["MEMBER-STATE"]) == (epoch, epoch, "stable"), r
            current = _parts(r["CURRENT-ASSIGNMENT"])
            assert current == set(by_id[r["CONSUMER-ID"]].assignment) and not current & seen
            seen |= current
        assert seen == {(topic, q) for q in range(partitions)}

        (row,) = _table(ok("groups", "describe", group, "--state", *bs))
        assert [row[c] for c in ("ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH", "#MEMBERS")] == [
            "uniform",
            "Stable",
            epoch,
            "2",
        ]
        if isinstance(apache_cluster, ApacheKafkaCluster):
            node = apache_cluster.node(apache_cluster.group_coordinator(group))
            assert row["COORDINATOR (ID)"] == f"{node.bootstrap} ({node.node_id})", row

        # resetting the offsets of a live group is refused before anything is written
        refused = cli("groups", "reset-offsets", group, "--all-topics", "--to-earliest", "--execute", *bs)
        assert refused.returncode == 2, f"exit {refused.returncode}\n{refused.stdout}\n{refused.stderr}"
        assert "current state is Stable (2 members)" in refused.stderr, refused.stderr
    finally:
        for m in members:
            m.close()


def test_admin_aborts_an_open_transaction_at_each_partitions_leader(apache_cluster: Cluster) -> None:
    """Our Admin's ``describe_producers`` and ``abort_transaction`` (issue 17, ``kafka-transactions.sh
    describe-producers|abort``) on partitions led by three different nodes: each DescribeProducers and
    WriteTxnMarkers goes to the partition's leader (a follower would answer NOT_LEADER_OR_FOLLOWER), and once
    each partition's ABORT marker is written its last stable offset reaches its log end."""
    topic = unique("txn-abort")
    create_topic(apache_cluster.bootstrap, topic, 3)
    tps = [(topic, i) for i in range(3)]
    p = Producer({"bootstrap.servers": apache_cluster.bootstrap, "transactional.id": unique("tid"),
                  "transaction.timeout.ms": 600_000})  # fmt: skip
    try:
        p.init_transactions(60)
        p.begin_transaction()
        for i in range(3):
            p.produce(topic, b"open-%d" % i, partition=i)
        assert p.flush(30) == 0
        with Admin({"bootstrap.servers": apache_cluster.bootstrap}) as admin:
            leaders = {
                (topic, q.partition): q.leader for q in admin.describe_topics([topic])[topic].partitions
            }
            assert len(set(leaders.values())) == 3, leaders
            producers = admin.describe_producers(tps)
            for tp in tps:
                (state,) = producers[tp]
                assert state.txn_start_offset == 0, (tp, state)
                admin.abort_transaction(
                    AbortTransactionSpec(
                        topic, tp[1], state.producer_id, state.producer_epoch, state.coordinator_epoch
                    )
                )
            after = admin.describe_producers(tps)
            assert [s.txn_start_offset for tp in tps for s in after[tp]] == [None, None, None], after
            ends = {tp: o.offset for tp, o in admin.list_offsets(dict.fromkeys(tps, "latest")).items()}
        assert ends == dict.fromkeys(tps, 2)  # the record and its ABORT marker
        c = Consumer({"bootstrap.servers": apache_cluster.bootstrap, "group.id": unique("lso"),
                      "isolation.level": "read_committed"})  # fmt: skip
        try:
            assert {
                (tp.topic, tp.partition): o for tp, o in c.end_offsets(tps).items()
            } == ends  # LSO = log end
        finally:
            c.close()
    finally:
        p.close()
