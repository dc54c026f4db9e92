"""The log on a disk that refuses: a real tmpfs that runs out of blocks or inodes (issue 12, part 1).

A refused write must leave the log exactly as it was (nothing past the last whole batch on disk, the same end
offset in memory and after a reopen), and appends must resume once space returns, without reopening. A
failed fsync cannot be produced on tmpfs; that one case patches the sync call and checks the rule Kafka and
PostgreSQL follow: the partition goes offline and a later flush never reports success for it.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from storagekit import read_all, segment_files, sized_batch

from groupstream.storage import LogConfig, PartitionLog, log_flush
from groupstream.storage.catalog import Catalog
from groupstream.storage.errors import LogOfflineError, LogWriteError
from support.disk import SmallDisk, small_disk


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[SmallDisk]:
    with small_disk(tmp_path, 2 * 1024 * 1024) as d:
        yield d


def _config() -> LogConfig:
    return LogConfig(segment_bytes=256 * 1024, index_interval_bytes=4096)


def _fill_log(plog: PartitionLog, now: int = 1) -> int:
    """Append 20 KB batches until the disk refuses; returns how many were appended."""
    n = 0
    while True:
        try:
            plog.append(sized_batch(20_000, last_offset_delta=9), now)
        except LogWriteError:
            return n
        n += 1
        assert n < 10_000, "the disk never filled"


def test_a_refused_append_leaves_no_torn_bytes_and_resumes_when_space_returns(disk: SmallDisk) -> None:
    plog = PartitionLog.open(disk.path / "t-0", _config())
    disk.add_ballast(1024 * 1024)
    appended = _fill_log(plog)
    assert appended > 0
    end = plog.log_end_offset
    assert end == appended * 10
    active = segment_files(plog.directory)[-1]
    assert active.stat().st_size == plog.segments[-1].size, "bytes of the refused write stayed in the file"
    with pytest.raises(LogWriteError, match="No space left on device"):
        plog.append(sized_batch(20_000, last_offset_delta=9), 2)
    assert plog.log_end_offset == end

    disk.remove_ballast()
    info = plog.append(sized_batch(20_000, last_offset_delta=9), 3)
    assert info.base_offset == end  # the same offsets the refused appends would have had
    plog.close()

    again = PartitionLog.open(disk.path / "t-0", _config())
    assert again.log_end_offset == end + 10
    assert [o for o, _, _ in read_all(again)] == list(range(0, end + 10, 10))
    assert not again.recovery_report.truncations
    again.close()


def test_a_short_write_then_a_roll_loses_nothing(disk: SmallDisk) -> None:
    """The loss the issue traced, made deterministic: a 200 KB batch gets only 190 KB onto the disk, space
    returns, smaller batches follow and the segment rolls before they reach the end of the torn bytes.
    Before the fix those bytes stayed in the sealed segment, and the next open cut the log at them and
    deleted every later segment; now the refused write is cut off at once."""
    plog = PartitionLog.open(disk.path / "t-0", _config())  # 256 KB segments
    plog.append(sized_batch(50_000, last_offset_delta=9), 1)
    disk.add_ballast(disk.free_bytes() - 190 * 1024)
    with pytest.raises(LogWriteError):
        plog.append(sized_batch(200_000, last_offset_delta=9), 2)
    disk.remove_ballast()
    # six of 30 KB bring the segment to 230 KB, short of the torn bytes' end (240 KB); then 60 KB batches,
    # the first of which does not fit and rolls: the torn tail [230 KB, 240 KB) would stay behind
    for i, size in enumerate([30_000] * 6 + [60_000] * 8):
        plog.append(sized_batch(size, last_offset_delta=9), 3 + i)
    assert [s.size for s in plog.segments] == [230_000, 240_000, 240_000]
    end = plog.log_end_offset
    plog.close()
    for clean in (True, False):
        again = PartitionLog.open(disk.path / "t-0", _config())
        assert again.log_end_offset == end, again.recovery_report
        assert [o for o, _, _ in read_all(again)] == list(range(0, end, 10))
        assert not again.recovery_report.removed_segments and not again.recovery_report.truncations
        if clean:
            again.close()
        else:
            for seg in again.segments:  # as kill -9 leaves it: no clean-shutdown mark
                seg.close()


def test_a_refused_write_survives_an_unclean_reopen(disk: SmallDisk) -> None:
    """kill -9 right after the refusal: no clean marker, the recovery scan finds only whole batches."""
    plog = PartitionLog.open(disk.path / "t-0", _config())
    disk.add_ballast(1024 * 1024)
    _fill_log(plog)
    end = plog.log_end_offset
    plog.flush()
    # what a killed process leaves: the files as they are, no close
    for seg in plog.segments:
        seg.close()
    again = PartitionLog.open(disk.path / "t-0", _config())
    assert again.log_end_offset == end
    assert not again.recovery_report.truncations, again.recovery_report
    assert not again.recovery_report.removed_segments
    again.close()


def test_a_roll_the_disk_refuses_keeps_the_active_segment(tmp_path: Path) -> None:
    """Out of inodes: the new segment's files cannot be created, so the roll fails before it seals anything."""
    mount = tmp_path / "inodes"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,nr_inodes=12", "tmpfs", str(mount)], check=True)
    try:
        config = LogConfig(segment_bytes=64 * 1024, index_interval_bytes=4096)
        plog = PartitionLog.open(mount / "t-0", config)
        filler: list[Path] = []
        for i in range(100):  # take every inode that is left
            try:
                (mount / f"f{i}").touch()
            except OSError as e:
                assert e.errno == errno.ENOSPC
                break
            filler.append(mount / f"f{i}")
        appended = 0
        with pytest.raises(LogWriteError, match="cannot create segment"):
            while True:
                plog.append(sized_batch(20_000, last_offset_delta=4), 1)
                appended += 1
        assert len(plog.segments) == 1 and not plog.segments[0].sealed
        assert plog.log_end_offset == appended * 5
        assert [p.name for p in segment_files(plog.directory)] == ["00000000000000000000.log"]
        for f in filler:
            f.unlink()
        plog.append(sized_batch(20_000, last_offset_delta=4), 2)  # the roll happens now
        assert len(plog.segments) == 2
        assert [o for o, _, _ in read_all(plog)] == list(range(0, (appended + 1) * 5, 5))
        plog.close()
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_topic_the_disk_refuses_is_not_half_created(tmp_path: Path) -> None:
    mount = tmp_path / "inodes"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,nr_inodes=40", "tmpfs", str(mount)], check=True)
    try:
        catalog = Catalog(mount / "data", LogConfig(), 0)
        with pytest.raises(LogWriteError):
            catalog.create_topic("wide", 20, {})  # 20 partitions need more than 40 inodes
        assert catalog.get_topic("wide") is None
        assert not [p for p in (mount / "data").iterdir() if p.name.startswith("wide-")]
        catalog.create_topic("narrow", 2, {})
        catalog.close()
        reopened = Catalog(mount / "data", LogConfig(), 0)
        assert [t.name for t in reopened.topics()] == ["narrow"]
        reopened.close()
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_failed_fsync_takes_the_partition_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plog = PartitionLog.open(tmp_path / "t-0", _config())
    plog.append(sized_batch(1000), 1)
    plog.flush()
    durable = plog.flushed_offset
    plog.append(sized_batch(1000), 2)

    def eio(fd: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(log_flush, "datasync", eio)
    with pytest.raises(LogOfflineError, match="offline after a failed flush"):
        plog.flush()
    monkeypatch.undo()  # the disk "works" again: a retried fsync would now succeed, and must not be trusted
    with pytest.raises(LogOfflineError):
        plog.flush()
    assert plog.flushed_offset == durable
    with pytest.raises(LogOfflineError):
        plog.append(sized_batch(1000), 3)
    with pytest.raises(LogOfflineError):
        plog.read(0, 1 << 20)
    plog.close()  # no clean-shutdown mark: the next open recovers from the recovery point
    again = PartitionLog.open(tmp_path / "t-0", _config())
    assert not again.recovery_report.clean_shutdown
    assert again.log_end_offset == 2  # both batches are in the file; the recovery scan validated them
    again.close()
