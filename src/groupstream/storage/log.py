"""``PartitionLog``: the segmented log of one topic partition.

Threading contract: one owner thread appends, reads, rolls, retains, truncates and closes; ``flush`` may
run on another thread at the same time. The log's state (`log_state.LogState`) has two locks: ``lock`` guards
only the segment list, the end offset and the flush bookkeeping, and is held for microseconds (never across
I/O that the owner would wait on). A flush ``dup``s the fds it needs under that lock and fsyncs the duplicates
without it, so a segment deleted by retention meanwhile is harmless. ``flush_lock`` serialises flushes with the
rare operations that rewrite files under them (truncate, close, delete); appends never take it.

This module appends, rolls, reads, opens and closes; the flush is `log_flush.LogFlusher`'s, and retention,
DeleteRecords, the compaction swap and truncation are `log_maintenance.LogMaintenance`'s, both working on the
same `LogState`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import time
from bisect import bisect_right
from pathlib import Path

from groupstream.protocol.errors import PeerProtocolError
from groupstream.protocol.records.batch import build_control_batch
from groupstream.protocol.records.batch_header import (
    CONTROL_BIT,
    TRANSACTIONAL_BIT,
    iter_batches,
    patch_base_offset,
)
from groupstream.protocol.records.record import ControlType
from groupstream.storage.checkpoint import (
    LOG_START_OFFSET_FILE,
    RECOVERY_POINT_FILE,
    has_clean_marker,
    read_offset,
    remove_clean_marker,
    write_clean_marker,
    write_offset,
)
from groupstream.storage.config import INT32_MAX, LogConfig, TimestampType
from groupstream.storage.errors import (
    CorruptBatchError,
    CorruptRangeError,
    LogOfflineError,
    LogWriteError,
    OffsetOutOfRange,
    RecordTooLargeError,
    StaleMarkerError,
)
from groupstream.storage.file_range import FileRange
from groupstream.storage.fileio import fsync_directory
from groupstream.storage.holes import Hole
from groupstream.storage.log_flush import LogFlusher
from groupstream.storage.log_maintenance import LogMaintenance
from groupstream.storage.log_results import AppendInfo, ReadResult, SendRead, stamp_log_append_time
from groupstream.storage.log_state import LogState
from groupstream.storage.log_transactions import TxnReplay, note_marker, restore_transaction_state
from groupstream.storage.producer_state import (
    Accept,
    Duplicate,
    InvalidEpoch,
    OutOfOrder,
    ProducerStateManager,
    StaleCoordinator,
    UnknownProducer,
    read_snapshot,
    remove_snapshot,
    write_snapshot,
)
from groupstream.storage.recovery import RecoveryReport, load_segments
from groupstream.storage.segment import BatchPlacement, Segment
from groupstream.storage.swap import finish_interrupted_swaps
from groupstream.storage.timestamp_lookup import first_at_or_after, largest_timestamp
from groupstream.storage.txn_index import AbortedTxn, AbortedTxnIndex

log = logging.getLogger("groupstream.storage")

NO_TIMESTAMP = -1
TXN_DATA_MASK = TRANSACTIONAL_BIT | CONTROL_BIT


class PartitionLog:
    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: list[Segment],
        log_start: int,
        flushed_offset: int,
        recovery_point: int,
        report: RecoveryReport,
        producer_state: ProducerStateManager,
        aborted: AbortedTxnIndex | None = None,
    ) -> None:
        self.directory = directory
        self.recovery_report = report
        self.producer_state = producer_state
        self._ongoing = producer_state.ongoing_transactions  # the same mapping for the log's lifetime
        self.aborted_index = aborted if aborted is not None else AbortedTxnIndex()
        self._state = state = LogState(
            directory=directory,
            config=config,
            segments=segments,
            log_start=log_start,
            log_end=segments[-1].next_offset,
            flushed_offset=flushed_offset,
            checkpointed_recovery_point=recovery_point,
            producer_state=producer_state,
            aborted_index=self.aborted_index,
            dir_gen=1 if report.changed_directory else 0,
        )
        self._flusher = LogFlusher(state)
        self._maintenance = LogMaintenance(state)

    @classmethod
    def open(cls, directory: str | os.PathLike[str], config: LogConfig, now_ms: int | None = None) -> PartitionLog:
        """Open (creating if needed) and recover the partition in ``directory``. ``now_ms`` starts the
        ``segment.ms`` clock of a non-empty active segment (None: at its next append)."""
        path = Path(directory)
        if not path.is_dir():
            path.mkdir(parents=True)
            fsync_directory(path.parent)
        began = time.monotonic()
        swapped = finish_interrupted_swaps(path)
        checkpointed = read_offset(path, RECOVERY_POINT_FILE)
        # A clean close writes the recovery point (the log end) before the marker: without it, trust nothing.
        clean = has_clean_marker(path) and checkpointed is not None
        recovery_point = checkpointed or 0
        saved_start = read_offset(path, LOG_START_OFFSET_FILE) or 0
        snapshot = read_snapshot(path) if clean else "an unclean shutdown leaves no snapshot"
        state = ProducerStateManager()
        aborted = AbortedTxnIndex()
        segments, report = load_segments(
            path,
            config,
            clean=clean,
            recovery_point=recovery_point,
            empty_base=saved_start,
            on_batch=None if clean else TxnReplay(state, aborted),
        )
        report.removed_files.extend(swapped)
        log_end = segments[-1].next_offset
        log_start = min(max(saved_start, segments[0].base_offset), log_end)
        state, aborted, txn_files_written = restore_transaction_state(
            segments, snapshot if clean else None, log_start, report, state, aborted
        )
        flushed = log_end if clean else min(recovery_point, log_end)
        remove_snapshot(path)  # made durable with the marker's removal, which syncs the directory
        remove_clean_marker(path)
        if not segments[-1].is_empty and now_ms is not None:
            segments[-1].rolling_base_ms = now_ms
        opened = cls(path, config, segments, log_start, flushed, min(recovery_point, log_end), report, state, aborted)
        opened._state.txn_files_dirty |= txn_files_written
        opened._log_recovery(time.monotonic() - began)
        return opened

    def _write_producer_snapshot(self) -> None:
        """At a clean close, so the next open need not scan every segment for the producer state. Only an
        optimisation: a disk that refuses it costs that scan, never the clean-shutdown marker."""
        st = self._state
        try:
            write_snapshot(self.directory, self.producer_state, st.log_end, st.sync_txn_files())
        except OSError as exc:
            log.warning("%s: cannot write the producer-state snapshot (%s); the next open scans the log for it",
                        self.name, exc.strerror or exc)  # fmt: skip

    def _log_recovery(self, seconds: float) -> None:
        """One WARNING line per repair (truncation, unreadable range, rebuilt index), naming the partition."""
        report = self.recovery_report
        for event in report.events:
            log.warning("%s: %s", self.name, event)
        log.debug(
            "%s: opened in %.1f ms after a%s shutdown, %d segments (%d from their indexes, %d CRC-checked), "
            "offsets %d..%d, producer state %s",
            self.name,
            seconds * 1000,
            " clean" if report.clean_shutdown else "n unclean",
            len(self._state.segments),
            len(report.trusted_segments),
            len(report.validated_segments),
            self._state.log_start,
            self._state.log_end,
            report.producer_state,
        )

    # -- state ------------------------------------------------------------------------------------------

    @property
    def config(self) -> LogConfig:
        """The topic's configuration; replaced when it changes, read afresh by each operation."""
        return self._state.config

    @config.setter
    def config(self, config: LogConfig) -> None:
        self._state.config = config

    @property
    def name(self) -> str:
        """The directory name, ``<topic>-<partition>``."""
        return self.directory.name

    @property
    def topic(self) -> str:
        return self.directory.name.rpartition("-")[0]

    @property
    def partition(self) -> int:
        tail = self.directory.name.rpartition("-")[2]
        return int(tail) if tail.isdigit() else -1

    @property
    def log_start_offset(self) -> int:
        return self._state.log_start

    @property
    def log_end_offset(self) -> int:
        return self._state.log_end

    @property
    def high_watermark(self) -> int:
        """On a single node every appended batch is committed: the high watermark is the log end."""
        return self._state.log_end

    @property
    def last_stable_offset(self) -> int:
        """The LSO: no transaction is undecided below it (the first offset of the oldest open transaction,
        or the high watermark when none is open). read_committed fetches stop here."""
        if not self._ongoing:  # the fetch fast path: no transaction open
            return self._state.log_end
        first = self.producer_state.first_unstable_offset()
        hw = self._state.log_end
        if first is None or first > hw:
            return hw
        return max(first, self._state.log_start)  # as Kafka: never below the log start (DeleteRecords may pass it)

    def aborted_transactions(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """The aborted transactions a read_committed fetch of ``[fetch_offset, upper_bound_offset)`` must
        name (Kafka's collectAbortedTxns)."""
        return self.aborted_index.collect(fetch_offset, upper_bound_offset)

    @property
    def flushed_offset(self) -> int:
        """Every offset below this is on disk (fsynced); ``acks=all`` under ``flush.policy=always`` waits
        for it to pass the batch."""
        return self._state.flushed_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._state.segments)

    @property
    def closed(self) -> bool:
        return self._state.closed

    def segment_base_offsets(self) -> list[int]:
        return list(self._state.bases)

    def unreadable_ranges(self) -> list[tuple[int, int, int]]:
        """``(first, last, next readable)`` offsets of every damaged range known so far (recovery finds some;
        reads of segments a clean open trusted may find more)."""
        holes: list[Hole] = [h for seg in self._state.segments for h in seg.holes if h.loses_offsets]
        return [(h.first_offset, h.last_offset, h.next_offset) for h in holes]

    @property
    def segments(self) -> tuple[Segment, ...]:
        """The segments in offset order, the active one last (owner thread: the cleaner plans from it)."""
        return tuple(self._state.segments)

    @property
    def truncation_generation(self) -> int:
        """Changes whenever ``truncate_to`` removes data, so work planned before it can be abandoned."""
        return self._state.truncation_gen

    @property
    def offline(self) -> str | None:
        """Why the partition is offline (a failed fsync), or None while it serves."""
        return self._state.offline

    # -- append -----------------------------------------------------------------------------------------

    def append(self, batches: bytearray, now_ms: int) -> AppendInfo:
        """Append already-validated v2 batches: offsets are patched into ``batches`` in place and the
        bytes written to the active segment in one write. The caller's buffer is what was stored."""
        st = self._state
        st.check_open()
        config = st.config
        log_append = config.message_timestamp_type is TimestampType.LOG_APPEND_TIME
        max_message = config.max_message_bytes
        base_offset = next_offset = st.log_end
        placements: list[BatchPlacement] = []
        txn_starts: list[tuple[int, int]] = []
        try:
            for pos, h in iter_batches(batches, validate_crc=False):
                size = h.size
                if size > max_message:
                    raise RecordTooLargeError(
                        f"batch of {size} bytes exceeds max.message.bytes={max_message}"
                    )
                patch_base_offset(batches, pos, next_offset)
                max_ts = h.max_timestamp
                if log_append:
                    stamp_log_append_time(batches, pos, size, h.attributes, now_ms)
                    max_ts = now_ms
                last = next_offset + h.last_offset_delta
                placements.append((pos, last, max_ts, size))
                if h.attributes & TXN_DATA_MASK == TRANSACTIONAL_BIT:
                    txn_starts.append((h.producer_id, next_offset))
                next_offset = last + 1
        except PeerProtocolError as exc:
            raise CorruptBatchError(str(exc)) from exc
        if not placements:
            raise CorruptBatchError("append needs at least one batch")
        total = len(batches)
        if total > config.segment_bytes:
            raise RecordTooLargeError(f"append of {total} bytes exceeds segment.bytes={config.segment_bytes}")
        last_offset = next_offset - 1
        if last_offset - base_offset > INT32_MAX:
            raise RecordTooLargeError("append spans more offsets than one segment can index")
        active = st.segments[-1]
        if self._should_roll(active, total, last_offset, now_ms):
            active = self._roll(now_ms)
        active.append(batches, placements, now_ms)
        with st.lock:
            st.log_end = next_offset
        for producer_id, first in txn_starts:  # a transactional batch in the log opens its transaction
            self.producer_state.update_txn(producer_id, first)
        return AppendInfo(base_offset, last_offset, now_ms if log_append else NO_TIMESTAMP, st.log_start, total)
    def append_checked(
        self, batches: bytearray, now_ms: int
    ) -> AppendInfo | Duplicate | OutOfOrder | InvalidEpoch | UnknownProducer:
        """The broker's produce path in one call: producer-state check, append, producer-state update.
        A rejection (duplicate, out of order, fenced, unknown) is returned and nothing is written."""
        try:
            verdict = self.producer_state.check_batches(batches)
        except PeerProtocolError as exc:
            raise CorruptBatchError(str(exc)) from exc
        if not isinstance(verdict, Accept):
            return verdict
        info = self.append(batches, now_ms)
        self.producer_state.update_from_batches(batches)
        return info

    def append_marker(
        self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, now_ms: int
    ) -> AppendInfo:
        """Write a COMMIT (``commit``) or ABORT marker for the producer's transaction, as the transaction
        coordinator does at EndTxn: a control batch (transactional + control, base sequence -1) of one
        record, key version 0 + type (0 abort, 1 commit), value version 0 + ``coordinator_epoch``. It ends
        the producer's open transaction (if any; a marker without one is written all the same, as Kafka
        does); an aborted one is indexed. A marker of an older producer epoch than the partition has seen,
        or from an older coordinator epoch than the producer's last marker, raises `StaleMarkerError` and
        writes nothing; a newer producer epoch fences the older one."""
        self._state.check_open()
        state = self.producer_state
        verdict = state.check_marker(producer_id, producer_epoch, coordinator_epoch)
        if isinstance(verdict, InvalidEpoch):
            raise StaleMarkerError(f"{self.name}: marker of producer {producer_id} at epoch {producer_epoch} is "
                                   f"older than its epoch {verdict.current_epoch}", fenced_by_coordinator=False)  # fmt: skip
        if isinstance(verdict, StaleCoordinator):
            raise StaleMarkerError(f"{self.name}: marker of producer {producer_id} from coordinator epoch "
                                   f"{coordinator_epoch} is older than {verdict.current_coordinator_epoch}",
                                   fenced_by_coordinator=True)  # fmt: skip
        batch = bytearray(build_control_batch(
            ControlType.COMMIT if commit else ControlType.ABORT,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch,
            timestamp=now_ms,
        ))  # fmt: skip
        info = self.append(batch, now_ms)
        stamp = now_ms if info.log_append_time == NO_TIMESTAMP else info.log_append_time
        entry = note_marker(state, self.aborted_index, producer_id, producer_epoch, coordinator_epoch, commit,
                            info.base_offset, stamp)  # fmt: skip
        if entry is not None:
            self._state.append_aborted(self._state.segments[-1], entry)
        return info

    def _should_roll(self, active: Segment, size: int, last_offset: int, now_ms: int) -> bool:
        if active.size == 0:
            return False
        config = self._state.config
        rolling_base = active.rolling_base_ms
        return (
            active.size + size > config.segment_bytes
            or active.indexes_full
            or (rolling_base is not None and now_ms - rolling_base > config.segment_ms)
            or last_offset - active.base_offset > INT32_MAX
        )

    def _roll(self, now_ms: int) -> Segment:
        """Seal the active segment and start a new one at the log end. Nothing is fsynced here: the
        sealed segment stays dirty until the next ``flush``. The new files are created before anything
        changes, so a disk that refuses them leaves the active segment as it was."""
        st = self._state
        new = Segment.create(self.directory, st.log_end, st.config)
        try:
            st.segments[-1].seal()
        except LogWriteError:
            new.delete_files()
            raise
        st.insert_segment(len(st.segments), new)
        return new

    def roll(self, now_ms: int) -> None:
        """Force a new segment (if the active one holds anything)."""
        self._state.check_open()
        if not self._state.segments[-1].is_empty:
            self._roll(now_ms)

    # -- read -------------------------------------------------------------------------------------------

    def read(
        self, fetch_offset: int, max_bytes: int, min_one_batch: bool = True, max_offset: int | None = None
    ) -> ReadResult:
        """Whole batches from one segment, starting with the batch that contains ``fetch_offset``.

        Up to ``max_bytes``, but at least one whole batch when ``min_one_batch`` (so a consumer can always
        progress). ``max_offset`` is exclusive: only batches ending below it are returned (the broker
        passes the high watermark or last stable offset). Reading at the log end returns nothing.

        Only batches whose framing is confirmed are returned (see `Segment.confirmed_prefix`): a read stops
        before damage, and a read at an offset in a damaged range raises `CorruptRangeError` naming the
        range and the next readable offset, never skipping it silently.
        """
        records, next_offset = self._read(fetch_offset, max_bytes, min_one_batch, max_offset, 0)
        assert not isinstance(records, FileRange)
        return ReadResult(records, next_offset, self._state.log_end, self._state.log_start)

    def read_for_send(
        self, fetch_offset: int, max_bytes: int, min_one_batch: bool, max_offset: int | None, zero_copy_from: int
    ) -> SendRead:
        """`read` for a Fetch answered on a plain socket: when the batches span at least ``zero_copy_from``
        bytes and their framing is confirmed, the records are a `FileRange` of the segment, found by reading
        batch headers only (see `Segment.whole_span`), for the connection to send with sendfile; otherwise
        the bytes, as `read` returns them."""
        records, next_offset = self._read(fetch_offset, max_bytes, min_one_batch, max_offset, zero_copy_from)
        return SendRead(records, next_offset)

    def _read(
        self, fetch_offset: int, max_bytes: int, min_one_batch: bool, max_offset: int | None, zero_copy_from: int
    ) -> tuple[bytes | FileRange, int]:
        """(records, offset after them) for `read`; a `FileRange` only when ``zero_copy_from`` > 0."""
        st = self._state
        st.check_open()
        start, end = st.log_start, st.log_end
        if fetch_offset < start or fetch_offset > end:
            raise OffsetOutOfRange(fetch_offset, start, end)
        upper = end if max_offset is None else min(max_offset, end)
        if fetch_offset >= upper:
            return b"", fetch_offset
        segments = st.segments
        i = max(bisect_right(st.bases, fetch_offset) - 1, 0)
        found = None
        while i < len(segments):
            seg = segments[i]
            found = seg.locate(fetch_offset)
            if found is not None:
                break
            i += 1
        if found is None:
            return b"", fetch_offset
        pos, first = found
        if first.last_offset >= upper:
            return b"", fetch_offset
        limit = seg.readable_end(pos)
        if upper < seg.next_offset:
            with contextlib.suppress(CorruptRangeError):  # ``upper`` in a hole: the hole's start is the limit
                cap = seg.locate(upper)
                if cap is not None:
                    limit = min(limit, cap[0])
        if first.size > max_bytes:
            if not min_one_batch:
                return b"", fetch_offset
            if (0 < zero_copy_from <= first.size and FileRange.available()
                    and seg.whole_span(pos, first.size, first) is not None):  # fmt: skip
                with contextlib.suppress(OSError):  # no descriptor to spare: copy
                    return FileRange(seg.log_fd, pos, first.size), first.next_offset
            return seg.read(pos, first.size), first.next_offset
        want = min(max_bytes, limit - pos)
        if 0 < zero_copy_from <= want and FileRange.available():
            span = seg.whole_span(pos, want, first)
            if span is not None and span[0] >= zero_copy_from:
                with contextlib.suppress(OSError):  # no descriptor to spare: copy
                    return FileRange(seg.log_fd, pos, span[0]), span[1]
        data = seg.read(pos, want)
        n, next_offset = seg.confirmed_prefix(data, pos, want, limit, first)
        return (data if n == len(data) else data[:n]), next_offset

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record at or above the log start whose timestamp is at least
        ``timestamp``, as Kafka answers ListOffsets (see `timestamp_lookup.first_at_or_after`)."""
        self._state.check_open()
        return first_at_or_after(self._state.segments, self._state.log_start, timestamp)

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """ListOffsets MAX_TIMESTAMP (see `timestamp_lookup.largest_timestamp`)."""
        self._state.check_open()
        return largest_timestamp(self._state.segments, self._state.log_start)

    # -- retention, DeleteRecords, compaction, truncation (see ``log_maintenance``) ------------------------

    def enforce_retention(self, now_ms: int) -> list[int]:
        """Delete whole old segments (never the active one) by ``retention.ms`` (a segment's largest
        timestamp) and ``retention.bytes``, and those wholly below the log start; returns their base
        offsets. The log start offset moves to the first remaining segment."""
        return self._maintenance.enforce_retention(now_ms)

    def delete_records(self, before_offset: int) -> int:
        """DeleteRecords: move the log start to ``before_offset`` (persisted before returning); bytes go
        only once a whole segment is below it. Returns the new log start offset (the low watermark)."""
        return self._maintenance.delete_records(before_offset)

    def holds(self, segments: list[Segment]) -> bool:
        """Whether ``segments`` are still consecutive sealed segments of this log."""
        return self._maintenance.holds(segments)

    def replace_segments(self, old: list[Segment], cleaned: Path) -> Segment:
        """Swap the fsynced rewrite ``cleaned`` in for the consecutive sealed segments ``old``, crash-safely
        (see `LogMaintenance.replace_segments`)."""
        return self._maintenance.replace_segments(old, cleaned)

    def truncate_to(self, offset: int) -> None:
        """Remove every offset at or after ``offset`` (a batch containing it goes whole, so the log end may
        land below ``offset``). Producer state is rebuilt from what remains."""
        self._maintenance.truncate_to(offset)

    # -- flush (see ``log_flush``) and lifetime ----------------------------------------------------------

    def flush(self) -> int:
        """fsync every dirty segment file and index (and the directory, after creations or deletions);
        returns the new ``flushed_offset``. Safe to call from another thread while the owner appends."""
        return self._flusher.flush()

    def close(self) -> None:
        """Flush, checkpoint and mark the shutdown clean, so the next open skips CRC validation. When the
        disk refuses any of it (or the partition is offline) the log is closed without the clean marker:
        the next open then recovers from the last recovery point that was written."""
        st = self._state
        with st.flush_lock:
            if st.closed:
                return
            try:
                if st.offline is not None:
                    raise LogOfflineError(st.offline)
                st.segments[-1].cut_torn_tail()
                self._flusher.flush_holding_flush_lock()
                st.write_recovery_point(st.log_end)
                write_offset(self.directory, LOG_START_OFFSET_FILE, st.log_start)
                self._write_producer_snapshot()
                write_clean_marker(self.directory)
            except (OSError, LogWriteError) as exc:
                log.warning("%s closed without a clean-shutdown mark (%s): the next start recovers it", self.name,
                            exc)
            finally:
                with st.lock:
                    st.closed = True
                for seg in st.segments:
                    seg.close()

    def delete(self) -> None:
        """Close without flushing and remove the partition directory."""
        st = self._state
        with st.flush_lock:
            with st.lock:
                st.closed = True
            for seg in st.segments:
                seg.close()
            shutil.rmtree(self.directory, ignore_errors=True)
