"""Transactions in the storage layer: open transactions, markers, the last stable offset and the aborted-
transaction index (``.txnindex``), across clean and unclean reopens, truncation and retention."""

from __future__ import annotations

import random
import shutil
import struct
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings
from storagekit import make_batch, read_all, small_config

from groupstream.protocol.records.batch import BatchBuilder, RecordBatch, iter_record_batches
from groupstream.protocol.records.batch_header import TRANSACTIONAL_BIT
from groupstream.protocol.records.record import ControlType
from groupstream.storage import LogConfig, PartitionLog, StaleMarkerError
from groupstream.storage.checkpoint import PRODUCER_SNAPSHOT_FILE
from groupstream.storage.compaction import clean
from groupstream.storage.producer_state import (
    Accept,
    CompletedTxn,
    InvalidEpoch,
    ProducerStateManager,
    StaleCoordinator,
)
from groupstream.storage.txn_index import AbortedTxn, AbortedTxnIndex

A, B = 1000, 2000


def txn_batch(pid: int, seq: int, *, epoch: int = 0, n: int = 1) -> bytearray:
    return make_batch(payload=b"x" * 10, last_offset_delta=n - 1, producer_id=pid, producer_epoch=epoch,
                      base_sequence=seq, attributes=TRANSACTIONAL_BIT)  # fmt: skip


def plain(n: int = 1) -> bytearray:
    return make_batch(payload=b"p" * 10, last_offset_delta=n - 1)


# -- the pure state -------------------------------------------------------------------------------------------


def test_open_transactions_give_the_first_unstable_offset_in_first_offset_order() -> None:
    state = ProducerStateManager()
    assert state.first_unstable_offset() is None
    state.update(A, 0, 0, 1, 10, 11)
    state.update_txn(A, 10)
    state.update(B, 0, 0, 0, 12, 12)
    state.update_txn(B, 12)
    state.update_txn(A, 13)  # a later batch of an open transaction does not move its start
    assert state.first_unstable_offset() == 10
    assert state.complete_txn(A, 0, 5, commit=False, marker_offset=14) == CompletedTxn(A, 10, 14, aborted=True)
    assert state.first_unstable_offset() == 12
    assert state.complete_txn(B, 0, 5, commit=True, marker_offset=15) == CompletedTxn(B, 12, 15, aborted=False)
    assert state.first_unstable_offset() is None
    assert state.complete_txn(B, 0, 5, commit=True, marker_offset=16) is None  # nothing open: nothing completed


def test_marker_epochs_older_are_refused_newer_fence() -> None:
    state = ProducerStateManager()
    state.update(A, 3, 0, 0, 0, 0)
    state.update_txn(A, 0)
    assert state.check_marker(A, 2, 0) == InvalidEpoch(3)
    assert state.check_marker(A, 3, 0) == Accept()
    assert state.complete_txn(A, 4, 7, commit=False, marker_offset=1) == CompletedTxn(A, 0, 1, aborted=True)
    assert state.get(A) is not None and state.get(A).epoch == 4  # type: ignore[union-attr]
    assert state.check(A, 3, 1, 1) == InvalidEpoch(4)  # the fenced producer's data is refused too
    assert state.check_marker(A, 4, 6) == StaleCoordinator(7)
    assert state.check_marker(A, 4, 7) == Accept()


def test_collect_aborted_follows_kafkas_rules() -> None:
    index = AbortedTxnIndex()
    # A aborted 0..5 while B (from 3) stayed open: its LSO is 3. B aborted 3..9 with nothing open: LSO 10.
    index.add(AbortedTxn(A, 0, 5, 3))
    index.add(AbortedTxn(B, 3, 9, 10))
    index.add(AbortedTxn(A, 20, 25, 26))
    assert index.collect(0, 3) == [AbortedTxn(A, 0, 5, 3)]  # the LSO reaching the bound ends the search
    assert index.collect(0, 4) == [AbortedTxn(A, 0, 5, 3), AbortedTxn(B, 3, 9, 10)]
    assert index.collect(6, 20) == [AbortedTxn(B, 3, 9, 10)]
    assert index.collect(10, 21) == [AbortedTxn(A, 20, 25, 26)]
    assert index.collect(26, 100) == []
    with pytest.raises(ValueError, match="not after"):
        index.add(AbortedTxn(B, 24, 25, 26))


