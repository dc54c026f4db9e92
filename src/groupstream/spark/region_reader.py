"""The input side of a Spark region: a stream that reads the partitions the group gives this instance, from
where the region's shared table says their published output ends.

Several instances of a pipeline (``region.table`` and ``region.member`` set, the same ``kafka.group.id``) join
one consumer group through our consumer, which lives in this source's process and only takes part in the group
(its partitions stay paused; Spark's tasks read the data). Each micro-batch reads, for every partition the
instance owns at planning time, from the table ledger's offset for it (the merged checkpoint of all instances;
``startingOffsets`` for a partition the ledger has never seen) to the log end, limited by
``maxOffsetsPerTrigger``. That is each batch's reset to the consistent cut: after a rebalance an instance's new
partitions start exactly where the previous owner's published output ends, and a batch of a partition it lost
meanwhile is refused by the ledger when the instance tries to publish it (see `region_table`).

Spark's own offsets for such a stream are the batch's ranges (``{"member": m, "ranges": [[topic, partition,
start, end], ...]}``); Spark's checkpoint replays a planned batch after a crash, and the ledger decides whether
it still may be published. The published offsets are committed to the group, so lag tools see the pipeline.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxRows

from groupstream.region.ledger import OffsetLedger
from groupstream.spark.membership import GroupMembership
from groupstream.spark.options import SourceOptions
from groupstream.spark.planning import OffsetRange, TopicPartition, rate_limit, split_ranges
from groupstream.spark.region_table import BatchPlan, write_plan

__all__ = ["RegionReaderCore"]

log = logging.getLogger("groupstream.spark")

Ranges = dict[TopicPartition, tuple[int, int]]


def ranges_to_spark(member: str, ranges: Ranges) -> dict[str, Any]:
    return {"member": member, "ranges": [[t, p, s, e] for (t, p), (s, e) in sorted(ranges.items())]}


def ranges_from_spark(offset: dict[str, Any]) -> Ranges:
    return {(str(t), int(p)): (int(s), int(e)) for t, p, s, e in offset.get("ranges", [])}


def plan_key(member: str, ranges: Ranges) -> str:
    text = json.dumps(ranges_to_spark(member, ranges), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class RegionReaderCore:
    """What `source.StreamReader` does differently in region mode; it owns the group membership."""

    def __init__(
        self,
        options: SourceOptions,
        resolve_start: Callable[[Sequence[TopicPartition]], dict[TopicPartition, int]],
        latest: Callable[[Sequence[TopicPartition]], dict[TopicPartition, int]],
    ) -> None:
        """``resolve_start(tps)`` gives ``startingOffsets`` for partitions the ledger has not seen;
        ``latest(tps)`` their log ends."""
        assert options.region_table is not None and options.region_member is not None
        self.options = options
        self.member = options.region_member
        self.ledger = OffsetLedger(options.region_table)
        self._resolve_start = resolve_start
        self._latest = latest
        self._membership: GroupMembership | None = None

    @property
    def membership(self) -> GroupMembership:
        if self._membership is None:
            self._membership = GroupMembership(self.options, self.member)
        return self._membership

    def initial_offset(self) -> dict[str, Any]:
        return ranges_to_spark(self.member, {})

    def latest_offset(self, limit: ReadLimit, target: dict[TopicPartition, int] | None) -> dict[str, Any]:
        owned = sorted(self.membership.owned())
        published = self.ledger.offsets(owned)
        if published:
            self.membership.commit(published)
        unseen = [tp for tp in owned if tp not in published]
        begin = published | (self._resolve_start(unseen) if unseen else {})
        latest = self._latest(owned) if owned else {}
        if target is not None:  # Trigger.AvailableNow: never past what was there when it started
            latest = {tp: min(o, target.get(tp, o)) for tp, o in latest.items()}
        end = {tp: max(latest.get(tp, begin[tp]), begin[tp]) for tp in owned}
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(begin, end, limit.max_rows)
        return ranges_to_spark(self.member, {tp: (begin[tp], end[tp]) for tp in owned})

    def partitions(self, end: dict[str, Any]) -> list[OffsetRange]:
        ranges = ranges_from_spark(end)
        write_plan(self.ledger.root, self.member, BatchPlan(plan_key(self.member, ranges), ranges))
        work = [OffsetRange(t, p, s, e) for (t, p), (s, e) in sorted(ranges.items())]
        return split_ranges(work, self.options.min_partitions)

    def stop(self) -> None:
        if self._membership is not None:
            self._membership.close()
            self._membership = None
