"""The sliding window the clients' ``metrics()`` average and rate over (Kafka samples two 30 s windows; one 60 s
window here): values with their times, so rates, averages and maxima cover only the last minute."""

from __future__ import annotations

from collections import deque

WINDOW_MS = 60_000


class Window:
    """Values with their times over the last ``WINDOW_MS``: sum, count, max, and a rate per second."""

    def __init__(self) -> None:
        self._samples: deque[tuple[int, float]] = deque()

    def add(self, now_ms: int, value: float) -> None:
        self._samples.append((now_ms, value))
        self._expire(now_ms)

    def _expire(self, now_ms: int) -> None:
        while self._samples and self._samples[0][0] <= now_ms - WINDOW_MS:
            self._samples.popleft()

    def avg(self, now_ms: int) -> float:
        self._expire(now_ms)
        return sum(v for _, v in self._samples) / len(self._samples) if self._samples else 0.0

    def max(self, now_ms: int) -> float:
        self._expire(now_ms)
        return max((v for _, v in self._samples), default=0.0)

    def rate(self, now_ms: int, started_ms: int) -> float:
        """The values' sum per second, over the window (or the time since the start, when shorter)."""
        self._expire(now_ms)
        return sum(v for _, v in self._samples) * 1000.0 / _span(now_ms, started_ms)

    def count_rate(self, now_ms: int, started_ms: int) -> float:
        """How many values per second."""
        self._expire(now_ms)
        return len(self._samples) * 1000.0 / _span(now_ms, started_ms)


def _span(now_ms: int, started_ms: int) -> int:
    return max(min(now_ms - started_ms, WINDOW_MS), 1)
