"""Group commit: fsyncs run off the event loop, one flush for every append that arrived meanwhile.

Policies (per topic, ``flush.policy``):

- ``always`` (default): a partition with unflushed appends is flushed as soon as the previous flush ends, and
  an ``acks=all`` produce is answered only once its offsets are on disk. Survives power loss.
- ``interval``: dirty partitions are flushed every ``flush.interval.ms``; acks do not wait for it.
- ``os``: never fsync explicitly; the page cache decides.

Every policy writes appended bytes to the file (not a Python buffer) before acknowledging, so an acknowledged
record survives ``kill -9`` of the broker under all three.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

log = logging.getLogger("groupstream.broker.flusher")


class Flushable(Protocol):
    @property
    def flushed_offset(self) -> int: ...

    def flush(self) -> Any: ...


class Flusher:
    def __init__(self, interval_ms: int = 1000) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="groupstream-flush")
        self._dirty_now: set[Any] = set()  # policy always: flush as soon as possible
        self._dirty_later: set[Any] = set()  # policy interval: flush on the timer
        self._waiters: list[tuple[Any, int, asyncio.Future[None]]] = []
        self._running: asyncio.Future[None] | None = None
        self._interval_s = interval_ms / 1000.0
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False

    def appended(self, plog: Any, policy: str) -> None:
        if policy == "always":
            self._dirty_now.add(plog)
            self._kick()
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
        self._dirty_now.add(plog)
        self._kick()
        return fut

    def forget(self, plog: Any) -> None:
        """A deleted partition: nothing more to flush, and nobody should wait on it."""
        self._dirty_now.discard(plog)
        self._dirty_later.discard(plog)
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

    def _kick(self) -> None:
        if self._running is not None or not self._dirty_now or self._closed:
            return
        batch = list(self._dirty_now)
        self._dirty_now.clear()
        loop = asyncio.get_running_loop()
        self._running = fut = loop.run_in_executor(self._executor, _flush_all, batch)
        fut.add_done_callback(self._done)

    def _done(self, fut: asyncio.Future[None]) -> None:
        self._running = None
        exc = fut.exception()
        if exc is not None:
            log.error("flush failed", exc_info=(type(exc), exc, exc.__traceback__))
        still: list[tuple[Any, int, asyncio.Future[None]]] = []
        for plog, offset, waiter in self._waiters:
            if waiter.done():
                continue
            if plog.flushed_offset >= offset:
                waiter.set_result(None)
            elif exc is not None:
                waiter.set_exception(exc)
            else:
                still.append((plog, offset, waiter))
                self._dirty_now.add(plog)
        self._waiters = still
        self._kick()

    async def close(self) -> None:
        """Flush everything still dirty, then stop."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._running is not None:
            await asyncio.wait([self._running])
        pending = list(self._dirty_now | self._dirty_later)
        if pending:
            await asyncio.get_running_loop().run_in_executor(self._executor, _flush_all, pending)
        for _, _, waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._executor.shutdown(wait=True)


def _flush_all(logs: list[Any]) -> None:
    for plog in logs:
        plog.flush()
