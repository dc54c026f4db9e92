"""Where long-polling fetches wait: woken by appends to the partitions they read, never by a sleep loop."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from groupstream.protocol.topic_partition import TopicPartition


class _Waiter:
    __slots__ = ("future", "keys", "remaining", "timer")

    def __init__(self, future: asyncio.Future[bool], keys: tuple[TopicPartition, ...], remaining: int) -> None:
        self.future = future
        self.keys = keys
        self.remaining = remaining
        self.timer: asyncio.TimerHandle | None = None


class FetchPurgatory:
    """Parks fetches until ``min_bytes`` more bytes arrive on their partitions or their wait expires.

    The future resolves to True when woken by data and False on timeout; either way the handler reads again.
    """

    def __init__(self) -> None:
        self._by_key: dict[TopicPartition, set[_Waiter]] = {}

    def watch(self, keys: Iterable[TopicPartition], needed_bytes: int, timeout_ms: int) -> asyncio.Future[bool]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        waiter = _Waiter(fut, tuple(keys), max(1, needed_bytes))
        for key in waiter.keys:
            self._by_key.setdefault(key, set()).add(waiter)
        waiter.timer = loop.call_later(max(0, timeout_ms) / 1000.0, self._complete, waiter, False)
        fut.add_done_callback(lambda _f: self._remove(waiter))
        return fut

    def notify(self, key: TopicPartition, appended_bytes: int) -> None:
        waiters = self._by_key.get(key)
        if not waiters:
            return
        for waiter in list(waiters):
            waiter.remaining -= appended_bytes
            if waiter.remaining <= 0:
                self._complete(waiter, True)

    def wake_all(self) -> None:
        """Answer every parked fetch now (shutdown, topic deletion)."""
        for waiters in list(self._by_key.values()):
            for waiter in list(waiters):
                self._complete(waiter, True)

    def _complete(self, waiter: _Waiter, woken: bool) -> None:
        self._remove(waiter)
        if not waiter.future.done():
            waiter.future.set_result(woken)

    def _remove(self, waiter: _Waiter) -> None:
        if waiter.timer is not None:
            waiter.timer.cancel()
        for key in waiter.keys:
            waiters = self._by_key.get(key)
            if waiters is not None:
                waiters.discard(waiter)
                if not waiters:
                    del self._by_key[key]

    def __len__(self) -> int:
        return len({w for ws in self._by_key.values() for w in ws})
