"""The output side of a Spark region: a Parquet table shared by the region's instances, written per micro-batch
and published atomically with the offsets the batch read (see `groupstream.region.ledger`). With ``delta`` the
table is also a Delta table: each ledger entry's files are then committed to the Delta log, exactly once and in
ledger order (see `groupstream.spark.delta_table`), so readers of the log never see a batch that was not published.

Use it as the query's ``foreachBatch`` function: ``df.writeStream.foreachBatch(RegionTable(path, member))``.
The batch's ranges come from the plan the source wrote when Spark asked it for the batch's tasks. The source
runs in its own Python process (Spark's streaming source runner), the function in the driver's, so the plan
crosses as a small file, ``_plans/<member>.json``; Spark plans and runs one batch of a query at a time, so the
member's plan file always describes the batch being written.

A batch whose ranges went stale (another instance published those offsets after a rebalance) is dropped
without writing anything; the source plans the next batch from the ledger, which is the reset to the merged
checkpoint.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from groupstream.protocol.topic_partition import TopicPartition
from groupstream.region.ledger import OffsetLedger, PublishRejected

if TYPE_CHECKING:
    from groupstream.spark.delta_table import DeltaRegionPublisher

__all__ = ["PLANS_DIR", "BatchPlan", "RegionTable", "read_plan", "write_plan"]

PLANS_DIR = "_plans"
log = logging.getLogger("groupstream.spark")

Ranges = dict[TopicPartition, tuple[int, int]]


class BatchPlan:
    """What one micro-batch of a member reads: its ranges, under a key that names the batch in the ledger, with
    the topic ids it reads them in and, for partitions read anew after a data loss, the published offset and
    topic id each replaces (see `OffsetLedger.check`)."""

    def __init__(
        self,
        key: str,
        ranges: Mapping[TopicPartition, tuple[int, int]],
        topic_ids: Mapping[TopicPartition, str] | None = None,
        expected: Mapping[TopicPartition, tuple[int, str | None]] | None = None,
    ) -> None:
        self.key = key
        self.ranges: Ranges = dict(ranges)
        self.topic_ids: dict[TopicPartition, str] = dict(topic_ids or {})
        self.expected: dict[TopicPartition, tuple[int, str | None]] = dict(expected or {})

    def rows(self) -> dict[str, list[list[Any]]]:
        """The ranges (``[topic, partition, start, end, topic id]``) and the expected offsets (``[topic,
        partition, offset, topic id]``) as JSON rows: the plan file's form and Spark's offset's."""
        ranges = [[tp[0], tp[1], s, e, self.topic_ids.get(tp)] for tp, (s, e) in sorted(self.ranges.items())]
        expected = [[t, p, o, i] for (t, p), (o, i) in sorted(self.expected.items())]
        return {"ranges": ranges, "expected": expected}

    @classmethod
    def from_rows(cls, key: str, raw: Mapping[str, Any]) -> BatchPlan:
        """The plan of `rows` (ranges without a topic id were written before ids were kept)."""
        rows = raw.get("ranges", [])
        return cls(
            key,
            {TopicPartition(str(r[0]), int(r[1])): (int(r[2]), int(r[3])) for r in rows},
            {TopicPartition(str(r[0]), int(r[1])): str(r[4]) for r in rows if len(r) > 4 and r[4] is not None},
            {TopicPartition(str(t), int(p)): (int(o), None if i is None else str(i))
             for t, p, o, i in raw.get("expected", [])},
        )

    def to_json(self) -> str:
        return json.dumps({"key": self.key, **self.rows()}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> BatchPlan:
        raw = json.loads(text)
        return cls.from_rows(str(raw["key"]), raw)


def _plan_path(table: Path, member: str) -> Path:
    return table / PLANS_DIR / f"{member}.json"


def write_plan(table: Path | str, member: str, plan: BatchPlan) -> None:
    path = _plan_path(Path(table), member)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(plan.to_json())
    os.replace(tmp, path)


def read_plan(table: Path | str, member: str) -> BatchPlan | None:
    path = _plan_path(Path(table), member)
    return BatchPlan.from_json(path.read_text()) if path.exists() else None


class RegionTable:
    """``foreachBatch`` function that writes a region member's batches to the shared table."""

    def __init__(
        self,
        path: Path | str,
        member: str,
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
        delta: bool = False,
    ) -> None:
        """``on_event(event, fields)`` hears of every batch: ``published`` (ledger entry, ranges, files) or
        ``dropped`` (the stale ranges). With ``delta`` the table is also a Delta table: every published entry
        is committed to its Delta log (see `groupstream.spark.delta_table`)."""
        self.ledger = OffsetLedger(path)
        self.member = member
        self._on_event = on_event
        self.ledger.recover(member)
        self._delta: DeltaRegionPublisher | None = None
        if delta:
            from groupstream.spark.delta_table import DeltaRegionPublisher

            self._delta = DeltaRegionPublisher(path)
            self._delta.catch_up()  # entries a member that died published to the ledger only
        self.published = 0
        self.rejected = 0

    def __call__(self, df: Any, batch_id: int) -> None:
        plan = read_plan(self.ledger.root, self.member)
        if plan is None:
            raise RuntimeError(
                f"no batch plan for region member {self.member!r} in {self.ledger.root}: the query's source must be "
                "format('groupstream') with the same region.table and region.member"
            )
        conflicts = self.ledger.check(plan.ranges, plan.topic_ids, plan.expected)
        if conflicts:
            self._rejected(batch_id, PublishRejected(conflicts))
            return
        staging = self.ledger.staging_path(self.member, plan.key)
        if self._delta is not None:
            from groupstream.spark.delta_table import SPARK_DELTA_CONF

            for key, value in SPARK_DELTA_CONF.items():
                df.sparkSession.conf.set(key, value)
        try:
            df.write.mode("overwrite").parquet(str(staging))
        except Exception as e:
            if not _interrupted(e):
                raise
            # The query is being stopped in the middle of this batch. Nothing is published, so the next run
            # reads these ranges again from the ledger; returning (rather than raising Spark's interruption back
            # through py4j) also spares Spark a regex over the long error text, whose recursion overflows the
            # stream thread's stack (StackOverflowError in StreamExecution.isInterruptionException).
            shutil.rmtree(staging, ignore_errors=True)
            log.info("region member %s: batch %d interrupted by the query's stop; not published", self.member,
                     batch_id)  # fmt: skip
            return
        files = sorted(f for f in staging.glob("part-*.parquet") if _rows_in(f))
        for extra in staging.iterdir():  # Spark's _SUCCESS, checksums and empty parts are not part of the table
            if extra not in files and extra.is_file():
                extra.unlink()
        if not files:
            staging.rmdir()
        try:
            entry = self.ledger.publish(self.member, plan.key, plan.ranges, files, plan.topic_ids, plan.expected)
        except PublishRejected as e:
            self._rejected(batch_id, e)
            return
        self.published += 1
        if self._delta is not None:
            self._delta.catch_up()
        log.info("region member %s: batch %d published as ledger entry %d (%d files)", self.member, batch_id,
                 entry.seq, len(files))  # fmt: skip
        self._event("published", batch=batch_id, seq=entry.seq, files=len(files), ranges=_rows(plan.ranges))

    def _rejected(self, batch_id: int, error: PublishRejected) -> None:
        self.rejected += 1
        if self._delta is not None:
            self._delta.catch_up()  # the winner may have died between its ledger entry and its Delta commit
        log.warning("region member %s: batch %d dropped, %s; resetting to the ledger", self.member, batch_id, error)
        stale = {tp: (s, 0 if e is None else e) for tp, (s, e) in error.conflicts.items()}
        self._event("dropped", batch=batch_id, stale=_rows(stale))

    def _event(self, event: str, **fields: Any) -> None:
        if self._on_event is not None:
            self._on_event(event, fields)


_INTERRUPTIONS = ("java.lang.InterruptedException", "java.io.InterruptedIOException",
                  "java.nio.channels.ClosedByInterruptException")  # fmt: skip


def _interrupted(error: Exception) -> bool:
    """A py4j call into Spark that failed because the query's thread was interrupted (the query is stopping)."""
    return type(error).__name__ == "Py4JJavaError" and any(name in str(error) for name in _INTERRUPTIONS)


def _rows_in(path: Path) -> int:
    import pyarrow.parquet as pq

    return int(pq.read_metadata(path).num_rows)


def _rows(ranges: Mapping[TopicPartition, tuple[int, int]]) -> list[list[Any]]:
    return [[t, p, s, e] for (t, p), (s, e) in sorted(ranges.items())]
