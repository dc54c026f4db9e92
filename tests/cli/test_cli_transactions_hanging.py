"""``groupstream transactions describe-producers|find-hanging|abort`` (issue 17), as ``kafka-transactions.sh``
offers them, on our broker and on Apache Kafka.

A hanging transaction is an open transaction no coordinator will finish. A producer killed -9 in the middle of
a transaction does not make one by itself: its coordinator still lists the transaction (Ongoing, with the
partition) and aborts it when ``transaction.timeout.ms`` runs out, so ``find-hanging`` rightly leaves it out,
as Kafka's tool does. The tests then make it hang the way a lost coordinator state would: the broker is stopped,
its ``__transaction_state`` partitions deleted, and started again; the data partition still holds the open
transaction (its producer state is rebuilt from the log), but no coordinator knows its producer id. Then
``find-hanging`` reports it, ``abort --start-offset`` writes its ABORT marker at the leader, and a read_committed
reader (ours) reads past it: the last stable offset reaches the log end."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cli_runner import ok, run_cli, user_error

from groupstream import Consumer
from groupstream.client.admin import Admin, NewTopic
from groupstream.client.admin.transactions import (
    OpenTransaction,
    ProducerState,
    TransactionDescription,
    hanging_transactions,
    open_candidates,
)
from support.apache_kafka import ApacheKafkaCluster, fetch_jars
from support.brokers import BrokerKind, BrokerProcess
from support.kafka_config import jvm_command, log4j2_console
from support.waiting import wait_until

# The producer killed -9 in the middle of its second transaction: three committed records (offsets 0-2, the
# COMMIT marker at 3), then one record of a transaction left open at offset 4. Its transaction timeout is long
# (10 min) so that its coordinator would not abort it while the test runs.
_PRODUCER = """
import sys
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": sys.argv[3], "linger.ms": 0,
              "transaction.timeout.ms": 600000})
p.init_transactions(30)
p.begin_transaction()
for i in range(3):
    p.produce(sys.argv[2], b"committed-%d" % i)
p.commit_transaction(30)
p.begin_transaction()
p.produce(sys.argv[2], b"never-committed")
assert p.flush(30) == 0
print("open", flush=True)
sys.stdin.read()
"""


def _producer_killed_mid_transaction(bootstrap: str, topic: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _PRODUCER, bootstrap, topic, f"{topic}-txn"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "open", "the producer did not open its transaction"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)


def _table(*args: str) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = json.loads(ok("transactions", *args, "--format", "json").splitlines()[-1])[
        "rows"
    ]
    return rows


def _offsets(bootstrap: str, topic: str) -> tuple[int, int]:
    """(last stable offset, log end offset) of partition 0, as a read_committed consumer and the admin see them."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"lso-{uuid.uuid4().hex[:6]}",
                  "isolation.level": "read_committed"})  # fmt: skip
    try:
        lso = c.end_offsets([(topic, 0)])
    finally:
        c.close()
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        end = admin.list_offsets({(topic, 0): "latest"})[(topic, 0)].offset
    return next(iter(lso.values())), end


def _read_committed(bootstrap: str, topic: str, until: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rc-{uuid.uuid4().hex[:6]}",
                  "isolation.level": "read_committed", "enable.auto.commit": False})  # fmt: skip
    got: list[bytes] = []
    try:
        c.assign([(topic, 0)], offsets={(topic, 0): 0})

        def past() -> bool:
            got.extend(r.value for r in c.poll(0.2))
            return c.position((topic, 0)) >= until

        wait_until(past, 30, f"our read_committed consumer to reach offset {until} of {topic}", interval_s=0)
    finally:
        c.close()
    return got


def _kafka_find_hanging(bootstrap: str, topic: str, workdir: Path) -> list[dict[str, str]]:
    """Kafka's own ``kafka-transactions find-hanging`` (TransactionsCommand of the fixtures' Kafka), its rows by
    its headers, with our column names."""
    log4j2 = workdir / "tool-log4j2.properties"
    log4j2.write_text(log4j2_console("WARN", stderr=True))
    cmd = jvm_command("org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", bootstrap, "find-hanging",
                      "--topic", topic, "--max-transaction-timeout", "0", log4j2=log4j2)  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    header, *rows = [
        [c.strip() for c in line.split("\t")] for line in done.stdout.splitlines() if line.strip()
    ]
    return [{h.upper(): v for h, v in zip(header, r, strict=False) if h} for r in rows]


