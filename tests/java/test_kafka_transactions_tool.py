"""``kafka-transactions describe-producers`` (Kafka 4.4's TransactionsCommand) against our broker (issue 17): the
tool asks DescribeProducers for a partition and prints each active producer, with the start offset of its open
transaction, which is how an operator finds the transaction holding a partition's last stable offset back; then
``kafka-transactions abort`` writes that transaction's ABORT marker (WriteTxnMarkers) and the LSO moves on."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from java_harness import run_tool

from support.brokers import BrokerProcess
from support.waiting import wait_until

pytestmark = [pytest.mark.compat, pytest.mark.broker_ours]

TOOL = "org.apache.kafka.tools.TransactionsCommand"
_STORAGE_TESTS = str(Path(__file__).resolve().parents[1] / "storage")  # storagekit's hand-built batches
if _STORAGE_TESTS not in sys.path:
    sys.path.append(_STORAGE_TESTS)


def test_describe_producers_shows_the_open_transactions_start_offset(java_broker: BrokerProcess) -> None:
    bootstrap = java_broker.bootstrap
    topic = f"producers-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    assert admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30) is None
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-txn", "linger.ms": 0})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, b"committed-%d" % i)
    p.commit_transaction(30)  # offsets 0-2, marker 3
    p.begin_transaction()
    p.produce(topic, b"open")
    assert p.flush(30) == 0  # offset 4, the transaction left open
    try:
        run = run_tool(TOOL, ["--bootstrap-server", bootstrap, "describe-producers", "--topic", topic,
                              "--partition", "0"]).check()  # fmt: skip
        header, *rows = [line.split() for line in run.out.splitlines() if line.strip()]
        assert header == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                          "CurrentTransactionStartOffset"], run.out  # fmt: skip
        (row,) = rows
        assert int(row[0]) >= 0 and int(row[1]) >= 0, run.out
        assert row[3] == "3" and int(row[4]) > 0, run.out  # four records: sequences 0..3
        assert row[5] == "4", run.out
        # The operator's way out of a hanging transaction: the tool writes its ABORT marker (WriteTxnMarkers).
        run_tool(TOOL, ["--bootstrap-server", bootstrap, "abort", "--topic", topic, "--partition", "0",
                        "--start-offset", "4"]).check()  # fmt: skip
        after = run_tool(TOOL, ["--bootstrap-server", bootstrap, "describe-producers", "--topic", topic,
                                "--partition", "0"]).check()  # fmt: skip
        (row,) = [line.split() for line in after.out.splitlines() if line.strip()][1:]
        assert row[5] == "None" and row[2] != "-1", after.out  # no open transaction; the marker's coordinator epoch
        assert read_committed(bootstrap, topic) == [b"committed-0", b"committed-1", b"committed-2"]
    finally:
        p.abort_transaction(30)


def read_committed(bootstrap: str, topic: str) -> list[bytes]:
    """What a read_committed consumer reads up to the end (the aborted record skipped, the markers passed)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader", "isolation.level": "read_committed",
                  "enable.auto.commit": False})  # fmt: skip
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []

        def at_end() -> bool:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append(m.value())
            return bool(c.position([TopicPartition(topic, 0)])[0].offset >= 6)  # past the abort marker at 5

        wait_until(at_end, 30, "the read_committed consumer to pass the abort marker")
        return got
    finally:
        c.close()


def test_kafka_dump_log_segments_reads_our_markers_and_txnindex(java_ready: Path, tmp_path: Path) -> None:
    """Kafka's own DumpLogSegments reads a partition our storage wrote: the control batches as Kafka's ABORT and
    COMMIT markers, and the .txnindex entry in Kafka's layout."""
    from storagekit import small_config

    from groupstream.protocol.records.batch import BatchBuilder
    from groupstream.storage import PartitionLog

    def txn(pid: int, n: int) -> bytearray:
        b = BatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=0, transactional=True)
        for i in range(n):
            b.append(1, None, b"v%d" % i)
        return bytearray(b.build())

    log = PartitionLog.open(tmp_path / "t-0", small_config(), 0)
    log.append_checked(txn(1000, 2), 1)  # 0-1
    log.append_checked(txn(2000, 1), 1)  # 2
    log.append_marker(1000, 0, commit=False, coordinator_epoch=5, now_ms=2)  # 3
    log.append_marker(2000, 0, commit=True, coordinator_epoch=5, now_ms=2)  # 4
    log.close()
    files = [str(log.directory / f"{0:020d}{suffix}") for suffix in (".log", ".txnindex")]
    run = run_tool("org.apache.kafka.tools.DumpLogSegments", ["--files", ",".join(files), "--print-data-log"]).check()
    assert "endTxnMarker: ABORT coordinatorEpoch: 5" in run.out, run.out
    assert "endTxnMarker: COMMIT coordinatorEpoch: 5" in run.out, run.out
    assert "version: 0 producerId: 1000 firstOffset: 0 lastOffset: 3 lastStableOffset: 2" in run.out, run.out
