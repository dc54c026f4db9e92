"""``produce``: one record appended by the calling thread straight into its partition's batch.

``produce`` costs about a dict lookup and an append: it serializes the record, picks its partition from the
topic's route (published by the network thread), and, holding the accumulator's lock only for that, appends
the record's bytes to the partition's open batch (the C encoder writes them in place; see ``encode``). It
returns a `DeliveryHandle`, a 3-tuple that reads the record's fate from its batch's outcome when asked, and
creates nothing else: no future, no queue entry, no wakeup, no ``buffer.memory`` reservation. Those happen
once per batch, when a record needs a new one (``_append_new``): the batch's capacity is reserved (blocking up
to ``max.block.ms`` while the buffer is full) and the network thread is woken if the new batch made an older
one sendable or the queues were empty. A record whose topic has no route yet (the first records of a topic) is
handed to the network thread (``_hand_over``), which places it once the metadata arrives, ahead of any later
record; the first such record of a topic then waits a little for the route (``_await_route``), so the records
after it are appended directly.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

from groupstream.client.errors import KafkaError
from groupstream.client.net.network_thread import monotonic_ms
from groupstream.client.producer import encode
from groupstream.client.producer.accumulator import TopicRoute
from groupstream.client.producer.batch import DeliveryCallback, ProducerBatch
from groupstream.client.producer.core import (
    Headers,
    HeadersArg,
    ProducerCore,
    coerce,
    headers_of,
    record_size,
    record_timestamp,
)
from groupstream.client.producer.future import BatchOutcome, DeliveryHandle
from groupstream.protocol.error_codes import ErrorCode

# How long the first record of a topic without a route waits for it (see ``_await_route``): a metadata round
# trip, with room for a loaded machine
ROUTE_WAIT_MS = 100


class Record(NamedTuple):
    """A record the one-call path did not take, serialized and timestamped, as the slower steps pass it on."""

    topic: str
    partition: int | None
    key: Any
    value: Any
    timestamp: int
    headers: Headers | None
    on_delivery: DeliveryCallback | None


class RecordPath(ProducerCore):
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
                handle = None  # the general path below says what is wrong with the record
            finally:
                lock.release()
            if handle is not None:
                return handle
        # the general path: serializers, headers, callbacks, a record that needs a new batch, a topic without a
        # route, a refused record
        acc = self._acc
        if acc.refusal is not None:
            raise self._refused()
        if self._serializing:
            key, value = self._serialize(key, value, topic)
        else:
            if value is not None and type(value) is not bytes:
                value = coerce(value, "value", topic)
            if key is not None and type(key) is not bytes:
                key = coerce(key, "key", topic)
        hdrs = headers_of(headers) if headers else None
        timestamp = record_timestamp(timestamp)
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
        return self._produce_slow(Record(topic, partition, key, value, timestamp, hdrs, on_delivery))

    send = produce  # the Java client's and kafka-python's name

    def _produce_slow(self, rec: Record) -> DeliveryHandle:
        """A record the fast paths could not append: it needs a new batch, its topic has no route yet, or it is
        refused (too large, a partition that does not exist)."""
        size = record_size(rec.key, rec.value, rec.headers)
        cfg = self.config
        if size > self._max_record:
            limit = "max.request.size" if size > cfg.max_request_size else "buffer.memory"
            err = KafkaError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"the record is {size} bytes serialized, more than {limit}={getattr(cfg, limit.replace('.', '_'))}",
                resource=rec.topic,
            )
            return self._refuse_record(rec.topic, rec.partition, rec.timestamp, err, rec.on_delivery)
        while True:
            route = self._acc.routes.get(rec.topic)
            if route is not None:
                return self._append_new(route, rec, size)
            handle = self._hand_over(rec, size)
            if handle is not None:
                self._await_route(rec.topic, handle)
                return handle  # else the route appeared meanwhile: append it here after all

    def _append_new(self, route: TopicRoute, rec: Record, size: int) -> DeliveryHandle:
        """Append ``rec`` (``size`` bytes at most), opening a new batch for it if it needs one."""
        acc = self._acc
        topic, partition, key, value, timestamp, hdrs, on_delivery = rec
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
                    batch, index, partition, sealed = self._place(route, partition, sticky, rec)
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
        self, route: TopicRoute, partition: int, sticky: bool, rec: Record
    ) -> tuple[ProducerBatch | None, int, int, bool]:
        """Append to the partition's open batch, letting it grow if a batch ahead of it waits; for a record
        without a key whose sticky partition's batch is full, seal that batch and move the sticky partition
        (KIP-480). Returns the batch, the record's index (-1: it needs a new batch in the returned partition),
        the partition, and whether a batch was sealed. The caller holds the lock."""
        acc = self._acc
        append = self._append
        _topic, _partition, key, value, timestamp, hdrs, _on_delivery = rec
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

    def _await_route(self, topic: str, handle: DeliveryHandle) -> None:
        """The first record handed over for ``topic`` waits a little (``ROUTE_WAIT_MS`` at most, never past
        ``max.block.ms``) for the network thread to fetch the topic's metadata and publish its route, as Java's
        ``send`` waits for a new topic's metadata: the records after it then take the one-call path. Without
        the wait an application thread producing in a loop hands every record over, one by one, while it holds
        the GIL that the network thread needs to bring the route (a loop of 10,000 records took 100 ms instead
        of 5). Later records of a topic that still has no route do not wait (no broker answers, or the topic
        does not exist: they fail after ``max.block.ms``, as before)."""
        acc = self._acc
        with acc.route_changed:  # notified by a route published and by a handed-over record failing
            if topic in self._route_waited:
                return
            self._route_waited.add(topic)
            deadline = time.monotonic() + min(ROUTE_WAIT_MS, self.config.max_block_ms) / 1000
            while topic not in acc.routes and not handle.done() and acc.refusal is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                acc.route_changed.wait(left)

    def _hand_over(self, rec: Record, size: int) -> DeliveryHandle | None:
        """Queue a record for the network thread (its topic has no route); None if a route appeared first."""
        topic, partition, key, value, timestamp, hdrs, on_delivery = rec
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
