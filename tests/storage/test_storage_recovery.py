"""Recovery: torn and corrupt tails, damaged indexes, clean versus unclean opens, and a real kill -9.

An unclean shutdown is simulated by copying the partition directory while the log is open: writes go
straight to the kernel, so the copy holds exactly what a killed process would leave behind.
"""

from __future__ import annotations

import itertools
import os
import shutil
import struct
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from storagekit import make_batch, read_all, segment_files, sized_batch, small_config

from groupstream.storage import LogConfig, PartitionLog
from groupstream.storage.checkpoint import CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_FILE, read_offset


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


def test_corruption_in_a_middle_segment_drops_everything_after_it(tmp_path: Path) -> None:
    config = small_config(segment_bytes=350)
    log, written = filled_log(tmp_path / "t-0", config)
    bases = log.segment_base_offsets()
    copy = crash_copy(log, tmp_path / "c-0")
    second = copy / f"{bases[1]:020d}.log"
    data = bytearray(second.read_bytes())
    data[150] ^= 0xFF  # the second batch of the second segment
    second.write_bytes(data)
    reopened = PartitionLog.open(copy, config, 0)
    report = reopened.recovery_report
    assert report.removed_segments == bases[2:]
    assert reopened.segment_base_offsets() == bases[:2]
    assert [raw for _, _, raw in read_all(reopened)] == written[:4]
    assert sorted(p.name for p in copy.iterdir() if p.name[0].isdigit()) == sorted(
        f"{b:020d}{s}" for b in bases[:2] for s in (".log", ".index", ".timeindex")
    )
    assert reopened.append(make_batch(), now_ms=0).base_offset == reopened.log_end_offset - 1


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
