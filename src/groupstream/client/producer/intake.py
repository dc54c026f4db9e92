"""The network thread's side of ``produce``: topic routes from the metadata, and records that came before them.

An application thread places a record itself once its topic has a route (see ``accumulator``). Routes are
published here, from the metadata, which lives on this thread. A record for a topic without a route is handed
over instead (the producer's hand-off queue, drained at the start of every loop iteration) and waits here for
the topic's metadata, as Java's ``send`` waits on metadata, for at most ``max.block.ms``; then it fails with
UNKNOWN_TOPIC_OR_PARTITION naming the topic (a topic that does not exist and that the broker will not create),
or, when no broker could be reached to ask, with REQUEST_TIMED_OUT saying so (not that the topic is missing).

Order. A topic's waiting records are placed before its route is published, both under the accumulator's lock,
and an application thread hands a record over only while it holds the same lock and sees no route; so every
record handed over is placed before any record appended directly, in the order they were produced.
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from groupstream.client.errors import KafkaError
from groupstream.client.net.metadata import MetadataCache
from groupstream.client.net.requests import PollResult
from groupstream.client.producer import encode
from groupstream.client.producer.accumulator import RecordAccumulator, TopicRoute
from groupstream.client.producer.batch import DeliveryCallback
from groupstream.client.producer.future import BatchOutcome
from groupstream.client.producer.memory import BufferMemory
from groupstream.client.producer.partitioner import Partitioner
from groupstream.protocol.error_codes import ErrorCode, is_retriable

# (topic, partition or None, key, value, timestamp, headers or None, its own outcome, callback or None,
#  bytes reserved for it in buffer.memory)
PendingRecord = tuple[
    str, int | None, bytes | None, bytes | None, int, Sequence[tuple[str, bytes | None]] | None, BatchOutcome,
    DeliveryCallback | None, int,
]  # fmt: skip
RecordFailed = Callable[[PendingRecord, BaseException], None]


@dataclass
class _Waiting:
    deadline_ms: int
    records: list[PendingRecord] = field(default_factory=list)


class RecordIntake:
    def __init__(
        self,
        records: queue.SimpleQueue[PendingRecord],
        accumulator: RecordAccumulator,
        metadata: MetadataCache,
        partitioner: Partitioner,
        memory: BufferMemory,
        *,
        max_block_ms: int,
        on_failed: RecordFailed,
        unreachable: Callable[[], str | None] = lambda: None,
        fatal: Callable[[], BaseException | None] = lambda: None,
    ) -> None:
        """``on_failed(record, error)`` settles a record that gives up (called with the accumulator's lock
        held); ``unreachable()``: why no broker can be reached right now, or None (the network client's view);
        ``fatal()``: the error every record fails with at once (a refused authentication), or None."""
        self._records = records
        self._acc = accumulator
        self._metadata = metadata
        self._partitioner = partitioner
        self._memory = memory
        self._max_block_ms = max_block_ms
        self._on_failed = on_failed
        self._unreachable = unreachable
        self._fatal = fatal
        self._waiting: dict[str, _Waiting] = {}
        self._seen_version = -1

    def poll(self, now_ms: int) -> PollResult:
        changed = self._metadata.version != self._seen_version
        if not changed and not self._waiting and self._records.empty():
            return PollResult()
        acc = self._acc
        with acc.lock:
            if changed:
                self._seen_version = self._metadata.version
                self._refresh_routes()
            self._drain(now_ms)  # first: records handed over before a route is published below
            if self._waiting:
                self._place_waiting(now_ms)
            if not self._waiting:
                return PollResult()
            delay = self._expire_waiting(now_ms)
        return PollResult((), delay)

    def has_pending_work(self) -> bool:
        return bool(self._waiting) or not self._records.empty()

    def begin_close(self, now_ms: int) -> None:
        pass

    def fail_pending(self, error: BaseException) -> None:
        acc = self._acc
        with acc.lock:
            acc.refuse(error)
            for waiting in self._waiting.values():
                for rec in waiting.records:
                    self._fail(rec, error)
            self._waiting.clear()
            while True:
                try:
                    rec = self._records.get_nowait()
                except queue.Empty:
                    return
                self._fail(rec, error)

    # --- routes and placing (the accumulator's lock held) ---------------------------------------------------------

    def _refresh_routes(self) -> None:
        metadata = self._metadata
        for topic in list(self._acc.routes):
            count = metadata.partition_count(topic)
            if count is not None:
                self._acc.publish(topic, count, metadata.available_partitions(topic))

    def _drain(self, now_ms: int) -> None:
        records = self._records
        while True:
            try:
                rec = records.get_nowait()
            except queue.Empty:
                return
            topic = rec[0]
            route = self._acc.routes.get(topic)
            if route is not None and topic not in self._waiting:
                self._place(route, rec, now_ms)
            else:
                self._wait(rec, now_ms)

    def _wait(self, rec: PendingRecord, now_ms: int) -> None:
        topic = rec[0]
        waiting = self._waiting.get(topic)
        if waiting is not None:
            waiting.records.append(rec)  # keep the order of records behind the first one
            return
        code = self._metadata.topic_errors.get(topic)
        if code is not None and not is_retriable(code):
            self._fail(rec, KafkaError(code, resource=topic))
            return
        fatal = self._fatal()
        if fatal is not None:
            self._fail(rec, fatal)
            return
        self._waiting[topic] = _Waiting(now_ms + self._max_block_ms, [rec])
        self._metadata.add_topics((topic,), at_once=True)  # its records wait: no retry.backoff.ms first
        self._metadata.request_update()

    def _place_waiting(self, now_ms: int) -> None:
        metadata = self._metadata
        fatal = self._fatal()
        for topic in list(self._waiting):
            if fatal is not None:
                for rec in self._waiting.pop(topic).records:
                    self._fail(rec, fatal)
                continue
            count = metadata.partition_count(topic)
            if count is None:
                code = metadata.topic_errors.get(topic)
                if code is not None and not is_retriable(code):
                    for rec in self._waiting.pop(topic).records:
                        self._fail(rec, KafkaError(code, resource=topic))
                continue
            route = self._acc.publish(topic, count, metadata.available_partitions(topic))
            for rec in self._waiting.pop(topic).records:
                self._place(route, rec, now_ms)

    def _place(self, route: TopicRoute, rec: PendingRecord, now_ms: int) -> None:
        topic, partition, key, value, timestamp, headers, outcome, callback, size = rec
        acc = self._acc
        partitioner = self._partitioner
        sticky = False
        if partition is None:
            if partitioner.custom is None and (key is None or not partitioner.use_keys):
                sticky = True
            try:
                partition = partitioner.partition(route, key)
            except Exception as e:  # a custom partitioner that raised fails its record, not this thread
                self._fail(rec, e)
                return
        if not 0 <= partition < route.count:
            self._fail(
                rec,
                KafkaError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"partition {partition} of topic {topic!r} does not exist (it has {route.count})",
                    resource=topic,
                ),
            )
            return
        batch = route.open[partition]
        index = -1
        if batch is not None:
            index = encode.append_record(batch.buf, timestamp, key, value, headers, batch.capacity)
        if index < 0:
            if sticky:
                acc.seal_open(route, partition)
                partition = partitioner.next_sticky(route)
                batch = route.open[partition]
                if batch is not None:
                    index = encode.append_record(batch.buf, timestamp, key, value, headers, batch.capacity)
            if index < 0:
                capacity = acc.capacity_for(size)
                self._memory.force(capacity)
                batch, _wake = acc.open_batch(route, partition, capacity, capacity, now_ms)
                index = encode.append_record(batch.buf, timestamp, key, value, headers, capacity)
        assert batch is not None
        outcome.partition = partition
        batch.add_extra(index, timestamp, callback, outcome)
        acc.pending -= 1
        self._memory.release(size)

    def _fail(self, rec: PendingRecord, error: BaseException) -> None:
        self._acc.pending -= 1
        self._on_failed(rec, error)
        self._acc.route_changed.notify_all()  # a bulk producer may wait for this record's route or failure

    def _expire_waiting(self, now_ms: int) -> int | None:
        soonest: int | None = None
        for topic in list(self._waiting):
            waiting = self._waiting[topic]
            if now_ms < waiting.deadline_ms:
                delay = waiting.deadline_ms - now_ms
                soonest = delay if soonest is None else min(soonest, delay)
                continue
            del self._waiting[topic]
            code = self._metadata.topic_errors.get(topic, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            why = self._unreachable() if topic not in self._metadata.topic_errors else None
            if why is not None:
                code = ErrorCode.REQUEST_TIMED_OUT
                text = f"topic {topic!r} has no metadata after max.block.ms={self._max_block_ms} ms: {why}"
            elif code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                text = (
                    f"topic {topic!r} does not exist: not in the metadata after max.block.ms={self._max_block_ms} ms "
                    "(create it, or enable auto.create.topics.enable on the broker)"
                )
            else:
                text = f"topic {topic!r} has no usable metadata after max.block.ms={self._max_block_ms} ms"
            err = KafkaError(code, text, resource=topic)
            for rec in waiting.records:
                self._fail(rec, err)
            self._metadata.remove_topics((topic,))
        return soonest
