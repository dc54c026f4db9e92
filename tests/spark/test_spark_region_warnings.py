"""The region reader warns once per lost topic, also when a plan falls between its deletion and its creation
again: the deletion is warned about, and the new topic under the same name is then read anew without a second
warning (a stream does the same: the topic leaves its offsets, and comes back as a new one). No Spark, no
broker: the reader's view of the cluster and its group membership are given."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from groupstream.region.ledger import OffsetLedger
from groupstream.spark.dataloss import ClusterView
from groupstream.spark.options import parse_source_options
from groupstream.spark.planning import TopicPartition
from groupstream.spark.region_reader import RegionReaderCore

T0, T1 = ("t", 0), ("t", 1)


class Owner:
    """The group gave this instance both partitions; commits are not looked at here."""

    def owned(self) -> list[TopicPartition]:
        return [T0, T1]

    def commit(self, offsets: object) -> None:
        pass

    def close(self) -> None:
        pass


def test_a_topic_seen_deleted_then_created_again_is_warned_about_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    table = tmp_path / "table"
    ledger = OffsetLedger(table)
    staged = ledger.staging_path("i0", "b1") / "part-0.parquet"
    staged.write_bytes(b"rows")
    ledger.publish("i0", "b1", {T0: (0, 100), T1: (0, 120)}, [staged], {T0: "id-a", T1: "id-a"})
    options = parse_source_options({"kafka.bootstrap.servers": "localhost:9092", "subscribe": "t",
                                    "region.table": str(table), "region.member": "i0", "kafka.group.id": "g",
                                    "failOnDataLoss": "false"}, True)  # fmt: skip
    views = [ClusterView({}), ClusterView({T0: 30, T1: 40}, {"t": "id-b"})]  # deleted, then created again
    core = RegionReaderCore(options, lambda tps: dict.fromkeys(tps, 0), lambda: views.pop(0),
                            lambda tps: dict.fromkeys(tps, 0))  # fmt: skip
    core._membership = Owner()  # type: ignore[assignment]
    with caplog.at_level(logging.INFO, logger="groupstream.spark"):
        core.latest_offset(ReadAllAvailable(), None)
        plan = core.latest_offset(ReadAllAvailable(), None)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "topic t was deleted" in warnings[0], warnings
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert any("deleted and created again" in m for m in infos), infos
    assert sorted(tuple(r[:4]) for r in plan["ranges"]) == [("t", 0, 0, 30), ("t", 1, 0, 40)]  # read anew
