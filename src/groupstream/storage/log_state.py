"""`LogState`: what a partition log (``log.PartitionLog``) shares with its helpers, the flusher
(``log_flush``) and the segment-list maintenance (``log_maintenance``): the segment list and its offsets, the
flush bookkeeping, the two locks that guard them, and the ``.txnindex`` files written since the open.

One object rather than each helper reaching into the log's privates: the threading contract (see ``log``)
is about these fields, and every change to the segment list goes through `remove_segments` /
`insert_segment`, which take ``lock`` and count the directory change a flush must make durable.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from groupstream.storage.checkpoint import RECOVERY_POINT_FILE, write_offset
from groupstream.storage.config import LogConfig
from groupstream.storage.errors import LogClosedError, LogOfflineError
from groupstream.storage.log_transactions import segment_end
from groupstream.storage.producer_state import ProducerStateManager
from groupstream.storage.segment import Segment
from groupstream.storage.txn_index import AbortedTxn, AbortedTxnIndex, append_entry, write_entries

__all__ = ["LogState"]

log = logging.getLogger("groupstream.storage")

_UNSYNCABLE = -1  # in ``txn_files_dirty``: a .txnindex could not be written; the next open rebuilds them all


@dataclass(eq=False, slots=True)
class LogState:
    """The state of one partition log. ``lock`` guards the segment list, ``log_end`` and the flush
    bookkeeping (held for microseconds, never across I/O the owner thread waits on); ``flush_lock``
    serialises flushes with the operations that rewrite files under them (truncate, close, delete)."""

    directory: Path
    config: LogConfig  # replaced when the topic's configuration changes; read afresh by each operation
    segments: list[Segment]
    log_start: int
    log_end: int
    flushed_offset: int  # every offset below it is fsynced
    checkpointed_recovery_point: int
    producer_state: ProducerStateManager
    aborted_index: AbortedTxnIndex
    bases: list[int] = field(default_factory=list)  # the segments' base offsets, for bisect
    lock: threading.Lock = field(default_factory=threading.Lock)
    flush_lock: threading.Lock = field(default_factory=threading.Lock)
    dir_gen: int = 0  # counts creations and deletions of files in the directory
    dir_flushed_gen: int = 0  # the ``dir_gen`` the last directory fsync covered
    truncation_gen: int = 0  # counts truncations, so a flush planned before one does not claim its offsets
    closed: bool = False
    offline: str | None = None  # why the partition is offline (a failed fsync)
    txn_files_dirty: set[int] = field(default_factory=set)  # base offsets of .txnindex files written

    def __post_init__(self) -> None:
        self.bases = [s.base_offset for s in self.segments]

    @property
    def name(self) -> str:
        """The directory name, ``<topic>-<partition>``."""
        return self.directory.name

    def check_open(self) -> None:
        if self.closed:
            raise LogClosedError(f"partition log {self.directory} is closed")
        if self.offline is not None:
            raise LogOfflineError(self.offline)

    # -- the segment list ---------------------------------------------------------------------------------

    def remove_segments(self, start: int, stop: int | None = None, *, truncation: bool = False) -> list[Segment]:
        """Take ``segments[start:stop]`` out of the list (marked deleted, so a flush in progress skips them)
        and return them; their files are the caller's to delete. ``truncation``: offsets are going away, so a
        flush planned before this must not claim them."""
        with self.lock:
            removed = self.segments[start:stop]
            del self.segments[start:stop]
            del self.bases[start:stop]
            for seg in removed:
                seg.deleted = True
            self.dir_gen += 1
            if truncation:
                self.truncation_gen += 1
        return removed

    def insert_segment(self, i: int, seg: Segment) -> None:
        """Put ``seg`` at position ``i`` of the list (``len(segments)``: the new active segment)."""
        with self.lock:
            self.segments.insert(i, seg)
            self.bases.insert(i, seg.base_offset)
            self.dir_gen += 1

    def write_recovery_point(self, offset: int) -> None:
        write_offset(self.directory, RECOVERY_POINT_FILE, offset)
        self.checkpointed_recovery_point = offset

    # -- the .txnindex files ------------------------------------------------------------------------------

    def append_aborted(self, seg: Segment, entry: AbortedTxn) -> None:
        """Add an aborted transaction to ``seg``'s .txnindex."""
        self._write_txn_file(seg, "append to", lambda: append_entry(seg.txn_index_path, entry))

    def rewrite_txn_file(self, i: int) -> None:
        """Rewrite segment ``i``'s .txnindex from the aborted-transaction index (after a truncation or a
        compaction swap changed what the segment holds)."""
        seg = self.segments[i]
        entries = self.aborted_index.in_range(seg.base_offset, segment_end(self.segments, i))
        self._write_txn_file(seg, "rewrite", lambda: write_entries(seg.txn_index_path, entries))

    def _write_txn_file(self, seg: Segment, what: str, write: Callable[[], None]) -> None:
        """Run ``write`` on ``seg``'s .txnindex and note the file for the fsync at a clean close. The log holds
        the markers, so a disk that refuses costs only a rebuild of the files at the next open."""
        try:
            write()
            self.txn_files_dirty.add(seg.base_offset)
        except OSError as exc:
            log.warning("%s: cannot %s %s (%s); the next start rebuilds it", self.name, what,
                        seg.txn_index_path.name, exc.strerror or exc)  # fmt: skip
            self.txn_files_dirty.add(_UNSYNCABLE)

    def sync_txn_files(self) -> int:
        """At a clean close: fsync the .txnindex files written since the open; returns the entry count the
        snapshot records (-1, so the next open rebuilds them, when one could not be written or synced)."""
        if _UNSYNCABLE in self.txn_files_dirty:
            return -1
        for seg in self.segments:
            if seg.base_offset in self.txn_files_dirty and seg.txn_index_path.exists():
                try:
                    fd = os.open(seg.txn_index_path, os.O_RDONLY)
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)
                except OSError:
                    return -1
        return len(self.aborted_index)
