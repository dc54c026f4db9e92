"""Records from the application, placed on the network thread: partition, then into the accumulator.

`produce` on an application thread only checks, serializes and queues a record (the producer's hand-off
queue, drained here at the start of every loop iteration); partitions are chosen here because the metadata
lives on this thread. A record for a topic the metadata does not know yet waits for it, as Java's ``send``
waits on metadata, for at most ``max.block.ms``; then it fails with UNKNOWN_TOPIC_OR_PARTITION naming the
topic (a topic that does not exist and that the broker will not create), or, when no broker could be reached
to ask, with REQUEST_TIMED_OUT saying so (not that the topic is missing). Pure apart from reading the queue.
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from groupstream.client.errors import KafkaError
from groupstream.client.net.metadata import MetadataCache
from groupstream.client.net.requests import PollResult
from groupstream.client.producer.accumulator import RecordAccumulator
from groupstream.client.producer.batch import DeliveryCallback
from groupstream.client.producer.partitioner import Partitioner
from groupstream.protocol.error_codes import ErrorCode, is_retriable

# (topic, partition or None, key, value, timestamp, headers, future, callback or None, size)
PendingRecord = tuple[
    str, int | None, bytes | None, bytes | None, int, Sequence[tuple[str, bytes | None]], Future[Any],
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
        *,
        max_block_ms: int,
        on_failed: RecordFailed,
        unreachable: Callable[[], str | None] = lambda: None,
    ) -> None:
        """``unreachable()``: why no broker can be reached right now, or None (the network client's view)."""
        self._records = records
        self._acc = accumulator
        self._metadata = metadata
        self._partitioner = partitioner
        self._max_block_ms = max_block_ms
        self._on_failed = on_failed
        self._unreachable = unreachable
        self._waiting: dict[str, _Waiting] = {}
        self._seen_version = -1
        self._counts: dict[
            str, int
        ] = {}  # partition counts of known topics, at metadata version _seen_version

    def poll(self, now_ms: int) -> PollResult:
        if self._metadata.version != self._seen_version:
            self._seen_version = self._metadata.version
            self._counts.clear()
            if self._waiting:
                self._retry_waiting(now_ms)
        records = self._records
        place = self._place
        while True:
            try:
                rec = records.get_nowait()
            except queue.Empty:
                break
            place(rec, now_ms)
        if not self._waiting:
            return PollResult()
        return PollResult((), self._expire_waiting(now_ms))

    def has_pending_work(self) -> bool:
        return bool(self._waiting) or not self._records.empty()

    def begin_close(self, now_ms: int) -> None:
        pass

    def fail_pending(self, error: BaseException) -> None:
        for waiting in self._waiting.values():
            for rec in waiting.records:
                self._on_failed(rec, error)
        self._waiting.clear()
        while True:
            try:
                rec = self._records.get_nowait()
            except queue.Empty:
                return
            self._on_failed(rec, error)

    # --- placing ---------------------------------------------------------------------------------------------

    def _place(self, rec: PendingRecord, now_ms: int) -> None:
        topic, partition, key, value, timestamp, headers, future, callback, size = rec
        count = self._counts.get(topic)
        if count is None:
            count = self._count(rec, now_ms)
            if count is None:
                return
        if partition is None:
            partition = self._partitioner.partition(topic, key, count, size)
        elif not 0 <= partition < count:
            self._on_failed(
                rec,
                KafkaError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"partition {partition} of topic {topic!r} does not exist (it has {count})",
                    resource=topic,
                ),
            )
            return
        self._acc.append(topic, partition, timestamp, key, value, headers, future, callback, size, now_ms)

    def _count(self, rec: PendingRecord, now_ms: int) -> int | None:
        """The topic's partition count (cached until the metadata changes), or None when the record had to
        wait for the metadata or failed."""
        topic = rec[0]
        if topic in self._waiting:
            self._waiting[topic].records.append(rec)  # keep the order of records behind the first one
            return None
        metadata = self._metadata
        count = metadata.partition_count(topic)
        if count is not None:
            self._counts[topic] = count
            return count
        code = metadata.topic_errors.get(topic)
        if code is not None and not is_retriable(code):
            self._on_failed(rec, KafkaError(code, resource=topic))
            return None
        self._waiting[topic] = _Waiting(now_ms + self._max_block_ms, [rec])
        metadata.add_topics((topic,))
        metadata.request_update()
        return None

    def _retry_waiting(self, now_ms: int) -> None:
        for topic in list(self._waiting):
            if self._metadata.partition_count(topic) is None:
                code = self._metadata.topic_errors.get(topic)
                if code is None or is_retriable(code):
                    continue
            waiting = self._waiting.pop(topic)
            for rec in waiting.records:
                self._place(rec, now_ms)

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
                self._on_failed(rec, err)
            self._metadata.remove_topics((topic,))
        return soonest
