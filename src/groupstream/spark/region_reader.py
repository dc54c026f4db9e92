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

Spark's own offsets for such a stream are the batch's plan (``{"member": m, "ranges": [[topic, partition,
start, end, topic id], ...], "expected": [[topic, partition, offset, topic id], ...]}``); Spark's checkpoint
replays a planned batch after a crash, and the ledger decides whether it still may be published. The published
offsets are committed to the group, so lag tools see the pipeline.

Data loss follows the rules of every groupstream stream (see `dataloss`), against the ledger: a partition the
ledger holds in a topic that was deleted and created again (another topic id), whose offsets went back, or that
is gone, fails the query under failOnDataLoss; otherwise it is warned about once and read anew (a new topic from
its earliest offsets), the batch naming the published offset and topic id it replaces (``expected``) so that
only one such restart of a partition can ever be published.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxRows

from groupstream.region.ledger import OffsetLedger
from groupstream.spark.cluster import DataLossError
from groupstream.spark.dataloss import ClusterView, DataLoss, LossKind, warning_text
from groupstream.spark.membership import GroupMembership
from groupstream.spark.options import SourceOptions
from groupstream.spark.planning import OffsetRange, TopicPartition, rate_limit, split_ranges
from groupstream.spark.region_table import BatchPlan, write_plan

__all__ = ["RegionReaderCore"]

log = logging.getLogger("groupstream.spark")

Ranges = dict[TopicPartition, tuple[int, int]]


def plan_to_spark(member: str, plan: BatchPlan) -> dict[str, Any]:
    rows = plan.rows()
    out: dict[str, Any] = {"member": member, "ranges": rows["ranges"]}
    if rows["expected"]:
        out["expected"] = rows["expected"]
    return out


def plan_from_spark(offset: dict[str, Any]) -> BatchPlan:
    """The batch plan in Spark's offsets (rows without a topic id: written before ids were kept)."""
    return BatchPlan.from_rows("", offset)


