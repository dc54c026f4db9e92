"""How records end: the network thread completes each batch's outcome (and the own outcomes of records that
never reached a batch), and queues the ``on_delivery`` callbacks asked for; the application thread runs them
inside ``poll``, ``flush`` and ``close``, as confluent-kafka runs them, so a slow callback never stalls the
network."""

from __future__ import annotations

import queue

from groupstream.client.net.network_thread import monotonic_ms
from groupstream.client.producer.batch import ProducerBatch
from groupstream.client.producer.core import Delivery, ProducerCore
from groupstream.client.producer.intake import PendingRecord
from groupstream.client.producer.record_metadata import RecordMetadata


class Deliveries(ProducerCore):
    # --- completion (network thread) ----------------------------------------------------------------------------

    def _batch_done(
        self, batch: ProducerBatch, base_offset: int, log_append_time: int, error: BaseException | None
    ) -> None:
        """The sender's report on a batch: written at ``base_offset`` (``error`` None) or failed."""
        self._metrics.batch_done(batch.record_count, error is not None, monotonic_ms())
        if error is None:
            batch.outcome.succeed(base_offset, log_append_time)
        else:
            batch.outcome.fail(error)
        extras = batch.extras
        if extras:
            topic, partition = batch.topic, batch.partition
            put = self._deliveries.put
            for index, ts, callback, own in extras:
                if error is None:
                    offset = base_offset + index if base_offset >= 0 else -1
                    if own is not None:
                        own.succeed(offset, log_append_time)
                    if callback is not None:
                        md = RecordMetadata(
                            topic, partition, offset, log_append_time if log_append_time >= 0 else ts
                        )
                        put((callback, None, md))
                else:
                    if own is not None:
                        own.fail(error)
                    if callback is not None:
                        put((callback, error, RecordMetadata(topic, partition, -1, ts)))
        self._acc.completed(batch)
        self._memory.release(batch.memory)

    def _record_failed(self, rec: PendingRecord, error: BaseException) -> None:
        """The intake's report on a handed-over record that gave up before it reached a batch."""
        topic, partition, _k, _v, timestamp, _h, outcome, callback, size = rec
        self._metrics.batch_done(1, True, monotonic_ms())
        outcome.fail(error)
        if callback is not None:
            p = -1 if partition is None else partition
            self._deliveries.put((callback, error, RecordMetadata(topic, p, -1, timestamp)))
        self._memory.release(size)

    # --- the application thread -------------------------------------------------------------------------------

    def metrics(self) -> dict[str, float]:
        """The producer's measurements by Kafka's metric names: ``record-send-rate``/``-total``,
        ``record-error-rate``/``-total``, ``request-latency-avg``/``-max``, ``request-rate``/``-total``,
        ``records-per-request-avg``, ``batch-size-avg``/``-max``, ``outgoing-byte-rate``; rates and averages
        over the last minute."""
        return self._metrics.snapshot()

    def poll(self, timeout: float | None = 0) -> int:
        """Run the delivery callbacks that are due, waiting up to ``timeout`` seconds (None: forever) for the
        first one; returns how many ran."""
        served = self._serve_deliveries()
        if served or timeout == 0:
            return served
        try:
            item = self._deliveries.get(timeout=timeout)
        except queue.Empty:
            return 0
        self._deliver(item)
        return 1 + self._serve_deliveries()

    def _serve_deliveries(self) -> int:
        n = 0
        get = self._deliveries.get_nowait
        while True:
            try:
                item = get()
            except queue.Empty:
                return n
            self._deliver(item)
            n += 1

    @staticmethod
    def _deliver(item: Delivery) -> None:
        callback, error, metadata = item
        callback(error, metadata)
