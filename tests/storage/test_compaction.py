"""Log compaction: newest value per key, tombstones, offsets and gaps, crash-safe swaps, producer state."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from storagekit import read_all, segment_files

from groupstream.protocol.records import BatchBuilder, iter_record_batches
from groupstream.protocol.records.batch_header import parse_header
from groupstream.protocol.records.compression import Codec
from groupstream.storage import LogConfig, PartitionLog
from groupstream.storage import producer_state as ps
from groupstream.storage.checkpoint import CLEANER_OFFSET_FILE, read_offset
from groupstream.storage.compaction import clean, cleanable_range, commit_cleaning, plan_cleaning
from groupstream.storage.swap import commit_cleaned

DAY = 24 * 3600 * 1000


def compact_config(**props: str) -> LogConfig:
    base = {
        "cleanup.policy": "compact",
        "segment.bytes": "600",
        "index.interval.bytes": "100",
        "min.cleanable.dirty.ratio": "0.5",
    }
    base.update(props)
    return LogConfig.from_properties(base)


def keyed(
    items: list[tuple[bytes | None, bytes | None]],
    ts: int = 1000,
    compression: int = Codec.NONE,
    **kw: int,
) -> bytearray:
    b = BatchBuilder(compression=compression, **kw)
    for key, value in items:
        b.append(ts, key, value)
    return bytearray(b.build())


def records(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    for _, _, raw in read_all(log):
        for batch in iter_record_batches(raw):
            out.extend((r.offset, r.key, r.value) for r in batch)
    return out


def latest_by_key(recs: list[tuple[int, bytes | None, bytes | None]]) -> dict[bytes | None, tuple[int, bytes | None]]:
    return {k: (o, v) for o, k, v in recs}


def fill(log: PartitionLog, rounds: int, keys: int = 5, ts: int = 1000) -> None:
    for r in range(rounds):
        for k in range(keys):
            log.append(keyed([(b"k%d" % k, b"v%d-%d" % (k, r))], ts=ts), now_ms=ts)


def test_newest_value_per_key_wins_and_offsets_are_preserved(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", compact_config(), 0)
    fill(log, rounds=20)
    log.roll(0)
    before = records(log)
    end = log.log_end_offset
    stats = clean(log, now_ms=2000)
    assert stats is not None and stats.records_removed == 95
    after = records(log)
    assert log.log_end_offset == end
    # every key keeps exactly its newest record, at its original offset
    assert latest_by_key(after) == latest_by_key(before)
    assert len(after) == 5
    assert sorted(o for o, _, _ in after) == [o for o, _, _ in after]
    assert log.size_bytes < 600 * 2


def test_reads_land_on_the_next_batch_across_gaps(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", compact_config(), 0)
    fill(log, rounds=10)
    log.append(keyed([(b"tail", b"x")]), now_ms=1000)  # in the active segment: never cleaned
    clean(log, now_ms=2000, force=True)
    survivors = [o for o, _, _ in records(log)]
    for offset in range(log.log_start_offset, log.log_end_offset):
        got = log.read(offset, 1 << 20)
        first = parse_header(got.records, 0)
        assert first.last_offset >= offset
        # the batch returned is the first one holding anything at or past the offset
        assert all(not (offset <= s < first.base_offset) for s in survivors)


def test_tombstones_go_only_after_delete_retention(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", compact_config(**{"delete.retention.ms": str(DAY)}), 0)
    fill(log, rounds=4, ts=1000)
    log.append(keyed([(b"k1", None)], ts=5000), now_ms=5000)
    log.roll(5000)
    clean(log, now_ms=5000 + DAY - 1, force=True)
    assert latest_by_key(records(log))[b"k1"][1] is None  # the tombstone stays, the values it deletes go
    assert [k for _, k, _ in records(log)].count(b"k1") == 1
    stats = clean(log, now_ms=5000 + DAY + 1, force=True)
    assert stats is not None and stats.tombstones_removed == 1
    assert b"k1" not in latest_by_key(records(log))
    assert set(latest_by_key(records(log))) == {b"k0", b"k2", b"k3", b"k4"}


def test_dirty_ratio_triggers_and_checkpoint_advances(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", compact_config(), 0)
    assert plan_cleaning(log, 0) is None  # nothing sealed
    fill(log, rounds=20)
    log.roll(0)
    rng = cleanable_range(log, 0)
    assert rng.dirty_ratio == 1.0
    assert clean(log, 0) is not None
    assert read_offset(log.directory, CLEANER_OFFSET_FILE) == log.log_end_offset
    assert cleanable_range(log, 0).dirty_bytes == 0
    assert plan_cleaning(log, 0) is None  # all clean: nothing to do until new data arrives
    # a little new dirty data stays below the 0.5 ratio; lots of it does not
    log.append(keyed([(b"k0", b"new")]), now_ms=0)
    log.roll(0)
    assert cleanable_range(log, 0).dirty_ratio < 0.5 and plan_cleaning(log, 0) is None
    fill(log, rounds=10)
    log.roll(0)
    assert cleanable_range(log, 0).dirty_ratio >= 0.5
    plan = plan_cleaning(log, 0)
    assert plan is not None
    plan.discard()


def test_only_topics_that_compact_are_cleaned(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", compact_config(**{"cleanup.policy": "delete"}), 0)
    fill(log, rounds=20)
    log.roll(0)
    assert plan_cleaning(log, 0, force=True) is None


def test_small_segments_merge_and_the_active_segment_is_untouched(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", compact_config(), 0)
    fill(log, rounds=30)
    active_base = log.segment_base_offsets()[-1]
    active_before = [b for b in read_all(log) if b[0] >= active_base]
    n_before = len(log.segment_base_offsets())
    clean(log, 0, force=True)  # full segments are rewritten one by one (grouping uses their old sizes) ...
    assert len(log.segment_base_offsets()) == n_before
    clean(log, 0, force=True)  # ... and the shrunken ones merge on the next pass
    assert len(log.segment_base_offsets()) < n_before
    assert log.segment_base_offsets()[-1] == active_base
    assert [b for b in read_all(log) if b[0] >= active_base] == active_before
    # index files on disk match the rebuilt segments
    reopened_dir = tmp_path / "copy-0"
    log.close()
    shutil.copytree(log.directory, reopened_dir)
    again = PartitionLog.open(reopened_dir, compact_config(), 0)
    assert again.recovery_report.rebuilt_indexes == []


def test_compressed_batches_are_reencoded_with_their_codec(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", compact_config(**{"segment.bytes": "4000"}), 0)
    log.append(keyed([(b"a", b"1"), (b"b", b"1"), (b"c", b"1")], compression=Codec.GZIP), now_ms=0)
    log.append(keyed([(b"a", b"2")], ts=1500), now_ms=0)
    log.roll(0)
    clean(log, 0, force=True)
    batches = [parse_header(raw, 0) for _, _, raw in read_all(log)]
    first = batches[0]
    assert first.compression == Codec.GZIP
    assert (first.base_offset, first.last_offset, first.records_count) == (0, 2, 2)
    assert [(o, k, v) for o, k, v in records(log)] == [(1, b"b", b"1"), (2, b"c", b"1"), (3, b"a", b"2")]


def test_keyless_records_are_removed_and_control_batches_kept(tmp_path: Path) -> None:
    from groupstream.protocol.records import ControlType, build_control_batch

    log = PartitionLog.open(tmp_path / "t-0", compact_config(**{"segment.bytes": "4000"}), 0)
    log.append(keyed([(None, b"no key"), (b"a", b"1")]), now_ms=0)
    marker = build_control_batch(ControlType.ABORT, producer_id=7, producer_epoch=0, coordinator_epoch=0, timestamp=0)
    log.append(bytearray(marker), now_ms=0)
    log.append(keyed([(b"b", b"1")]), now_ms=0)
    log.roll(0)
    clean(log, 0, force=True)
    kept = [raw for _, _, raw in read_all(log)]
    assert bytes(marker[12:]) in [raw[12:] for raw in kept]  # the marker batch, byte for byte
    data = [
        (r.key, r.value)
        for raw in kept
        if not parse_header(raw, 0).is_control
        for batch in iter_record_batches(raw)
        for r in batch
    ]
    assert data == [(b"a", b"1"), (b"b", b"1")]


def test_producer_state_survives_compaction_and_reopen(tmp_path: Path) -> None:
    config = compact_config()
    log = PartitionLog.open(tmp_path / "t-0", config, 0)
    seq = 0
    last_batch = b""
    for r in range(12):
        for k in range(2):
            b = keyed([(b"k%d" % k, b"v%d" % r)], producer_id=42, producer_epoch=3, base_sequence=seq)
            last_batch = bytes(b)
            assert not isinstance(log.append_checked(b, now_ms=0), ps.OutOfOrder)
            seq += 1
    # another writer supersedes every key, so the producer's own batches would all be cleaned away
    fill(log, rounds=1, keys=2)
    log.roll(0)
    before = log.producer_state.snapshot()
    stats = clean(log, 0, force=True)
    assert stats is not None and stats.empty_batches_kept >= 5
    assert log.producer_state.snapshot() == before
    log.close()
    reopened = PartitionLog.open(tmp_path / "t-0", config, 0)
    assert reopened.producer_state.snapshot() == before
    # a retry of the producer's last batch is still recognised, and its next sequence still fits
    assert isinstance(reopened.append_checked(bytearray(last_batch), now_ms=0), ps.Duplicate)
    nxt = keyed([(b"k9", b"x")], producer_id=42, producer_epoch=3, base_sequence=seq)
    assert not isinstance(reopened.append_checked(nxt, now_ms=0), ps.OutOfOrder | ps.UnknownProducer)


def _prepared(tmp_path: Path) -> tuple[PartitionLog, Any, dict[bytes | None, tuple[int, bytes | None]]]:
    log = PartitionLog.open(tmp_path / "t-0", compact_config(**{"segment.bytes": "2000"}), 0)
    for _ in range(20):
        fill(log, rounds=1)
        log.roll(0)  # small segments, so the cleaner merges several into one
    expected = latest_by_key(records(log))
    plan = plan_cleaning(log, 0, force=True)
    assert plan is not None
    plan.build()
    return log, plan, expected


def _crash_copy(log: PartitionLog, dest: Path) -> Path:
    shutil.copytree(log.directory, dest)
    return dest


def test_crash_before_the_swap_commits_keeps_the_old_segments(tmp_path: Path) -> None:
    log, plan, expected = _prepared(tmp_path)
    copy = _crash_copy(log, tmp_path / "crash-0")
    assert any(p.name.endswith(".cleaned") for p in copy.iterdir())
    reopened = PartitionLog.open(copy, compact_config(**{"segment.bytes": "2000"}), 0)
    assert not any(p.name.endswith((".cleaned", ".swap")) for p in copy.iterdir())
    assert latest_by_key(records(reopened)) == expected
    assert len(records(reopened)) == 100  # nothing was cleaned
    plan.discard()


@pytest.mark.parametrize("deleted_old", [0, 1, 2])
def test_crash_after_the_swap_commits_finishes_it(tmp_path: Path, deleted_old: int) -> None:
    log, plan, expected = _prepared(tmp_path)
    group = next(b for b in plan.built if len(b.sources) >= 3)
    swap = commit_cleaned(group.path)
    copy = _crash_copy(log, tmp_path / "crash-0")
    for src in group.sources[1 : 1 + deleted_old]:  # the crash came while old segments were being deleted
        os.unlink(copy / f"{src.base_offset:020d}.log")
    reopened = PartitionLog.open(copy, compact_config(**{"segment.bytes": "2000"}), 0)
    assert swap.name in reopened.recovery_report.removed_files
    names = {p.name for p in copy.iterdir()}
    assert not any(n.endswith((".cleaned", ".swap")) for n in names)
    for src in group.sources[1:]:
        assert f"{src.base_offset:020d}.log" not in names
    got = records(reopened)
    assert latest_by_key(got) == expected
    assert [o for o, _, _ in got] == sorted(o for o, _, _ in got)
    assert reopened.log_end_offset == log.log_end_offset
    plan.discard()


def test_work_on_segments_removed_meanwhile_is_discarded(tmp_path: Path) -> None:
    config = compact_config(**{"cleanup.policy": "compact,delete", "retention.ms": "1000"})
    log = PartitionLog.open(tmp_path / "t-0", config, 0)
    fill(log, rounds=20, ts=0)
    log.roll(0)
    plan = plan_cleaning(log, 0, force=True)
    assert plan is not None
    plan.build()
    assert log.enforce_retention(now_ms=10_000)  # retention deletes the sealed segments under the cleaner
    stats = commit_cleaning(log, plan)
    assert stats.groups_discarded >= 1
    assert read_offset(log.directory, CLEANER_OFFSET_FILE) is None
    assert not any(p.name.endswith((".cleaned", ".swap")) for p in log.directory.iterdir())
    assert segment_files(log.directory)  # the active segment is all that is left


def test_compaction_properties_are_validated() -> None:
    with pytest.raises(ValueError, match=r"min\.cleanable\.dirty\.ratio"):
        compact_config(**{"min.cleanable.dirty.ratio": "1.5"})
    with pytest.raises(ValueError, match=r"delete\.retention\.ms"):
        compact_config(**{"delete.retention.ms": "soon"})
