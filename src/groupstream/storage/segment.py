"""One segment: a ``.log`` file of whole v2 batches plus its sparse ``.index`` and ``.timeindex``.

Files are named by the segment's base offset as ``%020d`` like Kafka's, so directory order is offset order.
A segment keeps its state in memory (size, next offset, max timestamp, index arrays); that state is always
derived from the log file by the same rule, whether by appends or by a rebuild scan, so a rebuilt segment
is indistinguishable from one that was never closed.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from groupstream.protocol.records.batch_header import HEADER_SIZE, BatchHeader
from groupstream.storage.config import INT32_MAX, LogConfig
from groupstream.storage.errors import LogWriteError
from groupstream.storage.fileio import open_rw, pread_upto, pwrite_all
from groupstream.storage.offset_index import OffsetIndex
from groupstream.storage.scan import BatchScan
from groupstream.storage.time_index import NO_TIMESTAMP, TimeIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)

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


class Segment:
    def __init__(self, directory: Path, base_offset: int, config: LogConfig, log_fd: int) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.log_path = directory / file_name(base_offset, LOG_SUFFIX)
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
        self.deleted = False
        self._torn = False  # a failed write left bytes past ``size`` that are not cut off yet

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
        on_batch: Callable[[BatchHeader], None] | None = None,
    ) -> RebuildResult:
        """Rederive all state from the log file, truncating it at the first batch that is torn, corrupt or
        out of offset order; index files are left alone until ``finish_rebuild``."""
        self.offset_index.start_rebuild()
        self.time_index.start_rebuild()
        self.size = 0
        self.next_offset = self.base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = -1
        self._bytes_since_index = 0
        self.indexes_full = False
        self.sealed = False
        file_size = os.fstat(self.log_fd).st_size
        expected = max(min_offset, self.base_offset)
        scan = BatchScan(self.log_fd, 0, file_size, validate_crc=validate_crc)
        error: str | None = None
        for pos, h in scan:
            if h.base_offset < expected:
                error = f"batch at {pos} has base offset {h.base_offset}, expected at least {expected}"
                break
            if h.last_offset - self.base_offset > INT32_MAX:
                error = f"batch at {pos} ends at offset {h.last_offset}, beyond this segment's int32 range"
                break
            self._observe(pos, h.last_offset, h.max_timestamp, h.size)
            if on_batch is not None:
                on_batch(h)
            expected = h.next_offset
        else:
            error = scan.error
        truncated = file_size - self.size
        if truncated:
            os.ftruncate(self.log_fd, self.size)
            self.write_gen += 1
        return RebuildResult(truncated, error)

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
        start below it (a compressed batch) or, across a gap, the next one."""
        if offset >= self.next_offset:
            return None
        start = self.offset_index.lookup(offset)
        for pos, h in BatchScan(self.log_fd, start, self.size, validate_crc=False, chunk=self._locate_chunk):
            if h.last_offset >= offset:
                return pos, h
        return None

    def read(self, position: int, size: int) -> bytes:
        return pread_upto(self.log_fd, size, position)

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is at or past ``offset``; returns bytes removed."""
        found = self.locate(offset)
        if found is None:
            return 0
        before = self.size
        os.ftruncate(self.log_fd, found[0])
        self.rebuild(validate_crc=False, min_offset=self.base_offset)
        self.finish_rebuild(seal=False)
        self.write_gen += 1
        return before - self.size

    def largest_timestamp(self) -> int:
        """What time retention compares with; like Kafka, the file's mtime when no batch has a timestamp."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return os.fstat(self.log_fd).st_mtime_ns // 1_000_000

    # -- file lifetime --------------------------------------------------------------------------------

    def dup_fds(self) -> list[int]:
        fds = [os.dup(self.log_fd)]
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
