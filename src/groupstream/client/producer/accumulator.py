"""Per-partition queues of batches, shared by the application threads (which append) and the network thread
(which decides when batches go, and takes them), under one short lock, as Java's ``RecordAccumulator``.

Appending. The network thread publishes a `TopicRoute` per topic once it knows the topic's partitions; with
it an application thread places a record itself: it picks the partition and appends the record's bytes to that
partition's open batch (``route.open``), holding ``lock`` only for the append. Only when the record needs a new
batch does it do more (reserve ``buffer.memory`` for the batch, outside the lock, then ``open_batch``), and only
then may it have to wake the network thread: when the queues were empty (nothing set the linger timer yet) or
when the new batch sealed a previous one (which is then sendable at once).

Sending. The rules are those of Java's ``RecordAccumulator``:

- a partition is *sendable* when its first batch is full (``batch.size``, or a later batch exists), has waited
  ``linger.ms``, is a retry whose backoff ended, or a flush or close is under way;
- a node is *ready* when a partition it leads is sendable; draining a ready node then takes the first batch of
  every partition it leads (not only the sendable ones), one batch per partition, up to ``max.request.size``,
  starting where the last drain of that node stopped so no partition starves; an open batch drained is sealed;
- a batch that failed with a retriable error goes back to its partition's queue in its original send order,
  ahead of newer batches, after a backoff;
- a batch older than ``delivery.timeout.ms`` that is not in flight expires.

Whether a particular batch may be drained now (in-flight limits, idempotent ordering) is the sender's call,
passed in as ``may_send``. Time is always passed in (``now_ms``).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from groupstream.client.producer import encode
from groupstream.client.producer.batch import ProducerBatch
from groupstream.client.producer.future import BatchOutcome
from groupstream.protocol.records.batch_header import HEADER_SIZE
from groupstream.protocol.topic_partition import TopicPartition

LeaderOf = Callable[[str, int], int | None]


@dataclass
class ReadyCheck:
    nodes: set[int] = field(default_factory=set)
    next_check_ms: int | None = None  # delay until a partition that is not sendable yet becomes so
    unknown_leaders: set[str] = field(default_factory=set)  # topics with a partition whose leader is unknown


class TopicRoute:
    """What an application thread needs to place a record of ``topic`` without the network thread: the
    partition count, the partitions with a leader (for records without a key), the partition records without a
    key stick to, and each partition's open batch (also as its buffer, byte limit and outcome, for the encoder's
    ``append_routed`` and ``append_rows``). Read and changed only under the accumulator's lock."""

    __slots__ = ("available", "bufs", "count", "limits", "open", "outcomes", "sticky", "topic")

    def __init__(self, topic: str, count: int, available: Sequence[int]) -> None:
        self.topic = topic
        self.count = count
        self.available = tuple(available)
        self.sticky = -1
        self.open: list[ProducerBatch | None] = [None] * count
        self.bufs: list[bytearray | None] = [None] * count
        self.limits: list[int] = [0] * count
        self.outcomes: list[BatchOutcome | None] = [None] * count

    def grow(self, count: int, available: Sequence[int]) -> None:
        """The topic has more partitions now (Kafka never takes partitions away)."""
        extra = count - self.count
        if extra > 0:
            self.open += [None] * extra
            self.bufs += [None] * extra
            self.limits += [0] * extra
            self.outcomes += [None] * extra
            self.count = count
        self.available = tuple(available)


