"""What a flush fsyncs (issue 14): the log's bytes, which an acks=all answer waits for, on every flush; the
active segment's index files (derived from the log) only at a clean close, and a sealed segment's once, after
it is sealed; an unclean open still finds every acknowledged record."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from storagekit import read_all, sized_batch

import groupstream.storage.log_flush as log_flush
from groupstream.storage import LogConfig, PartitionLog


@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The names of the files each real fsync of a flush covered, in order."""
    names: list[str] = []
    real = log_flush.datasync

    def counted(fd: int) -> None:
        names.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        real(fd)

    monkeypatch.setattr(log_flush, "datasync", counted)
    yield names


def test_a_flush_syncs_the_active_segments_log_alone_and_a_sealed_segments_indexes_once(
    tmp_path: Path, synced: list[str]
) -> None:
    config = LogConfig(segment_bytes=1_000_000, index_interval_bytes=100, retention_ms=-1)
    log = PartitionLog.open(tmp_path / "t-0", config, 0)
    for i in range(3):
        log.append(sized_batch(500, fill=0x61 + i), 0)
        synced.clear()
        assert log.flush() == i + 1
        assert synced == ["00000000000000000000.log"]  # the offsets are durable: one fsync, not three
    log.roll(0)
    log.append(sized_batch(500, fill=0x64), 0)
    synced.clear()
    assert log.flush() == 4
    first = "00000000000000000000"
    assert sorted(synced) == sorted([f"{first}.log", f"{first}.index", f"{first}.timeindex",
                                     "00000000000000000003.log"])  # fmt: skip
    log.append(sized_batch(500, fill=0x65), 0)
    synced.clear()
    log.flush()
    assert synced == ["00000000000000000003.log"]  # the sealed segment's indexes are not synced again
    synced.clear()
    log.close()
    assert sorted(synced) == [f"00000000000000000003{suffix}" for suffix in (".index", ".log", ".timeindex")]
    reopened = PartitionLog.open(tmp_path / "t-0", config, 0)
    assert [offset for offset, _, _ in read_all(reopened)] == [0, 1, 2, 3, 4]
    reopened.close()


def test_an_unclean_open_finds_every_flushed_record_whatever_the_indexes_say(tmp_path: Path) -> None:
    """A crash after flushes that left the active segment's indexes to the page cache: truncated or emptied
    index files (what a power loss could leave) are rebuilt from the log, which holds every flushed record."""
    config = LogConfig(segment_bytes=1_000_000, index_interval_bytes=100, retention_ms=-1)
    log = PartitionLog.open(tmp_path / "t-0", config, 0)
    for i in range(20):
        log.append(sized_batch(300, fill=0x61 + i % 20), 0)
    assert log.flush() == 20
    for suffix in (".index", ".timeindex"):  # what the disk may hold of files never fsynced
        os.truncate(tmp_path / "t-0" / f"00000000000000000000{suffix}", 0)
    # no close: the crash; the next open finds no clean-shutdown mark
    reopened = PartitionLog.open(tmp_path / "t-0", config, 0)
    assert [offset for offset, _, _ in read_all(reopened)] == list(range(20))
    assert reopened.offset_for_timestamp(0) is not None
    reopened.close()
    log.delete()
