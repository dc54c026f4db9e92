"""The Producer: a thin application-side shell over the background network thread.

Application threads call ``produce``, which serializes the record, reserves its bytes in ``buffer.memory``
(blocking up to ``max.block.ms`` when full), queues it for the network thread and returns a
``concurrent.futures.Future``. Everything else happens on the network thread (seed 002): placing records into
per-partition batches, InitProducerId and sequences, Produce requests, retries, metadata. That thread
completes the futures; ``on_delivery`` callbacks are run on the application thread, inside ``poll``,
``flush`` and ``close``, as confluent-kafka does, so a slow callback never stalls the network.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import random
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, InvalidStateError
from types import TracebackType
from typing import Any

from groupstream.client.errors import KafkaError
from groupstream.client.net.metadata import MetadataCache
from groupstream.client.net.network_client import NetworkClient
from groupstream.client.net.network_thread import ApplicationEvent, NetworkThread, monotonic_ms
from groupstream.client.producer.accumulator import RecordAccumulator
from groupstream.client.producer.batch import RECORD_OVERHEAD, DeliveryCallback, ProducerBatch
from groupstream.client.producer.config import ProducerConfig
from groupstream.client.producer.errors import ProducerClosedError, SerializationError
from groupstream.client.producer.future import DeliveryFuture
from groupstream.client.producer.idempotence import IdempotenceManager
from groupstream.client.producer.intake import PendingRecord, RecordIntake
from groupstream.client.producer.memory import BufferMemory
from groupstream.client.producer.partitioner import Partitioner
from groupstream.client.producer.record_metadata import RecordMetadata
from groupstream.client.producer.sender import Sender, SenderConfig
from groupstream.protocol.error_codes import ErrorCode

log = logging.getLogger("groupstream.client.producer")

HeadersArg = Mapping[str, bytes | str | None] | Iterable[tuple[str, bytes | str | None]] | None
_Delivery = tuple[DeliveryCallback, BaseException | None, RecordMetadata]


class _Flush(ApplicationEvent):
    """Make every batch sendable now (``begin``), or stop doing so (the flush returned)."""

    __slots__ = ("begin",)

    def __init__(self, begin: bool) -> None:
        self.begin = begin


class Producer:
    """Produces records to Kafka topics; thread-safe. See the module docstring for the threading model."""

    def __init__(self, config: Mapping[str, Any] | None = None, **aliases: Any) -> None:
        self.config = ProducerConfig.from_mapping({**(config or {}), **aliases})
        cfg = self.config
        net = cfg.network
        self._closed = False
        self._records: queue.SimpleQueue[PendingRecord] = queue.SimpleQueue()
        self._deliveries: queue.SimpleQueue[_Delivery] = queue.SimpleQueue()
        self._memory = BufferMemory(cfg.buffer_memory)
        self._key_serializer = cfg.key_serializer
        self._value_serializer = cfg.value_serializer
        self._metadata = MetadataCache(
            max_age_ms=net.metadata_max_age_ms,
            retry_backoff_ms=net.retry_backoff_ms,
            allow_auto_topic_creation=True,  # as Java's producer asks: the broker's setting decides
        )
        self._accumulator = RecordAccumulator(
            batch_size=cfg.batch_size,
            linger_ms=cfg.linger_ms,
            compression=cfg.compression,
            delivery_timeout_ms=cfg.delivery_timeout_ms,
        )
        self._sender: Sender | None = None
        self._idempotence = (
            IdempotenceManager(
                retry_backoff_ms=net.retry_backoff_ms,
                retry_backoff_max_ms=net.retry_backoff_max_ms,
                in_flight_batches=lambda: self._sender.in_flight_batches if self._sender is not None else 0,
            )
            if cfg.idempotence
            else None
        )
        self._sender = Sender(
            SenderConfig(
                acks=cfg.acks,
                request_timeout_ms=net.request_timeout_ms,
                retries=cfg.retries,
                retry_backoff_ms=net.retry_backoff_ms,
                retry_backoff_max_ms=net.retry_backoff_max_ms,
                delivery_timeout_ms=cfg.delivery_timeout_ms,
                max_in_flight=net.max_in_flight,
                max_request_size=cfg.max_request_size,
            ),
            self._accumulator,
            self._metadata,
            self._idempotence,
            self._batch_done,
        )
        rng = random.Random()
        self._intake = RecordIntake(
            self._records,
            self._accumulator,
            self._metadata,
            Partitioner(cfg.partitioner, cfg.batch_size, rng.randrange, self._metadata.available_partitions),
            max_block_ms=cfg.max_block_ms,
            on_failed=self._record_failed,
            unreachable=lambda: self._client.unreachable,
        )
        managers: list[Any] = [self._intake]
        if self._idempotence is not None:
            managers.append(self._idempotence)
        managers.append(self._sender)
        client = NetworkClient(net, self._metadata, monotonic_ms)
        self._client = client
        self._thread = NetworkThread(
            client, managers, self._process_event, name=f"groupstream-producer-{net.client_id}"
        )
        self._wakeup = client.wakeup
        self._thread.start()

    # --- producing -------------------------------------------------------------------------------------------------

    def produce(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        timestamp: int | None = None,
        headers: HeadersArg = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> Future[RecordMetadata]:
        """Queue one record; the future resolves to its `RecordMetadata` once the broker acknowledged it (or
        fails with the reason it could not be). ``on_delivery(error, metadata)`` runs in a later ``poll``,
        ``flush`` or ``close`` on the calling thread. Blocks only while ``buffer.memory`` is full."""
        if self._closed:
            raise ProducerClosedError("produce() after close()")
        if not self._thread.alive:
            raise ProducerClosedError(f"the producer's network thread stopped: {self._thread.failure!r}")
        fatal = self._idempotence.fatal_error if self._idempotence is not None else None
        if fatal is not None:
            raise fatal
        k = self._serialize(self._key_serializer, key, "key", topic) if key is not None else None
        v = self._serialize(self._value_serializer, value, "value", topic) if value is not None else None
        hdrs = _headers(headers) if headers else ()
        size = RECORD_OVERHEAD + (len(k) if k is not None else 0) + (len(v) if v is not None else 0)
        for hk, hv in hdrs:
            size += len(hk) + (len(hv) if hv is not None else 0) + 4
        future: Future[RecordMetadata] = DeliveryFuture()
        cfg = self.config
        if size > cfg.max_request_size or size > cfg.buffer_memory:
            limit = "max.request.size" if size > cfg.max_request_size else "buffer.memory"
            err = KafkaError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"the record is {size} bytes serialized, more than {limit}={getattr(cfg, limit.replace('.', '_'))}",
                resource=topic,
            )
            future.set_exception(err)
            if on_delivery is not None:
                self._deliveries.put(
                    (on_delivery, err, RecordMetadata(topic, -1 if partition is None else partition, -1, -1))
                )
            return future
        if timestamp is None:
            timestamp = time.time_ns() // 1_000_000
        elif timestamp < 0:
            raise ValueError(f"timestamp must be milliseconds since the epoch, not {timestamp}")
        self._memory.reserve(size, cfg.max_block_ms)
        self._records.put((topic, partition, k, v, timestamp, hdrs, future, on_delivery, size))
        self._wakeup()
        return future

    send = produce  # the Java client's and kafka-python's name

    @staticmethod
    def _serialize(
        serializer: Callable[[Any], bytes | None] | None, obj: Any, what: str, topic: str
    ) -> bytes | None:
        if serializer is not None:
            obj = serializer(obj)
            if obj is None:
                return None
        if type(obj) is bytes:
            return obj
        if isinstance(obj, str):
            return obj.encode()
        if isinstance(obj, (bytearray, memoryview)):
            return bytes(obj)
        raise SerializationError(
            f"{what} for topic {topic!r} is a {type(obj).__name__}, not bytes or str; set {what}.serializer"
        )

    # --- completion (network thread) ----------------------------------------------------------------------------

    def _batch_done(
        self, batch: ProducerBatch, base_offset: int, log_append_time: int, error: BaseException | None
    ) -> None:
        topic, partition = batch.topic, batch.partition
        futures = batch.futures
        if error is None:
            timestamps = batch.timestamps
            if log_append_time >= 0:
                timestamps = [log_append_time] * len(futures)
            new = tuple.__new__  # the namedtuple's own __new__ is a Python function: too slow per record
            if base_offset >= 0:
                mds = [
                    new(RecordMetadata, (topic, partition, base_offset + i, ts))
                    for i, ts in enumerate(timestamps)
                ]
            else:
                mds = [new(RecordMetadata, (topic, partition, -1, ts)) for ts in timestamps]
            _resolve(futures, mds)
            if batch.callbacks:
                put = self._deliveries.put
                for i, cb in batch.callbacks:
                    put((cb, None, mds[i]))
        else:
            _fail(futures, error)
            if batch.callbacks:
                for i, cb in batch.callbacks:
                    self._deliveries.put(
                        (cb, error, RecordMetadata(topic, partition, -1, batch.timestamps[i]))
                    )
        self._memory.release(batch.memory, len(futures))

    def _record_failed(self, rec: PendingRecord, error: BaseException) -> None:
        topic, partition, _k, _v, timestamp, _h, future, callback, size = rec
        _fail([future], error)
        if callback is not None:
            self._deliveries.put(
                (
                    callback,
                    error,
                    RecordMetadata(topic, -1 if partition is None else partition, -1, timestamp),
                )
            )
        self._memory.release(size, 1)

    def _process_event(self, event: ApplicationEvent, now_ms: int) -> None:
        if isinstance(event, _Flush):
            if event.begin:
                self._accumulator.begin_flush()
            else:
                self._accumulator.end_flush()

    # --- application-side waiting --------------------------------------------------------------------------------

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
    def _deliver(item: _Delivery) -> None:
        callback, error, metadata = item
        callback(error, metadata)

    def flush(self, timeout: float | None = None) -> int:
        """Send everything now (no linger) and wait up to ``timeout`` seconds (None: until done) for every
        record produced so far to be delivered or failed, running delivery callbacks meanwhile. Returns the
        number of records still outstanding (0 when all are done)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self._thread.add_event(_Flush(True))
        try:
            seen = 0
            while True:
                self._serve_deliveries()
                if self._memory.records == 0:
                    break
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                if not self._thread.alive:
                    break
                seen = self._memory.wait_release(seen, 0.5 if remaining is None else min(remaining, 0.5))
        finally:
            self._thread.add_event(_Flush(False))
        self._serve_deliveries()
        return self._memory.records

    def __len__(self) -> int:
        """Records produced and not yet delivered or failed (confluent-kafka's ``len(producer)``)."""
        return self._memory.records

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is pending within ``timeout`` seconds (None: up to ``delivery.timeout.ms``), fail the
        rest with ProducerClosedError, stop the network thread and run the last delivery callbacks. Returns
        as soon as nothing is pending; with records pending it waits for them at most ``timeout``, even when no
        broker can be reached (one may come back meanwhile), and their error then says that none could be."""
        if self._closed:
            return
        self._closed = True
        timeout_ms = self.config.delivery_timeout_ms if timeout is None else max(0, int(timeout * 1000))

        def undelivered() -> ProducerClosedError:
            text = f"the producer closed before this record was delivered (close timeout {timeout_ms} ms)"
            why = self._client.unreachable
            return ProducerClosedError(f"{text}: {why}" if why is not None else text)

        self._thread.close(timeout_ms, undelivered)
        self._serve_deliveries()

    def __enter__(self) -> Producer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Producer({self.config.network.client_id!r}, {len(self)} outstanding{', closed' if self._closed else ''})"


def _resolve(futures: list[Future[Any]], results: list[RecordMetadata]) -> None:
    try:
        for f, md in zip(futures, results, strict=True):
            f.set_result(md)
    except InvalidStateError:  # a caller cancelled its future: settle the others one by one
        for f, md in zip(futures, results, strict=True):
            with contextlib.suppress(InvalidStateError):
                f.set_result(md)


def _fail(futures: list[Future[Any]], error: BaseException) -> None:
    for f in futures:
        with contextlib.suppress(InvalidStateError):
            f.set_exception(error)


def _headers(headers: HeadersArg) -> list[tuple[str, bytes | None]]:
    items = headers.items() if isinstance(headers, Mapping) else headers
    out: list[tuple[str, bytes | None]] = []
    for k, v in items or ():
        if not isinstance(k, str):
            raise SerializationError(f"header names must be str, got {k!r}")
        out.append((k, v.encode() if isinstance(v, str) else (bytes(v) if v is not None else None)))
    return out