# -- the log ----------------------------------------------------------------------------------------------------


def two_transactions(directory: Path, **config: object) -> PartitionLog:
    """A aborts [0, 1, 3], B commits [2, 4], with a plain batch (5) between; LSO reaches 6 after the markers."""
    log = PartitionLog.open(directory, small_config(**config), 0)
    log.append_checked(txn_batch(A, 0, n=2), 1)  # 0-1
    log.append_checked(txn_batch(B, 0), 1)  # 2
    assert log.last_stable_offset == 0
    log.append_checked(txn_batch(A, 2), 1)  # 3
    assert log.append_marker(A, 0, commit=False, coordinator_epoch=1, now_ms=2).base_offset == 4
    assert log.last_stable_offset == 2  # B still open
    log.append_checked(plain(), 1)  # 5
    assert log.append_marker(B, 0, commit=True, coordinator_epoch=1, now_ms=3).base_offset == 6
    return log


def test_markers_end_transactions_and_index_the_aborted_ones(tmp_path: Path) -> None:
    log = two_transactions(tmp_path / "t-0")
    assert log.last_stable_offset == log.high_watermark == 7
    assert log.aborted_transactions(0, 7) == [AbortedTxn(A, 0, 4, 2)]
    assert log.aborted_transactions(5, 7) == []
    # The marker as stored: control + transactional, sequence -1, one record with Kafka's key and value.
    data = log.read(4, 1 << 20, max_offset=5).records
    batch = next(iter_record_batches(data))
    assert isinstance(batch, RecordBatch) and batch.is_control and batch.is_transactional
    assert batch.base_sequence == -1 and batch.producer_id == A
    (record,) = batch.records()
    assert record.key == struct.pack(">hh", 0, 0) and record.value == struct.pack(">hi", 0, 1)
    marker = batch.control_marker()
    assert marker is not None and marker.control_type == ControlType.ABORT
    # The .txnindex in Kafka's 34-byte layout.
    (txn_file,) = log.directory.glob("*.txnindex")
    assert txn_file.read_bytes() == struct.pack(">hqqqq", 0, A, 0, 4, 2)
    log.close()


