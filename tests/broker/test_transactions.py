"""Transactions on our broker (issue 17), with confluent-kafka's and aiokafka's transactional producers.

- commit and abort: read_uncommitted sees both transactions' records, read_committed only the committed ones;
- a second producer with the same transactional.id fences the first: the first's commit fails, also when the
  first was SIGSTOPped in its own process while the second initialised, then resumed;
- an open transaction is aborted at its timeout (the last stable offset moves on);
- DescribeTransactions and ListTransactions show the coordinator's view;
- kill -9 of the broker: a transaction whose commit was acknowledged is committed after the restart (its
  markers are written again from the PrepareCommit record), an open one aborts at its timeout;
- send_offsets_to_transaction: the offsets are pending (OffsetFetch require_stable answers
  UNSTABLE_OFFSET_COMMIT) until the transaction ends, committed with it, dropped by an abort, and still
  committed after the group coordinator reloads its partition.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from groupstream.protocol.messages import by_name
from support.brokers import BrokerKind, BrokerProcess
from support.raw_client import RawClient
from support.waiting import wait_until

pytestmark = [pytest.mark.broker_ours, pytest.mark.compat]

DESCRIBE = by_name("DescribeTransactions")
LIST = by_name("ListTransactions")


@pytest.fixture(scope="module")
def gs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(BrokerKind.GROUPSTREAM, tmp_path_factory.mktemp("txn")) as b:
        yield b


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    assert admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30) is None


def producer(bootstrap: str, tid: str, **extra: Any) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 0, **extra})
    p.init_transactions(30)
    return p


def read_all(bootstrap: str, topic: str, isolation: str, partitions: int = 1) -> list[bytes]:
    """Every record a consumer at ``isolation`` gets from the start to the end it can reach (read_committed
    stops at the last stable offset: the end of the partition once no transaction is open)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}",
                  "isolation.level": isolation, "enable.auto.commit": False})  # fmt: skip
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
        got: list[bytes] = []

        def at_end() -> bool:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append(m.value() or b"")
            positions = c.position([TopicPartition(topic, p) for p in range(partitions)])
            # past the last marker too: the position moves over control batches
            return all(tp.offset >= ends[tp.partition] for tp in positions)

        wait_until(at_end, 30, f"a {isolation} consumer to reach the end of {topic}")
        return got
    finally:
        c.close()


def raw(gs: BrokerProcess, api: Any, version: int, **fields: Any) -> Any:
    client = RawClient(gs.port, "txn-test")
    try:
        corr = client.send(api, version, api.Request(**fields))
        got = client.receive()
        assert got[0] == corr
        return got[3]
    finally:
        client.close()


def describe(gs: BrokerProcess, tid: str) -> Any:
    return raw(gs, DESCRIBE, 0, transactional_ids=[tid]).transaction_states[0]


def test_committed_records_are_read_once_and_aborted_ones_only_uncommitted(gs: BrokerProcess) -> None:
    create_topic(gs.bootstrap, "txn-basic", 2)
    p = producer(gs.bootstrap, "basic")
    p.begin_transaction()
    for i in range(10):
        p.produce("txn-basic", f"c{i}".encode(), partition=i % 2)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(5):
        p.produce("txn-basic", f"a{i}".encode(), partition=i % 2)
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce("txn-basic", b"c10", partition=0)
    p.commit_transaction(30)
    committed = sorted(f"c{i}".encode() for i in range(11))
    assert sorted(read_all(gs.bootstrap, "txn-basic", "read_committed", 2)) == committed
    assert sorted(read_all(gs.bootstrap, "txn-basic", "read_uncommitted", 2)) == sorted(
        committed + [f"a{i}".encode() for i in range(5)])
    # the markers are in (read_committed reached the end); CompleteCommit follows once they are durable
    wait_until(lambda: describe(gs, "basic").transaction_state == "CompleteCommit", 10, "CompleteCommit")
    d = describe(gs, "basic")
    assert (d.error_code, d.topics) == (0, [])
    listed = raw(gs, LIST, 1, state_filters=["CompleteCommit"], producer_id_filters=[], duration_filter=-1)
    assert "basic" in [s.transactional_id for s in listed.transaction_states]


