"""Streaming reads through ``readStream.format("groupstream")`` on a real local Spark: read limits per trigger,
Trigger.AvailableNow, progress committed to the consumer group, restarts from the checkpoint without
duplicates, new partitions and topics picked up, and starting from a group's commits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spark_kit import fill, new_topic

from groupstream.client.admin import Admin
from support.brokers import BrokerProcess

pytestmark = pytest.mark.compat


def stream(spark: Any, bootstrap: str, **options: str) -> Any:
    reader = spark.readStream.format("groupstream").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def run_available_now(df: Any, out: Path, checkpoint: Path) -> Any:
    query = (
        df.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert not query.isActive, "the AvailableNow query did not finish"
    assert query.exception() is None, query.exception()
    return query


def read_out(spark: Any, out: Path) -> list[Any]:
    return spark.read.parquet(str(out)).select("topic", "partition", "offset", "key").collect()


def test_limited_triggers_read_everything_once_and_commit_progress_to_the_group(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    bs = broker.bootstrap
    topic = new_topic(bs, 3)
    produced = fill(bs, topic, 1000)
    df = stream(spark, bs, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="300",
                **{"group.id": "spark-job"})  # fmt: skip
    query = run_available_now(df, tmp_path / "out", tmp_path / "ck")
    rows = read_out(spark, tmp_path / "out")
    assert sorted(bytes(r.key) for r in rows) == sorted(produced)
    assert len({(r.partition, r.offset) for r in rows}) == 1000
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert len(sizes) >= 4 and max(sizes) <= 300 + 3, sizes  # the limit, plus one record per lagging partition
    with Admin({"bootstrap.servers": bs}) as admin:
        ends = {tp: o.offset for tp, o in admin.list_offsets({(topic, p): "latest" for p in range(3)}).items()}
        committed = {tp: om.offset for tp, om in admin.list_group_offsets("spark-job").items()}
    assert committed == ends  # the group shows the job caught up: lag 0


def test_a_restart_resumes_from_the_checkpoint_and_picks_up_new_partitions_and_topics(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    bs = broker.bootstrap
    first = new_topic(bs, 2, prefix="rs-a")
    produced = fill(bs, first, 400)
    df = stream(spark, bs, subscribePattern="rs-a-.*|rs-b-.*", startingOffsets="earliest")
    run_available_now(df, tmp_path / "out", tmp_path / "ck")
    assert len(read_out(spark, tmp_path / "out")) == 400

    with Admin({"bootstrap.servers": bs}) as admin:
        admin.create_partitions(first, 3)
    produced |= fill(bs, first, 300, first=400)
    second = new_topic(bs, 1, prefix="rs-b")
    more = fill(bs, second, 50, first=10_000)
    df = stream(spark, bs, subscribePattern="rs-a-.*|rs-b-.*", startingOffsets="earliest")
    run_available_now(df, tmp_path / "out", tmp_path / "ck")
    rows = read_out(spark, tmp_path / "out")
    assert len({(r.topic, r.partition, r.offset) for r in rows}) == len(rows) == 750  # nothing read twice
    assert sorted(bytes(r.key) for r in rows if r.topic == first) == sorted(produced)
    assert sorted(bytes(r.key) for r in rows if r.topic == second) == sorted(more)
    assert {r.partition for r in rows if r.topic == first} == {0, 1, 2}


def test_starting_offsets_group_resumes_where_the_group_committed(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    bs = broker.bootstrap
    topic = new_topic(bs, 2)
    fill(bs, topic, 200, partition=0)
    fill(bs, topic, 100, first=200, partition=1)
    with Admin({"bootstrap.servers": bs}) as admin:
        admin.alter_group_offsets("resume-me", {(topic, 0): 150})  # partition 1 has no commit: earliest
    df = stream(spark, bs, subscribe=topic, startingOffsets="group", **{"group.id": "resume-me"})
    run_available_now(df, tmp_path / "out", tmp_path / "ck")
    rows = read_out(spark, tmp_path / "out")
    assert sorted(r.offset for r in rows if r.partition == 0) == list(range(150, 200))
    assert sorted(r.offset for r in rows if r.partition == 1) == list(range(100))
    with Admin({"bootstrap.servers": bs}) as admin:
        committed = {tp: om.offset for tp, om in admin.list_group_offsets("resume-me").items()}
    assert committed == {(topic, 0): 200, (topic, 1): 100}


def test_the_streaming_sink_copies_a_topic(spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    bs = broker.bootstrap
    source_topic, target = new_topic(bs, 3), new_topic(bs, 2)
    produced = fill(bs, source_topic, 900)
    df = stream(spark, bs, subscribe=source_topic, startingOffsets="earliest", maxOffsetsPerTrigger="400")
    query = (
        df.select("key", "value")
        .writeStream.format("groupstream")
        .option("kafka.bootstrap.servers", bs)
        .option("topic", target)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert not query.isActive and query.exception() is None, query.exception()
    copied = spark.read.format("groupstream").option("kafka.bootstrap.servers", bs).option(
        "subscribe", target).load().collect()  # fmt: skip
    assert sorted((bytes(r.key), bytes(r.value)) for r in copied) == sorted(produced.items())
