from __future__ import annotations

from pathlib import Path

import pytest
from storagekit import make_batch, small_config

from groupstream.storage import (
    Accept,
    AppendInfo,
    CheckResult,
    Duplicate,
    InvalidEpoch,
    OutOfOrder,
    PartitionLog,
    ProducerStateManager,
    UnknownProducer,
)

MAX = 2**31 - 1
PID = 7

# (history of appended batches as (epoch, base_seq, last_seq), candidate (epoch, base_seq, last_seq), verdict)
# History batches get offsets 100, 110, 120, ... each spanning last_seq - base_seq + 1 offsets.
CASES: list[tuple[str, list[tuple[int, int, int]], tuple[int, int, int], CheckResult]] = [
    ("new producer starts at 0", [], (0, 0, 4), Accept()),
    ("new producer not at 0", [], (0, 5, 9), UnknownProducer()),
    ("next in sequence", [(0, 0, 4)], (0, 5, 5), Accept()),
    ("gap", [(0, 0, 4)], (0, 7, 8), OutOfOrder(5)),
    ("replay of the last batch", [(0, 0, 4), (0, 5, 9)], (0, 5, 9), Duplicate(110, 114)),
    ("replay of an older batch", [(0, 0, 4), (0, 5, 9)], (0, 0, 4), Duplicate(100, 104)),
    ("overlapping but not equal", [(0, 0, 4), (0, 5, 9)], (0, 5, 7), OutOfOrder(10)),
    (
        "older than the five remembered",
        [(0, 0, 0), (0, 1, 1), (0, 2, 2), (0, 3, 3), (0, 4, 4), (0, 5, 5)],
        (0, 0, 0),
        OutOfOrder(6),
    ),
    (
        "oldest of the five remembered",
        [(0, 0, 0), (0, 1, 1), (0, 2, 2), (0, 3, 3), (0, 4, 4), (0, 5, 5)],
        (0, 1, 1),
        Duplicate(110, 110),
    ),
    ("wraps at int32 max", [(0, MAX - 4, MAX)], (0, 0, 3), Accept()),
    ("no wrap is out of order", [(0, MAX - 4, MAX)], (0, MAX, MAX), OutOfOrder(0)),
    ("batch that itself wraps", [(0, MAX - 1, 1)], (0, 2, 2), Accept()),
    ("epoch bump restarts at 0", [(0, 0, 4)], (1, 0, 0), Accept()),
    ("epoch bump not at 0", [(0, 0, 4)], (1, 5, 5), OutOfOrder(0)),
    ("fenced epoch", [(3, 0, 4)], (2, 5, 5), InvalidEpoch(3)),
    ("fenced epoch even as a duplicate", [(3, 0, 4)], (2, 0, 4), InvalidEpoch(3)),
    ("duplicate only within the epoch", [(0, 0, 4), (1, 0, 4)], (1, 0, 4), Duplicate(110, 114)),
    ("after a bump the old epoch is fenced", [(0, 0, 4), (1, 0, 4)], (0, 5, 5), InvalidEpoch(1)),
]


