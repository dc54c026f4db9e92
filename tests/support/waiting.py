"""The one way tests wait for something: poll a condition until a deadline, and fail naming what never
happened. A fixed sleep standing in for a condition is what this replaces."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


def wait_until(condition: Callable[[], object], timeout_s: float = 20.0, what: str = "condition",
               interval_s: float = 0.01, explain: Callable[[], str] | None = None,
               error: Callable[[str], BaseException] = AssertionError) -> None:  # fmt: skip
    """Return once ``condition()`` is truthy; after ``timeout_s``, raise ``error`` (an AssertionError unless a
    fixture names its own) naming ``what``, followed by ``explain()`` (e.g. the logs of the processes involved).

    A condition that can tell it will never hold (the process it waits for has exited) raises instead of
    returning False: that ends the wait at once, with its own message."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            detail = f"\n{explain()}" if explain is not None else ""
            raise error(f"timed out after {timeout_s:g}s waiting for {what}{detail}")
        time.sleep(interval_s)  # the poll interval, bounded by the deadline


async def async_wait_until(condition: Callable[[], Awaitable[object]], timeout_s: float = 20.0,
                           what: str = "condition", interval_s: float = 0.05) -> None:  # fmt: skip
    """``wait_until`` for a condition that must be awaited (an asyncio client's request)."""
    deadline = time.monotonic() + timeout_s
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g}s waiting for {what}")
        await asyncio.sleep(interval_s)  # the poll interval, bounded by the deadline
