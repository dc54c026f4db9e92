"""Each group's total lag (or a topic's end offset) over time, for the console's charts and rates: sampled every so often and whenever a page
is drawn, kept in memory for the last ``keep`` samples (an hour at one sample every 10 s). Pure: times come in.
A console that restarts starts its charts again; the lag itself is always current in the tables."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

SAMPLE_EVERY_S = 10.0


class LagHistory:
    def __init__(self, keep: int = 360) -> None:
        self._keep = keep
        self._series: dict[str, deque[tuple[int, int]]] = {}

    def record(self, now_ms: int, lags: Mapping[str, int]) -> None:
        """The groups' lags at ``now_ms``; a group no longer listed keeps its past until it is forgotten."""
        for group, lag in lags.items():
            series = self._series.setdefault(group, deque(maxlen=self._keep))
            if series and series[-1][0] >= now_ms:
                series.pop()  # two samples at the same moment: the later one stands
            series.append((now_ms, lag))

    def series(self, group: str) -> list[tuple[int, int]]:
        return list(self._series.get(group, ()))

    def forget(self, groups: set[str]) -> None:
        for g in set(self._series) - groups:
            del self._series[g]

    def rate(self, name: str) -> float | None:
        """How fast the recorded value grew per second between the two latest samples at least a second apart
        (for end offsets: records written per second); None before there are two."""
        series = self._series.get(name)
        if not series or len(series) < 2:
            return None
        t1, v1 = series[-1]
        earlier = [(t, v) for t, v in series if t <= t1 - 1000]
        if not earlier:
            return None
        t0, v0 = earlier[-1]
        return max(v1 - v0, 0) * 1000.0 / (t1 - t0)
