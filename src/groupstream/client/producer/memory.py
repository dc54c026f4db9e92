"""``buffer.memory`` back-pressure, by the batch, shared by the application threads and the network thread.

An application thread reserves a batch's capacity when it opens the batch (blocking up to ``max.block.ms``
while the buffer is full), not a record's size per record: records appended to an open batch cost nothing
here. A record that waits for its topic's metadata reserves its own size until it is placed. The network
thread releases a batch's bytes when the batch completes, either way; it never waits, so when it must open a
batch itself (for a record that waited) it takes the bytes at once (``force``), even past the limit, which
then holds the application threads back until enough is released. ``flush`` waits on the same condition for
the records outstanding to reach zero.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from groupstream.client.producer.errors import BufferFullError


class BufferMemory:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._used = 0
        self._releases = 0  # bumped by every release, so a waiter cannot miss one

    @property
    def used(self) -> int:
        return self._used

    def reserve(self, size: int, max_block_ms: int, waiting: Callable[[], int] = lambda: 0) -> None:
        """Take ``size`` bytes, waiting while the buffer is full; BufferFullError after ``max_block_ms``.
        ``waiting()`` (records not yet sent) only goes into the error's message."""
        with self._lock:  # the fast path: a plain lock, no Condition method calls
            if self._used + size <= self.limit or self._used == 0:
                self._used += size
                return
        with self._cond:
            deadline = time.monotonic() + max_block_ms / 1000
            while self._used + size > self.limit and self._used > 0:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self._cond.wait(remaining):
                    if self._used + size <= self.limit or self._used == 0:
                        break
                    raise BufferFullError(
                        f"buffer.memory={self.limit} bytes stayed full for max.block.ms={max_block_ms} ms "
                        f"({waiting()} records waiting to be sent)"
                    )
            self._used += size

    def try_reserve(self, size: int) -> bool:
        """Take ``size`` bytes if they are free now."""
        with self._lock:
            if self._used + size <= self.limit or self._used == 0:
                self._used += size
                return True
            return False

    def force(self, size: int) -> None:
        """Take ``size`` bytes without waiting (the network thread)."""
        with self._lock:
            self._used += size

    def release(self, size: int) -> None:
        with self._cond:
            self._used -= size
            self._releases += 1
            self._cond.notify_all()

    def wait_release(self, seen: int, timeout_s: float | None, done: bool) -> int:
        """Wait until a release after ``seen`` (a value this returned before; 0 at first) or the timeout,
        unless ``done``; returns the current release count."""
        with self._cond:
            if self._releases == seen and not done:
                self._cond.wait(timeout_s)
            return self._releases