def _hanging_scenario(
    bootstrap: str, wipe_coordinator_state: Callable[[], None], workdir: Path, *, by_ids: bool = False
) -> None:
    """``by_ids``: abort naming the producer id, producer epoch and coordinator epoch that describe-producers
    shows (as for brokers before 3.0) instead of ``--start-offset``."""
    topic = f"hang-{uuid.uuid4().hex[:8]}"
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
        wait_until(lambda: topic in admin.list_topics(), 30, f"topic {topic}")
    _producer_killed_mid_transaction(bootstrap, topic)

    (producer,) = _table(
        "describe-producers", "--bootstrap-server", bootstrap, "--topic", topic, "--partition", "0"
    )
    assert producer["CURRENTTRANSACTIONSTARTOFFSET"] == "4", producer
    assert producer["LASTSEQUENCE"] == "3" and int(producer["PRODUCERID"]) >= 0, producer
    assert int(producer["LATESTCOORDINATOREPOCH"]) >= 0, producer  # the first transaction's COMMIT marker
    assert _offsets(bootstrap, topic) == (4, 5)  # the open transaction holds the LSO back

    # Its coordinator still knows it: not hanging, even with every open transaction a candidate.
    find = (
        "find-hanging",
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--max-transaction-timeout",
        "0",
    )
    assert _table(*find) == []

    wipe_coordinator_state()
    (row,) = _table(*find)
    assert (row["TOPIC"], row["PARTITION"], row["STARTOFFSET"]) == (topic, "0", "4"), row
    assert (row["PRODUCERID"], row["PRODUCEREPOCH"]) == (producer["PRODUCERID"], producer["PRODUCEREPOCH"]), (
        row
    )
    assert (
        _table("find-hanging", "--bootstrap-server", bootstrap, "--topic", topic) == []
    )  # younger than 15 min
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        (node_id,) = [b.node_id for b in admin.describe_cluster().brokers]
    by_broker = ("find-hanging", "--bootstrap-server", bootstrap, "--broker-id")
    assert _table(*by_broker, str(node_id), "--max-transaction-timeout", "0") == [
        row
    ]  # the broker's partitions
    assert "no such broker" in user_error("transactions", *by_broker, str(node_id + 1))
    (on_replica,) = _table("describe-producers", "--bootstrap-server", bootstrap, "--topic", topic,
                           "--partition", "0", "--broker-id", str(node_id))  # fmt: skip
    assert on_replica == producer, on_replica
    assert "has no partition 1" in user_error("transactions", "describe-producers", "--bootstrap-server", bootstrap,
                                              "--topic", topic, "--partition", "1")  # fmt: skip
    (theirs,) = _kafka_find_hanging(bootstrap, topic, workdir)  # Kafka's own tool finds the same transaction
    assert {k: v for k, v in theirs.items() if k != "DURATION(MIN)"} == {
        k: v for k, v in row.items() if k != "DURATION(MIN)"
    }, (theirs, row)

    no_such = user_error("transactions", "abort", "--bootstrap-server", bootstrap, "--topic", topic,
                         "--partition", "0", "--start-offset", "3")  # fmt: skip
    assert "no open transaction starts at offset 3" in no_such
    which = (
        ("--producer-id", producer["PRODUCERID"], "--producer-epoch", producer["PRODUCEREPOCH"],
         "--coordinator-epoch", producer["LATESTCOORDINATOREPOCH"])
        if by_ids else ("--start-offset", "4")
    )  # fmt: skip
    out = ok(
        "transactions", "abort", "--bootstrap-server", bootstrap, "--topic", topic, "--partition", "0", *which
    )
    assert f"producer {producer['PRODUCERID']}" in out, out
    assert _read_committed(bootstrap, topic, 6) == [b"committed-0", b"committed-1", b"committed-2"]
    assert _offsets(bootstrap, topic) == (6, 6)  # the ABORT marker at 5; nothing holds the LSO back
    (after,) = _table(
        "describe-producers", "--bootstrap-server", bootstrap, "--topic", topic, "--partition", "0"
    )
    assert after["CURRENTTRANSACTIONSTARTOFFSET"] == "None", after
    assert _table(*find) == []


