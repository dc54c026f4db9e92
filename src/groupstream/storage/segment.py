"""One segment: a ``.log`` file of whole v2 batches plus its sparse ``.index`` and ``.timeindex``.

Files are named by the segment's base offset as ``%020d`` like Kafka's, so directory order is offset order.
A segment keeps its state in memory (size, next offset, max timestamp, index arrays); that state is always
derived from the log file by the same rule, whether by appends or by a rebuild scan, so a rebuilt segment
is indistinguishable from one that was never closed. A clean open takes it from the index files instead
(`Segment.open_trusted`), checked cheaply against the log (`groupstream.storage.index_trust`); reads then
confirm the framing that open did not scan (`groupstream.storage.frame_check`).

Damage inside a segment that is not the last one is never cut off: it becomes a `Hole`, whose bytes stay on
disk and whose offsets raise `CorruptRangeError` when read, while the intact batches around it stay readable.
Holes are found by recovery, or later by a read that runs into bad framing a clean open did not scan
(`groupstream.storage.holes`).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from groupstream.protocol.records.batch_header import HEADER_SIZE, BatchHeader, parse_header
from groupstream.storage.config import INT32_MAX, LogConfig
from groupstream.storage.errors import CorruptRangeError, LogWriteError
from groupstream.storage.fileio import open_rw, pread_upto, pwrite_all
from groupstream.storage.frame_check import ConfirmedRuns, check_frames, whole_batches
from groupstream.storage.holes import Hole, ScanWindow, anchor_before, record_damage, resync, scan_window
from groupstream.storage.index_trust import load_indexes, time_index_problem
from groupstream.storage.offset_index import OffsetIndex
from groupstream.storage.scan import VerifiedScan
from groupstream.storage.time_index import NO_TIMESTAMP, TimeIndex

log = logging.getLogger("groupstream.storage")

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"  # aborted transactions (groupstream.storage.txn_index), only when there are some
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)

# What a scan shows each batch it confirms: (log fd, position, header); the fd lets a caller read a batch
# whose records it needs (a transaction marker).
OnBatch = Callable[[int, int, BatchHeader], None]

# (position of the batch inside the appended buffer, last offset, max timestamp, size)
BatchPlacement = tuple[int, int, int, int]


def file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


def parse_file_name(name: str) -> tuple[int, str] | None:
    """``(base offset, suffix)`` for a segment file name, None for anything else."""
    for suffix in SEGMENT_SUFFIXES:
        if name.endswith(suffix):
            stem = name[: -len(suffix)]
            if len(stem) == 20 and stem.isdigit():
                return int(stem), suffix
    return None


@dataclass(frozen=True, slots=True)
class RebuildResult:
    truncated_bytes: int
    error: str | None
    holes: tuple[Hole, ...] = ()
    trusted: bool = False  # the state came from the index files and a scan of the tail after their last entry
    index_problem: str | None = None  # why a clean open could not take the state from the index files


class Segment:
    def __init__(self, directory: Path, base_offset: int, config: LogConfig, log_fd: int) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.log_path = directory / file_name(base_offset, LOG_SUFFIX)
        self.txn_index_path = directory / file_name(base_offset, TXN_INDEX_SUFFIX)
        self.log_fd = log_fd
        self.offset_index = OffsetIndex(
            directory / file_name(base_offset, INDEX_SUFFIX), base_offset, config.segment_index_bytes
        )
        self.time_index = TimeIndex(
            directory / file_name(base_offset, TIME_INDEX_SUFFIX), base_offset, config.segment_index_bytes
        )
        self._interval = config.index_interval_bytes
        self._locate_chunk = min(max(2 * self._interval + HEADER_SIZE, 8192), 1 << 20)
        self.size = 0
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = -1
        self._bytes_since_index = 0
        self.indexes_full = False  # either index reached segment.index.bytes: time to roll
        self.sealed = False
        # When the segment.ms clock started: the first append into it, or the open that found it non-empty.
        self.rolling_base_ms: int | None = None
        # Flush bookkeeping, shared with the flushing thread under the log's lock.
        self.write_gen = 0
        self.flushed_gen = 0
        self.indexes_synced_gen = 0  # the write_gen whose index files were fsynced too (see dup_fds)
        self.deleted = False
        self._torn = False  # a failed write left bytes past ``size`` that are not cut off yet
        self.holes: list[Hole] = []  # in file order
        # Framing below this position was never confirmed: a clean open trusted it without a scan. Reads
        # confirm it as they go and remember where (``_confirmed``: disjoint ``[start, end)`` runs, sorted).
        self.unverified_end = 0
        self._confirmed = ConfirmedRuns()

    @classmethod
    def create(cls, directory: Path, base_offset: int, config: LogConfig) -> Segment:
        """A new empty segment; files left at that name by a crash are replaced. If the disk refuses (full,
        out of inodes or descriptors), whatever was created is removed again and `LogWriteError` raised."""
        try:
            fd = open_rw(directory / file_name(base_offset, LOG_SUFFIX), truncate=True)
        except OSError as exc:
            raise LogWriteError(f"cannot create segment {base_offset} in {directory}: {exc.strerror or exc}") from exc
        seg = cls(directory, base_offset, config, fd)
        try:
            for index in (seg.offset_index, seg.time_index):
                index.start_rebuild()
                index.sync_file()
        except OSError as exc:
            seg.delete_files()
            raise LogWriteError(f"cannot create segment {base_offset} in {directory}: {exc.strerror or exc}") from exc
        seg.write_gen = 1
        return seg

    @classmethod
    def open_existing(cls, directory: Path, base_offset: int, config: LogConfig) -> Segment:
        """Open the files only; the in-memory state is empty until ``rebuild``."""
        return cls(directory, base_offset, config, open_rw(directory / file_name(base_offset, LOG_SUFFIX)))

    @property
    def is_empty(self) -> bool:
        return self.size == 0

    @property
    def dirty(self) -> bool:
        return self.write_gen != self.flushed_gen

    @property
    def indexes_dirty(self) -> bool:
        return self.write_gen != self.indexes_synced_gen

    # -- building state -------------------------------------------------------------------------------

    def _observe(self, position: int, last_offset: int, max_timestamp: int, size: int) -> None:
        """Account for one batch now in the file; the single rule both appends and rebuilds follow."""
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        if self._bytes_since_index > self._interval and not self.offset_index.is_full:
            self.offset_index.append(last_offset, position)
            if not self.time_index.is_full:
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.indexes_full = self.offset_index.is_full or self.time_index.is_full
            self._bytes_since_index = 0
        self._bytes_since_index += size
        self.next_offset = last_offset + 1
        self.size = position + size

    def rebuild(
        self,
        *,
        validate_crc: bool,
        min_offset: int,
        on_batch: OnBatch | None = None,
        upper: int | None = None,
        crc_from_offset: int | None = None,
    ) -> RebuildResult:
        """Rederive all state from the log file; index files are left alone until ``finish_rebuild``.

        What damage (a torn, corrupt or out-of-order batch) means depends on where the segment sits. In the
        last segment (``upper`` None) it is what a crash leaves: the file is truncated there. In an older one
        (``upper`` = the next segment's base offset) the bytes are kept: the damage becomes a `Hole` and the
        scan resumes at the next intact batch, so nothing that validates is lost. ``crc_from_offset`` checks
        the CRCs of the batches ending at or past it only (``validate_crc`` checks all)."""
        self._reset_state()
        return self._scan_into_state(
            0,
            max(min_offset, self.base_offset),
            validate_crc=validate_crc,
            crc_from_offset=crc_from_offset,
            upper=upper,
            on_batch=on_batch,
        )

    def _reset_state(self) -> None:
        self.offset_index.start_rebuild()
        self.time_index.start_rebuild()
        self.size = 0
        self.next_offset = self.base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = -1
        self._bytes_since_index = 0
        self.indexes_full = False
        self.sealed = False
        self.holes = []
        self.unverified_end = 0
        self._confirmed = ConfirmedRuns()

    def _scan_into_state(
        self,
        position: int,
        expected: int,
        *,
        validate_crc: bool,
        crc_from_offset: int | None,
        upper: int | None,
        on_batch: OnBatch | None,
        accounted: int | None = None,
    ) -> RebuildResult:
        """Observe every confirmed batch from ``position`` (where offset ``expected`` starts) to the end of the
        file; damage is handled as `rebuild` describes. The batch at ``accounted`` is in the indexes already:
        it is only confirmed and stepped over."""
        file_size = os.fstat(self.log_fd).st_size
        limit = self.base_offset + INT32_MAX + 1  # offsets relative to the base are int32 in the indexes
        if upper is not None:
            limit = min(limit, upper)
        first_error: str | None = None
        holes: list[Hole] = []
        while True:
            scan = VerifiedScan(
                self.log_fd,
                position,
                file_size,
                expected=expected,
                upper=limit,
                validate_crc=validate_crc,
                crc_from_offset=crc_from_offset,
            )
            for pos, h in scan:
                if pos == accounted:
                    self.size, self.next_offset, self._bytes_since_index = pos + h.size, h.next_offset, h.size
                else:
                    self._observe(pos, h.last_offset, h.max_timestamp, h.size)
                if on_batch is not None:
                    on_batch(self.log_fd, pos, h)
            if scan.damage is None:
                break
            at, expected, why = scan.damage
            first_error = first_error or why
            if upper is None:
                os.ftruncate(self.log_fd, at)
                self.size = at
                self.write_gen += 1
                return RebuildResult(file_size - at, why, tuple(holes))
            hole = resync(self.log_fd, at, file_size, expected, limit, why)
            holes.append(hole)
            self.holes.append(hole)
            self.size = hole.end
            if hole.end >= file_size:
                self.next_offset = max(self.next_offset, hole.next_offset)
                break
            position, expected = hole.end, hole.next_offset
        return RebuildResult(0, first_error, tuple(holes))

    def open_trusted(self, *, upper: int | None, crc_from_offset: int) -> RebuildResult:
        """After a clean shutdown: take the state from the index files plus a header scan of the tail after
        their last entry, instead of scanning the whole file (a sealed segment costs two small file reads
        and a few batch headers, whatever its size).

        The index files are checked cheaply first (whole entries, increasing, inside the file, the last offset
        entry at a batch header holding that offset, the last time entry at a batch with that timestamp, the
        sealing entry present); if anything fails, the whole segment is scanned instead. Batches ending at or
        past ``crc_from_offset`` (the recovery point) get their CRCs checked: they were not known durable.
        Damage in the scanned tail (the batch the last entry names included) is handled as in `rebuild`,
        which then rescans the whole segment."""
        self._reset_state()
        loaded = load_indexes(self.log_fd, self.offset_index, self.time_index, self.base_offset, upper)
        problem = loaded if isinstance(loaded, str) else None
        first: RebuildResult | None = None
        if not isinstance(loaded, str):
            self.size, self.next_offset = loaded.size, loaded.next_offset
            self.max_timestamp, self.offset_of_max_timestamp = loaded.max_timestamp, loaded.offset_of_max_timestamp
            self.indexes_full = self.offset_index.is_full or self.time_index.is_full
            entry = self.offset_index.last_entry
            first = self._scan_into_state(
                self.size,
                self.next_offset,
                validate_crc=False,
                crc_from_offset=crc_from_offset,
                upper=upper,
                on_batch=None,
                accounted=None if entry is None else entry[1],
            )
            if first.error is None:
                problem = time_index_problem(
                    self.log_fd,
                    self.offset_index,
                    self.time_index,
                    max_timestamp=self.max_timestamp,
                    next_offset=self.next_offset,
                    size=self.size,
                    sealed=upper is not None,
                )
                if problem is None:
                    self.unverified_end = 0 if entry is None else entry[1]
                    return replace(first, trusted=True)
        result = self.rebuild(validate_crc=False, min_offset=self.base_offset, upper=upper, crc_from_offset=crc_from_offset)
        if first is not None and first.truncated_bytes:
            result = replace(result, truncated_bytes=first.truncated_bytes + result.truncated_bytes,
                             error=first.error)  # fmt: skip
        return replace(result, index_problem=problem)

    def finish_rebuild(self, *, seal: bool) -> list[Path]:
        """Seal if inactive, then make the index files match memory; returns the files rewritten."""
        if seal:
            self.seal()
        rewritten = [index.path for index in (self.offset_index, self.time_index) if index.sync_file()]
        if rewritten:
            self.write_gen += 1
        return rewritten

    def seal(self) -> None:
        """Mark the segment inactive; like Kafka, record its final max timestamp in the time index so the
        next open can trust the index without rescanning. A torn tail is cut off first: a sealed segment
        ends at its last whole batch."""
        self.cut_torn_tail()
        if self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp):
            self.write_gen += 1
        self.sealed = True

    # -- appending and reading ------------------------------------------------------------------------

    def append(self, data: bytes | bytearray | memoryview, placements: list[BatchPlacement], now_ms: int) -> None:
        """Write ``data`` (whole batches, offsets assigned) at the end of the log in one write.

        A write the disk refuses part-way is cut off again before the error is raised: bytes past ``size``
        would otherwise be found by the next open as a torn batch in the middle of the log. Only the log
        file matters here; index entries are written best-effort (see `IndexFile`)."""
        start = self.size
        self.cut_torn_tail()
        try:
            pwrite_all(self.log_fd, data, start)
        except OSError as exc:
            self._torn = True
            detail = f"writing {len(data)} bytes to {self.log_path.name} at {start} failed: {exc.strerror or exc}"
            try:
                self.cut_torn_tail()
            except LogWriteError as again:
                raise LogWriteError(f"{detail}; {again}") from exc
            raise LogWriteError(detail) from exc
        if self.rolling_base_ms is None:
            self.rolling_base_ms = now_ms
        observe = self._observe
        for rel, last_offset, max_ts, size in placements:
            observe(start + rel, last_offset, max_ts, size)
        self.write_gen += 1

    def cut_torn_tail(self) -> None:
        """Truncate the file back to ``size`` after a failed write; until that succeeds (truncating frees
        space, so it normally does) nothing may be appended or sealed behind the torn bytes."""
        if not self._torn:
            return
        try:
            os.ftruncate(self.log_fd, self.size)
        except OSError as exc:
            raise LogWriteError(
                f"cannot cut the torn write off {self.log_path.name} at {self.size}: {exc.strerror or exc}"
            ) from exc
        self._torn = False
        self.write_gen += 1  # the shorter length must reach the disk too

    def locate(self, offset: int) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset is at or past ``offset``: the batch containing it, which may
        start below it (a compressed batch) or, across a gap, the next one.

        The batch's extent is confirmed (see `VerifiedScan`), so a corrupt length field is never handed on.
        Damage met on the way becomes a hole first; an offset in a hole raises `CorruptRangeError`."""
        if offset >= self.next_offset:
            return None
        start, expected, exact, end = self._window(offset)
        while True:
            scan = VerifiedScan(
                self.log_fd,
                start,
                end,
                expected=expected,
                upper=self.next_offset,
                chunk=self._locate_chunk,
                confirmed_from=self.unverified_end,
            )
            for pos, h in scan:
                if h.last_offset >= offset:
                    return pos, h
            if scan.damage is None:
                return None
            at, first_offset, why = scan.damage
            if at == start and not exact:  # the offset that starts there is unknown: begin further back
                before = self.offset_index.position_before(start)
                start, expected, exact = anchor_before(self.holes, start, before, self.base_offset)
                continue
            self._add_hole(at, first_offset, why)
            start, expected, exact, end = self._window(offset)

    def _window(self, offset: int) -> ScanWindow:
        """Where a scan for ``offset`` starts and ends (see `scan_window`); raises `CorruptRangeError` when
        ``offset`` lies in a hole."""
        window = scan_window(self.holes, offset, self.offset_index.lookup(offset), self.base_offset, self.size)
        if isinstance(window, Hole):
            raise self.corrupt_range_error(window)
        return window

    def _add_hole(self, at: int, expected: int, why: str) -> Hole:
        """Record damage found after the segment was opened (a clean open does not scan below its last index
        entries): resynchronise on the next intact batch before the next hole, or merge with that hole."""
        hole = record_damage(self.holes, self.log_fd, at, expected, why, size=self.size, next_offset=self.next_offset)
        log.warning(
            "%s: damage found in %s at byte %d: %s; %s",
            self.directory.name,
            self.log_path.name,
            at,
            why,
            f"offsets {hole.first_offset}..{hole.last_offset} are unreadable (bytes {hole.start}..{hole.end} kept on "
            f"disk); the next readable offset is {hole.next_offset}"
            if hole.loses_offsets
            else f"bytes {hole.start}..{hole.end} held no offsets (kept on disk)",
        )
        return hole

    def corrupt_range_error(self, hole: Hole) -> CorruptRangeError:
        return CorruptRangeError(
            self.directory.name,
            hole.first_offset,
            hole.last_offset,
            hole.next_offset,
            f"{hole.reason}; bytes {hole.start}..{hole.end} of {self.log_path.name}",
        )

    def readable_end(self, position: int) -> int:
        """Where the intact bytes from ``position`` end: the next hole's start, else the segment's size."""
        for hole in self.holes:
            if hole.start >= position:
                return hole.start
        return self.size

    def _walk(self, position: int, expected: int, *, skip_holes: bool) -> Iterator[tuple[int, BatchHeader]]:
        while position < self.size:
            hole = next((h for h in self.holes if h.start >= position), None)
            scan = VerifiedScan(
                self.log_fd,
                position,
                self.size if hole is None else hole.start,
                expected=expected,
                upper=self.next_offset,
                confirmed_from=self.unverified_end,
            )
            yield from scan
            if scan.damage is not None:
                hole = self._add_hole(*scan.damage)
            if hole is None:
                return
            if hole.loses_offsets and not skip_holes:
                raise self.corrupt_range_error(hole)
            position, expected = hole.end, hole.next_offset

    def batches_from(self, offset: int) -> Iterator[tuple[int, BatchHeader]]:
        """Every batch from the one `locate` finds for ``offset`` to the end of the segment, framing confirmed.
        Reaching a hole that lost offsets raises `CorruptRangeError`: what it held is unknown."""
        found = self.locate(offset)
        if found is not None:
            yield from self._walk(found[0], found[1].base_offset, skip_holes=False)

    def iter_batches(self) -> Iterator[tuple[int, BatchHeader]]:
        """Every intact batch of the segment, stepping over holes (rebuilding producer state needs all it can
        read); damage met on the way becomes a hole."""
        yield from self._walk(0, self.base_offset, skip_holes=True)

    def confirmed_prefix(self, data: bytes, position: int, want: int, limit: int, first: BatchHeader) -> tuple[int, int]:
        """How many leading bytes of ``data`` (read at ``position``; its first batch is ``first``, confirmed by
        `locate`) are whole batches with confirmed framing, at most ``want``; and the offset after them.

        Framing this process wrote or scanned is confirmed already. Below ``unverified_end`` (what a clean open
        trusted without a scan) `check_frames` confirms it, one struct unpack per batch, and what it confirmed
        is remembered. Damage found this way becomes a hole; the bytes before it are returned."""
        unverified = self.unverified_end - position
        if unverified <= 0 or self._confirmed.covers(position, position + len(data)):
            return whole_batches(data, 0, first.base_offset)
        done, done_next, damage = check_frames(
            self.log_fd, data, position, want, limit, first, unverified, self.next_offset
        )
        if damage is not None:
            self._add_hole(*damage)
        if done:
            self._confirmed.add(position, position + done)
        return done, done_next

    def read(self, position: int, size: int) -> bytes:
        return pread_upto(self.log_fd, size, position)

    def whole_span(self, position: int, want: int, first: BatchHeader) -> tuple[int, int] | None:
        """How many bytes from ``position`` (where ``first`` starts, found by `locate`) are whole batches, at
        most ``want``, and the offset after them, reading only batch headers: the largest offset index entry
        within the range is a batch start, so the walk starts there and reads the headers of the few batches
        after it. None when the framing of the range is not confirmed yet (a read that copies the bytes
        confirms it; see `confirmed_prefix`), or when the range holds no whole batch."""
        end = position + want
        if self.unverified_end > position and not self._confirmed.covers(position, end):
            return None
        p = self.offset_index.position_before(end + 1)
        if p is None or p < position:
            p = position
        last: BatchHeader | None = first if p == position and first.size <= want else None
        if p != position:
            head = pread_upto(self.log_fd, HEADER_SIZE, p)
            if len(head) < HEADER_SIZE:
                return None
            h = parse_header(head)
            if p + h.size > end:  # the batch before ``p`` is the last whole one: it ends where ``p`` starts
                return (p - position, h.base_offset)
            last = h
        elif last is None:
            return None
        p += last.size
        while p + HEADER_SIZE <= end:
            head = pread_upto(self.log_fd, HEADER_SIZE, p)
            if len(head) < HEADER_SIZE:
                break
            h = parse_header(head)
            if p + h.size > end:
                break
            last = h
            p += h.size
        return (p - position, last.next_offset)

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is at or past ``offset``; returns bytes removed. An offset in a
        hole cuts at the hole's start; holes before the cut stay holes."""
        try:
            found = self.locate(offset)
            cut = None if found is None else found[0]
        except CorruptRangeError:
            cut = next(h.start for h in self.holes if h.first_offset <= offset < h.next_offset)
        if cut is None:
            return 0
        before = self.size
        keep_holes = any(h.start < cut for h in self.holes)
        os.ftruncate(self.log_fd, cut)
        self.rebuild(validate_crc=False, min_offset=self.base_offset, upper=offset if keep_holes else None)
        self.finish_rebuild(seal=False)
        self.write_gen += 1
        return before - self.size

    def largest_timestamp(self) -> int:
        """What time retention compares with; like Kafka, the file's mtime when no batch has a timestamp."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return os.fstat(self.log_fd).st_mtime_ns // 1_000_000

    # -- file lifetime --------------------------------------------------------------------------------

    def dup_fds(self, indexes: bool = True) -> list[int]:
        """Duplicates of the descriptors a flush fsyncs: the log's, and the index files' with ``indexes``."""
        fds = [os.dup(self.log_fd)]
        if not indexes:
            return fds
        for index in (self.offset_index, self.time_index):
            fd = index.dup_fd()
            if fd is not None:
                fds.append(fd)
        return fds

    def close_index_files(self) -> None:
        """Sealed, flushed indexes are only read from memory: give their fds back."""
        self.offset_index.close()
        self.time_index.close()

    def close(self) -> None:
        self.close_index_files()
        if self.log_fd >= 0:
            fd, self.log_fd = self.log_fd, -1
            os.close(fd)

    def delete_files(self) -> None:
        """Unlink the log first: a crash part-way leaves orphan indexes, which recovery removes."""
        self.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.log_path)
        self.offset_index.delete_file()
        self.time_index.delete_file()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.txn_index_path)
