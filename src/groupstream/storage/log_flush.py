"""`LogFlusher`: makes a partition log's appended bytes durable, from any thread while the owner appends.

A flush takes a consistent picture under the log's ``lock`` (the log end, the dirty segments and their write
generations, duplicates of their file descriptors, the directory generation), fsyncs without it, and then
records what it covered: a segment deleted by retention meanwhile is harmless (its duplicate is still open),
and a truncation meanwhile keeps the flush from claiming offsets that went away. A failed fsync takes the
partition offline for good, as Kafka and PostgreSQL do: the kernel may have dropped the dirty pages, so a
later fsync that succeeds proves nothing.
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_right

from groupstream.storage.errors import LogOfflineError, LogWriteError
from groupstream.storage.fileio import datasync, fsync_directory
from groupstream.storage.log_state import LogState
from groupstream.storage.segment import Segment

__all__ = ["LogFlusher"]

log = logging.getLogger("groupstream.storage")


class LogFlusher:
    """The flush of one partition log's `LogState`."""

    def __init__(self, state: LogState) -> None:
        self._state = state

    def flush(self) -> int:
        """fsync every dirty segment file, the index files of sealed segments (and the directory, after
        creations or deletions); returns the new ``flushed_offset``.

        The active segment's index files are left to the page cache until it is sealed or the log closes:
        what an acks=all answer waits for is the log's bytes, and its indexes are derived from them (an open
        after a crash rederives them; a clean open checks them against the log). Syncing them too took two
        more fsyncs per flush, as long as the log's one together, on the path of every acknowledgement."""
        st = self._state
        with st.flush_lock:
            if st.closed:
                return st.flushed_offset
            if st.offline is not None:
                raise LogOfflineError(st.offline)
            self.flush_holding_flush_lock(whole=False)
            return st.flushed_offset

    def flush_holding_flush_lock(self, whole: bool = True) -> None:
        """`flush` for a caller that holds ``flush_lock`` already; ``whole`` (a clean close): the active
        segment's index files too, so that the next open can trust every index."""
        st = self._state
        with st.lock:
            target = st.log_end
            truncations = st.truncation_gen
            active = st.segments[-1]
            work: list[tuple[Segment, int, bool]] = []  # (segment, its write generation, with its indexes)
            for seg in st.segments:
                indexes = whole or seg is not active
                if seg.dirty or (indexes and seg.indexes_dirty):
                    work.append((seg, seg.write_gen, indexes))
            fds = self._dup_fds(work)
            dir_gen = st.dir_gen
        self._sync(fds, dir_gen)
        with st.lock:
            for seg, gen, indexes in work:
                if gen > seg.flushed_gen:
                    seg.flushed_gen = gen
                if indexes and gen > seg.indexes_synced_gen:
                    seg.indexes_synced_gen = gen
            st.dir_flushed_gen = max(st.dir_flushed_gen, dir_gen)
            if truncations == st.truncation_gen and target > st.flushed_offset:
                st.flushed_offset = target
            active = st.segments[-1]
            for seg, _, _ in work:
                if seg is not active and not seg.deleted and not seg.dirty and not seg.indexes_dirty:
                    seg.close_index_files()
            flushed = st.flushed_offset
            crossed = bisect_right(st.bases, flushed) > bisect_right(st.bases, st.checkpointed_recovery_point)
        # Recovery works segment by segment, so the checkpoint only needs rewriting when the flushed
        # offset enters a new segment; that keeps a flush at one fsync per dirty file.
        if crossed:
            try:
                st.write_recovery_point(flushed)
            except OSError as exc:  # only an optimisation: the next open validates from the older point
                log.warning("%s: cannot write the recovery point %d (%s); keeping %d", st.name, flushed,
                            exc.strerror or exc, st.checkpointed_recovery_point)  # fmt: skip

    def _dup_fds(self, work: list[tuple[Segment, int, bool]]) -> list[int]:
        """Duplicates of the dirty segments' descriptors (under ``lock``), so they can be synced without it."""
        fds: list[int] = []
        try:
            for seg, _, indexes in work:
                fds.extend(seg.dup_fds(indexes))
        except OSError as exc:  # out of descriptors: nothing was synced, nothing is lost; retry later
            for fd in fds:
                os.close(fd)
            raise LogWriteError(f"cannot flush {self._state.name}: {exc.strerror or exc}") from exc
        return fds

    def _sync(self, fds: list[int], dir_gen: int) -> None:
        """fsync ``fds`` (closing them) and the directory if files came or went since its last fsync."""
        st = self._state
        try:
            for fd in fds:
                datasync(fd)
            if dir_gen != st.dir_flushed_gen:
                fsync_directory(st.directory)
        except OSError as exc:
            self._take_offline(f"fsync failed: {exc.strerror or exc}")
            raise LogOfflineError(st.offline or "") from exc
        finally:
            for fd in fds:
                os.close(fd)

    def _take_offline(self, reason: str) -> None:
        st = self._state
        with st.lock:
            if st.offline is None:
                st.offline = f"partition {st.name} is offline after a failed flush ({reason}); restart the broker to recover it"
        log.error("%s", st.offline)
