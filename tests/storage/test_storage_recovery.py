"""Recovery: torn and corrupt tails, damage in older segments, damaged indexes, clean versus unclean opens,
the producer-state snapshot, and a real kill -9.

An unclean shutdown is simulated by copying the partition directory while the log is open: writes go
straight to the kernel, so the copy holds exactly what a killed process would leave behind.

The layout most tests use (``filled_log`` with ``segment.bytes=350``): twelve 100-byte batches, three per
segment, batch i holding one offset when i is even and two when it is odd; so the segments start at offsets
0, 4, 9 and 13, the log ends at 18, and the second segment holds batches 3 (offsets 4-5), 4 (6) and 5 (7-8)
at bytes 0, 100, 200.
"""

from __future__ import annotations

import itertools
import logging
import os
import shutil
import struct
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings
from storagekit import make_batch, read_all, segment_files, sized_batch, small_config, split_batches

from groupstream.storage import LogConfig, PartitionLog
from groupstream.storage.checkpoint import (
    CLEAN_SHUTDOWN_FILE,
    PRODUCER_SNAPSHOT_FILE,
    RECOVERY_POINT_FILE,
    read_offset,
)
from groupstream.storage.errors import CorruptRangeError


def crash_copy(log: PartitionLog, dest: Path) -> Path:
    shutil.copytree(log.directory, dest)
    return dest


def filled_log(directory: Path, config: LogConfig, n: int = 12, size: int = 100) -> tuple[PartitionLog, list[bytes]]:
    log = PartitionLog.open(directory, config, 0)
    written = []
    for i in range(n):
        b = sized_batch(size, last_offset_delta=i % 2, timestamp=1000 + i, fill=0x41 + i)
        log.append(b, now_ms=0)
        written.append(bytes(b))
    return log, written


def test_unclean_open_keeps_every_complete_batch(tmp_path: Path) -> None:
    config = small_config(segment_bytes=350)
    log, written = filled_log(tmp_path / "t-0", config)
    assert len(log.segment_base_offsets()) == 4
    copy = crash_copy(log, tmp_path / "c-0")
    reopened = PartitionLog.open(copy, config, 0)
    report = reopened.recovery_report
    assert not report.clean_shutdown
    assert report.validated_segments == log.segment_base_offsets()  # never flushed: everything checked
    assert report.truncations == [] and report.removed_segments == []
    assert [raw for _, _, raw in read_all(reopened)] == written
    assert reopened.log_end_offset == log.log_end_offset
    assert reopened.flushed_offset == 0  # nothing is known to be on disk until a flush
    assert reopened.flush() == reopened.log_end_offset


def test_torn_tail_is_truncated_and_appends_continue(tmp_path: Path) -> None:
    config = small_config(segment_bytes=100_000)
    log, written = filled_log(tmp_path / "t-0", config, n=5)
    copy = crash_copy(log, tmp_path / "c-0")
    (seg,) = segment_files(copy)
    os.truncate(seg, 4 * 100 + 37)  # mid fifth batch
    reopened = PartitionLog.open(copy, config, 0)
    assert [raw for _, _, raw in read_all(reopened)] == written[:4]
    ((base, removed, why),) = reopened.recovery_report.truncations
    assert (base, removed) == (0, 37) and "at 400" in why
    end = reopened.log_end_offset
    assert reopened.append(make_batch(payload=b"after"), now_ms=0).base_offset == end
    assert seg.stat().st_size == 400 + 61 + len(b"after")


@pytest.mark.parametrize("where", ["payload", "crc", "attributes"])
def test_crc_corrupt_tail_is_truncated(tmp_path: Path, where: str) -> None:
    config = small_config(segment_bytes=100_000)
    log, written = filled_log(tmp_path / "t-0", config, n=5)
    copy = crash_copy(log, tmp_path / "c-0")
    (seg,) = segment_files(copy)
    data = bytearray(seg.read_bytes())
    at = {"payload": 4 * 100 + 80, "crc": 4 * 100 + 18, "attributes": 4 * 100 + 22}[where]
    data[at] ^= 0x10
    seg.write_bytes(data)
    reopened = PartitionLog.open(copy, config, 0)
    assert [raw for _, _, raw in read_all(reopened)] == written[:4]
    assert "CRC" in reopened.recovery_report.truncations[0][2]


