"""The Producer: records appended by the calling thread straight into their partition's batch; everything that
talks to a broker runs on the background network thread.

``produce`` costs about a dict lookup and an append: it serializes the record, picks its partition from the
topic's route (published by the network thread), and, holding the accumulator's lock only for that, appends
the record's bytes to the partition's open batch (the C encoder writes them in place; see ``encode``). It
returns a `DeliveryHandle`, a 3-tuple that reads the record's fate from its batch's outcome when asked, and
creates nothing else: no future, no queue entry, no wakeup, no ``buffer.memory`` reservation. Those happen
once per batch, when a record needs a new one: the batch's capacity is reserved (blocking up to
``max.block.ms`` while the buffer is full) and the network thread is woken if the new batch made an older one
sendable or the queues were empty. A record whose topic has no route yet (the first records of a topic) is
handed to the network thread, which places it once the metadata arrives, ahead of any later record.

The bulk paths, ``produce_batch`` (a list of ``(key, value[, headers])`` rows) and ``produce_arrow`` (an Arrow
table with Spark's Kafka sink columns), append many rows per call of the C encoder, reading Arrow columns'
buffers directly, and return one `BulkDelivery` for all of them.

The network thread (seed 002) does the rest: InitProducerId and sequences, draining ready batches into
Produce requests, retries, metadata, and completing each batch's outcome. ``on_delivery`` callbacks, asked for
per record, run on the application thread inside ``poll``, ``flush`` and ``close``, as confluent-kafka runs
them, so a slow callback never stalls the network.
"""

from __future__ import annotations

import logging
import queue
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

from groupstream.client.errors import KafkaError
from groupstream.client.net.metadata import MetadataCache
from groupstream.client.net.network_client import NetworkClient
from groupstream.client.net.network_thread import ApplicationEvent, NetworkThread, monotonic_ms
from groupstream.client.producer import encode
from groupstream.client.producer.accumulator import RecordAccumulator, TopicRoute
from groupstream.client.producer.batch import RECORD_OVERHEAD, DeliveryCallback, ProducerBatch
from groupstream.client.producer.config import ProducerConfig
from groupstream.client.producer.errors import ProducerClosedError, SerializationError
from groupstream.client.producer.future import BatchOutcome, BulkDelivery, DeliveryHandle, failed_handle
from groupstream.client.producer.idempotence import IdempotenceManager
from groupstream.client.producer.intake import PendingRecord, RecordIntake
from groupstream.client.producer.memory import BufferMemory
from groupstream.client.producer.partitioner import Partitioner
from groupstream.client.producer.record_metadata import RecordMetadata
from groupstream.client.producer.sender import Sender, SenderConfig
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.records.batch_header import HEADER_SIZE

log = logging.getLogger("groupstream.client.producer")

HeadersArg = Mapping[str, bytes | str | None] | Iterable[tuple[str, bytes | str | None]] | None
Headers = list[tuple[str, bytes | None]]
_Delivery = tuple[DeliveryCallback, BaseException | None, RecordMetadata]