@pytest.mark.parametrize(("history", "candidate", "verdict"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_check_rules(history: list[tuple[int, int, int]], candidate: tuple[int, int, int], verdict: CheckResult) -> None:
    state = ProducerStateManager()
    for i, (epoch, first, last) in enumerate(history):
        span = (last - first) % (MAX + 1)
        state.update(PID, epoch, first, last, 100 + 10 * i, 100 + 10 * i + span)
    assert state.check(PID, *candidate) == verdict


def test_non_idempotent_batches_are_always_accepted() -> None:
    state = ProducerStateManager()
    assert state.check(-1, -1, -1, -1) == Accept()
    state.update(-1, -1, -1, -1, 0, 0)
    assert len(state) == 0


def test_unsequenced_batches_only_fence() -> None:
    state = ProducerStateManager()
    state.update(PID, 2, 0, 0, 0, 0)
    assert state.check(PID, 2, -1, -1) == Accept()
    assert state.check(PID, 1, -1, -1) == InvalidEpoch(2)


def idempotent(epoch: int, seq: int, n: int = 1, payload: bytes = b"v", pid: int = PID) -> bytearray:
    return make_batch(
        payload=payload, last_offset_delta=n - 1, producer_id=pid, producer_epoch=epoch, base_sequence=seq
    )


def test_append_checked_runs_check_append_update(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", small_config(), 0)
    first = log.append_checked(idempotent(0, 0, 3), now_ms=0)
    assert isinstance(first, AppendInfo) and (first.base_offset, first.last_offset) == (0, 2)
    assert log.append_checked(idempotent(0, 0, 3), now_ms=0) == Duplicate(0, 2)
    assert log.append_checked(idempotent(0, 5), now_ms=0) == OutOfOrder(3)
    assert log.append_checked(idempotent(0, 3, 2), now_ms=0) == AppendInfo(3, 4, -1, 0)
    assert log.log_end_offset == 5
    # Two batches of one request: the second is checked against the state the first would leave.
    two = idempotent(0, 5) + idempotent(0, 6)
    assert isinstance(log.append_checked(two, now_ms=0), AppendInfo)
    assert log.producer_state.check(PID, 0, 7, 7) == Accept()
    bad = idempotent(0, 7) + idempotent(0, 9)
    assert log.append_checked(bad, now_ms=0) == OutOfOrder(8)
    assert log.log_end_offset == 7


def test_state_is_rebuilt_from_the_log_on_open(tmp_path: Path) -> None:
    config = small_config(segment_bytes=300)
    log = PartitionLog.open(tmp_path / "t-0", config, 0)
    for seq in range(8):
        log.append_checked(idempotent(0, seq), now_ms=0)
    log.append_checked(idempotent(1, 0, 2), now_ms=0)
    log.append_checked(idempotent(0, 0, pid=9), now_ms=0)
    log.append(make_batch(payload=b"plain"), now_ms=0)
    live = log.producer_state.snapshot()
    log.close()
    reopened = PartitionLog.open(tmp_path / "t-0", config, 0)
    assert reopened.producer_state.snapshot() == live
    assert reopened.producer_state.check(PID, 1, 0, 1) == Duplicate(8, 9)
    assert reopened.producer_state.check(PID, 1, 2, 2) == Accept()
    assert reopened.producer_state.check(PID, 0, 8, 8) == InvalidEpoch(1)
    assert reopened.producer_state.check(9, 0, 1, 1) == Accept()


def test_retention_forgets_producers_and_unknown_ones_must_restart(tmp_path: Path) -> None:
    config = small_config(segment_bytes=200, retention_bytes=0)
    log = PartitionLog.open(tmp_path / "t-0", config, 0)
    log.append_checked(idempotent(0, 0, payload=b"x" * 60), now_ms=0)  # producer 7, segment 0
    log.append_checked(idempotent(0, 0, payload=b"x" * 60, pid=9), now_ms=0)
    log.append_checked(idempotent(0, 1, payload=b"x" * 60, pid=9), now_ms=0)  # one batch per segment
    assert log.segment_base_offsets() == [0, 1, 2]
    assert log.enforce_retention(now_ms=0) == [0, 1]
    assert sorted(log.producer_state) == [9]
    # Producer 7's state went with its data: a continuation is UnknownProducer (the broker answers
    # UNKNOWN_PRODUCER_ID with the new log start offset); restarting at sequence 0 is accepted.
    assert log.append_checked(idempotent(0, 1), now_ms=0) == UnknownProducer()
    assert isinstance(log.append_checked(idempotent(0, 0), now_ms=0), AppendInfo)
    log.close()
    reopened = PartitionLog.open(tmp_path / "t-0", config, 0)
    assert sorted(reopened.producer_state) == [PID, 9]


def test_truncation_rebuilds_state(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", small_config(), 0)
    for seq in range(4):
        log.append_checked(idempotent(0, seq), now_ms=0)
    log.truncate_to(2)
    assert log.producer_state.check(PID, 0, 2, 2) == Accept()
    assert log.producer_state.check(PID, 0, 3, 3) == OutOfOrder(2)