def test_garbage_after_the_last_batch_is_truncated(tmp_path: Path) -> None:
    config = small_config(segment_bytes=100_000)
    log, written = filled_log(tmp_path / "t-0", config, n=3)
    copy = crash_copy(log, tmp_path / "c-0")
    (seg,) = segment_files(copy)
    with seg.open("ab") as f:
        f.write(os.urandom(5) + b"\x00" * 300)
    reopened = PartitionLog.open(copy, config, 0)
    assert [raw for _, _, raw in read_all(reopened)] == written
    assert seg.stat().st_size == 300


def read_around(log: PartitionLog) -> tuple[list[tuple[int, int, bytes]], list[CorruptRangeError]]:
    """Every readable batch from the log start to the log end, seeking past each unreadable range as a
    consumer would after CORRUPT_MESSAGE; and the errors met."""
    offset, out, errors = log.log_start_offset, [], []
    while offset < log.log_end_offset:
        try:
            result = log.read(offset, 1 << 20)
        except CorruptRangeError as exc:
            assert exc.first_offset <= offset <= exc.last_offset < exc.next_offset
            errors.append(exc)
            offset = exc.next_offset
            continue
        assert result.records, f"no progress at {offset}"
        out.extend(split_batches(result.records))
        offset = result.next_offset
    return out, errors


def corrupt_length(path: Path, position: int, new_length: int) -> None:
    """Overwrite the batch length field (bytes 8-11) of the batch at ``position``."""
    with open(path, "r+b") as f:
        f.seek(position + 8)
        f.write(struct.pack(">i", new_length))


def flip(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0xFF
    path.write_bytes(data)


def files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.iterdir() if p.suffix == ".log"}