def test_a_stale_marker_writes_nothing(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", small_config(), 0)
    log.append_checked(txn_batch(A, 0, epoch=2), 1)
    with pytest.raises(StaleMarkerError, match="epoch 1 is older than its epoch 2") as caught:
        log.append_marker(A, 1, commit=True, coordinator_epoch=0, now_ms=1)
    assert not caught.value.fenced_by_coordinator
    log.append_marker(A, 3, commit=False, coordinator_epoch=4, now_ms=1)  # a newer epoch fences and aborts
    with pytest.raises(StaleMarkerError, match="coordinator epoch 3") as caught:
        log.append_marker(A, 3, commit=False, coordinator_epoch=3, now_ms=1)
    assert caught.value.fenced_by_coordinator
    assert log.log_end_offset == 2 and log.last_stable_offset == 2
    assert log.aborted_transactions(0, 2) == [AbortedTxn(A, 0, 1, 2)]
    log.close()


def test_a_clean_reopen_trusts_snapshot_and_txnindex(tmp_path: Path) -> None:
    log = two_transactions(tmp_path / "t-0")
    log.append_checked(txn_batch(A, 0, epoch=1), 4)  # 7: open across the restart
    state = log.producer_state.snapshot()
    log.close()
    reopened = PartitionLog.open(tmp_path / "t-0", small_config(), 0)
    assert reopened.recovery_report.producer_state == "snapshot"
    assert reopened.producer_state.snapshot() == state
    assert reopened.last_stable_offset == 7 and reopened.high_watermark == 8
    assert reopened.aborted_transactions(0, 8) == [AbortedTxn(A, 0, 4, 2)]
    reopened.append_marker(A, 1, commit=False, coordinator_epoch=1, now_ms=5)
    assert reopened.last_stable_offset == 9
    assert reopened.aborted_transactions(5, 9) == [AbortedTxn(A, 7, 8, 9)]
    reopened.close()


@pytest.mark.parametrize("how", ["unclean", "txnindex deleted", "txnindex torn", "snapshot version 1"])
def test_the_txnindex_is_rebuilt_from_the_markers(tmp_path: Path, how: str) -> None:
    log = two_transactions(tmp_path / "t-0", segment_bytes=300)
    log.append_checked(txn_batch(A, 0, epoch=1), 4)  # open
    assert len(log.segment_base_offsets()) > 1
    expected_state = log.producer_state.snapshot()
    expected_files = {p.name: p.read_bytes() for p in log.directory.glob("*.txnindex")}
    assert expected_files
    if how == "unclean":
        shutil.copytree(log.directory, tmp_path / "crash")
        log.close()
        directory = tmp_path / "crash"
    else:
        log.close()
        directory = log.directory
        files = list(directory.glob("*.txnindex"))
        if how == "txnindex deleted":
            files[0].unlink()
        elif how == "txnindex torn":
            files[0].write_bytes(files[0].read_bytes()[:-5])
        else:  # an old broker's snapshot: no count of index entries, so the files are not trusted
            snap = directory / PRODUCER_SNAPSHOT_FILE
            data = bytearray(snap.read_bytes())
            data[4:6] = (1).to_bytes(2, "big")
            snap.write_bytes(bytes(data))
    reopened = PartitionLog.open(directory, small_config(segment_bytes=300), 0)
    assert reopened.recovery_report.producer_state != "snapshot"
    rebuilt = [e for e in reopened.recovery_report.events if ".txnindex" in e]
    # Only a file that was wrong is rewritten and reported (the unclean open finds them intact here).
    if how in ("unclean", "snapshot version 1"):
        assert rebuilt == [], rebuilt
    else:
        assert len(rebuilt) == 1, rebuilt
        assert rebuilt[0].endswith("it was missing" if how == "txnindex deleted" else "it did not match the log")
    assert reopened.producer_state.snapshot() == expected_state
    assert reopened.last_stable_offset == 7
    assert reopened.aborted_transactions(0, 8) == [AbortedTxn(A, 0, 4, 2)]
    assert {p.name: p.read_bytes() for p in directory.glob("*.txnindex")} == expected_files
    reopened.close()


def test_an_unknown_snapshot_version_is_refused_by_name(tmp_path: Path) -> None:
    log = two_transactions(tmp_path / "t-0")
    log.close()
    snap = log.directory / PRODUCER_SNAPSHOT_FILE
    data = bytearray(snap.read_bytes())
    data[4:6] = (9).to_bytes(2, "big")
    snap.write_bytes(bytes(data))
    reopened = PartitionLog.open(log.directory, small_config(), 0)
    assert "snapshot version 9 is unknown" in reopened.recovery_report.producer_state
    assert reopened.aborted_transactions(0, 7) == [AbortedTxn(A, 0, 4, 2)]
    reopened.close()


def test_truncation_and_retention_trim_the_index(tmp_path: Path) -> None:
    log = two_transactions(tmp_path / "t-0", segment_bytes=300)
    log.truncate_to(6)  # B's commit marker goes: B is open again from 2
    assert log.last_stable_offset == 2
    assert log.aborted_transactions(0, 6) == [AbortedTxn(A, 0, 4, 2)]
    log.truncate_to(4)  # A's abort marker goes: the entry and its file too
    assert log.last_stable_offset == 0 and log.aborted_transactions(0, 4) == []
    assert not list(log.directory.glob("*.txnindex"))
    log.append_marker(A, 0, commit=False, coordinator_epoch=1, now_ms=2)  # 4
    log.append_marker(B, 0, commit=False, coordinator_epoch=1, now_ms=2)  # 5
    for _ in range(6):
        log.append_checked(plain(), 1)
    assert log.aborted_transactions(0, 6) == [AbortedTxn(A, 0, 4, 2), AbortedTxn(B, 2, 5, 6)]
    log.delete_records(log.log_end_offset - 1)
    log.enforce_retention(10)
    assert log.log_start_offset > 5
    assert log.aborted_transactions(log.log_start_offset, log.log_end_offset) == []
    assert len(log.aborted_index) == 0 and not list(log.directory.glob("*.txnindex"))
    log.close()


# -- compaction ---------------------------------------------------------------------------------------------------


def keyed_txn(pid: int, seq: int, key: bytes, value: bytes) -> bytearray:
    b = BatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=seq, transactional=True)
    b.append(1000, key, value)
    return bytearray(b.build())


