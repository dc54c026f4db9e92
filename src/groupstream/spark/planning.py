"""Pure planning of what Spark tasks read: offset ranges per topic-partition, split to reach
``minPartitions``, limited per trigger by ``maxOffsetsPerTrigger``, and the offsets a stream checkpoints.

Offsets cross into Spark as plain nested dicts, ``{"topic": {"0": 42}}`` (Spark's Kafka source offset shape),
built with sorted keys: Spark compares and stores them as JSON, and two equal offsets must serialise alike.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["OffsetRange", "TopicPartition", "from_spark_offsets", "rate_limit", "split_ranges", "to_spark_offsets"]

TopicPartition = tuple[str, int]


@dataclass(frozen=True, order=True)
class OffsetRange:
    """Records ``start`` (inclusive) to ``end`` (exclusive) of one partition: one Spark task's work."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(self.end - self.start, 0)


def to_spark_offsets(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def from_spark_offsets(offsets: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    return {(topic, int(p)): int(o) for topic, parts in offsets.items() for p, o in parts.items()}


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
            out.append(OffsetRange(r.topic, r.partition, start, end))
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
