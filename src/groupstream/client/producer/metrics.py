"""``Producer.metrics()``: what the producer measures of itself, by the names of Kafka's Java producer
(``producer-metrics``): records sent and failed, produce requests and their latency, batch sizes.

The network thread records everything (requests as they are made and answered, batches as they end); the
application thread reads. One lock, held for a few additions; time comes in (``now_ms``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from groupstream.client.metrics_window import Window

__all__ = ["ProducerMetrics"]


class ProducerMetrics:
    def __init__(self, clock: Callable[[], int]) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._started = clock()
        self._sent = Window()
        self._errors = Window()
        self._latency = Window()
        self._batch_bytes = Window()
        self._request_records = Window()
        self._request_bytes = Window()
        self._sent_total = 0
        self._error_total = 0
        self._request_total = 0

    def request_sent(self, records: int, size: int, batch_sizes: list[int], now_ms: int) -> None:
        with self._lock:
            self._request_total += 1
            self._request_records.add(now_ms, records)
            self._request_bytes.add(now_ms, size)
            for b in batch_sizes:
                self._batch_bytes.add(now_ms, b)

    def request_answered(self, latency_ms: int, now_ms: int) -> None:
        with self._lock:
            self._latency.add(now_ms, latency_ms)

    def batch_done(self, records: int, failed: bool, now_ms: int) -> None:
        with self._lock:
            if failed:
                self._error_total += records
                self._errors.add(now_ms, records)
            else:
                self._sent_total += records
                self._sent.add(now_ms, records)

    def snapshot(self) -> dict[str, float]:
        now = self._clock()
        with self._lock:
            return {
                "record-send-total": float(self._sent_total),
                "record-send-rate": self._sent.rate(now, self._started),
                "record-error-total": float(self._error_total),
                "record-error-rate": self._errors.rate(now, self._started),
                "request-total": float(self._request_total),
                "request-rate": self._request_records.count_rate(now, self._started),
                "request-latency-avg": self._latency.avg(now),
                "request-latency-max": self._latency.max(now),
                "records-per-request-avg": self._request_records.avg(now),
                "batch-size-avg": self._batch_bytes.avg(now),
                "batch-size-max": self._batch_bytes.max(now),
                "outgoing-byte-rate": self._request_bytes.rate(now, self._started),
            }
