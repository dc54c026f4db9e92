"""``Consumer.metrics()``: what the consumer measures of itself, by the names of Kafka's Java consumer
(``consumer-fetch-manager-metrics``, ``consumer-coordinator-metrics``, ``consumer-metrics``), so dashboards and
habits carry over.

Rates and averages are over a sliding window (Kafka samples 2 windows of 30 s; one 60 s window here); totals
and maxima since the start. The network thread records fetches, commits and rebalances, the application
thread records what ``poll`` returned; one lock covers both, held for a few additions. Time comes in
(``now_ms``), so the arithmetic is tested with a manual clock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from groupstream.client.metrics_window import WINDOW_MS, Window

__all__ = ["WINDOW_MS", "ConsumerMetrics"]


class ConsumerMetrics:
    def __init__(self, clock: Callable[[], int]) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._started = clock()
        self._fetch_latency = Window()
        self._fetch_bytes = Window()
        self._consumed = Window()
        self._commit_latency = Window()
        self._rebalance_latency = Window()
        self._consumed_total = 0
        self._fetch_total = 0
        self._commit_total = 0
        self._rebalance_total = 0
        self._failed_rebalance_total = 0
        self._rebalance_started: int | None = None
        self._last_poll: int | None = None
        self.lag: Callable[[], Mapping[Any, int]] = dict
        """The lag of each assigned partition now (log end of the last fetch minus the position)."""

    # --- recording ----------------------------------------------------------------------------------

    def fetched(self, latency_ms: int, size: int, now_ms: int) -> None:
        with self._lock:
            self._fetch_total += 1
            self._fetch_latency.add(now_ms, latency_ms)
            self._fetch_bytes.add(now_ms, size)

    def polled(self, records: int, now_ms: int) -> None:
        with self._lock:
            self._last_poll = now_ms
            self._consumed_total += records
            self._consumed.add(now_ms, records)

    def committed(self, latency_ms: int, now_ms: int) -> None:
        with self._lock:
            self._commit_total += 1
            self._commit_latency.add(now_ms, latency_ms)

    def rebalance_started(self, now_ms: int) -> None:
        """A join began, or partitions are being revoked or were lost: what comes next is a rebalance."""
        with self._lock:
            if self._rebalance_started is None:
                self._rebalance_started = now_ms

    def rebalance_done(self, now_ms: int) -> None:
        """A new assignment is in force."""
        with self._lock:
            self._rebalance_total += 1
            if self._rebalance_started is not None:
                self._rebalance_latency.add(now_ms, now_ms - self._rebalance_started)
            self._rebalance_started = None

    # --- reading ------------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, float]:
        now = self._clock()
        lag = self.lag()
        with self._lock:
            return {
                "records-consumed-total": float(self._consumed_total),
                "records-consumed-rate": self._consumed.rate(now, self._started),
                "records-lag-max": float(max(lag.values(), default=0)),
                "records-lag": float(sum(lag.values())),
                "fetch-total": float(self._fetch_total),
                "fetch-rate": self._fetch_latency.count_rate(now, self._started),
                "fetch-latency-avg": self._fetch_latency.avg(now),
                "fetch-latency-max": self._fetch_latency.max(now),
                "bytes-consumed-rate": self._fetch_bytes.rate(now, self._started),
                "commit-total": float(self._commit_total),
                "commit-latency-avg": self._commit_latency.avg(now),
                "commit-latency-max": self._commit_latency.max(now),
                "rebalance-total": float(self._rebalance_total),
                "rebalance-latency-avg": self._rebalance_latency.avg(now),
                "rebalance-latency-max": self._rebalance_latency.max(now),
                "last-poll-seconds-ago": -1.0 if self._last_poll is None else (now - self._last_poll) / 1000.0,
            }