_time_ns = time.time_ns
_BULK_CHUNK = 4096  # rows per call of the encoder in the bulk paths: the lock is let go in between
_ROW_OVERHEAD = (
    12  # a small record's bytes beyond its key and value, about (sizing batches in the bulk paths)
)


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
        self._serializing = cfg.key_serializer is not None or cfg.value_serializer is not None
        self._max_record = min(cfg.max_request_size, cfg.buffer_memory)
        self._metadata = MetadataCache(
            max_age_ms=net.metadata_max_age_ms,
            retry_backoff_ms=net.retry_backoff_ms,
            allow_auto_topic_creation=True,  # as Java's producer asks: the broker's setting decides
        )
        self._acc = RecordAccumulator(
            batch_size=cfg.batch_size,
            linger_ms=cfg.linger_ms,
            compression=cfg.compression,
            delivery_timeout_ms=cfg.delivery_timeout_ms,
            capacity=min(cfg.batch_size, cfg.max_request_size, cfg.buffer_memory),
            max_capacity=min(cfg.batch_max_size, cfg.max_request_size, cfg.buffer_memory),
        )
        self._partitioner = Partitioner(cfg.partitioner, random.Random().randrange)
        self._custom = self._partitioner.custom
        self._by_key = self._partitioner.use_keys and self._custom is None
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
            self._acc,
            self._metadata,
            self._idempotence,
            self._batch_done,
        )
        self._intake = RecordIntake(
            self._records,
            self._acc,
            self._metadata,
            self._partitioner,
            self._memory,
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
        self._append = encode.append_record  # looked up here, so a test can run the pure-Python encoder
        self._append_rows = encode.append_rows
        self._append_routed = encode.append_routed
        self._key_partition = encode.key_partition
        self._lock = self._acc.lock
        self._plain = not self._serializing and self._custom is None  # produce's one-call path applies
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
    ) -> DeliveryHandle:
        """Append one record to its partition's batch and return its `DeliveryHandle`: ``result()`` gives its
        `RecordMetadata` once the broker acknowledged it (or raises why it could not be delivered); dropping
        the handle costs nothing. ``on_delivery(error, metadata)``, if given, runs in a later ``poll``,
        ``flush`` or ``close`` on the calling thread. Blocks only when the record needs a new batch and
        ``buffer.memory`` is full."""
        route = self._acc.open_routes.get(topic)
        if route is not None and headers is None and on_delivery is None and self._plain:
            # the common case in one call of the encoder: partition, append, handle (see encode.append_routed)
            lock = self._lock
            lock.acquire()
            try:
                handle: DeliveryHandle | None = self._append_routed(
                    route.bufs, route.limits, route.outcomes, route.count, route.sticky, self._by_key, partition,
                    key, value, timestamp, DeliveryHandle,
                )  # fmt: skip
            except (TypeError, ValueError, OverflowError):
                handle = None  # the general path says what is wrong with the record
            finally:
                lock.release()
            if handle is not None:
                return handle
        return self._produce(topic, value, key, partition, timestamp, headers, on_delivery)

    def _produce(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        timestamp: int | None,
        headers: HeadersArg,
        on_delivery: DeliveryCallback | None,
    ) -> DeliveryHandle:
        """``produce`` for everything: serializers, headers, callbacks, a record that needs a new batch, a topic
        without a route, a refused record."""
        acc = self._acc
        if acc.refusal is not None:
            raise self._refused()
        if self._serializing:
            key = self._serialize(self._key_serializer, key, "key", topic) if key is not None else None
            value = (
                self._serialize(self._value_serializer, value, "value", topic) if value is not None else None
            )
        else:
            if value is not None and type(value) is not bytes:
                value = _coerce(value, "value", topic)
            if key is not None and type(key) is not bytes:
                key = _coerce(key, "key", topic)
        hdrs = _headers(headers) if headers else None
        if timestamp is None:
            timestamp = _time_ns() // 1_000_000
        elif timestamp < 0:
            raise ValueError(f"timestamp must be milliseconds since the epoch, not {timestamp}")
        route = acc.routes.get(topic)
        if route is not None:
            if partition is not None:
                p = partition
            elif key is not None and self._by_key:
                p = self._key_partition(key, route.count)
            elif self._custom is None:
                p = route.sticky
            else:
                p = -1
            if 0 <= p < route.count:
                lock = acc.lock
                lock.acquire()
                try:
                    batch = route.open[p]
                    if batch is not None:
                        index = self._append(batch.buf, timestamp, key, value, hdrs, batch.capacity)
                        if index >= 0:
                            if on_delivery is not None:
                                batch.add_extra(index, timestamp, on_delivery, None)
                            return DeliveryHandle.make(batch.outcome, index, timestamp)
                finally:
                    lock.release()
        return self._produce_slow(topic, partition, key, value, timestamp, hdrs, on_delivery)

    send = produce  # the Java client's and kafka-python's name

    @staticmethod
    def _serialize(
        serializer: Callable[[Any], bytes | None] | None, obj: Any, what: str, topic: str
    ) -> bytes | bytearray | memoryview | None:
        if serializer is not None:
            obj = serializer(obj)
            if obj is None:
                return None
        if type(obj) is bytes:
            return obj
        return _coerce(obj, what, topic)

    def _produce_slow(
        self,
        topic: str,
        partition: int | None,
        key: Any,
        value: Any,
        timestamp: int,
        hdrs: Headers | None,
        on_delivery: DeliveryCallback | None,
    ) -> DeliveryHandle:
        """A record the fast path could not append: it needs a new batch, its topic has no route yet, or it is
        refused (too large, a partition that does not exist)."""
        size = _record_size(key, value, hdrs)
        cfg = self.config
        if size > self._max_record:
            limit = "max.request.size" if size > cfg.max_request_size else "buffer.memory"
            err = KafkaError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"the record is {size} bytes serialized, more than {limit}={getattr(cfg, limit.replace('.', '_'))}",
                resource=topic,
            )
            return self._refuse_record(topic, partition, timestamp, err, on_delivery)
        while True:
            route = self._acc.routes.get(topic)
            if route is not None:
                return self._append_new(route, partition, key, value, timestamp, hdrs, on_delivery, size)
            handle = self._hand_over(topic, partition, key, value, timestamp, hdrs, on_delivery, size)
            if handle is not None:
                return handle  # else the route appeared meanwhile: append it here after all

    def _append_new(
        self,
        route: TopicRoute,
        partition: int | None,
        key: Any,
        value: Any,
        timestamp: int,
        hdrs: Headers | None,
        on_delivery: DeliveryCallback | None,
        size: int,
    ) -> DeliveryHandle:
        acc = self._acc
        topic = route.topic
        sticky = partition is None and self._custom is None and (key is None or not self._by_key)
        if partition is None and not sticky:
            partition = self._partitioner.partition(route, key)  # a key's or a custom partitioner's: no lock
        if partition is None:
            partition = -1  # sticky: chosen under the lock
        elif not 0 <= partition < route.count:
            err = KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"partition {partition} of topic {topic!r} does not exist (it has {route.count})",
                resource=topic,
            )
            return self._refuse_record(topic, partition, timestamp, err, on_delivery)
        capacity = acc.capacity_for(size)
        memory = self._memory
        append = self._append
        lock = acc.lock
        reserved = 0  # buffer.memory taken for a new batch and not given to one yet
        wake = False
        try:
            while True:
                lock.acquire()
                try:
                    if acc.refusal is not None:
                        raise self._refused()
                    batch, index, partition, sealed = self._place(
                        route, partition, sticky, timestamp, key, value, hdrs
                    )
                    wake = wake or sealed
                    if index < 0 and (reserved or memory.try_reserve(capacity)):
                        reserved = 0  # the new batch holds it from now on
                        batch, opened = acc.open_batch(route, partition, capacity, capacity, monotonic_ms())
                        wake = wake or opened
                        index = append(batch.buf, timestamp, key, value, hdrs, capacity)
                    if index >= 0:
                        assert batch is not None
                        if on_delivery is not None:
                            batch.add_extra(index, timestamp, on_delivery, None)
                        handle = DeliveryHandle.make(batch.outcome, index, timestamp)
                        break
                finally:
                    lock.release()
                # buffer.memory is full: wait for the network thread to free some, without the lock
                memory.reserve(capacity, self.config.max_block_ms, self.__len__)
                reserved = capacity
        finally:
            if reserved:
                memory.release(reserved)
        if wake:
            self._wakeup()
        return handle

    def _place(
        self,
        route: TopicRoute,
        partition: int,
        sticky: bool,
        timestamp: int,
        key: Any,
        value: Any,
        hdrs: Headers | None,
    ) -> tuple[ProducerBatch | None, int, int, bool]:
        """Append to the partition's open batch, letting it grow if a batch ahead of it waits; for a record
        without a key whose sticky partition's batch is full, seal that batch and move the sticky partition
        (KIP-480). Returns the batch, the record's index (-1: it needs a new batch in the returned partition),
        the partition, and whether a batch was sealed. The caller holds the lock."""
        acc = self._acc
        append = self._append
        sealed = False
        if sticky:
            partition = self._partitioner.sticky(route)
        batch = route.open[partition]
        index = -1
        if batch is not None:
            index = append(batch.buf, timestamp, key, value, hdrs, batch.capacity)
            if index < 0 and acc.grow(route, partition, self._memory.try_reserve):
                index = append(batch.buf, timestamp, key, value, hdrs, batch.capacity)
            if index < 0 and sticky:
                sealed = acc.seal_open(route, partition)
                partition = self._partitioner.next_sticky(route)
                batch = route.open[partition]
                if batch is not None:
                    index = append(batch.buf, timestamp, key, value, hdrs, batch.capacity)
        return batch, index, partition, sealed

    def _hand_over(
        self,
        topic: str,
        partition: int | None,
        key: Any,
        value: Any,
        timestamp: int,
        hdrs: Headers | None,
        on_delivery: DeliveryCallback | None,
        size: int,
    ) -> DeliveryHandle | None:
        """Queue a record for the network thread (its topic has no route); None if a route appeared first."""
        if key is not None and type(key) is not bytes:
            key = encode.as_bytes(key, "key")  # placed later: copy what the caller may still change
        if value is not None and type(value) is not bytes:
            value = encode.as_bytes(value, "value")
        acc = self._acc
        self._memory.reserve(size, self.config.max_block_ms, self.__len__)
        outcome = BatchOutcome(topic, -1 if partition is None else partition)
        with acc.lock:
            if acc.refusal is not None:
                self._memory.release(size)
                raise self._refused()
            if topic in acc.routes:
                self._memory.release(size)
                return None
            self._records.put((topic, partition, key, value, timestamp, hdrs, outcome, on_delivery, size))
            acc.pending += 1
        self._wakeup()
        return DeliveryHandle.make(outcome, 0, timestamp)

    def _refuse_record(
        self,
        topic: str,
        partition: int | None,
        timestamp: int,
        error: BaseException,
        on_delivery: DeliveryCallback | None,
    ) -> DeliveryHandle:
        p = -1 if partition is None else partition
        if on_delivery is not None:
            self._deliveries.put((on_delivery, error, RecordMetadata(topic, p, -1, timestamp)))
        return failed_handle(topic, p, timestamp, error)

    def _refused(self) -> BaseException:
        if self._closed:
            return ProducerClosedError("produce() after close()")
        fatal = self._idempotence.fatal_error if self._idempotence is not None else None
        if fatal is not None:
            return fatal
        if not self._thread.alive:
            return ProducerClosedError(f"the producer's network thread stopped: {self._thread.failure!r}")
        return self._acc.refusal or ProducerClosedError("the producer refuses records")

    # --- the bulk paths ----------------------------------------------------------------------------------------

    def produce_batch(
        self,
        topic: str,
        records: Iterable[tuple[Any, ...]],
        *,
        partition: int | None = None,
        timestamp: int | None = None,
    ) -> BulkDelivery:
        """Append many records of one topic: ``records`` are ``(key, value)`` or ``(key, value, headers)``
        tuples (serialized as ``produce`` does). Each goes to ``partition``, or where ``produce`` would put it.
        All get ``timestamp`` (default: now). Returns one `BulkDelivery` for them all; no per-record callback.
        Waits, as ``produce`` may, when ``buffer.memory`` is full, and for the topic's metadata (up to
        ``max.block.ms``) when it has none yet."""
        if self._acc.refusal is not None:
            raise self._refused()
        rows = records if isinstance(records, list | tuple) else list(records)
        if self._serializing or any(len(r) != 2 for r in rows):
            rows = [self._bulk_row(topic, r) for r in rows]
        if timestamp is None:
            timestamp = _time_ns() // 1_000_000
        elif timestamp < 0:
            raise ValueError(f"timestamp must be milliseconds since the epoch, not {timestamp}")
        if not rows:
            return BulkDelivery(0, [])
        route, first = self._route_for(topic, partition, rows[0], timestamp)
        outcomes = [first[0]] if first is not None else []
        start = 0 if first is None else 1
        if route is None or start == len(rows):
            return BulkDelivery(len(rows), outcomes)
        if partition is not None and not 0 <= partition < route.count:
            raise ValueError(
                f"partition {partition} of topic {topic!r} does not exist (it has {route.count})"
            )
        partitions: int | list[int | None] | None = partition
        if partition is None and self._custom is not None:
            custom, count = self._custom, route.count
            partitions = [None] * start + [custom(topic, r[0], count) for r in rows[start:]]
            self._check_partitions(route, partitions)
        append_rows = self._append_rows

        def run(i: int, end: int, r: TopicRoute, touched: bytearray) -> tuple[int, int]:
            return append_rows(r.bufs, r.limits, timestamp, r.count, r.sticky, self._by_key, i, end, rows,
                               partitions, None, None, None, touched)  # fmt: skip

        def keyless(i: int) -> bool:
            return partitions is None and (rows[i][0] is None or not self._by_key)

        step = max(1, len(rows) // 64)
        sample = rows[start::step]
        row_bytes = _ROW_OVERHEAD + sum(len(r[0] or b"") + len(r[1] or b"") for r in sample) // max(
            1, len(sample)
        )
        self._bulk(route, start, len(rows), run, keyless, outcomes, row_bytes)
        return BulkDelivery(len(rows), outcomes)

    def produce_arrow(
        self,
        table: Any,
        topic: str | None = None,
        *,
        partition: int | None = None,
        timestamp: int | None = None,
    ) -> BulkDelivery:
        """Append the rows of a ``pyarrow.Table`` or ``RecordBatch`` with the columns of Spark's Kafka sink:
        ``value`` (binary or string), optional ``key``, ``headers`` (list of struct<key: string, value:
        binary>), ``partition`` (integers) and ``topic`` (used when the ``topic`` argument is None). Keys and
        values are encoded straight from the columns' buffers; rows whose ``headers`` are not all empty take
        a slower path through Python objects. Serializers do not apply. Returns one `BulkDelivery`."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if self._acc.refusal is not None:
            raise self._refused()
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        if not isinstance(table, pa.Table):
            raise TypeError(f"produce_arrow takes a pyarrow Table or RecordBatch, not {type(table).__name__}")
        names = set(table.column_names)
        if "value" not in names:
            raise ValueError("produce_arrow needs a 'value' column")
        if timestamp is None:
            timestamp = _time_ns() // 1_000_000
        if topic is None:
            if "topic" not in names:
                raise ValueError("produce_arrow needs a topic: the 'topic' argument or a 'topic' column")
            topics = table.column("topic")
            if topics.null_count:
                raise ValueError("a row has no topic (a null 'topic' and no 'topic' argument)")
            outcomes: list[BatchOutcome] = []
            for t in pc.unique(topics).to_pylist():
                part = self.produce_arrow(table.filter(pc.equal(topics, t)), str(t), partition=partition,
                                          timestamp=timestamp)  # fmt: skip
                outcomes += part._outcomes
            return BulkDelivery(table.num_rows, outcomes)
        outcomes = []
        done = 0
        for rb in table.combine_chunks().to_batches() if table.num_rows else []:
            part = self._produce_arrow_batch(rb, topic, partition, timestamp)
            outcomes += part._outcomes
            done += part.count
        return BulkDelivery(done, outcomes)

    def _produce_arrow_batch(
        self, rb: Any, topic: str, partition: int | None, timestamp: int
    ) -> BulkDelivery:
        import pyarrow.compute as pc

        names = set(rb.schema.names)
        n = rb.num_rows
        keys = rb.column("key") if "key" in names else None
        values = rb.column("value")
        parts = rb.column("partition") if "partition" in names and partition is None else None
        headers = rb.column("headers") if "headers" in names else None
        if headers is not None and (
            headers.null_count == n or pc.max(pc.list_value_length(headers)).as_py() in (0, None)
        ):
            headers = None  # no row has a header: the columns go to the encoder as they are
        first_row = (
            _py_value(keys, 0),
            _py_value(values, 0),
            _arrow_headers(headers[0].as_py()) if headers is not None else None,
        )
        row_partition = partition
        if parts is not None and parts[0].is_valid:
            row_partition = int(parts[0].as_py())
        route, first = self._route_for(topic, row_partition, first_row, timestamp)
        outcomes = [first[0]] if first is not None else []
        start = 0 if first is None else 1
        if route is None or start == n:
            return BulkDelivery(n, outcomes)
        count = route.count
        if partition is not None and not 0 <= partition < count:
            raise ValueError(f"partition {partition} of topic {topic!r} does not exist (it has {count})")
        if parts is not None:
            low, high = pc.min_max(parts).values()
            if (low.is_valid and low.as_py() < 0) or (high.is_valid and high.as_py() >= count):
                raise ValueError(f"a 'partition' of topic {topic!r} is outside 0..{count - 1}")
            parts = parts.cast("int32")
        partitions: int | list[int | None] | None = partition
        if partition is None and parts is None and self._custom is not None:
            custom = self._custom
            key_list = keys.to_pylist() if keys is not None else [None] * n
            partitions = [None] * start + [custom(topic, k, count) for k in key_list[start:]]
            self._check_partitions(route, partitions)
        append_rows = self._append_rows
        if headers is not None:  # through Python objects; the encoder still takes the rows in one call
            key_list = keys.to_pylist() if keys is not None else [None] * n
            rows = list(
                zip(
                    key_list,
                    values.to_pylist(),
                    [_arrow_headers(h) for h in headers.to_pylist()],
                    strict=True,
                )
            )
            if parts is not None and partitions is None:
                partitions = parts.to_pylist()

            def run(i: int, end: int, r: TopicRoute, touched: bytearray) -> tuple[int, int]:
                return append_rows(r.bufs, r.limits, timestamp, r.count, r.sticky, self._by_key, i, end, rows,
                                   partitions, None, None, None, touched)  # fmt: skip
        else:
            key_spec = _binary_spec(keys) if keys is not None else None
            value_spec = _binary_spec(values)
            part_spec = _int32_spec(parts) if parts is not None and partitions is None else None

            def run(i: int, end: int, r: TopicRoute, touched: bytearray) -> tuple[int, int]:
                return append_rows(r.bufs, r.limits, timestamp, r.count, r.sticky, self._by_key, i, end, None,
                                   partitions, key_spec, value_spec, part_spec, touched)  # fmt: skip

        def keyless(i: int) -> bool:
            if partitions is not None or (parts is not None and parts[i].is_valid):
                return False
            return keys is None or not keys[i].is_valid or not self._by_key

        data = sum(pc.sum(pc.binary_length(c)).as_py() or 0 for c in (keys, values) if c is not None)
        self._bulk(route, start, n, run, keyless, outcomes, _ROW_OVERHEAD + data // n)
        return BulkDelivery(n, outcomes)

    def _bulk_row(self, topic: str, row: tuple[Any, ...]) -> tuple[Any, ...]:
        if not isinstance(row, tuple) or len(row) not in (2, 3):
            raise TypeError(f"a record is a (key, value) or (key, value, headers) tuple, not {row!r}")
        key = self._serialize(self._key_serializer, row[0], "key", topic) if row[0] is not None else None
        value = (
            self._serialize(self._value_serializer, row[1], "value", topic) if row[1] is not None else None
        )
        if len(row) == 3 and row[2]:
            return (key, value, _headers(row[2]))
        return (key, value)

    def _check_partitions(self, route: TopicRoute, partitions: list[int | None]) -> None:
        for p in partitions:
            if p is not None and not 0 <= p < route.count:
                raise ValueError(
                    f"the partitioner chose partition {p} of topic {route.topic!r} (it has {route.count})"
                )

    def _route_for(
        self, topic: str, partition: int | None, row: tuple[Any, ...], timestamp: int
    ) -> tuple[TopicRoute | None, tuple[BatchOutcome, int] | None]:
        """The topic's route. Without one yet, the first row is produced as ``produce`` would (handed to the
        network thread, which asks for the metadata) and this waits for the route, or for that record to fail
        (after ``max.block.ms`` without metadata, or at close), raising its error; the first row's outcome is
        returned then, as it is produced."""
        acc = self._acc
        route = acc.routes.get(topic)
        if route is not None:
            return route, None
        key, value = row[0], row[1]
        hdrs = row[2] if len(row) > 2 else None
        handle = self._produce_slow(topic, partition, key, value, timestamp, hdrs, None)
        first = (handle[0], handle[1])
        with acc.route_changed:  # notified by a route published and by a handed-over record failing
            while topic not in acc.routes and not handle.done():
                if not self._thread.alive:
                    raise self._refused()
                acc.route_changed.wait(1.0)
            route = acc.routes.get(topic)
        if route is None:
            error = handle.exception(0)
            assert error is not None
            raise error
        return route, first

    def _bulk(
        self,
        route: TopicRoute,
        start: int,
        end: int,
        run: Callable[[int, int, TopicRoute, bytearray], tuple[int, int]],
        keyless: Callable[[int], bool],
        outcomes: list[BatchOutcome],
        row_bytes: int,
    ) -> None:
        """Append rows ``start..end-1`` with ``run`` (one call of the encoder for many rows), opening batches as
        partitions fill up, and collect the outcomes of the batches the rows went into.

        The rows are all here already, so a batch opened for them is sized for the rows left that will go to it
        (``row_bytes`` each, estimated; all of them for records without a key or with one partition, their
        share of the partitions otherwise), between ``batch.size`` and ``batch.max.size``: what a batch would
        grow to anyway while the sender works through the backlog, without the steps.

        A batch is opened only when the row that needs it is appended in the same hold of the lock (the network
        thread never sees an empty batch); the lock is let go between chunks of rows, and to wait for
        ``buffer.memory``, whose bytes are then kept (``spare``) for the next batch opened."""
        acc = self._acc
        lock = acc.lock
        memory = self._memory
        partitioner = self._partitioner
        touched = bytearray(route.count)
        seen: set[int] = set()
        spare = 0
        i = start
        try:
            while i < end:
                wake = False
                need = 0
                lock.acquire()
                try:
                    if acc.refusal is not None:
                        raise self._refused()
                    if len(touched) < route.count:
                        touched.extend(bytes(route.count - len(touched)))
                    stop = min(end, i + _BULK_CHUNK)
                    while i < stop:
                        partitioner.sticky(route)
                        i, full = run(i, stop, route, touched)
                        p = touched.find(1)
                        while p >= 0:  # the batches rows went into, collected while they are the open ones
                            touched[p] = 0
                            outcome = route.open[p].outcome  # type: ignore[union-attr]
                            if id(outcome) not in seen:
                                seen.add(id(outcome))
                                outcomes.append(outcome)
                            p = touched.find(1, p + 1)
                        if full < 0 or acc.grow(route, full, memory.try_reserve):
                            continue  # the chunk is done, or the full batch took more room
                        alone = keyless(i)
                        if full == route.sticky and route.open[full] is not None and alone:
                            wake = acc.seal_open(route, full) or wake  # the sticky partition moves (KIP-480)
                            partitioner.next_sticky(route)
                            continue
                        left = (end - i) * row_bytes // (1 if alone else route.count)
                        capacity = max(acc.capacity, min(acc.max_capacity, HEADER_SIZE + left))
                        if spare < capacity:
                            if not memory.try_reserve(capacity - spare):
                                need = capacity - spare  # wait for it without the lock
                                break
                            spare = capacity
                        spare -= capacity
                        _batch, opened_wake = acc.open_batch(route, full, capacity, capacity, monotonic_ms())
                        wake = wake or opened_wake
                finally:
                    lock.release()
                if wake:
                    self._wakeup()
                if need:
                    memory.reserve(need, self.config.max_block_ms, self.__len__)
                    spare += need
        finally:
            if spare:
                memory.release(spare)

    # --- completion (network thread) ----------------------------------------------------------------------------

    def _batch_done(
        self, batch: ProducerBatch, base_offset: int, log_append_time: int, error: BaseException | None
    ) -> None:
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
        topic, partition, _k, _v, timestamp, _h, outcome, callback, size = rec
        outcome.fail(error)
        if callback is not None:
            self._deliveries.put(
                (
                    callback,
                    error,
                    RecordMetadata(topic, -1 if partition is None else partition, -1, timestamp),
                )
            )
        self._memory.release(size)

    def _process_event(self, event: ApplicationEvent, now_ms: int) -> None:
        if isinstance(event, _Flush):
            if event.begin:
                self._acc.begin_flush()
            else:
                self._acc.end_flush()

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
                left = self._acc.outstanding()
                if left == 0:
                    break
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                if not self._thread.alive:
                    break
                seen = self._memory.wait_release(
                    seen, 0.5 if remaining is None else min(remaining, 0.5), False
                )
        finally:
            self._thread.add_event(_Flush(False))
        self._serve_deliveries()
        return self._acc.outstanding()

    def __len__(self) -> int:
        """Records produced and not yet delivered or failed (confluent-kafka's ``len(producer)``)."""
        return self._acc.outstanding()

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is pending within ``timeout`` seconds (None: up to ``delivery.timeout.ms``), fail the
        rest with ProducerClosedError, stop the network thread and run the last delivery callbacks. Returns
        as soon as nothing is pending; with records pending it waits for them at most ``timeout``, even when no
        broker can be reached (one may come back meanwhile), and their error then says that none could be."""
        if self._closed:
            return
        self._closed = True
        with self._acc.lock:
            self._acc.refuse(ProducerClosedError("produce() after close()"))
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


def _coerce(obj: Any, what: str, topic: str) -> bytes | bytearray | memoryview:
    """A key or value the encoder takes: str as UTF-8, bytes-like objects as they are (copied when appended)."""
    if isinstance(obj, str):
        return obj.encode()
    if isinstance(obj, bytes | bytearray | memoryview):
        return obj
    raise SerializationError(
        f"{what} for topic {topic!r} is a {type(obj).__name__}, not bytes or str; set {what}.serializer"
    )


def _record_size(key: Any, value: Any, hdrs: Headers | None) -> int:
    """Bytes a record takes in a batch, at most (``buffer.memory``, ``max.request.size``)."""
    size = RECORD_OVERHEAD + (len(key) if key is not None else 0) + (len(value) if value is not None else 0)
    for hk, hv in hdrs or ():
        size += len(hk) + (len(hv) if hv is not None else 0) + 4
    return size


def _headers(headers: HeadersArg) -> Headers:
    items = headers.items() if isinstance(headers, Mapping) else headers
    out: Headers = []
    for k, v in items or ():
        if not isinstance(k, str):
            raise SerializationError(f"header names must be str, got {k!r}")
        out.append((k, v.encode() if isinstance(v, str) else (bytes(v) if v is not None else None)))
    return out


def _arrow_headers(items: Sequence[Any] | None) -> Headers | None:
    """A ``headers`` cell of Spark's sink (a list of {key, value} structs) as the encoder's header list."""
    if not items:
        return None
    out: Headers = []
    for h in items:
        k, v = (h["key"], h["value"]) if isinstance(h, Mapping) else h
        if not isinstance(k, str):
            raise SerializationError(f"header names must be str, got {k!r}")
        out.append((k, v.encode() if isinstance(v, str) else (bytes(v) if v is not None else None)))
    return out


def _py_value(column: Any, i: int) -> bytes | None:
    if column is None:
        return None
    v = column[i].as_py()
    return v.encode() if isinstance(v, str) else v


def _binary_spec(column: Any) -> encode.ArrowBinary | None:
    """An Arrow binary or string column as the encoder reads it: (offsets, data, validity, offset, length,
    64-bit offsets)."""
    import pyarrow as pa

    t = column.type
    if pa.types.is_null(t):
        return None
    if pa.types.is_binary_view(t) or pa.types.is_string_view(t):
        column = column.cast(pa.binary())
        t = column.type
    if pa.types.is_binary(t) or pa.types.is_string(t):
        wide = False
    elif pa.types.is_large_binary(t) or pa.types.is_large_string(t):
        wide = True
    else:
        raise TypeError(f"a key or value column must be binary or string, not {t}")
    validity, offsets, data = column.buffers()[:3]
    return (offsets, data if data is not None else b"", validity if column.null_count else None, column.offset,
            len(column), wide)  # fmt: skip


def _int32_spec(column: Any) -> encode.ArrowInt32:
    validity, values = column.buffers()[:2]
    return (values, validity if column.null_count else None, column.offset, len(column))
