"""When the next ConsumerGroupHeartbeat may go out: on the interval the coordinator hands back, at once when
something must be told, and never before an exponential backoff after a failure has passed. Pure: times are
passed in."""

from __future__ import annotations

from collections.abc import Callable

from groupstream.client.consumer.membership_timing import RetryBackoff

__all__ = ["HeartbeatSchedule"]


class HeartbeatSchedule:
    """Kafka's heartbeat request state: an interval timer restarted at each send, and a retry backoff of
    ``retry.backoff.ms * 2**(failures-1)`` capped at ``retry.backoff.max.ms`` (times ``jitter()``, 1.0 by
    default so tests are exact)."""

    def __init__(
        self,
        *,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1000,
        jitter: Callable[[], float] | None = None,
    ) -> None:
        self._backoff = RetryBackoff(retry_backoff_ms, retry_backoff_max_ms, jitter)
        self.interval_ms = 0  # until the coordinator says otherwise: the first heartbeat goes out at once
        self._next_due_ms = 0

    @property
    def failures(self) -> int:
        return self._backoff.failures

    def backoff_ms(self, failures: int) -> int:
        return self._backoff.backoff_ms(failures)

    def next_send_ms(self, urgent: bool) -> int:
        """The earliest time the next heartbeat may go out."""
        due = 0 if urgent else self._next_due_ms
        return max(due, self._backoff.not_before_ms)

    def on_sent(self, now_ms: int) -> None:
        self._next_due_ms = now_ms + self.interval_ms

    def on_success(self, now_ms: int, interval_ms: int) -> None:
        self._backoff.succeeded()
        if interval_ms > 0 and interval_ms != self.interval_ms:
            self.interval_ms = interval_ms
            self._next_due_ms = now_ms + interval_ms

    def on_failure(self, now_ms: int) -> None:
        """Retry as soon as the backoff allows (not a whole interval later)."""
        self._backoff.failed(now_ms)
        self._next_due_ms = now_ms

    def retry_now(self) -> None:
        """Forget the backoff: the next heartbeat may go out at once (a member rejoining after being fenced)."""
        self._backoff.not_before_ms = 0
        self._next_due_ms = 0