def keyed_plain(key: bytes, value: bytes) -> bytearray:
    b = BatchBuilder()
    b.append(1000, key, value)
    return bytearray(b.build())


def test_compaction_drops_aborted_records_and_stops_at_the_lso(tmp_path: Path) -> None:
    config = LogConfig.from_properties({"cleanup.policy": "compact", "segment.bytes": "300",
                                        "min.cleanable.dirty.ratio": "0.01"})  # fmt: skip
    log = PartitionLog.open(tmp_path / "t-0", config, 0)
    log.append(keyed_plain(b"k", b"committed-before"), 1)
    log.append_checked(keyed_txn(A, 0, b"k", b"aborted"), 1)
    log.append_marker(A, 0, commit=False, coordinator_epoch=1, now_ms=1)
    log.append_checked(keyed_txn(B, 0, b"j", b"open-old"), 1)  # B stays open: nothing from here is cleaned
    for i in range(6):
        log.append(keyed_plain(b"j", b"plain-%d" % i), 1)
    assert len(log.segment_base_offsets()) > 3
    clean(log, 2000, force=True)
    values = [(r.key, r.value) for _, _, raw in read_all(log) for b in iter_record_batches(raw) for r in b]
    assert (b"k", b"committed-before") in values  # the aborted write did not displace it ...
    assert (b"k", b"aborted") not in values  # ... and is gone itself
    assert (b"j", b"open-old") in values and (b"j", b"plain-0") in values  # at and after the LSO: untouched
    log.append_marker(B, 0, commit=True, coordinator_epoch=1, now_ms=1)
    log.roll(2)
    clean(log, 2000, force=True)
    values = [(r.key, r.value) for _, _, raw in read_all(log) for b in iter_record_batches(raw) for r in b]
    assert (b"j", b"open-old") not in values and (b"j", b"plain-5") in values  # decided: compacted as usual
    assert (b"k", b"committed-before") in values
    log.close()


# -- kill -9 in the middle of transactions --------------------------------------------------------------------

_CHILD = textwrap.dedent(
    """
    import sys
    sys.path[:0] = [sys.argv[2], sys.argv[3]]
    from storagekit import make_batch, small_config
    from groupstream.protocol.records.batch_header import TRANSACTIONAL_BIT
    from groupstream.storage import PartitionLog
    from test_storage_transactions import schedule
    log = PartitionLog.open(sys.argv[1], small_config(segment_bytes=3000), 0)
    seqs = {}
    for i, (kind, pid, n) in enumerate(schedule(int(sys.argv[4]))):
        if kind == "data":
            seq = seqs.get(pid, 0)
            seqs[pid] = seq + n
            info = log.append_checked(make_batch(payload=b"d" * 40, last_offset_delta=n - 1, producer_id=pid,
                                                 producer_epoch=0, base_sequence=seq, attributes=TRANSACTIONAL_BIT), 0)
        else:
            info = log.append_marker(pid, 0, kind == "commit", 1, 0)
        print(info.last_offset, flush=True)
    """
)