def test_a_new_producer_fences_the_old_one(gs: BrokerProcess) -> None:
    create_topic(gs.bootstrap, "txn-fence")
    old = producer(gs.bootstrap, "fence")
    old.begin_transaction()
    old.produce("txn-fence", b"zombie")
    old.flush(30)
    new = producer(gs.bootstrap, "fence")  # aborts the old producer's open transaction first
    new.begin_transaction()
    new.produce("txn-fence", b"fresh")
    new.commit_transaction(30)
    with pytest.raises(KafkaException) as e:
        old.commit_transaction(30)
    assert e.value.args[0].fatal() and "fenced" in str(e.value).lower()
    assert read_all(gs.bootstrap, "txn-fence", "read_committed") == [b"fresh"]
    assert describe(gs, "fence").producer_epoch == 2  # the fence's bump, then the new producer's


ZOMBIE = textwrap.dedent("""
    import sys
    from confluent_kafka import Producer, KafkaException
    p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": "stopped", "linger.ms": 0})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("txn-stop", b"from-the-zombie")
    p.flush(30)
    print("produced", flush=True)
    sys.stdin.readline()
    try:
        p.commit_transaction(30)
        print("committed", flush=True)
    except KafkaException as e:
        print("failed", "fatal" if e.args[0].fatal() else "abortable", e.args[0].str(), flush=True)
""")


def test_a_sigstopped_zombie_cannot_commit_after_a_new_instance_started(gs: BrokerProcess, tmp_path: Path) -> None:
    create_topic(gs.bootstrap, "txn-stop")
    script = tmp_path / "zombie.py"
    script.write_text(ZOMBIE)
    zombie = subprocess.Popen([sys.executable, str(script), gs.bootstrap], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)  # fmt: skip
    try:
        assert zombie.stdout is not None and zombie.stdin is not None
        assert zombie.stdout.readline().strip() == "produced"
        os.kill(zombie.pid, signal.SIGSTOP)
        new = producer(gs.bootstrap, "stopped")
        new.begin_transaction()
        new.produce("txn-stop", b"from-the-new-instance")
        new.commit_transaction(30)
        os.kill(zombie.pid, signal.SIGCONT)
        zombie.stdin.write("go\n")
        zombie.stdin.flush()
        outcome = zombie.stdout.readline().strip()
        assert outcome.startswith("failed fatal"), outcome
        assert "fenced" in outcome.lower(), outcome
        assert zombie.wait(30) == 0
    finally:
        if zombie.poll() is None:
            os.kill(zombie.pid, signal.SIGCONT)
            zombie.kill()
            zombie.wait()
    assert read_all(gs.bootstrap, "txn-stop", "read_committed") == [b"from-the-new-instance"]


def test_an_open_transaction_is_aborted_at_its_timeout(gs: BrokerProcess) -> None:
    create_topic(gs.bootstrap, "txn-timeout")
    p = producer(gs.bootstrap, "slow", **{"transaction.timeout.ms": 1500})
    p.begin_transaction()
    p.produce("txn-timeout", b"never-committed")
    p.flush(30)
    assert describe(gs, "slow").transaction_state == "Ongoing"
    wait_until(lambda: describe(gs, "slow").transaction_state == "CompleteAbort", 20, "the timeout to abort")
    assert describe(gs, "slow").producer_epoch == 1  # the abort bumped the epoch: the producer is fenced
    assert read_all(gs.bootstrap, "txn-timeout", "read_committed") == []  # and the LSO reached the end
    with pytest.raises(KafkaException):
        p.commit_transaction(10)


def test_aiokafka_transactional_producer(gs: BrokerProcess) -> None:
    import asyncio

    from aiokafka import AIOKafkaProducer

    create_topic(gs.bootstrap, "txn-aio")

    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=gs.bootstrap, transactional_id="aio")
        await p.start()
        try:
            async with p.transaction():
                await p.send_and_wait("txn-aio", b"aio-committed")
            await p.begin_transaction()
            await p.send_and_wait("txn-aio", b"aio-aborted")
            await p.abort_transaction()
        finally:
            await p.stop()

    asyncio.run(run())
    assert read_all(gs.bootstrap, "txn-aio", "read_committed") == [b"aio-committed"]
    assert sorted(read_all(gs.bootstrap, "txn-aio", "read_uncommitted")) == [b"aio-aborted", b"aio-committed"]