# How the second batch of the second segment (offset 6, bytes 100-199) is damaged.
DAMAGE: dict[str, Callable[[Path], None]] = {
    "payload": lambda p: flip(p, 150),  # only its CRC notices
    "shorter length": lambda p: corrupt_length(p, 100, 100 - 12 - 30),  # ends in the middle of its records
    "longer length": lambda p: corrupt_length(p, 100, 100 - 12 + 30),  # ends in the middle of the next batch
    "huge length": lambda p: corrupt_length(p, 100, 1 << 30),  # past the end of the file
    "magic": lambda p: flip(p, 116),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_corruption_in_a_middle_segment_keeps_every_later_segment(tmp_path: Path, damage: str) -> None:
    """The bug this replaces truncated the second segment at the damage and deleted the third and fourth."""
    config = small_config(segment_bytes=350)
    log, written = filled_log(tmp_path / "t-0", config)
    bases = log.segment_base_offsets()
    assert bases == [0, 4, 9, 13]
    copy = crash_copy(log, tmp_path / "c-0")
    DAMAGE[damage](copy / f"{bases[1]:020d}.log")
    on_disk = files(copy)
    reopened = PartitionLog.open(copy, config, 0)
    report = reopened.recovery_report
    assert report.removed_segments == [] and report.truncations == []
    assert reopened.segment_base_offsets() == bases
    assert files(copy) == on_disk  # nothing deleted or cut, the damaged bytes included
    ((segment, hole),) = report.holes
    assert (segment, hole.start, hole.end, hole.first_offset, hole.next_offset) == (4, 100, 200, 6, 7)
    assert report.validated_segments == bases  # never flushed: all CRC-checked
    assert reopened.unreadable_ranges() == [(6, 6, 7)]

    got, errors = read_around(reopened)
    assert got == [(b, e, raw) for (b, e, raw) in split_batches(b"".join(written)) if b != 6]
    assert [(e.partition, e.first_offset, e.last_offset, e.next_offset) for e in errors] == [("c-0", 6, 6, 7)]
    assert "the next readable offset is 7" in str(errors[0]) and "00000000000000000004.log" in str(errors[0])
    with pytest.raises(CorruptRangeError):  # asked again, the same answer
        reopened.read(6, 1000)
    assert reopened.read(4, 1000).records == written[3]  # the batch before it, alone
    assert reopened.append(make_batch(), now_ms=0).base_offset == written_end(written)


def test_damage_below_the_recovery_point_of_an_unclean_open_is_kept_and_later_segments_are_crc_checked(
    tmp_path: Path,
) -> None:
    """The header scan below the recovery point (it rebuilds producer state) finds framing damage; what follows
    it is then CRC-checked, the segment holding the recovery point onwards as always."""
    config = small_config(segment_bytes=350)
    log, written = filled_log(tmp_path / "t-0", config)
    assert log.flush() == log.log_end_offset
    assert read_offset(log.directory, RECOVERY_POINT_FILE) == 18  # in the last segment, 13
    copy = crash_copy(log, tmp_path / "c-0")
    DAMAGE["shorter length"](copy / f"{4:020d}.log")
    reopened = PartitionLog.open(copy, config, 0)
    report = reopened.recovery_report
    assert not report.clean_shutdown and report.validated_segments == [9, 13]
    assert reopened.unreadable_ranges() == [(6, 6, 7)] and report.truncations == []
    got, _ = read_around(reopened)
    assert [raw for _, _, raw in got] == written[:4] + written[5:]


def test_truncating_keeps_holes_before_the_cut_and_cuts_at_a_hole_it_falls_in(tmp_path: Path) -> None:
    config = small_config(segment_bytes=100_000)
    log, written = filled_log(tmp_path / "t-0", config)  # one segment
    copy = crash_copy(log, tmp_path / "c-0")
    reopened_copy = PartitionLog.open(copy, config, 0)
    reopened_copy.close()
    corrupt_length(copy / f"{0:020d}.log", 100, 50)  # batch 1, offsets 1-2, below the last index entry
    reopened = PartitionLog.open(copy, config, 0)
    with pytest.raises(CorruptRangeError):
        read_all(reopened)
    assert reopened.unreadable_ranges() == [(1, 2, 3)]
    reopened.truncate_to(9)
    assert reopened.log_end_offset == 9 and reopened.unreadable_ranges() == [(1, 2, 3)]
    got, _ = read_around(reopened)
    assert [raw for _, _, raw in got] == [written[0], *written[2:6]]
    reopened.truncate_to(2)
    assert reopened.log_end_offset == 1 and reopened.unreadable_ranges() == []
    assert reopened.append(make_batch(), now_ms=0).base_offset == 1


def written_end(written: list[bytes]) -> int:
    return split_batches(b"".join(written))[-1][1] + 1


def test_damage_to_the_last_batch_of_an_older_segment_leaves_the_rest_of_it_unreadable(tmp_path: Path) -> None:
    config = small_config(segment_bytes=350)
    log, written = filled_log(tmp_path / "t-0", config)
    copy = crash_copy(log, tmp_path / "c-0")
    flip(copy / f"{4:020d}.log", 250)  # batch 5, offsets 7-8: nothing intact follows it in the segment
    reopened = PartitionLog.open(copy, config, 0)
    assert reopened.unreadable_ranges() == [(7, 8, 9)]
    got, errors = read_around(reopened)
    assert [e.first_offset for e in errors] == [7]
    assert [raw for _, _, raw in got] == written[:5] + written[6:]


def test_consecutive_damaged_batches_form_one_range(tmp_path: Path) -> None:
    config = small_config(segment_bytes=550)  # five batches a segment
    log, written = filled_log(tmp_path / "t-0", config, n=15)
    copy = crash_copy(log, tmp_path / "c-0")
    first = segment_files(copy)[0]
    flip(first, 150)  # batch 1 (offsets 1-2)
    corrupt_length(first, 200, 5000)  # batch 2 (offset 3)
    reopened = PartitionLog.open(copy, config, 0)
    assert reopened.unreadable_ranges() == [(1, 3, 4)]
    got, _ = read_around(reopened)
    assert [raw for _, _, raw in got] == [written[0], *written[3:]]


def test_a_missing_middle_segment_is_an_unreadable_range(tmp_path: Path) -> None:
    config = small_config(segment_bytes=350)
    log, written = filled_log(tmp_path / "t-0", config)
    log.close()
    (log.directory / f"{4:020d}.log").unlink()
    reopened = PartitionLog.open(log.directory, config, 0)
    assert reopened.unreadable_ranges() == [(4, 8, 9)]
    got, errors = read_around(reopened)
    assert [raw for _, _, raw in got] == written[:3] + written[6:]
    assert "ends at offset 3 but the next segment starts at 9" in str(errors[0])


@pytest.mark.parametrize("damage", ["shorter length", "longer length", "huge length", "magic"])
def test_framing_damage_below_the_recovery_point_is_found_by_the_first_read(tmp_path: Path, damage: str) -> None:
    """A clean open trusts sealed segments (it reads their index files, not their batches), so damage in the
    middle of one is found by the first read that reaches it: that read stops before it, the next raises, and
    the batches after it stay readable; the range is remembered."""
    config = small_config(segment_bytes=350, index_interval_bytes=150)
    log, written = filled_log(tmp_path / "t-0", config)
    log.close()
    DAMAGE[damage](log.directory / f"{4:020d}.log")
    on_disk = files(log.directory)
    reopened = PartitionLog.open(log.directory, config, 0)
    report = reopened.recovery_report
    assert report.clean_shutdown and report.trusted_segments == [0, 4, 9, 13]
    assert report.holes == [] and report.truncations == [] and report.validated_segments == []
    assert reopened.unreadable_ranges() == []  # not found yet

    assert reopened.read(4, 1 << 20).records == written[3]  # stops before the damaged batch
    with pytest.raises(CorruptRangeError) as caught:
        reopened.read(6, 1 << 20)
    assert (caught.value.first_offset, caught.value.last_offset, caught.value.next_offset) == (6, 6, 7)
    assert reopened.unreadable_ranges() == [(6, 6, 7)]
    got, errors = read_around(reopened)
    assert [raw for _, _, raw in got] == written[:4] + written[5:]
    assert len(errors) == 1
    assert files(log.directory) == on_disk


def test_a_clean_open_reads_neither_sealed_segments_nor_what_lies_below_the_recovery_point(tmp_path: Path) -> None:
    """Proof that nothing is rescanned: damage a CRC-covered byte of every batch but the active segment's last
    one; a clean open trusts the segments and opens without a repair."""
    config = small_config(segment_bytes=350, index_interval_bytes=150)
    log, _ = filled_log(tmp_path / "t-0", config)
    log.close()
    for seg in segment_files(log.directory):
        size = seg.stat().st_size
        for pos in range(0, size - 100 if seg == segment_files(log.directory)[-1] else size, 100):
            flip(seg, pos + 80)
    reopened = PartitionLog.open(log.directory, config, 0)
    report = reopened.recovery_report
    assert report.trusted_segments == [0, 4, 9, 13] and report.index_problems == []
    assert report.events == [] and reopened.log_end_offset == log.log_end_offset


def test_batches_past_the_recovery_point_of_a_clean_open_are_crc_checked(tmp_path: Path) -> None:
    config = small_config(segment_bytes=100_000)
    log, written = filled_log(tmp_path / "t-0", config, n=4)
    log.close()
    (seg,) = segment_files(log.directory)
    with seg.open("ab") as f:  # a batch a clean close never wrote, with a bad CRC
        bad = bytearray(sized_batch(100, timestamp=5))
        struct.pack_into(">q", bad, 0, log.log_end_offset)
        bad[80] ^= 0x01
        f.write(bytes(bad))
    reopened = PartitionLog.open(log.directory, config, 0)
    ((_, removed, why),) = reopened.recovery_report.truncations
    assert removed == 100 and "CRC" in why
    assert [raw for _, _, raw in read_all(reopened)] == written


def test_offset_for_timestamp_refuses_to_guess_across_an_unreadable_range(tmp_path: Path) -> None:
    config = small_config(segment_bytes=350)
    log, _ = filled_log(tmp_path / "t-0", config)  # batch i has timestamp 1000 + i
    copy = crash_copy(log, tmp_path / "c-0")
    flip(copy / f"{4:020d}.log", 150)  # batch 4, offset 6, timestamp 1004
    reopened = PartitionLog.open(copy, config, 0)
    assert reopened.offset_for_timestamp(1003) == (4, 1003)
    with pytest.raises(CorruptRangeError):
        reopened.offset_for_timestamp(1004)  # offset 6 may hold it
    assert reopened.offset_for_timestamp(1006) == (9, 1006)  # the segment holding it has no damage
    assert reopened.log_end_offset == log.log_end_offset  # ListOffsets earliest/latest are unaffected


def test_every_repair_is_logged_once_at_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = small_config(segment_bytes=350, index_interval_bytes=150)
    log, _ = filled_log(tmp_path / "t-0", config)
    copy = crash_copy(log, tmp_path / "t-1")
    flip(copy / f"{4:020d}.log", 150)
    last = segment_files(copy)[-1]
    os.truncate(last, last.stat().st_size - 7)
    (copy / f"{9:020d}.index").unlink()
    with caplog.at_level(logging.WARNING, logger="groupstream.storage"):
        PartitionLog.open(copy, config, 0)
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert lines == [
        "t-1: offsets 6..6 are unreadable: batch at 100 fails its CRC check (00000000000000000004.log, bytes "
        "100..200 kept on disk); the next readable offset is 7",
        "t-1: truncated 00000000000000000013.log at byte 200, removing 93 bytes (offsets from 16 on): batch at 200 "
        "claims 100 bytes but only 93 remain",
        "t-1: rebuilt 00000000000000000004.index (segment of offsets 4..8, 300 log bytes): the log was repaired",
        "t-1: rebuilt 00000000000000000009.index (segment of offsets 9..12, 300 log bytes): it was missing",
        "t-1: rebuilt 00000000000000000013.index (segment of offsets 13..15, 200 log bytes): the log was repaired",
        "t-1: rebuilt 00000000000000000013.timeindex (segment of offsets 13..15, 200 log bytes): the log was repaired",
    ]


# -- producer state ----------------------------------------------------------------------------------------------


def idempotent_log(directory: Path, config: LogConfig) -> PartitionLog:
    """Three producers, several epochs and sequences, across segments."""
    log = PartitionLog.open(directory, config, 0)
    for i in range(30):
        pid, epoch = 100 + i % 3, i // 20
        seq = (i // 3) % 7 * 2 if epoch == 0 else (i - 20) // 3 * 2
        batch = make_batch(payload=b"x" * 40, last_offset_delta=1, producer_id=pid, producer_epoch=epoch,
                           base_sequence=seq)  # fmt: skip
        assert not isinstance(log.append_checked(batch, now_ms=0), tuple)
    return log


def test_a_clean_close_leaves_a_producer_snapshot_that_the_next_open_uses(tmp_path: Path) -> None:
    config = small_config(segment_bytes=400)
    log = idempotent_log(tmp_path / "t-0", config)
    scanned = PartitionLog.open(crash_copy(log, tmp_path / "c-0"), config, 0)
    assert scanned.recovery_report.producer_state == "scanned with the log's recovery"
    expected = log.producer_state.snapshot()
    assert len(expected) == 3 and scanned.producer_state.snapshot() == expected
    log.close()
    assert (log.directory / PRODUCER_SNAPSHOT_FILE).exists()
    reopened = PartitionLog.open(log.directory, config, 0)
    assert reopened.recovery_report.producer_state == "snapshot"
    assert reopened.producer_state.snapshot() == expected
    assert not (log.directory / PRODUCER_SNAPSHOT_FILE).exists()  # the log changes from here on


@pytest.mark.parametrize("spoil", ["missing", "flipped", "truncated", "stale"])
def test_an_unusable_snapshot_falls_back_to_the_header_scan(tmp_path: Path, spoil: str) -> None:
    config = small_config(segment_bytes=400)
    log = idempotent_log(tmp_path / "t-0", config)
    expected = log.producer_state.snapshot()
    log.close()
    snap = log.directory / PRODUCER_SNAPSHOT_FILE
    if spoil == "missing":
        snap.unlink()
    elif spoil == "flipped":
        flip(snap, len(snap.read_bytes()) - 3)
    elif spoil == "truncated":
        snap.write_bytes(snap.read_bytes()[:-9])
    else:  # written at another log end: the active segment lost its last batch since
        last = segment_files(log.directory)[-1]
        os.truncate(last, last.stat().st_size - 1)
    reopened = PartitionLog.open(log.directory, config, 0)
    why = reopened.recovery_report.producer_state
    assert why.startswith("scanned: "), why
    assert {"missing": "no snapshot", "flipped": "CRC", "truncated": "CRC", "stale": "taken at offset"}[spoil] in why
    if spoil == "stale":
        assert reopened.producer_state.snapshot() != expected  # the lost batch's sequence is gone too
    else:
        assert reopened.producer_state.snapshot() == expected


# -- a property: whatever CRC-covered bytes are damaged, every intact batch stays readable ------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.integers(70, 300), min_size=8, max_size=30),
    deltas=st.lists(st.integers(0, 3), min_size=30, max_size=30),
    hits=st.lists(st.tuples(st.integers(0, 29), st.integers(0, 10_000), st.booleans()), min_size=1, max_size=4),
    segment_bytes=st.integers(400, 1500),
    clean=st.booleans(),
)
def test_every_intact_batch_stays_readable_whatever_is_damaged(
    tmp_path_factory: pytest.TempPathFactory,
    sizes: list[int],
    deltas: list[int],
    hits: list[tuple[int, int, bool]],
    segment_bytes: int,
    clean: bool,
) -> None:
    """Damage, in any segment but the last: a length field that ends its batch inside its own records, or
    (unclean opens, which check CRCs) a flipped byte anywhere the CRC covers. Afterwards every batch that was
    not touched reads back exactly, every touched one raises CorruptRangeError covering its offsets, and no
    file changed. After a clean shutdown nothing is scanned at open: the reads find the damage."""
    root = tmp_path_factory.mktemp("prop")
    config = small_config(segment_bytes=segment_bytes, index_interval_bytes=120)
    log = PartitionLog.open(root / "t-0", config, 0)
    placed: list[tuple[int, int, int, bytes, int]] = []  # (base, last, position, bytes, segment base)
    for i, size in enumerate(sizes):
        info = log.append(sized_batch(size, last_offset_delta=deltas[i], timestamp=i, fill=0x41 + i % 26), now_ms=0)
        seg = log.segments[-1]
        placed.append((info.base_offset, info.last_offset, seg.size - size, b"", seg.base_offset))
    bases = log.segment_base_offsets()
    copy = root / "t-0" if clean else crash_copy(log, root / "c-0")
    log.close()
    raw = {b: (copy / f"{b:020d}.log").read_bytes() for b in bases}
    batches = [(base, last, pos, raw[sb][pos : pos + sizes[i]], sb) for i, (base, last, pos, _, sb) in enumerate(placed)]
    older = [b for b in batches if b[4] != bases[-1]]
    if not older:
        return
    for which, where, length in hits:
        _, _, pos, data, sb = older[which % len(older)]
        path = copy / f"{sb:020d}.log"
        if length or clean:
            corrupt_length(path, pos, 49 + where % (len(data) - 61))  # ends inside its own records
        else:
            flip(path, pos + 21 + where % (len(data) - 21))
    on_disk = files(copy)
    touched = {base for base, _, pos, data, sb in batches if on_disk[f"{sb:020d}.log"][pos : pos + len(data)] != data}
    reopened = PartitionLog.open(copy, config, 0)
    report = reopened.recovery_report
    assert report.removed_segments == [] and report.truncations == [] and report.clean_shutdown == clean
    assert reopened.segment_base_offsets() == bases
    for base, last, _, data, _ in batches:
        if base in touched:
            with pytest.raises(CorruptRangeError) as caught:
                reopened.read(base, 1 << 20)
            assert caught.value.first_offset <= base and last <= caught.value.last_offset
        else:
            assert reopened.read(base, 1).records == data
    assert files(copy) == on_disk


def test_clean_open_skips_crc_validation_but_still_checks_framing(tmp_path: Path) -> None:
    config = small_config(segment_bytes=100_000)
    log, _written = filled_log(tmp_path / "t-0", config, n=4)
    log.close()
    assert (log.directory / CLEAN_SHUTDOWN_FILE).exists()
    (seg,) = segment_files(log.directory)
    data = bytearray(seg.read_bytes())
    data[80] ^= 0x01  # a payload bit: only a CRC check would notice
    seg.write_bytes(data[:-10])  # and a torn tail, which framing notices
    reopened = PartitionLog.open(log.directory, config, 0)
    report = reopened.recovery_report
    assert report.clean_shutdown and report.validated_segments == []
    assert len(read_all(reopened)) == 3
    assert not (log.directory / CLEAN_SHUTDOWN_FILE).exists()  # a crash from here on is unclean
    assert reopened.flushed_offset == reopened.log_end_offset


def test_recovery_point_limits_validation_to_unflushed_segments(tmp_path: Path) -> None:
    config = small_config(segment_bytes=350)
    log, written = filled_log(tmp_path / "t-0", config)
    bases = log.segment_base_offsets()
    assert log.flush() == log.log_end_offset
    assert read_offset(log.directory, RECOVERY_POINT_FILE) == log.log_end_offset
    b = sized_batch(300)
    log.append(b, now_ms=0)  # rolls: a new, unflushed segment
    copy = crash_copy(log, tmp_path / "c-0")
    reopened = PartitionLog.open(copy, config, 0)
    # Everything below the flushed offset (the old end, the new segment's base) is trusted.
    assert bases[-1] < log.segment_base_offsets()[-1] == read_offset(copy, RECOVERY_POINT_FILE)
    assert reopened.recovery_report.validated_segments == [log.segment_base_offsets()[-1]]
    assert [raw for _, _, raw in read_all(reopened)] == [*written, bytes(b)]
    assert reopened.flushed_offset == log.log_end_offset - 1


Damage = Callable[[Path], None]


def _delete(p: Path) -> None:
    p.unlink()


def _odd_size(p: Path) -> None:
    p.write_bytes(p.read_bytes()[:-3])


def _garbage(p: Path) -> None:
    p.write_bytes(os.urandom(p.stat().st_size))


def _non_monotonic(p: Path) -> None:
    data = p.read_bytes()
    entry = 8 if p.suffix == ".index" else 12
    p.write_bytes(data[entry : 2 * entry] + data[:entry] + data[2 * entry :])


def _past_the_end(p: Path) -> None:
    extra = struct.pack(">ii", 10_000, 999_999) if p.suffix == ".index" else struct.pack(">qi", 10**12, 10_000)
    p.write_bytes(p.read_bytes() + extra)


def _emptied(p: Path) -> None:
    p.write_bytes(b"")


@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
@pytest.mark.parametrize("damage", [_delete, _odd_size, _garbage, _non_monotonic, _past_the_end, _emptied])
@pytest.mark.parametrize("clean", [True, False])
def test_damaged_index_is_rebuilt(tmp_path: Path, suffix: str, damage: Damage, clean: bool) -> None:
    config = small_config(segment_bytes=700, index_interval_bytes=120)
    log, written = filled_log(tmp_path / "t-0", config, n=14)
    directory = log.directory if clean else crash_copy(log, tmp_path / "c-0")
    if clean:
        log.close()
    originals = {p.name: p.read_bytes() for p in segment_files(directory, suffix)}
    assert all(originals.values())
    victim = segment_files(directory, suffix)[0]
    damage(victim)
    reopened = PartitionLog.open(directory, config, 0)
    assert victim.name in reopened.recovery_report.rebuilt_indexes
    assert {p.name: p.read_bytes() for p in segment_files(directory, suffix)} == originals
    assert [raw for _, _, raw in read_all(reopened)] == written
    for offset in range(reopened.log_end_offset):
        assert reopened.read(offset, 1).records
    assert reopened.offset_for_timestamp(1005) is not None


def test_orphan_and_temporary_files_are_removed(tmp_path: Path) -> None:
    config = small_config()
    log, _ = filled_log(tmp_path / "t-0", config, n=2)
    log.close()
    (log.directory / f"{500:020d}.index").write_bytes(b"\x00" * 8)
    (log.directory / f"{500:020d}.timeindex").write_bytes(b"")
    (log.directory / "recovery-point.tmp").write_bytes(b"half")
    (log.directory / "notes.txt").write_text("not ours to delete")
    reopened = PartitionLog.open(log.directory, config, 0)
    assert sorted(reopened.recovery_report.removed_files) == [
        f"{500:020d}.index",
        f"{500:020d}.timeindex",
        "recovery-point.tmp",
    ]
    assert (log.directory / "notes.txt").exists()


def test_reopen_after_close_is_identical(tmp_path: Path) -> None:
    config = small_config(segment_bytes=350)
    log, written = filled_log(tmp_path / "t-0", config)
    log.delete_records(3)
    before = {p.name: p.read_bytes() for p in log.directory.iterdir() if p.name[0].isdigit()}
    log.close()
    reopened = PartitionLog.open(log.directory, config, 0)
    after = {p.name: p.read_bytes() for p in log.directory.iterdir() if p.name[0].isdigit()}
    assert before == after
    assert reopened.recovery_report.rebuilt_indexes == []
    assert (reopened.log_start_offset, reopened.log_end_offset) == (3, log.log_end_offset)
    assert [raw for _, _, raw in read_all(reopened)] == written[2:]  # batch 2 holds offset 3


_CHILD = textwrap.dedent(
    """
    import sys
    sys.path[:0] = [sys.argv[2], sys.argv[3]]
    from storagekit import sized_batch, small_config
    from groupstream.storage import PartitionLog
    log = PartitionLog.open(sys.argv[1], small_config(segment_bytes=5000), 0)
    i = 0
    while True:
        info = log.append(sized_batch(200 + i % 300, last_offset_delta=i % 4, fill=65 + i % 26), now_ms=0)
        print(info.last_offset, flush=True)
        i += 1
    """
)


def test_kill_9_loses_no_acknowledged_batch(tmp_path: Path) -> None:
    here = Path(__file__).parent
    src = Path(__file__).parents[2] / "src"
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(tmp_path / "t-0"), str(here), str(src)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    acked = -1
    for _ in range(400):
        acked = int(child.stdout.readline())
    child.kill()
    child.wait()
    log = PartitionLog.open(tmp_path / "t-0", small_config(segment_bytes=5000), 0)
    assert not log.recovery_report.clean_shutdown
    assert log.log_end_offset > acked
    assert len(log.segment_base_offsets()) > 5
    batches = read_all(log)
    assert [s for s, _, _ in batches] == sorted(s for s, _, _ in batches)
    assert all(e + 1 == s for (_, e, _), (s, _, _) in itertools.pairwise(batches))