def schedule(seed: int, count: int = 100_000) -> Iterator[tuple[str, int, int]]:
    """Transactional writes of three producers, interleaved at random: ("data", pid, records) or ("commit" |
    "abort", pid, 1); a producer's marker comes only while its transaction is open."""
    rng = random.Random(seed)
    open_: set[int] = set()
    for _ in range(count):
        pid = rng.choice((A, B, 3000))
        if pid in open_ and rng.random() < 0.3:
            open_.discard(pid)
            yield ("commit" if rng.random() < 0.5 else "abort"), pid, 1
        else:
            open_.add(pid)
            yield "data", pid, rng.randint(1, 3)


def model(seed: int, log_end: int) -> tuple[int, list[tuple[int, int, int]]]:
    """(LSO, aborted (pid, first, marker offset)) after the schedule's ops that end below ``log_end``."""
    offset = 0
    first: dict[int, int] = {}
    aborted: list[tuple[int, int, int]] = []
    for kind, pid, n in schedule(seed):
        if offset + n > log_end:
            break
        if kind == "data":
            first.setdefault(pid, offset)
        else:
            start = first.pop(pid)
            if kind == "abort":
                aborted.append((pid, start, offset))
        offset += n
    assert offset == log_end, "the log ends inside an op"
    return min(first.values(), default=log_end), aborted


def test_kill_9_mid_transaction_rebuilds_lso_and_txnindex(tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    here = Path(__file__).parent
    src = Path(__file__).parents[2] / "src"
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(tmp_path / "t-0"), str(here), str(src), str(seed)],
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert child.stdout is not None
    try:
        acked = -1
        for _ in range(600):
            acked = int(child.stdout.readline())
    finally:
        child.kill()
        child.wait()
    log = PartitionLog.open(tmp_path / "t-0", small_config(segment_bytes=3000), 0)
    try:
        assert not log.recovery_report.clean_shutdown
        assert log.log_end_offset > acked, f"seed {seed}"
        assert len(log.segment_base_offsets()) > 2, f"seed {seed}"
        lso, aborted = model(seed, log.log_end_offset)
        assert log.last_stable_offset == lso, f"seed {seed}"
        got = [(t.producer_id, t.first_offset, t.last_offset) for t in log.aborted_transactions(0, log.log_end_offset)]
        assert got == aborted and aborted, f"seed {seed}"
        on_disk = sum(p.stat().st_size for p in log.directory.glob("*.txnindex"))
        assert on_disk == 34 * len(aborted), f"seed {seed}"
    finally:
        log.close()
    reopened = PartitionLog.open(tmp_path / "t-0", small_config(segment_bytes=3000), 0)
    assert reopened.recovery_report.producer_state == "snapshot"
    assert reopened.last_stable_offset == lso
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in reopened.aborted_transactions(0, lso)] == [
        a for a in aborted if a[1] < lso]  # fmt: skip
    reopened.close()


# -- a property: whatever the appends, truncations and restarts, the log agrees with a model -------------------


def replay_model(ops: list[tuple[str, int, int, int]]) -> tuple[int, list[tuple[int, int, int]]]:
    """(first unstable offset or None as -1, aborted (pid, first, marker offset)) of ``ops`` = (kind, pid,
    base offset, records), in log order."""
    first: dict[int, int] = {}
    aborted: list[tuple[int, int, int]] = []
    for kind, pid, base, _ in ops:
        if kind == "data":
            first.setdefault(pid, base)
        else:
            start = first.pop(pid, None)
            if kind == "abort" and start is not None:
                aborted.append((pid, start, base))
    return min(first.values(), default=-1), aborted


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(st.sampled_from(["data", "data", "commit", "abort", "truncate", "reopen", "crash"]),
                                st.sampled_from([A, B]), st.integers(1, 3)), min_size=1, max_size=40))  # fmt: skip
