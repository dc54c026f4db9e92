"""Clients kept alive between the Spark tasks a Python worker runs, as Spark's Kafka source pools its consumers.

A task that opened its own client would pay, every time, a connection to each broker, version negotiation and
a metadata refresh before its first record: more than a small micro-batch takes to read. So a worker keeps
the clients its tasks used, keyed by their configuration, and lends one to each task. A client is lent to
one task at a time; a task that fails closes the client it had instead of returning it (its connection or
position may be what failed, as Spark invalidates a consumer after a task error). Idle clients are closed
after ``idle_timeout_s`` and beyond ``capacity``, checked whenever a client is taken or returned (a worker runs
nothing between tasks). What is left is closed when the worker exits.

It holds whether Spark reuses Python workers or not (``spark.python.worker.reuse``): without reuse the worker
exits after its task and the exit hook closes what it kept. A worker forked from a process whose cache had
clients (PySpark's daemon forks workers) cannot use them, as their network threads did not survive the fork:
the cache notices the new process id and forgets them without closing, which would touch the parent's sockets.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["ClientCache", "close_at_exit"]

log = logging.getLogger("groupstream.spark")

C = TypeVar("C")


@dataclass(slots=True)
class _Idle(Generic[C]):
    key: Hashable
    client: C
    since: float


class ClientCache(Generic[C]):
    def __init__(
        self,
        factory: Callable[[Hashable], C],
        close: Callable[[C], None],
        *,
        idle_timeout_s: float = 300.0,
        capacity: int = 8,
        clock: Callable[[], float] = time.monotonic,
        pid: Callable[[], int] = os.getpid,
    ) -> None:
        """``factory(key)`` makes a client for a configuration; ``close(client)`` ends one (it must not raise
        for a client that already broke). ``capacity`` bounds the idle clients kept."""
        self._factory = factory
        self._close = close
        self._idle_timeout_s = idle_timeout_s
        self._capacity = capacity
        self._clock = clock
        self._pid = pid
        self._owner = pid()
        self._idle: list[_Idle[C]] = []  # oldest first
        self._lent = 0
        self._lock = threading.Lock()

    @property
    def idle(self) -> int:
        with self._lock:
            self._forget_if_forked()
            return len(self._idle)

    @property
    def lent(self) -> int:
        return self._lent

    def take(self, key: Hashable) -> C:
        """An idle client for ``key`` (the one returned last), or a new one."""
        with self._lock:
            self._forget_if_forked()
            expired = self._expire()
            found = next((i for i in range(len(self._idle) - 1, -1, -1) if self._idle[i].key == key), None)
            client = None if found is None else self._idle.pop(found).client
            self._lent += 1
        self._close_all(expired)
        if client is None:
            try:
                client = self._factory(key)
            except BaseException:
                with self._lock:
                    self._lent -= 1
                raise
        return client

    def give_back(self, key: Hashable, client: C, healthy: bool) -> None:
        """Return a client a task is done with; one that is not ``healthy`` is closed."""
        with self._lock:
            self._lent = max(self._lent - 1, 0)
            self._forget_if_forked()
            if healthy:
                self._idle.append(_Idle(key, client, self._clock()))
                doomed = []
            else:
                doomed = [client]
            doomed += self._expire()
            while len(self._idle) > self._capacity:
                doomed.append(self._idle.pop(0).client)
        self._close_all(doomed)

    @contextmanager
    def lend(self, key: Hashable, reset: Callable[[C], None] | None = None) -> Iterator[C]:
        """A client for the ``with`` block. It goes back to the cache when the block ends normally or is
        abandoned (a generator Spark stopped reading: ``GeneratorExit``), after ``reset(client)``; it is closed
        when the block raises."""
        client = self.take(key)
        healthy = False
        try:
            yield client
            healthy = True
        except GeneratorExit:
            healthy = True
            raise
        finally:
            if healthy and reset is not None:
                try:
                    reset(client)
                except Exception as e:  # a client that cannot even be reset is not lent again
                    log.info("closing a cached client that could not be reset: %s", e)
                    healthy = False
            self.give_back(key, client, healthy)

    def close(self) -> None:
        """Close every idle client (the worker is exiting)."""
        with self._lock:
            if self._forget_if_forked():
                return
            doomed = [i.client for i in self._idle]
            self._idle.clear()
        self._close_all(doomed)

    def _expire(self) -> list[C]:
        cutoff = self._clock() - self._idle_timeout_s
        doomed = [i.client for i in self._idle if i.since <= cutoff]
        if doomed:
            self._idle = [i for i in self._idle if i.since > cutoff]
        return doomed

    def _forget_if_forked(self) -> bool:
        pid = self._pid()
        if pid == self._owner:
            return False
        self._owner = pid
        self._idle.clear()
        self._lent = 0
        return True

    def _close_all(self, clients: list[C]) -> None:
        for client in clients:
            try:
                self._close(client)
            except Exception as e:  # closing is best effort: the client is dropped either way
                log.info("closing a cached client failed: %s", e)


def close_at_exit(cache: ClientCache[C]) -> ClientCache[C]:
    atexit.register(cache.close)
    return cache
