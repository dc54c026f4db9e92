"""Pure planning of what Spark tasks read: offset ranges per topic-partition, split to reach
``minPartitions``, limited per trigger by ``maxOffsetsPerTrigger``, and the offsets a stream checkpoints.

Offsets cross into Spark as plain nested dicts, ``{"topic": {"0": 42}}`` (Spark's Kafka source offset shape),
built with sorted keys: Spark compares and stores them as JSON, and two equal offsets must serialise alike.
A stream's offsets also carry the id of each topic they belong to, under the key ``@topicIds`` (``@`` is never
in a topic name), so that a topic deleted and created again under the same name is noticed even where its new
offsets are past the old ones (see `dataloss`). Offsets written without it (older checkpoints, brokers that
serve no topic ids) are read as ids unknown.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

__all__ = [
    "TOPIC_IDS_KEY",
    "OffsetRange",
    "ReadSpec",
    "TopicPartition",
    "from_spark_offsets",
    "rate_limit",
    "split_ranges",
    "to_spark_offsets",
    "topic_ids_of",
]

from groupstream.protocol.topic_partition import TopicPartition

TOPIC_IDS_KEY = "@topicIds"


@dataclass(frozen=True, order=True)
class OffsetRange:
    """Records ``start`` (inclusive) to ``end`` (exclusive) of one partition: one Spark task's work.

    ``topic_id`` is the id of the topic the range was planned in (None: unknown), so the task can tell the
    topic it reads from one deleted and created again under the same name since; ``first`` is False for the
    later pieces of a partition cut into several tasks (only the first answers for a recreated partition)."""

    topic: str
    partition: int
    start: int
    end: int
    topic_id: str | None = None
    first: bool = True

    @property
    def size(self) -> int:
        return max(self.end - self.start, 0)


@dataclass(frozen=True)
class ReadSpec:
    """What every task of a query needs besides its range (pickled once per task). Here, not in
    `executor`, so that the driver builds it without importing what the tasks read with."""

    bootstrap_servers: str
    client_config: tuple[tuple[str, str], ...]
    include_headers: bool
    fail_on_data_loss: bool
    poll_timeout_ms: int
    streaming: bool = False  # a micro-batch's task (its plan deals with lost partitions) or a batch read's


def to_spark_offsets(
    offsets: Mapping[TopicPartition, int], topic_ids: Mapping[str, str | None] | None = None
) -> dict[str, Any]:
    """``{"topic": {"0": 42}, "@topicIds": {"topic": "<uuid>"}}``, every level's keys sorted; ids only of topics
    that have offsets here."""
    out: dict[str, Any] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    ids = {t: str(i) for t, i in sorted((topic_ids or {}).items()) if t in out and i is not None}
    if ids:
        out[TOPIC_IDS_KEY] = ids
    return dict(sorted(out.items()))


def from_spark_offsets(offsets: Mapping[str, Any]) -> dict[TopicPartition, int]:
    return {
        TopicPartition(topic, int(p)): int(o) for topic, parts in offsets.items() if topic != TOPIC_IDS_KEY for p, o in parts.items()
    }


def topic_ids_of(offsets: Mapping[str, Any]) -> dict[str, str]:
    """The topic ids stream offsets were taken from ({} when they do not say)."""
    return {str(t): str(i) for t, i in dict(offsets.get(TOPIC_IDS_KEY) or {}).items()}


def split_ranges(ranges: Iterable[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Drop empty ranges; then, if there are fewer than ``min_partitions``, cut the ranges into pieces in
    proportion to their sizes (as Spark's Kafka source does), so big partitions get more tasks."""
    work = sorted(r for r in ranges if r.size > 0)
    if min_partitions is None or len(work) >= min_partitions:
        return work
    total = sum(r.size for r in work)
    out: list[OffsetRange] = []
    for r in work:
        parts = min(max(math.ceil(r.size / total * min_partitions), 1), r.size)
        step, extra = divmod(r.size, parts)
        start = r.start
        for i in range(parts):
            end = start + step + (1 if i < extra else 0)
            out.append(replace(r, start=start, end=end, first=r.first and i == 0))
            start = end
    return out


def rate_limit(
    start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], max_rows: int
) -> dict[TopicPartition, int]:
    """The end offsets of a trigger that reads at most ``max_rows`` records, shared among partitions in
    proportion to how far behind each is; a partition that is behind always moves at least one record."""
    lags = {tp: max(latest[tp] - start.get(tp, latest[tp]), 0) for tp in latest}
    total = sum(lags.values())
    if total <= max_rows:
        return dict(latest)
    out: dict[TopicPartition, int] = {}
    for tp, end in latest.items():
        begin = start.get(tp, end)
        share = max_rows * lags[tp] / total
        step = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(begin + step, end)
    return out
