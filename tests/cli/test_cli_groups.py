"""``groupstream groups``: list, describe (offsets, members, state views), reset-offsets, delete and
delete-offsets through the console script, against a real broker with a real confluent-kafka group member.

The main flow runs against our broker. The reset/delete flow runs against Tansu too (a check that the CLI
works on a broker we did not write; Tansu 0.6.0 leaves members' details empty in DescribeGroups and has no
OffsetDelete, so those views are checked on ours only).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import pytest
from cli_runner import ok, plain_tables, run_cli, user_error
from confluent_kafka import Consumer, Producer

from groupstream.client.admin import Admin, NewTopic
from support.brokers import BrokerKind, BrokerProcess, free_port
from support.compat import expects_true_high_watermark

PARTITIONS = 3
PER_PARTITION = 10


@pytest.fixture(scope="module")
def our_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    settings = {"group.initial.rebalance.delay.ms": "0"}
    with BrokerProcess(BrokerKind.GROUPSTREAM, tmp_path_factory.mktemp("groups-cli"), settings=settings) as b:
        yield b


@pytest.fixture(scope="module", params=[
    pytest.param(BrokerKind.GROUPSTREAM, marks=pytest.mark.broker_ours, id="groupstream"),
    pytest.param(BrokerKind.TANSU, marks=pytest.mark.broker_tansu, id="tansu"),
])  # fmt: skip
def any_broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    kind = BrokerKind(request.param)
    settings = {"group.initial.rebalance.delay.ms": "0"} if kind is BrokerKind.GROUPSTREAM else None
    with BrokerProcess(kind, tmp_path_factory.mktemp(f"groups-cli-{kind}"), settings=settings) as b:
        yield b


def _rows(output: str) -> list[list[str]]:
    """The cells of every table body row, as the piped (plain) output has them."""
    return [list(row.values()) for table in plain_tables(output) for row in table]


def _topic_with_records(bs: str) -> str:
    topic = f"gcli-{uuid.uuid4().hex[:8]}"
    with Admin({"bootstrap.servers": bs}) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS)])
    p = Producer({"bootstrap.servers": bs})
    for i in range(PARTITIONS * PER_PARTITION):
        p.produce(topic, value=f"v{i}".encode(), partition=i % PARTITIONS)
    assert p.flush(30) == 0
    return topic


def _member(bs: str, group: str, topic: str, records: int) -> Consumer:
    """A live member that consumed and committed ``records`` records (spread as the broker served them)."""
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "client.id": "cli-test-member",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})  # fmt: skip
    c.subscribe([topic])
    got = 0
    deadline = time.monotonic() + 30
    while got < records:
        assert time.monotonic() < deadline, f"consumed only {got} of {records} records"
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            got += 1
            c.commit(message=m, asynchronous=False)
    return c


def _committed(bs: str, group: str) -> dict[int, int]:
    with Admin({"bootstrap.servers": bs}) as admin:
        return {p: om.offset for (_, p), om in admin.list_group_offsets(group).items()}


@pytest.mark.broker_ours
def test_list_and_describe_views(our_broker: BrokerProcess) -> None:
    bs = ("--bootstrap-server", our_broker.bootstrap)
    topic = _topic_with_records(our_broker.bootstrap)
    group = f"g-{uuid.uuid4().hex[:8]}"
    consumer = _member(our_broker.bootstrap, group, topic, 12)
    try:
        with Admin({"bootstrap.servers": our_broker.bootstrap}) as admin:
            (member,) = admin.describe_groups([group])[group].members
        committed = _committed(our_broker.bootstrap, group)

        rows = {r[0]: r for r in _rows(ok("groups", "list", *bs))}
        assert rows[group][1:] == ["classic", "consumer", "Stable"]
        assert group in {r[0] for r in _rows(ok("groups", "list", "--state", "stable", *bs))}
        assert group not in {r[0] for r in _rows(ok("groups", "list", "--state", "EMPTY", *bs))}

        out = ok("groups", "describe", group, *bs)
        table = {int(r[2]): r for r in _rows(out) if r[0] == group}
        assert sorted(table) == list(range(PARTITIONS))
        for p, r in table.items():
            cur = committed.get(p)
            assert r[1] == topic
            assert r[3] == (str(cur) if cur is not None else "-")
            assert r[4] == str(PER_PARTITION)
            assert r[5] == (str(PER_PARTITION - cur) if cur is not None else "-")
            assert r[6:] == [member.member_id, member.client_host, "cli-test-member"]

        (mrow,) = _rows(ok("groups", "describe", group, "--members", "--verbose", *bs))
        assert mrow == [group, member.member_id, "-", member.client_host, "cli-test-member", str(PARTITIONS),
                        f"{topic}(0,1,2)"]  # fmt: skip
        (srow,) = _rows(ok("groups", "describe", group, "--state", *bs))
        assert srow[0] == group and srow[2:] == ["range", "Stable", "1"]
        assert srow[1].endswith("(1)")

        err = user_error("groups", "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute", *bs)
        assert "can only be reset if the group" in err and "Stable" in err
        err = user_error("groups", "delete", group, *bs)
        assert f"consumer group {group!r} is not empty" in err
        assert _committed(our_broker.bootstrap, group) == committed
    finally:
        consumer.close()  # a dynamic member leaves the group

    out = ok("groups", "describe", group, *bs)
    assert f"Consumer group {group!r} has no active members." in out
    assert all(r[6:] == ["-", "-", "-"] for r in _rows(out))
    assert _rows(ok("groups", "describe", group, "--state", *bs))[0][3] == "Empty"

    # piped, the output is Kafka's plain columns, whole at any width (no box, nothing cut), grep-able
    assert not set("│┃━…") & set(out)
    header = next(line for line in out.splitlines() if line.startswith("GROUP"))
    assert header.split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                              "CONSUMER-ID", "HOST", "CLIENT-ID"]  # fmt: skip
    # Kafka's spelling of the group, and the same rows as JSON for programs
    as_json = ok("groups", "describe", "--group", group, "--format", "json", *bs)
    (doc,) = [json.loads(line) for line in as_json.splitlines() if line.startswith("{")]
    assert [[r[k] or "-" for k in r] for r in doc["rows"]] == _rows(out)
    assert "--group" in user_error("groups", "describe", *bs)


def test_reset_and_delete(any_broker: BrokerProcess) -> None:
    bootstrap = any_broker.bootstrap
    bs = ("--bootstrap-server", bootstrap)
    topic = _topic_with_records(bootstrap)
    group = f"g-{uuid.uuid4().hex[:8]}"
    _member(bootstrap, group, topic, 5).close()
    before = _committed(bootstrap, group)
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        latest = admin.list_offsets({(topic, p): "latest" for p in range(PARTITIONS)})
    # what the broker calls the log end (Tansu 0.6.0 answers a stale one; see support.compat)
    ends = {p: latest[(topic, p)].offset for p in range(PARTITIONS)}
    if expects_true_high_watermark(any_broker.kind):
        assert ends == dict.fromkeys(range(PARTITIONS), PER_PARTITION)

    # a dry run (the default) changes nothing
    out = ok("groups", "reset-offsets", group, "--topic", topic, "--to-earliest", *bs)
    assert {int(r[2]): r[3] for r in _rows(out)} == dict.fromkeys(range(PARTITIONS), "0")
    assert _committed(bootstrap, group) == before

    ok("groups", "reset-offsets", group, "--topic", topic, "--to-latest", "--execute", *bs)
    assert _committed(bootstrap, group) == ends

    ok("groups", "reset-offsets", group, "--topic", f"{topic}:0,2", "--shift-by", "-1", "--execute", *bs)
    shifted = {0: ends[0] - 1, 1: ends[1], 2: ends[2] - 1}
    assert _committed(bootstrap, group) == shifted

    out = ok("groups", "reset-offsets", group, "--all-topics", "--to-offset", "100", "--dry-run", *bs)
    assert {int(r[2]): int(r[3]) for r in _rows(out)} == ends, "not clamped to the log end"

    ok("groups", "reset-offsets", group, "--topic", f"{topic}:1", "--to-datetime", "2001-01-01T00:00:00Z",
       "--execute", *bs)  # fmt: skip
    assert _committed(bootstrap, group)[1] == 0
    if any_broker.kind is BrokerKind.GROUPSTREAM:  # Tansu answers offset 0, not -1, for a time after every record
        ok("groups", "reset-offsets", group, "--topic", f"{topic}:1", "--to-datetime", "2999-01-01T00:00:00+02:00",
           "--execute", *bs)  # fmt: skip
        assert _committed(bootstrap, group)[1] == ends[1]

    err = user_error("groups", "reset-offsets", group, "--topic", f"{topic}:7", "--to-earliest", *bs)
    assert f"topic {topic!r} has {PARTITIONS} partitions; there is no partition 7" in err
    err = user_error("groups", "reset-offsets", group, "--topic", "no-such-topic", "--to-earliest", *bs)
    assert "no-such-topic" in err

    if any_broker.kind is BrokerKind.GROUPSTREAM:  # Tansu 0.6.0 has no OffsetDelete
        out = ok("groups", "delete-offsets", group, "--topic", f"{topic}:1", *bs)
        assert _rows(out) == [[topic, "1", "deleted"]]
        assert _committed(bootstrap, group) == {0: shifted[0], 2: shifted[2]}

    assert f"deleted consumer group {group!r}" in ok("groups", "delete", group, *bs)
    assert _committed(bootstrap, group) == {}
    assert group not in {r[0] for r in _rows(ok("groups", "list", *bs))}
    if any_broker.kind is BrokerKind.GROUPSTREAM:  # Tansu describes an unknown group as Empty
        assert f"consumer group {group!r} does not exist" in user_error("groups", "describe", group, *bs)
        assert f"consumer group {group!r} does not exist" in user_error("groups", "delete", group, *bs)


def test_user_mistakes_are_one_line_errors() -> None:
    dead = f"127.0.0.1:{free_port()}"
    err = user_error("groups", "list", "--bootstrap-server", dead)
    assert "connection refused" in err
    assert "unknown group state 'bogus'" in user_error("groups", "list", "--state", "bogus", "--bootstrap-server", dead)
    err = user_error("groups", "reset-offsets", "g", "--topic", "t:x", "--to-earliest", "--bootstrap-server", dead)
    assert "bad partition 'x'" in err
    err = user_error("groups", "reset-offsets", "g", "--topic", "t", "--to-datetime", "yesterday")
    assert "expected an ISO date-time" in err
    proc = run_cli("groups", "reset-offsets", "g", "--topic", "t", "--bootstrap-server", dead)
    assert proc.returncode == 2 and "one of the arguments --to-earliest" in proc.stderr
    assert "Traceback" not in proc.stderr
