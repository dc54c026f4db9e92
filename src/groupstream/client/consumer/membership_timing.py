"""The two clocks both membership managers (classic and KIP-848) keep, so that they cannot drift apart.

- `PollTimer` is ``max.poll.interval.ms``: Java's ``Timer``, which counts as expired once the deadline is
  reached (``>=``), started by the first subscribe and reset by every application poll.
- `RetryBackoff` is ``retry.backoff.ms`` growing exponentially to ``retry.backoff.max.ms`` after consecutive
  failures (KIP-580), times a jitter the caller draws (1.0 by default, so tests are exact).

Pure: times are passed in.
"""

from __future__ import annotations

from collections.abc import Callable

from groupstream.client.net.config import exponential_backoff_ms

__all__ = ["PollTimer", "RetryBackoff"]


class PollTimer:
    __slots__ = ("interval_ms", "last_poll_ms")

    def __init__(self, interval_ms: int) -> None:
        self.interval_ms = interval_ms
        self.last_poll_ms: int | None = None

    def poll_called(self, now_ms: int) -> None:
        self.last_poll_ms = now_ms

    def start(self, now_ms: int) -> None:
        """Start counting if nothing has yet (a subscribe before the first poll)."""
        if self.last_poll_ms is None:
            self.last_poll_ms = now_ms

    def expired(self, now_ms: int) -> bool:
        return self.last_poll_ms is not None and now_ms - self.last_poll_ms >= self.interval_ms

    def remaining_ms(self, now_ms: int) -> int | None:
        """How long until it expires (0 once it has), or None before it started."""
        if self.last_poll_ms is None:
            return None
        return max(0, self.last_poll_ms + self.interval_ms - now_ms)


class RetryBackoff:
    __slots__ = ("_jitter", "failures", "max_ms", "not_before_ms", "retry_backoff_ms")

    def __init__(self, retry_backoff_ms: int, max_ms: int, jitter: Callable[[], float] | None = None) -> None:
        self.retry_backoff_ms = retry_backoff_ms
        self.max_ms = max(max_ms, retry_backoff_ms)
        self._jitter = jitter or (lambda: 1.0)
        self.failures = 0
        self.not_before_ms = 0

    def backoff_ms(self, failures: int) -> int:
        return exponential_backoff_ms(self.retry_backoff_ms, self.max_ms, failures, self._jitter())

    def failed(self, now_ms: int) -> int:
        """One more consecutive failure: the earliest time of the next attempt."""
        self.failures += 1
        self.not_before_ms = now_ms + self.backoff_ms(self.failures)
        return self.not_before_ms

    def succeeded(self) -> None:
        self.failures = 0
        self.not_before_ms = 0

    def wait_ms(self, now_ms: int) -> int:
        """How long until the next attempt may go out (0: now)."""
        return max(0, self.not_before_ms - now_ms)