def plan_key(member: str, plan: BatchPlan) -> str:
    text = json.dumps(plan_to_spark(member, plan), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class RegionReaderCore:
    """What `source.StreamReader` does differently in region mode; it owns the group membership."""

    def __init__(
        self,
        options: SourceOptions,
        resolve_start: Callable[[Sequence[TopicPartition]], dict[TopicPartition, int]],
        view: Callable[[], ClusterView],
        earliest: Callable[[Sequence[TopicPartition]], Mapping[TopicPartition, int]],
    ) -> None:
        """``resolve_start(tps)`` gives ``startingOffsets`` for partitions the ledger has not seen; ``view()``
        the subscribed partitions now (log ends, topic ids); ``earliest(tps)`` their log starts."""
        assert options.region_table is not None and options.region_member is not None
        self.options = options
        self.member = options.region_member
        self.ledger = OffsetLedger(options.region_table)
        self._resolve_start = resolve_start
        self._view = view
        self._earliest = earliest
        self._membership: GroupMembership | None = None
        self._reported: set[DataLoss] = set()  # warned about once: a dropped batch plans them again
        self._gone: set[tuple[str, str | None]] = set()  # (topic, id) of deleted topics warned about

    @property
    def membership(self) -> GroupMembership:
        if self._membership is None:
            self._membership = GroupMembership(self.options, self.member)
        return self._membership

    def initial_offset(self) -> dict[str, Any]:
        return plan_to_spark(self.member, BatchPlan("", {}))

    def latest_offset(self, limit: ReadLimit, target: Mapping[TopicPartition, int] | None) -> dict[str, Any]:
        owned = sorted(self.membership.owned())
        entry = self.ledger.latest()
        published = {} if entry is None else {tp: entry.offsets[tp] for tp in owned if tp in entry.offsets}
        published_ids = {} if entry is None else {tp: i for tp, i in entry.topic_ids.items() if tp in published}
        if published:
            self.membership.commit(published)
        view = self._view()
        now = {tp: view.latest[tp] for tp in owned if tp in view.latest}
        ids = {tp: view.topic_ids[tp[0]] for tp in now if tp[0] in view.topic_ids}
        losses = self._losses(published, published_ids, now, ids, view)
        if losses and self.options.fail_on_data_loss:
            raise DataLossError("; ".join(loss.describe() for loss in losses))
        for loss in losses:
            if loss not in self._reported:
                self._reported.add(loss)
                if loss.kind is LossKind.RECREATED and (loss.topic, loss.old_id) in self._gone:
                    # seen deleted by an earlier plan, and warned about then: its return is the same event
                    log.info("%s", warning_text(loss))
                else:
                    log.warning("%s", warning_text(loss))
                if loss.kind is LossKind.GONE and loss.topic_gone:
                    self._gone.add((loss.topic, loss.old_id))
        anew = {TopicPartition(loss.topic, p) for loss in losses if loss.reads_from_earliest for p, _, _ in loss.partitions}
        unseen = [tp for tp in now if tp not in published]
        begin = dict(self._resolve_start(unseen)) if unseen else {}
        begin |= dict(self._earliest(sorted(anew & now.keys()))) if anew & now.keys() else {}
        for tp in now:
            if tp not in begin:
                begin[tp] = min(published[tp], now[tp])  # went back in the same topic: from its new end
        end = dict(now)
        if target is not None:  # Trigger.AvailableNow: never past what was there when it started
            end = {tp: min(o, target.get(tp, o)) for tp, o in end.items()}
        end = {tp: max(o, begin[tp]) for tp, o in end.items()}  # a start past the end (startingOffsets) reads nothing
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(begin, end, limit.max_rows)
        expected = {tp: (published[tp], published_ids.get(tp)) for tp in now if tp in published and begin[tp] != published[tp]}
        plan = BatchPlan("", {tp: (begin[tp], end[tp]) for tp in now}, ids, expected)
        return plan_to_spark(self.member, plan)

    def _losses(
        self,
        published: Mapping[TopicPartition, int],
        published_ids: Mapping[TopicPartition, str],
        now: Mapping[TopicPartition, int],
        ids: Mapping[TopicPartition, str],
        view: ClusterView,
    ) -> list[DataLoss]:
        """What happened, since the ledger's offsets, to the partitions this instance owns: one event per topic,
        kind and pair of topic ids. A partition whose topic is unsettled now is left alone."""
        events: dict[tuple[LossKind, str, str | None, str | None], list[tuple[int, int, int | None]]] = {}
        gone_topics: set[str] = set()
        for tp, was in sorted(published.items()):
            t, p = tp
            old, new = published_ids.get(tp), ids.get(tp)
            if t in view.unsettled:
                continue
            if tp not in now:
                events.setdefault((LossKind.GONE, t, old, None), []).append((p, was, None))
                if not any(tp[0] == t for tp in view.latest):
                    gone_topics.add(t)
            elif old is not None and new is not None and old != new:
                events.setdefault((LossKind.RECREATED, t, old, new), []).append((p, was, now[tp]))
            elif now[tp] < was:
                events.setdefault((LossKind.WENT_BACK, t, old, new), []).append((p, was, now[tp]))
        return [
            DataLoss(kind, t, tuple(parts), old, new, topic_gone=t in gone_topics)
            for (kind, t, old, new), parts in events.items()
        ]

    def partitions(self, end: dict[str, Any]) -> list[OffsetRange]:
        parsed = plan_from_spark(end)
        plan = BatchPlan(plan_key(self.member, parsed), parsed.ranges, parsed.topic_ids, parsed.expected)
        write_plan(self.ledger.root, self.member, plan)
        work = [OffsetRange(t, p, s, e, topic_id=plan.topic_ids.get(TopicPartition(t, p)))
                for (t, p), (s, e) in sorted(plan.ranges.items())]
        return split_ranges(work, self.options.min_partitions)

    def stop(self) -> None:
        if self._membership is not None:
            self._membership.close()
            self._membership = None