class RecordAccumulator:
    def __init__(
        self,
        *,
        batch_size: int,
        linger_ms: int,
        compression: int,
        delivery_timeout_ms: int,
        capacity: int | None = None,
        max_capacity: int | None = None,
    ) -> None:
        """``capacity``: bytes a batch may grow to (header included) once it holds a record; ``batch_size``
        unless given (the producer caps it with ``max.request.size`` and ``buffer.memory``). ``max_capacity``:
        what a batch may grow to, a ``capacity`` at a time, while a batch ahead of it waits (``grow``)."""
        self.batch_size = batch_size
        self.capacity = batch_size if capacity is None else capacity
        self.max_capacity = max(self.capacity, self.capacity if max_capacity is None else max_capacity)
        self.linger_ms = linger_ms
        self.compression = compression
        self.delivery_timeout_ms = delivery_timeout_ms
        self.lock = threading.Lock()
        self.route_changed = threading.Condition(self.lock)  # a route was published, or a record gave up
        self.routes: dict[str, TopicRoute] = {}
        # the routes ``produce`` may use: ``routes`` until appends are refused, then none
        self.open_routes: dict[str, TopicRoute] = {}
        # when not None, appends are refused: why (closed, a fatal error, the network thread stopped)
        self.refusal: BaseException | None = None
        self.pending = 0  # records handed to the network thread to place (their topic had no route yet)
        self._queues: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._live: set[ProducerBatch] = set()  # batches not completed yet: queued or in flight
        self._drain_start: dict[int, int] = {}
        self._flushes = 0
        self._closing = False
        # a transactional producer registers a partition (AddPartitionsToTxn) while its first batch lingers
        self.wake_on_new_partition = False

    # --- appending (the caller holds ``lock``) ------------------------------------------------------------------

    def refuse(self, error: BaseException) -> None:
        """Refuse appends from now on (unless already refused): ``error`` says why."""
        if self.refusal is None:
            self.refusal = error
            self.open_routes = {}

    def readmit(self) -> None:
        """Take appends again (a transactional producer's new transaction lifts the refusal it set)."""
        self.refusal = None
        self.open_routes = dict(self.routes)

    def publish(self, topic: str, count: int, available: Sequence[int]) -> TopicRoute:
        """The route of ``topic`` with ``count`` partitions (created, or grown)."""
        route = self.routes.get(topic)
        if route is None:
            route = self.routes[topic] = TopicRoute(topic, count, available)
            if self.refusal is None:
                self.open_routes[topic] = route
            self.route_changed.notify_all()
        else:
            route.grow(count, available)
        return route

    def capacity_for(self, record_size: int) -> int:
        """The capacity (and ``buffer.memory`` share) of a new batch whose first record takes ``record_size``."""
        return max(self.capacity, HEADER_SIZE + record_size)

    def open_batch(
        self, route: TopicRoute, partition: int, capacity: int, memory: int, now_ms: int
    ) -> tuple[ProducerBatch, bool]:
        """Seal the partition's open batch, if any, and open a new one; returns it, and whether the network
        thread must be woken (it may be asleep with nothing to send, or the sealed batch is sendable now)."""
        old = route.open[partition]
        wake = old is not None or not self._queues
        if old is not None:
            old.seal()
        batch = ProducerBatch(route.topic, partition, self.compression, now_ms, capacity, memory)
        tp = TopicPartition(route.topic, partition)
        dq = self._queues.get(tp)
        if dq is None:
            dq = self._queues[tp] = deque()
            wake = wake or self.wake_on_new_partition
        dq.append(batch)
        route.open[partition] = batch
        route.outcomes[partition] = batch.outcome
        route.limits[partition] = capacity
        route.bufs[partition] = batch.buf
        self._live.add(batch)
        return batch, wake

    def grow(self, route: TopicRoute, partition: int, take: Callable[[int], bool]) -> bool:
        """Let the partition's full open batch double (by ``capacity`` at least), up to ``max_capacity``, when a
        batch ahead of it in its queue has not been sent yet (the sender is behind: a bigger batch costs no
        latency and saves a request). ``take(n)`` reserves the bytes in ``buffer.memory`` without waiting;
        returns whether the batch grew."""
        batch = route.open[partition]
        if batch is None or batch.capacity >= self.max_capacity:
            return False
        dq = self._queues.get(TopicPartition(route.topic, partition))
        if dq is None or dq[0] is batch:
            return False
        extra = min(max(self.capacity, batch.capacity, 1), self.max_capacity - batch.capacity)
        if not take(extra):
            return False
        batch.capacity += extra
        batch.memory += extra
        route.limits[partition] = batch.capacity
        return True

    def seal_open(self, route: TopicRoute, partition: int) -> bool:
        """Seal the partition's open batch (it is full) without opening another; returns whether there was one."""
        batch = route.open[partition]
        if batch is None:
            return False
        batch.seal()
        route.open[partition] = route.bufs[partition] = None
        return True

    def _unroute(self, batch: ProducerBatch) -> None:
        batch.seal()
        route = self.routes.get(batch.topic)
        if route is not None and batch.partition < route.count and route.open[batch.partition] is batch:
            route.open[batch.partition] = route.bufs[batch.partition] = None

    def append(
        self,
        topic: str,
        partition: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] | None,
        now_ms: int,
        *,
        record_size: int = 0,
        partitions: int | None = None,
    ) -> tuple[ProducerBatch, int]:
        """Append one record, opening a batch if needed, without ``buffer.memory`` accounting (a convenience
        for tests); takes the lock itself. The topic gets a route of ``partitions`` (default: enough)."""
        with self.lock:
            route = self.routes.get(topic)
            if route is None or route.count <= partition:
                route = self.publish(topic, max(partition + 1, partitions or 0), ())
            batch = route.open[partition]
            if batch is not None:
                index = encode.append_record(batch.buf, timestamp, key, value, headers, batch.capacity)
                if index >= 0:
                    return batch, index
            batch, _wake = self.open_batch(route, partition, self.capacity_for(record_size), 0, now_ms)
            return batch, encode.append_record(batch.buf, timestamp, key, value, headers, batch.capacity)

    # --- completion ---------------------------------------------------------------------------------------------

    def completed(self, batch: ProducerBatch) -> None:
        """The batch is delivered or failed: it no longer counts as outstanding."""
        with self.lock:
            self._live.discard(batch)

    def outstanding(self) -> int:
        """Records produced and not yet delivered or failed."""
        with self.lock:
            return self.pending + sum(b.record_count for b in self._live)

    @property
    def records(self) -> int:
        """Records in queued batches (not in flight)."""
        with self.lock:
            return sum(b.record_count for dq in self._queues.values() for b in dq)

    # --- modes (network thread) ---------------------------------------------------------------------------------

    def begin_flush(self) -> None:
        self._flushes += 1

    def end_flush(self) -> None:
        self._flushes = max(0, self._flushes - 1)

    @property
    def flushing(self) -> bool:
        return self._flushes > 0

    def begin_close(self) -> None:
        self._closing = True

    # --- readiness and draining (network thread) ---------------------------------------------------------------

    def has_batches(self) -> bool:
        return bool(self._queues)

    def ready(self, now_ms: int, leader_of: LeaderOf) -> ReadyCheck:
        check = ReadyCheck()
        hurry = self._flushes > 0 or self._closing
        next_ms: int | None = None
        with self.lock:
            heads = [(tp, dq[0], len(dq)) for tp, dq in self._queues.items()]
        linger = self.linger_ms
        for (topic, partition), head, queued in heads:
            leader = leader_of(topic, partition)
            if leader is None:
                check.unknown_leaders.add(topic)
                continue
            if leader in check.nodes:
                continue
            if head.is_retry:
                due = head.retry_at_ms
            elif hurry or queued > 1 or head.is_full():
                due = now_ms
            else:
                due = head.created_ms + linger
            if due <= now_ms:
                check.nodes.add(leader)
            elif next_ms is None or due < next_ms:
                next_ms = due
        check.next_check_ms = None if next_ms is None else next_ms - now_ms
        return check

    def drain(
        self,
        now_ms: int,
        nodes: Sequence[int],
        leader_of: LeaderOf,
        max_request_size: int,
        may_send: Callable[[ProducerBatch], bool],
    ) -> dict[int, list[ProducerBatch]]:
        """Take the batches for one request to each of ``nodes``. The batches leave their queues, sealed (no
        append can reach them any more); the caller closes them into their wire bytes (stamping idempotent
        ones first, so the CRC is computed once) and sends them, or puts them back with ``reenqueue``."""
        wanted = set(nodes)
        out: dict[int, list[ProducerBatch]] = {}
        with self.lock:
            by_node: dict[int, list[TopicPartition]] = {}
            for tp in self._queues:
                leader = leader_of(*tp)
                if leader in wanted:
                    by_node.setdefault(leader, []).append(tp)
            for node, tps in by_node.items():
                n = len(tps)
                start = self._drain_start.get(node, 0) % n
                size = 0
                taken: list[ProducerBatch] = []
                for i in range(n):
                    tp = tps[(start + i) % n]
                    dq = self._queues[tp]
                    head = dq[0]
                    if head.is_retry and now_ms < head.retry_at_ms:
                        continue
                    if not may_send(head):
                        continue
                    head_size = head.size  # before compression: an upper bound
                    if taken and size + head_size > max_request_size:
                        self._drain_start[node] = start + i
                        break
                    dq.popleft()
                    if not dq:
                        del self._queues[tp]
                    if not head.sealed:
                        self._unroute(head)
                    taken.append(head)
                    size += head_size
                else:
                    self._drain_start[node] = start + 1
                if taken:
                    out[node] = taken
        return out

    def reenqueue(self, batch: ProducerBatch, now_ms: int, backoff_ms: int) -> None:
        """Put a batch that failed back in its partition's queue, in send order, due after ``backoff_ms``."""
        batch.retry_at_ms = now_ms + backoff_ms
        batch.in_flight = False
        with self.lock:
            dq = self._queues.get(batch.tp)
            if dq is None:
                dq = self._queues[batch.tp] = deque()
            order = batch.drain_order
            at = len(dq)
            for i, other in enumerate(dq):
                if other.drain_order < 0 or other.drain_order > order:
                    at = i
                    break
            dq.insert(at, batch)

    # --- expiry and shutdown (network thread) -----------------------------------------------------------------

    def expire(self, now_ms: int) -> list[ProducerBatch]:
        """Remove and return the queued batches older than ``delivery.timeout.ms``. A queue is always in
        creation order (retries go back in send order, ahead of newer batches), so only heads are checked."""
        limit = now_ms - self.delivery_timeout_ms
        expired: list[ProducerBatch] = []
        with self.lock:
            for tp in list(self._queues):
                dq = self._queues[tp]
                while dq and dq[0].created_ms <= limit:
                    b = dq.popleft()
                    self._unroute(b)
                    expired.append(b)
                if not dq:
                    del self._queues[tp]
        return expired

    def next_expiry_ms(self, now_ms: int) -> int | None:
        with self.lock:
            oldest = min((dq[0].created_ms for dq in self._queues.values()), default=None)
        if oldest is None:
            return None
        return max(0, oldest + self.delivery_timeout_ms - now_ms)

    def abort_all(self) -> list[ProducerBatch]:
        with self.lock:
            batches = [b for dq in self._queues.values() for b in dq]
            for b in batches:
                self._unroute(b)
            self._queues.clear()
        return batches

    def queued(self, tp: TopicPartition) -> list[ProducerBatch]:
        """The partition's queued batches, first to go first."""
        with self.lock:
            return list(self._queues.get(tp, ()))

    def partitions(self) -> list[TopicPartition]:
        with self.lock:
            return list(self._queues)