def test_log_agrees_with_a_model_through_truncations_and_restarts(tmp_path: Path, steps: list[tuple[str, int, int]]) -> None:
    config = small_config(segment_bytes=250)
    base = tmp_path / uuid.uuid4().hex  # one directory per example (hypothesis seeds random)
    log = PartitionLog.open(base / "t-0", config, 0)
    applied: list[tuple[str, int, int, int]] = []
    generation = 0
    try:
        for kind, pid, n in steps:
            if kind == "data":
                seq = sum(k for kk, p, _, k in applied if kk == "data" and p == pid)
                info = log.append_checked(txn_batch(pid, seq, n=n), 1)
                assert not isinstance(info, (InvalidEpoch, StaleCoordinator)) and hasattr(info, "base_offset"), info
                applied.append((kind, pid, info.base_offset, n))  # type: ignore[union-attr]
            elif kind in ("commit", "abort"):
                applied.append((kind, pid, log.append_marker(pid, 0, kind == "commit", 1, 1).base_offset, 1))
            elif kind == "truncate" and applied:
                cut = applied[n % len(applied)][2]
                log.truncate_to(cut)
                applied = [op for op in applied if op[2] < cut]
            elif kind == "reopen":
                log.close()
                log = PartitionLog.open(log.directory, config, 0)
            elif kind == "crash":
                generation += 1
                shutil.copytree(log.directory, base / str(generation) / "t-0")
                log.close()
                log = PartitionLog.open(base / str(generation) / "t-0", config, 0)
            unstable, aborted = replay_model(applied)
            end = log.log_end_offset
            assert log.last_stable_offset == (end if unstable < 0 else unstable), (kind, applied)
            got = [(t.producer_id, t.first_offset, t.last_offset) for t in log.aborted_transactions(0, end)]
            assert got == aborted, (kind, applied)
            files = sum(p.stat().st_size for p in log.directory.glob("*.txnindex"))
            assert files == 34 * len(aborted), (kind, applied)
        # Every fetch range names exactly the aborted transactions overlapping it (the early stop of the
        # search on an entry's LSO loses none).
        end = log.log_end_offset
        for fetch_offset in range(end + 1):
            for upper in range(fetch_offset + 1, end + 2):
                got = [(t.producer_id, t.first_offset, t.last_offset) for t in log.aborted_transactions(fetch_offset, upper)]
                assert got == [a for a in aborted if a[2] >= fetch_offset and a[1] < upper], (fetch_offset, upper)
    finally:
        log.close()


def test_a_transactional_batch_appended_unchecked_opens_its_transaction_as_recovery_would(tmp_path: Path) -> None:
    """The coordinators append their records without the idempotence check (``append``); a transactional one
    (an offset commit inside a transaction) still holds the LSO back, live as after a crash."""
    log = PartitionLog.open(tmp_path / "t-0", small_config(), 0)
    log.append(plain(), 1)
    log.append(txn_batch(A, 0), 1)  # 1
    assert log.last_stable_offset == 1
    shutil.copytree(log.directory, tmp_path / "crash" / "t-0")
    log.append_marker(A, 0, commit=False, coordinator_epoch=1, now_ms=1)
    assert log.aborted_transactions(0, 3) == [AbortedTxn(A, 1, 2, 3)]
    crashed = PartitionLog.open(tmp_path / "crash" / "t-0", small_config(), 0)
    assert crashed.last_stable_offset == 1
    assert crashed.producer_state.ongoing_transactions == {A: 1}
    crashed.close()
    log.close()


def test_the_lso_never_falls_below_the_log_start(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", small_config(), 0)
    log.append_checked(txn_batch(A, 0), 1)  # 0, open
    log.append(plain(3), 1)  # 1-3
    log.append_checked(txn_batch(A, 1), 1)  # 4, the same transaction
    assert log.last_stable_offset == 0
    log.delete_records(2)
    assert log.last_stable_offset == 2
    log.append_marker(A, 0, commit=True, coordinator_epoch=1, now_ms=1)
    assert log.last_stable_offset == log.log_end_offset == 6
    # A producer all of whose batches fall below the log start is forgotten with its open transaction, as
    # Kafka evicts it.
    log.append_checked(txn_batch(B, 0), 1)  # 6, open
    log.append(plain(), 1)  # 7
    log.delete_records(7)
    assert log.last_stable_offset == log.log_end_offset == 8
    log.close()
