"""How a running pipeline is asked to stop: SIGINT (Ctrl-C) and SIGTERM set a flag that the command's loop
checks between short waits on its query, which it then stops at a batch boundary (`stop_query`: once no
micro-batch is running, or after `BOUNDARY_WAIT_S`, or at once on a second signal; Spark redoes an interrupted
batch on the next run).

A KeyboardInterrupt thrown into the middle of a py4j call (Python waiting for the JVM to answer
``awaitTermination``) leaves that gateway connection half-used: stopping the query afterwards printed py4j
tracebacks, and a second signal interrupted the stop itself. A flag never interrupts a call; a second signal
only says again what the first said.

An instance started by a supervisor (``pipeline run --instances N``) also stops when the supervisor is gone
(its parent process changed), so that killing the supervisor never leaves instances behind.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from types import FrameType, TracebackType
from typing import Any

__all__ = ["BOUNDARY_WAIT_S", "SUPERVISOR_PID_ENV", "StopRequest", "stop_query"]

BOUNDARY_WAIT_S = 30.0

SUPERVISOR_PID_ENV = "GROUPSTREAM_SUPERVISOR_PID"
_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopRequest:
    """``with StopRequest() as stop:`` ... ``if stop:``: true once SIGINT or SIGTERM arrived (or the supervisor
    that started this process is gone). Handlers are installed only in the main thread, and restored on exit."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self.count = 0  # signals received
        self.since: float | None = None  # when the stop was first asked for (monotonic)
        self._event = threading.Event()
        self._previous: dict[int, Any] = {}
        supervisor = os.environ.get(SUPERVISOR_PID_ENV, "")
        self._supervisor = int(supervisor) if supervisor.isdigit() else None

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            for sig in _SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signal is None:
            self.signal = signum
        self.count += 1
        self._set()

    def _set(self) -> None:
        if self.since is None:
            self.since = time.monotonic()
        self._event.set()

    def __bool__(self) -> bool:
        if not self._event.is_set() and self._supervisor is not None and os.getppid() != self._supervisor:
            self._set()  # the supervisor died (kill -9): this instance is an orphan, so it stops
        return self._event.is_set()

    def wait(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for a stop request (a pace, cut short by the signal)."""
        return self._event.wait(timeout_s) or bool(self)


def stop_query(query: Any, stop: StopRequest) -> bool:
    """Stop ``query`` if a stop was asked for and it is at a batch boundary (or waited long enough, or was asked
    twice); True once stopped."""
    if not stop:
        return False
    waited = time.monotonic() - (stop.since or time.monotonic())
    if query.status.get("isTriggerActive") and stop.count < 2 and waited < BOUNDARY_WAIT_S:
        return False
    query.stop()
    return True
