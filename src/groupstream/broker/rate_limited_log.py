"""Logging what can happen thousands of times a second (a connection storm, a full disk refusing every produce)
without filling the disk or the operator's terminal with it: one line at once, then one summary a period while
it goes on. Runs on the broker's event loop, whose timers end each period."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

LOG_PERIOD_S = 60.0


class RateLimitedLog:
    """At most one line per period for something that can happen thousands of times a second: the first time
    is logged at once, later times are counted and summed up in one line per period while they go on."""

    def __init__(self, logger: logging.Logger, level: int, period_s: float = LOG_PERIOD_S) -> None:
        self._log = logger
        self._level = level
        self._period_s = period_s
        self._count = 0
        self._summary: Callable[[int], str] | None = None
        self._timer: asyncio.TimerHandle | None = None

    def note(self, first: Callable[[], str], summary: Callable[[int], str]) -> None:
        """One occurrence: ``first()`` is the line when none was logged in the last period; ``summary(n)`` the
        line for ``n`` occurrences counted since."""
        self._summary = summary
        if self._timer is None:
            self._log.log(self._level, "%s", first())
            self._timer = asyncio.get_running_loop().call_later(self._period_s, self._end_period)
        else:
            self._count += 1

    def _end_period(self) -> None:
        self._timer = None
        if self._count:
            self._emit()
            self._timer = asyncio.get_running_loop().call_later(self._period_s, self._end_period)

    def _emit(self) -> None:
        n, self._count = self._count, 0
        if self._summary is not None:
            self._log.log(self._level, "%s", self._summary(n))

    def close(self) -> None:
        """Log what was counted and not yet reported; no timer is left behind."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._count:
            self._emit()

