"""``groupstream groups list|describe`` of a KIP-848 ``consumer`` group through the console script: two
confluent-kafka members (``group.protocol=consumer``, the broker's ``uniform`` assignor) over a 4-partition
topic. Kafka's offsets view, and the ``--members`` / ``--state`` views with Kafka 4's epoch and target
assignment columns; a classic group beside it keeps the classic views."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from cli_runner import ok, plain_tables, user_error
from confluent_kafka import Consumer, Producer

from groupstream.client.admin import Admin, ConsumerGroupDescription, NewTopic
from support.brokers import BrokerKind, BrokerProcess

pytestmark = pytest.mark.broker_ours

PARTITIONS = 4
PER_PARTITION = 5


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    settings = {"group.initial.rebalance.delay.ms": "0", "group.consumer.heartbeat.interval.ms": "300"}
    with BrokerProcess(BrokerKind.GROUPSTREAM, tmp_path_factory.mktemp("cg-cli"), settings=settings) as b:
        yield b


def _tables(output: str) -> list[list[dict[str, str]]]:
    return plain_tables(output)


def _table(output: str) -> list[dict[str, str]]:
    (table,) = _tables(output)
    return table


def _parts(text: str) -> set[tuple[str, int]]:
    """Kafka 4's assignment text, ``topic:0,1;other:2``, as (topic, partition) pairs."""
    out: set[tuple[str, int]] = set()
    for item in text.split(";"):
        topic, _, parts = item.rpartition(":")
        out.update((topic, int(p)) for p in parts.split(","))
    return out


def _at_end(member: Consumer) -> bool:
    return all(tp.offset == PER_PARTITION for tp in member.position(member.assignment()))


def _stable_group(bs: str, group: str, topic: str) -> tuple[list[Consumer], ConsumerGroupDescription]:
    """Two members that own the topic's partitions between them, have read every record and committed."""
    conf = {"bootstrap.servers": bs, "group.id": group, "group.protocol": "consumer",
            "group.remote.assignor": "uniform", "auto.offset.reset": "earliest", "enable.auto.commit": False}  # fmt: skip
    members = [Consumer({**conf, "client.id": f"m{i}"}) for i in range(2)]
    for m in members:
        m.subscribe([topic])
    deadline = time.monotonic() + 30
    with Admin({"bootstrap.servers": bs}) as admin:
        while True:
            for m in members:
                m.poll(0.05)
            desc = admin.describe_consumer_groups([group])[group]
            # a partition that moved is read again by its new owner (nothing was committed): count positions
            caught_up = all(m.assignment() and _at_end(m) for m in members)
            if desc.stable and len(desc.members) == 2 and caught_up:
                break
            assert time.monotonic() < deadline, f"no stable group of two that read everything: {desc}"
        for m in members:
            m.commit(asynchronous=False)
        return members, admin.describe_consumer_groups([group])[group]