def _wipe(data_dir: Path) -> None:
    gone = [d for d in data_dir.rglob("__transaction_state*") if d.is_dir()]
    assert gone, f"no __transaction_state partition under {data_dir}"
    for d in gone:
        shutil.rmtree(d)


@pytest.fixture
def our_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    fetch_jars()  # Kafka's own tool is compared with ours
    with BrokerProcess(BrokerKind.GROUPSTREAM, tmp_path) as b:
        yield b


@pytest.mark.broker_ours
@pytest.mark.compat
def test_hanging_transaction_found_and_aborted_on_our_broker(our_broker: BrokerProcess) -> None:
    def wipe() -> None:
        our_broker.stop()
        _wipe(our_broker.data_dir)
        our_broker.start()

    _hanging_scenario(our_broker.bootstrap, wipe, our_broker.workdir)


@pytest.mark.broker_apache
@pytest.mark.compat
def test_hanging_transaction_found_and_aborted_on_apache_kafka(tmp_path: Path) -> None:
    fetch_jars()
    with ApacheKafkaCluster(tmp_path / "kafka", 1) as cluster:
        (node,) = cluster.nodes

        def wipe() -> None:
            node.stop()
            _wipe(node.data_dir)
            cluster.start_node(node)

        _hanging_scenario(cluster.bootstrap, wipe, tmp_path, by_ids=True)


def test_find_hanging_and_abort_refuse_incomplete_arguments() -> None:
    bootstrap = "127.0.0.1:1"  # never reached: the arguments are refused first
    assert "needs --topic or --broker-id" in user_error(
        "transactions", "find-hanging", "--bootstrap-server", bootstrap
    )
    assert "--partition needs --topic" in user_error(
        "transactions",
        "find-hanging",
        "--bootstrap-server",
        bootstrap,
        "--broker-id",
        "1",
        "--partition",
        "0",
    )
    assert "--start-offset, or with --producer-id" in user_error(
        "transactions", "abort", "--bootstrap-server", bootstrap, "--topic", "t", "--partition", "0"
    )
    assert "not both" in user_error("transactions", "abort", "--bootstrap-server", bootstrap, "--topic", "t",
                                    "--partition", "0", "--start-offset", "1", "--producer-id", "2")  # fmt: skip
    proc = run_cli(
        "transactions", "abort", "--bootstrap-server", bootstrap, "--topic", "t", "--partition", "-1"
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr


# -- the selection itself, on hand-made answers (no broker) -------------------------------------------------

_NOW = 10_000_000


def _producer(pid: int, last_ms: int, start: int | None = 7) -> ProducerState:
    return ProducerState(pid, 0, 3, 5, last_ms, start)


def _description(tid: str, pid: int, partitions: tuple[tuple[str, int], ...]) -> TransactionDescription:
    return TransactionDescription(tid, 0, "Ongoing", pid, 0, 60_000, _NOW - 120_000, partitions)


def test_candidates_are_open_transactions_older_than_the_longest_timeout() -> None:
    producers = {
        ("t", 0): [
            _producer(1, _NOW - 61_000),
            _producer(2, _NOW - 59_000),
            _producer(3, _NOW - 61_000, None),
        ],
        ("t", 1): [_producer(4, _NOW - 60_000), _producer(1, _NOW - 3_600_000)],
    }
    got = [(c.topic, c.partition, c.producer.producer_id) for c in open_candidates(producers, _NOW, 60_000)]
    assert got == [
        ("t", 0, 1),
        ("t", 1, 1),
    ]  # 2 and 4 too young (not strictly older), 3 has no open transaction


def test_a_candidate_hangs_unless_its_coordinator_will_write_its_marker() -> None:
    cands = [
        OpenTransaction("t", p, _producer(pid, 0)) for pid, p in ((1, 0), (1, 1), (2, 0), (3, 0), (4, 0))
    ]
    ids = {1: "a", 3: "c", 4: "d"}  # no coordinator lists producer 2
    descriptions: dict[str, TransactionDescription | None] = {
        "a": _description("a", 1, (("t", 0),)),  # still writing t-0; t-1 is not in its transaction
        "c": None,  # its transactional id is not found
        "d": _description("d", 4, (("t", 0), ("u", 0))),
    }
    got = [(c.producer.producer_id, c.partition) for c in hanging_transactions(cands, ids, descriptions)]
    assert got == [(1, 1), (2, 0), (3, 0)]
