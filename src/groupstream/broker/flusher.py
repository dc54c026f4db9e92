"""Group commit: fsyncs run off the event loop, one flush for every append that arrived meanwhile.

Policies (per topic, ``flush.policy``):

- ``always`` (default): a partition with unflushed appends is flushed as soon as its previous flush ends, and
  an ``acks=all`` produce is answered only once its offsets are on disk. Survives power loss. Up to four
  partitions are flushed at once, those somebody waits on (acks=all, a group coordinator's answer) first.
- ``interval``: dirty partitions are flushed every ``flush.interval.ms``; acks do not wait for it.
- ``os``: never fsync explicitly; the page cache decides.

Every policy writes appended bytes to the file (not a Python buffer) before acknowledging, so an acknowledged
record survives ``kill -9`` of the broker under all three.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from groupstream.storage.errors import LogClosedError, LogOfflineError, StorageError

log = logging.getLogger("groupstream.broker.flusher")

_RETRY_S = 1.0


# Flushes of different partitions run side by side (Kafka with flush.messages=1 fsyncs in each request handler
# thread, num.io.threads=8 of them): one slow fsync, or a round over many partitions nobody waits for, must not
# hold back the partition an acks=all produce or a group coordinator's answer is waiting on.
_WORKERS = 4


class Flusher:
    def __init__(self, interval_ms: int = 1000, workers: int = _WORKERS) -> None:
        self._workers = max(1, workers)
        self._executor = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="groupstream-flush")
        self._dirty_now: set[Any] = set()  # policy always: flush as soon as possible
        self._dirty_later: set[Any] = set()  # policy interval: flush on the timer
        self._waiters: list[tuple[Any, int, asyncio.Future[None]]] = []
        self._waited: set[Any] = set()  # logs somebody waits on: flushed before those nobody waits on
        self._running: dict[Any, asyncio.Future[Exception | None]] = {}  # at most one flush per log at a time
        self._interval_s = interval_ms / 1000.0
        self._timer: asyncio.TimerHandle | None = None
        self._retry: set[Any] = set()  # flush failed for a passing reason: try again after _RETRY_S
        self._retry_timer: asyncio.TimerHandle | None = None
        self._kick_handle: asyncio.Handle | None = None
        self._closed = False
        self.timed: Callable[[float], None] | None = None
        """Hears each flush's duration in ms, on a flush thread (prometheus_client's metrics are thread-safe)."""

    def appended(self, plog: Any, policy: str) -> None:
        if policy == "always":
            self._dirty_now.add(plog)
            self._kick_soon()
        elif policy == "interval":
            self._dirty_later.add(plog)
            self._arm_timer()

    def wait_flushed(self, plog: Any, offset: int) -> asyncio.Future[None]:
        """A future done once ``plog`` is durable up to ``offset`` (exclusive end offset)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if plog.flushed_offset >= offset:
            fut.set_result(None)
            return fut
        self._waiters.append((plog, offset, fut))
        self._waited.add(plog)
        self._dirty_now.add(plog)
        self._kick_soon()
        return fut

    def retrying(self) -> frozenset[Any]:
        """The logs whose flush failed for a passing reason and will be tried again (for tests and tools)."""
        return frozenset(self._retry)

    def forget(self, plog: Any) -> None:
        """A deleted partition: nothing more to flush, and nobody should wait on it."""
        self._dirty_now.discard(plog)
        self._dirty_later.discard(plog)
        self._retry.discard(plog)
        self._waited.discard(plog)
        for other, _, waiter in self._waiters:
            if other is plog and not waiter.done():
                waiter.set_result(None)

    def _arm_timer(self) -> None:
        if self._timer is None and not self._closed:
            self._timer = asyncio.get_running_loop().call_later(self._interval_s, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._dirty_now |= self._dirty_later
        self._dirty_later.clear()
        self._kick()

    def _kick_soon(self) -> None:
        """Start flushes once the event loop has handled everything that is ready now: requests pipelined on
        one connection arrive in one read and are appended one after another, and a flush started by the
        first would cover it alone, the others waiting for it to end and for a second round (measured: three
        pipelined acks=all requests took two rounds). Deferred to the end of the loop's turn, one fsync per
        partition covers them all (group commit); the first request's flush starts later by the time the loop
        takes to append the others (well under a millisecond a megabyte)."""
        if self._kick_handle is None and not self._closed:
            self._kick_handle = asyncio.get_running_loop().call_soon(self._kick_now)

    def _kick_now(self) -> None:
        self._kick_handle = None
        self._kick()

    def _kick(self) -> None:
        """Start flushes on free workers: logs somebody waits on first, then the others. A log being flushed
        stays dirty until that flush ends (appends during a flush need the next one); its later appends share
        that next flush (group commit)."""
        if len(self._running) >= self._workers or not self._dirty_now or self._closed:
            return
        ready = [plog for plog in self._dirty_now if plog not in self._running]
        if not ready:
            return
        ready.sort(key=lambda plog: plog not in self._waited)  # stable: waited-on logs first
        loop = asyncio.get_running_loop()
        for plog in ready[: self._workers - len(self._running)]:
            self._dirty_now.discard(plog)
            fut = loop.run_in_executor(self._executor, _flush_one, plog, self.timed)
            self._running[plog] = fut
            fut.add_done_callback(functools.partial(self._done, plog))

    def _done(self, plog: Any, fut: asyncio.Future[Exception | None]) -> None:
        """Settle the log's waiters: durable ones succeed, those of a log whose flush failed get its error (the
        produce handler answers KAFKA_STORAGE_ERROR, the coordinator backs off). A log that failed for a passing
        reason (out of descriptors) is tried again after ``_RETRY_S``; an offline one never is."""
        del self._running[plog]
        exc = fut.result()
        if exc is not None and not isinstance(exc, LogOfflineError):
            log.warning("flushing %s failed (%s); retrying in %.0f s", getattr(plog, "name", plog), exc, _RETRY_S)
            self._retry.add(plog)
            if self._retry_timer is None and not self._closed:
                self._retry_timer = asyncio.get_running_loop().call_later(_RETRY_S, self._on_retry)
        still: list[tuple[Any, int, asyncio.Future[None]]] = []
        waited: set[Any] = set()
        for other, offset, waiter in self._waiters:
            if waiter.done():
                continue
            if other is plog:
                if plog.flushed_offset >= offset:
                    waiter.set_result(None)
                    continue
                if exc is not None:
                    waiter.set_exception(exc)
                    continue
                self._dirty_now.add(plog)  # appended to during the flush: the next one covers it
            still.append((other, offset, waiter))
            waited.add(other)
        self._waiters = still
        self._waited = waited
        self._kick()

    def _on_retry(self) -> None:
        self._retry_timer = None
        self._dirty_now |= self._retry
        self._retry.clear()
        self._kick()

    async def close(self) -> None:
        """Flush everything still dirty, then stop."""
        self._closed = True
        if self._kick_handle is not None:
            self._kick_handle.cancel()
            self._kick_handle = None
        for timer in (self._timer, self._retry_timer):
            if timer is not None:
                timer.cancel()
        self._timer = self._retry_timer = None
        if self._running:
            await asyncio.wait(list(self._running.values()))
        pending = list(self._dirty_now | self._dirty_later | self._retry)
        if pending:
            await asyncio.get_running_loop().run_in_executor(self._executor, _flush_all, pending)
        for _, _, waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._executor.shutdown(wait=True)


def _flush_one(plog: Any, timed: Callable[[float], None] | None = None) -> Exception | None:
    """Flush one log on a worker thread; its error (if any) is returned for its own waiters alone: one
    partition's failing disk must not hold back the others' acks. ``timed(ms)`` hears how long a successful
    flush took (the broker's LogFlushRateAndTimeMs)."""
    started = time.perf_counter()
    try:
        plog.flush()
        if timed is not None:
            timed((time.perf_counter() - started) * 1000)
    except LogClosedError:
        pass  # deleted or closed meanwhile: its waiters were released by ``forget``/``close``
    except Exception as exc:  # the log's own typed errors, or anything unexpected: fail its waiters
        if not isinstance(exc, StorageError):
            log.error("flushing %s failed", getattr(plog, "name", plog), exc_info=exc)
        return exc
    return None


def _flush_all(logs: list[Any], timed: Callable[[float], None] | None = None) -> dict[Any, Exception]:
    """Flush each log on its own (closing: whatever is still dirty); the failures by log."""
    failures: dict[Any, Exception] = {}
    for plog in logs:
        exc = _flush_one(plog, timed)
        if exc is not None:
            failures[plog] = exc
    return failures
