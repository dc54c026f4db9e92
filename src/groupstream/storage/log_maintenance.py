"""`LogMaintenance`: the changes to a partition log's segment list other than appending and rolling: retention
(whole old segments by time and size), DeleteRecords (the log start moves, bytes go once a whole segment is
below it), the compaction swap (a cleaned rewrite in place of sealed segments) and truncation (a suffix of the
log goes, and the transaction state is rebuilt from what remains).

All run on the log's owner thread, on the `LogState` it shares with the flusher: segments leave the list under
its ``lock`` (through `LogState.remove_segments`) before their files are deleted, so a flush in progress
skips them; truncation also holds ``flush_lock``, because it rewrites a file a flush may be syncing.
"""

from __future__ import annotations

from bisect import bisect_right
from pathlib import Path

from groupstream.storage.checkpoint import LOG_START_OFFSET_FILE, write_offset
from groupstream.storage.errors import LogWriteError, OffsetOutOfRange
from groupstream.storage.log_state import LogState
from groupstream.storage.log_transactions import TxnReplay
from groupstream.storage.segment import Segment
from groupstream.storage.swap import commit_cleaned, install_swap

__all__ = ["LogMaintenance"]


class LogMaintenance:
    """Retention, DeleteRecords, compaction swaps and truncation of one partition log's `LogState`."""

    def __init__(self, state: LogState) -> None:
        self._state = state

    # -- retention and DeleteRecords ---------------------------------------------------------------------

    def enforce_retention(self, now_ms: int) -> list[int]:
        """Delete whole old segments (never the active one) by ``retention.ms`` (a segment's largest
        timestamp) and ``retention.bytes``, and those wholly below the log start; returns their base
        offsets. The log start offset moves to the first remaining segment."""
        st = self._state
        st.check_open()
        config, segments = st.config, st.segments
        deleted: list[int] = []
        if config.deletes and config.retention_ms >= 0:
            while len(segments) > 1 and now_ms - segments[0].largest_timestamp() > config.retention_ms:
                deleted.append(self._delete_oldest_segment())
        if config.deletes and config.retention_bytes >= 0:
            excess = sum(s.size for s in segments) - config.retention_bytes
            while len(segments) > 1 and excess - segments[0].size >= 0:
                excess -= segments[0].size
                deleted.append(self._delete_oldest_segment())
        deleted.extend(self._delete_segments_below_start())
        if deleted:
            self._advance_start_to_first_segment()
        return deleted

    def delete_records(self, before_offset: int) -> int:
        """DeleteRecords: move the log start to ``before_offset`` (persisted before returning); bytes go
        only once a whole segment is below it. Returns the new log start offset (the low watermark)."""
        st = self._state
        st.check_open()
        if before_offset < 0 or before_offset > st.log_end:
            raise OffsetOutOfRange(before_offset, st.log_start, st.log_end)
        if before_offset <= st.log_start:
            return st.log_start
        try:
            write_offset(st.directory, LOG_START_OFFSET_FILE, before_offset)
        except OSError as exc:
            raise LogWriteError(f"cannot record the new log start of {st.name}: {exc.strerror or exc}") from exc
        st.log_start = before_offset
        self._delete_segments_below_start()
        self._advance_start_to_first_segment()
        return st.log_start

    def _delete_oldest_segment(self) -> int:
        (seg,) = self._state.remove_segments(0, 1)
        seg.delete_files()
        return seg.base_offset

    def _delete_segments_below_start(self) -> list[int]:
        st = self._state
        deleted: list[int] = []
        while len(st.segments) > 1 and st.bases[1] <= st.log_start:
            deleted.append(self._delete_oldest_segment())
        return deleted

    def _advance_start_to_first_segment(self) -> None:
        st = self._state
        first = st.segments[0].base_offset
        if first > st.log_start:
            st.log_start = first
        st.producer_state.truncate_head(st.log_start)
        st.aborted_index.drop_before(first)

    # -- compaction ----------------------------------------------------------------------------------------

    def holds(self, segments: list[Segment]) -> bool:
        """Whether ``segments`` are still consecutive sealed segments of this log."""
        st = self._state
        if not segments or st.closed:
            return False
        try:
            i = st.segments.index(segments[0])
        except ValueError:
            return False
        return i + len(segments) < len(st.segments) and st.segments[i : i + len(segments)] == segments

    def replace_segments(self, old: list[Segment], cleaned: Path) -> Segment:
        """Swap the fsynced rewrite ``cleaned`` (``<base>.log.cleaned``, base = ``old[0]``'s) in for the
        consecutive sealed segments ``old``, crash-safely (see `groupstream.storage.swap`). Offsets are the
        rewrite's business: it must cover exactly ``old``'s range."""
        st = self._state
        st.check_open()
        if not self.holds(old):
            raise ValueError("the segments to replace are not consecutive sealed segments of this log")
        swap = commit_cleaned(cleaned)
        i = st.segments.index(old[0])
        st.remove_segments(i, i + len(old))
        for seg in old[1:]:
            seg.delete_files()
        old[0].close()
        install_swap(swap)
        new = Segment.open_existing(st.directory, old[0].base_offset, st.config)
        new.rebuild(validate_crc=False, min_offset=new.base_offset)
        new.finish_rebuild(seal=True)
        new.write_gen += 1  # durable already; the flusher's pass also covers the rewritten indexes
        st.insert_segment(i, new)
        st.rewrite_txn_file(i)  # the merged segments' aborted transactions, in one file
        return new

    # -- truncation ----------------------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Remove every offset at or after ``offset`` (a batch containing it goes whole, so the log end may
        land below ``offset``). Producer state is rebuilt from what remains."""
        st = self._state
        with st.flush_lock:
            st.check_open()
            if offset < st.log_start:
                raise OffsetOutOfRange(offset, st.log_start, st.log_end)
            if offset >= st.log_end:
                return
            i = bisect_right(st.bases, offset) - 1
            for doomed in st.remove_segments(i + 1, truncation=True):
                doomed.delete_files()
            seg = st.segments[i]
            seg.truncate_to(offset)
            if seg.is_empty:
                seg.rolling_base_ms = None
            with st.lock:
                st.log_end = seg.next_offset
                st.flushed_offset = min(st.flushed_offset, st.log_end)
            if st.log_start > st.log_end:
                st.log_start = st.log_end
                write_offset(st.directory, LOG_START_OFFSET_FILE, st.log_start)
            if st.checkpointed_recovery_point > st.log_end:
                st.write_recovery_point(st.log_end)
            self._rebuild_transaction_state()

    def _rebuild_transaction_state(self) -> None:
        """After a truncation: producer state and aborted-transaction index from what remains (the last
        segment's .txnindex is rewritten; later segments' went with them)."""
        st = self._state
        state = st.producer_state
        state.clear()
        st.aborted_index.clear()
        replay = TxnReplay(state, st.aborted_index)
        for seg in st.segments:
            for pos, h in seg.iter_batches():
                replay(seg.log_fd, pos, h)
        state.truncate_head(st.log_start)
        st.rewrite_txn_file(len(st.segments) - 1)