def test_kill9_with_transactions_in_flight(tmp_path: Path) -> None:
    with BrokerProcess(BrokerKind.GROUPSTREAM, tmp_path / "b") as b:
        create_topic(b.bootstrap, "txn-kill")
        done = producer(b.bootstrap, "acked")
        done.begin_transaction()
        for i in range(20):
            done.produce("txn-kill", f"acked-{i}".encode())
        done.commit_transaction(30)
        open_ = producer(b.bootstrap, "open", **{"transaction.timeout.ms": 2000})
        open_.begin_transaction()
        open_.produce("txn-kill", b"open")
        open_.flush(30)
        last = producer(b.bootstrap, "last")
        last.begin_transaction()
        last.produce("txn-kill", b"last")
        last.commit_transaction(30)  # acknowledged once PrepareCommit is durable; markers may be unwritten
        b.restart(kill=True)
        wait_until(lambda: describe(b, "open").transaction_state == "CompleteAbort", 30, "the open one to abort")
        wait_until(lambda: describe(b, "last").transaction_state == "CompleteCommit", 30, "the last to commit")
        expected = sorted([f"acked-{i}".encode() for i in range(20)] + [b"last"])
        assert sorted(read_all(b.bootstrap, "txn-kill", "read_committed")) == expected
        for p in (done, open_, last):
            p.purge()


OFFSET_FETCH = by_name("OffsetFetch")


def fetch_offset(gs: BrokerProcess, group: str, topic: str, stable: bool) -> tuple[int, int]:
    """(error code, committed offset) of partition 0, by OffsetFetch v7 (``require_stable`` as asked)."""
    T = OFFSET_FETCH.Request.OffsetFetchRequestTopic
    r = raw(gs, OFFSET_FETCH, 7, group_id=group, topics=[T(name=topic, partition_indexes=[0])], require_stable=stable)
    p = r.topics[0].partitions[0]
    return p.error_code, p.committed_offset


def test_send_offsets_to_transaction_commits_them_with_the_transaction(gs: BrokerProcess) -> None:
    from groupstream.protocol.error_codes import ErrorCode

    create_topic(gs.bootstrap, "txn-in")
    create_topic(gs.bootstrap, "txn-out")
    feeder = Producer({"bootstrap.servers": gs.bootstrap})
    for i in range(6):
        feeder.produce("txn-in", f"in-{i}".encode())
    feeder.flush(30)
    consumer = Consumer({"bootstrap.servers": gs.bootstrap, "group.id": "ctp", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})  # fmt: skip
    consumer.subscribe(["txn-in"])
    p = producer(gs.bootstrap, "ctp")
    try:
        got: list[Any] = []

        def three_read() -> bool:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m)
            return len(got) >= 3

        wait_until(three_read, 30, "three input records")
        got = got[:3]

        def step(records: list[Any], commit: bool) -> None:
            p.begin_transaction()
            for m in records:
                p.produce("txn-out", m.value().replace(b"in", b"out"))
            last = records[-1]
            p.send_offsets_to_transaction([TopicPartition("txn-in", 0, last.offset() + 1)],
                                          consumer.consumer_group_metadata(), 30)  # fmt: skip
            p.flush(30)
            # pending: a stable fetch is told to wait, a plain one sees the last committed offset
            assert fetch_offset(gs, "ctp", "txn-in", True)[0] == ErrorCode.UNSTABLE_OFFSET_COMMIT
            (p.commit_transaction if commit else p.abort_transaction)(30)

        step(got, commit=False)
        assert fetch_offset(gs, "ctp", "txn-in", True) == (0, -1)  # aborted: nothing committed
        step(got, commit=True)
        assert fetch_offset(gs, "ctp", "txn-in", True) == (0, 3)
        assert fetch_offset(gs, "ctp", "txn-in", False) == (0, 3)
        assert read_all(gs.bootstrap, "txn-out", "read_committed") == [b"out-0", b"out-1", b"out-2"]
    finally:
        consumer.close()
    # the commit survives the group's reload from its log (transactional batch, then the COMMIT marker)
    gs.restart()
    wait_until(lambda: fetch_offset(gs, "ctp", "txn-in", True) == (0, 3), 30, "the committed offset after restart")


ELECT = by_name("ElectLeaders")


def test_moving_the_transaction_coordinator_keeps_the_open_transaction(gs: BrokerProcess) -> None:
    """ElectLeaders on the id's `__transaction_state` partition reloads its shard from the log, as a Kafka
    coordinator move does: the producer finds the coordinator again and its open transaction commits."""
    from groupstream.broker.group_routing import partition_for

    create_topic(gs.bootstrap, "txn-move")
    p = producer(gs.bootstrap, "moved")
    p.begin_transaction()
    p.produce("txn-move", b"before")
    p.flush(30)
    TP = ELECT.Request.TopicPartitions
    r = raw(gs, ELECT, 2, election_type=0, timeout_ms=10_000,
            topic_partitions=[TP(topic="__transaction_state", partitions=[partition_for("moved", 50)])])
    assert r.replica_election_results[0].partition_result[0].error_code == 0
    assert describe(gs, "moved").transaction_state == "Ongoing"
    p.produce("txn-move", b"after")
    p.commit_transaction(30)
    assert read_all(gs.bootstrap, "txn-move", "read_committed") == [b"before", b"after"]