def test_describe_views_of_a_consumer_group(broker: BrokerProcess) -> None:
    bs = ("--bootstrap-server", broker.bootstrap)
    topic, group, classic = (f"{p}-{uuid.uuid4().hex[:6]}" for p in ("t", "g", "c"))
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS)])
        admin.alter_group_offsets(classic, {(topic, 0): 2})  # a classic group (Empty) beside it
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(PARTITIONS * PER_PARTITION):
        producer.produce(topic, value=b"v%d" % i, partition=i % PARTITIONS)
    assert producer.flush(30) == 0

    members, desc = _stable_group(broker.bootstrap, group, topic)
    try:
        by_id = {m.member_id: m for m in desc.members}
        epoch = str(desc.group_epoch)
        assert desc.assignment_epoch == desc.group_epoch > 0

        # list: the type column, and the --type filter
        listed = {r["GROUP"]: r for r in _table(ok("groups", "list", *bs))}
        assert [listed[group][c] for c in ("TYPE", "PROTOCOL-TYPE", "STATE")] == [
            "consumer",
            "consumer",
            "Stable",
        ]
        assert [listed[classic][c] for c in ("TYPE", "STATE")] == ["classic", "Empty"]
        assert {r["GROUP"] for r in _table(ok("groups", "list", "--type", "consumer", *bs))} >= {group}
        assert classic not in {r["GROUP"] for r in _table(ok("groups", "list", "--type", "consumer", *bs))}
        assert group not in {r["GROUP"] for r in _table(ok("groups", "list", "--type", "Classic", *bs))}

        # Kafka's offsets view: every partition with its owner, committed at the log end
        rows = _table(ok("groups", "describe", group, *bs))
        assert sorted(int(r["PARTITION"]) for r in rows) == list(range(PARTITIONS))
        owners = desc.owners()
        for r in rows:
            owner = owners[(r["TOPIC"], int(r["PARTITION"]))]
            assert [r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"]] == [
                str(PER_PARTITION),
                str(PER_PARTITION),
                "0",
            ]
            assert [r["CONSUMER-ID"], r["HOST"], r["CLIENT-ID"]] == [
                owner.member_id,
                owner.client_host,
                owner.client_id,
            ]

        # --members --verbose: Kafka 4's epochs and assignments, and each member's state
        rows = _table(ok("groups", "describe", group, "--members", "--verbose", *bs))
        assert sorted(r["CONSUMER-ID"] for r in rows) == sorted(by_id)
        seen: set[tuple[str, int]] = set()
        for r in rows:
            m = by_id[r["CONSUMER-ID"]]
            assert (r["GROUP"], r["GROUP-INSTANCE-ID"], r["HOST"], r["CLIENT-ID"]) == (
                group,
                "-",
                m.client_host,
                m.client_id,
            )
            assert (r["CURRENT-EPOCH"], r["TARGET-EPOCH"], r["MEMBER-STATE"]) == (epoch, epoch, "stable")
            assert "UPGRADED" not in r  # as Kafka's tool: only a group that mixes protocols gets the column
            assert r["CURRENT-ASSIGNMENT"] == r["TARGET-ASSIGNMENT"]
            current = _parts(r["CURRENT-ASSIGNMENT"])
            assert current == set(m.assignment) and r["#PARTITIONS"] == str(len(current)) == "2"
            assert not current & seen
            seen |= current
        assert seen == {(topic, p) for p in range(PARTITIONS)}

        # --members: Kafka's short form
        rows = _table(ok("groups", "describe", group, "--members", *bs))
        assert sorted((r["CONSUMER-ID"], r["CLIENT-ID"], r["#PARTITIONS"]) for r in rows) == sorted(
            (m.member_id, m.client_id, "2") for m in desc.members)  # fmt: skip

        # --state: the epochs and the assignor, for the classic group too ("-": it has generations instead)
        rows = {r["GROUP"]: r for r in _table(ok("groups", "describe", group, classic, "--state", *bs))}
        cols = ("ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS")
        assert [rows[group][c] for c in cols] == ["uniform", "Stable", epoch, epoch, "2"]
        assert rows[group]["COORDINATOR (ID)"] == f"{broker.bootstrap} (1)"
        assert [rows[classic][c] for c in cols] == ["-", "Empty", "-", "-", "0"]
        # a classic group alone keeps the classic columns (and --members --verbose its ASSIGNMENT column)
        (row,) = _table(ok("groups", "describe", classic, "--state", *bs))
        assert "GROUP-EPOCH" not in row and row["STATE"] == "Empty"
        out = ok("groups", "describe", group, classic, "--members", "--verbose", *bs)
        assert f"Consumer group {classic!r} has no active members." in out
        classic_table, consumer_table = _tables(out)
        assert classic_table == [] and len(consumer_table) == 2 and "ASSIGNMENT" not in consumer_table[0]
    finally:
        for m in members:
            m.close()

    # both members left: the group is Empty but still a consumer group, its epochs moved on
    (row,) = _table(ok("groups", "describe", group, "--state", *bs))
    assert row["STATE"] == "Empty" and row["#MEMBERS"] == "0" and int(row["GROUP-EPOCH"]) > desc.group_epoch
    out = ok("groups", "describe", group, "--members", "--verbose", *bs)
    assert f"Consumer group {group!r} has no active members." in out
    assert _table(out) == []


def test_consumer_group_mistakes_are_one_line_errors(broker: BrokerProcess) -> None:
    bs = ("--bootstrap-server", broker.bootstrap)
    assert "unknown group type 'share'" in user_error("groups", "list", "--type", "share", *bs)
    err = user_error("groups", "describe", "no-such-group", "--members", "--verbose", *bs)
    assert "consumer group 'no-such-group' does not exist" in err
