"""``buffer.memory`` back-pressure and the count of records not yet delivered, shared by the two threads.

``produce`` reserves a record's size before queueing it and blocks (up to ``max.block.ms``) while the buffer
is full; the network thread releases a batch's bytes when the batch completes, either way. ``flush`` waits
on the same condition for the count of undelivered records to reach zero.
"""

from __future__ import annotations

import threading
import time

from groupstream.client.producer.errors import BufferFullError


class BufferMemory:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._used = 0
        self._records = 0
        self._releases = 0  # bumped by every release, so a waiter cannot miss one

    @property
    def used(self) -> int:
        return self._used

    @property
    def records(self) -> int:
        """Records produced and not yet delivered or failed."""
        return self._records

    def reserve(self, size: int, max_block_ms: int) -> None:
        """Take ``size`` bytes for one record, waiting while the buffer is full; BufferFullError after
        ``max_block_ms``."""
        with self._lock:  # the fast path: a plain lock, no Condition method calls
            if self._used + size <= self.limit or self._used == 0:
                self._used += size
                self._records += 1
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
                        f"({self._records} records waiting to be sent)"
                    )
            self._used += size
            self._records += 1

    def release(self, size: int, records: int) -> None:
        with self._cond:
            self._used -= size
            self._records -= records
            self._releases += 1
            self._cond.notify_all()

    def wait_release(self, seen: int, timeout_s: float | None) -> int:
        """Wait until a release after ``seen`` (a value this returned before; 0 at first) or the timeout;
        returns the current release count."""
        with self._cond:
            if self._releases == seen and self._records > 0:
                self._cond.wait(timeout_s)
            return self._releases