def test_kafka_python_transactional_producer_with_offsets(gs: BrokerProcess) -> None:
    """kafka-python 3.0's transactional producer (AddPartitionsToTxn v3, EndTxn v3, TxnOffsetCommit v3):
    commit and abort, and offsets sent with a transaction under a bare group id (the simple form)."""
    from kafka import KafkaProducer
    from kafka.structs import OffsetAndMetadata
    from kafka.structs import TopicPartition as KTP

    create_topic(gs.bootstrap, "txn-kp")
    p = KafkaProducer(bootstrap_servers=gs.bootstrap, transactional_id="kp")
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send("txn-kp", b"kp-committed")
        p.send_offsets_to_transaction({KTP("txn-kp", 0): OffsetAndMetadata(42, "", -1)}, "kp-group")
        p.commit_transaction()
        p.begin_transaction()
        p.send("txn-kp", b"kp-aborted")
        p.send_offsets_to_transaction({KTP("txn-kp", 0): OffsetAndMetadata(99, "", -1)}, "kp-group")
        p.flush()
        p.abort_transaction()
    finally:
        p.close(timeout=10)
    assert read_all(gs.bootstrap, "txn-kp", "read_committed") == [b"kp-committed"]
    assert fetch_offset(gs, "kp-group", "txn-kp", True) == (0, 42)


PRODUCE = by_name("Produce")
INIT = by_name("InitProducerId")
ADD_PARTITIONS = by_name("AddPartitionsToTxn")


def produce_raw(gs: BrokerProcess, topic: str, records: bytes, tid: str | None) -> tuple[int, str | None]:
    R = PRODUCE.Request
    TD = R.TopicProduceData
    body = dict(transactional_id=tid, acks=-1, timeout_ms=5000,
                topic_data=[TD(name=topic, partition_data=[TD.PartitionProduceData(index=0, records=records)])])
    p = raw(gs, PRODUCE, 9, **body).responses[0].partition_responses[0]
    return p.error_code, p.error_message


def test_produce_checks_transactional_batches(gs: BrokerProcess) -> None:
    """Markers are the coordinator's to write; a transactional batch is appended only for a partition in its
    producer's ongoing transaction (KIP-890 part 1), and nothing refused is written."""
    from groupstream.protocol.error_codes import ErrorCode
    from groupstream.protocol.records import BatchBuilder
    from groupstream.protocol.records.batch import build_control_batch
    from groupstream.protocol.records.record import ControlType

    create_topic(gs.bootstrap, "txn-raw")
    marker = build_control_batch(ControlType.COMMIT, producer_id=5, producer_epoch=0, coordinator_epoch=0,
                                 timestamp=0)  # fmt: skip
    assert produce_raw(gs, "txn-raw", marker, None) == (ErrorCode.INVALID_RECORD, "clients may not write control batches")

    answers: list[Any] = []

    def initialised() -> bool:  # the coordinator may still be loading after the module's earlier restart
        answers.append(raw(gs, INIT, 4, transactional_id="raw", transaction_timeout_ms=60_000))
        return answers[-1].error_code not in (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)

    wait_until(initialised, 10, "InitProducerId to be served")
    init = answers[-1]
    assert init.error_code == 0
    pid, epoch = init.producer_id, init.producer_epoch

    def batch(producer_id: int) -> bytes:
        b = BatchBuilder(producer_id=producer_id, producer_epoch=epoch, base_sequence=0, transactional=True)
        b.append(0, None, b"v")
        return b.build()

    code, _ = produce_raw(gs, "txn-raw", batch(pid), "raw")  # not added to a transaction
    assert code == ErrorCode.INVALID_TXN_STATE
    code, _ = produce_raw(gs, "txn-raw", batch(pid + 1000), "raw")  # another producer's id
    assert code == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    code, _ = produce_raw(gs, "txn-raw", batch(pid), None)  # no transactional id
    assert code == ErrorCode.INVALID_RECORD
    T = ADD_PARTITIONS.Request.AddPartitionsToTxnTopic
    added = raw(gs, ADD_PARTITIONS, 3, v3_and_below_transactional_id="raw", v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=epoch, v3_and_below_topics=[T(name="txn-raw", partitions=[0])])
    assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
    assert produce_raw(gs, "txn-raw", batch(pid), "raw") == (0, None)
    assert read_all(gs.bootstrap, "txn-raw", "read_uncommitted") == [b"v"]  # only the accepted batch
