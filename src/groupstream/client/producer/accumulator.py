"""Per-partition queues of batches, and the rules for when they may go. Pure: time is ``now_ms``.

The rules are those of Java's ``RecordAccumulator``:

- a partition is *sendable* when its first batch is full (``batch.size``, or a later batch exists), has waited
  ``linger.ms``, is a retry whose backoff ended, or a flush or close is under way;
- a node is *ready* when a partition it leads is sendable; draining a ready node then takes the first batch of
  every partition it leads (not only the sendable ones), one batch per partition, up to ``max.request.size``,
  starting where the last drain of that node stopped so no partition starves;
- a batch that failed with a retriable error goes back to its partition's queue in its original send order,
  ahead of newer batches, after a backoff;
- a batch older than ``delivery.timeout.ms`` that is not in flight expires.

Whether a particular batch may be drained now (in-flight limits, idempotent ordering) is the sender's call,
passed in as ``may_send``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from groupstream.client.producer.batch import DeliveryCallback, ProducerBatch

TopicPartition = tuple[str, int]
LeaderOf = Callable[[str, int], int | None]


@dataclass
class ReadyCheck:
    nodes: set[int] = field(default_factory=set)
    next_check_ms: int | None = None  # delay until a partition that is not sendable yet becomes so
    unknown_leaders: set[str] = field(default_factory=set)  # topics with a partition whose leader is unknown


class RecordAccumulator:
    def __init__(
        self, *, batch_size: int, linger_ms: int, compression: int, delivery_timeout_ms: int
    ) -> None:
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self.compression = compression
        self.delivery_timeout_ms = delivery_timeout_ms
        self._queues: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._drain_start: dict[int, int] = {}
        self._flushes = 0
        self._closing = False
        self.records = 0  # records held (not in flight)

    # --- appending -------------------------------------------------------------------------------------------

    def append(
        self,
        topic: str,
        partition: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]],
        future: Future[Any],
        callback: DeliveryCallback | None,
        size: int,
        now_ms: int,
    ) -> bool:
        """Add a record to the partition's last batch, or to a new one; returns True when this made a batch
        sendable (full), so the caller knows the sender has work."""
        tp = (topic, partition)
        dq = self._queues.get(tp)
        if dq is None:
            dq = self._queues[tp] = deque()
        last = dq[-1] if dq else None
        if last is not None and last.try_append(
            timestamp, key, value, headers, future, callback, size, self.batch_size
        ):
            self.records += 1
            return last.estimated_size >= self.batch_size
        if last is not None:
            last.seal()
        batch = ProducerBatch(topic, partition, self.compression, now_ms)
        batch.try_append(timestamp, key, value, headers, future, callback, size, self.batch_size)
        dq.append(batch)
        self.records += 1
        return last is not None or batch.estimated_size >= self.batch_size

    # --- modes -----------------------------------------------------------------------------------------------

    def begin_flush(self) -> None:
        self._flushes += 1

    def end_flush(self) -> None:
        self._flushes = max(0, self._flushes - 1)

    @property
    def flushing(self) -> bool:
        return self._flushes > 0

    def begin_close(self) -> None:
        self._closing = True

    # --- readiness and draining -------------------------------------------------------------------------------

    def has_batches(self) -> bool:
        return bool(self._queues)

    def ready(self, now_ms: int, leader_of: LeaderOf) -> ReadyCheck:
        check = ReadyCheck()
        hurry = self._flushes > 0 or self._closing
        next_ms: int | None = None
        for (topic, partition), dq in self._queues.items():
            head = dq[0]
            leader = leader_of(topic, partition)
            if leader is None:
                check.unknown_leaders.add(topic)
                continue
            if leader in check.nodes:
                continue
            if head.is_retry:
                due = head.retry_at_ms
            elif hurry or len(dq) > 1 or head.is_full(self.batch_size):
                due = now_ms
            else:
                due = head.created_ms + self.linger_ms
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
        """Take the batches for one request to each of ``nodes``. The batches leave their queues; the caller
        sends them or puts them back with ``reenqueue``."""
        wanted = set(nodes)
        by_node: dict[int, list[TopicPartition]] = {}
        for tp in self._queues:
            leader = leader_of(*tp)
            if leader in wanted:
                by_node.setdefault(leader, []).append(tp)
        out: dict[int, list[ProducerBatch]] = {}
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
                data = head.close()
                if taken and size + len(data) > max_request_size:
                    self._drain_start[node] = start + i
                    break
                dq.popleft()
                if not dq:
                    del self._queues[tp]
                self.records -= head.record_count
                taken.append(head)
                size += len(data)
            else:
                self._drain_start[node] = start + 1
            if taken:
                out[node] = taken
        return out

    def reenqueue(self, batch: ProducerBatch, now_ms: int, backoff_ms: int) -> None:
        """Put a batch that failed back in its partition's queue, in send order, due after ``backoff_ms``."""
        batch.retry_at_ms = now_ms + backoff_ms
        batch.in_flight = False
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
        self.records += batch.record_count

    # --- expiry and shutdown ----------------------------------------------------------------------------------

    def expire(self, now_ms: int) -> list[ProducerBatch]:
        """Remove and return the queued batches older than ``delivery.timeout.ms``. A queue is always in
        creation order (retries go back in send order, ahead of newer batches), so only heads are checked."""
        limit = now_ms - self.delivery_timeout_ms
        expired: list[ProducerBatch] = []
        for tp in list(self._queues):
            dq = self._queues[tp]
            while dq and dq[0].created_ms <= limit:
                b = dq.popleft()
                self.records -= b.record_count
                expired.append(b)
            if not dq:
                del self._queues[tp]
        return expired

    def next_expiry_ms(self, now_ms: int) -> int | None:
        oldest = min((dq[0].created_ms for dq in self._queues.values()), default=None)
        if oldest is None:
            return None
        return max(0, oldest + self.delivery_timeout_ms - now_ms)

    def abort_all(self) -> list[ProducerBatch]:
        batches = [b for dq in self._queues.values() for b in dq]
        self._queues.clear()
        self.records = 0
        return batches

    def queued(self, tp: TopicPartition) -> Iterator[ProducerBatch]:
        """The partition's queued batches, first to go first."""
        return iter(self._queues.get(tp, ()))

    def partitions(self) -> list[TopicPartition]:
        return list(self._queues)
