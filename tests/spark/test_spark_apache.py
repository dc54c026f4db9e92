"""The Spark source and sink (``format("groupstream")``) on a 3-node Apache Kafka cluster (replication factor
3), where a topic's partitions are led by different nodes: each task must read from, and the sink write to,
the leader of its partition, and the stream's group commits go to the group's coordinator, another node.

- A batch read returns every record once, each at the offset the producer was told.
- A stream commits its progress to its consumer group: inside every micro-batch our Admin already sees the
  previous batches' end offsets committed; partitions added to the topic while it runs are read from their
  start; once caught up the group's offsets are the log ends.
- The sink writes rows that an independent reader (confluent-kafka) reads back exactly, each partition's
  offsets from 0 with no gap and its high watermark the number of rows written there.
- A region of two pipeline instances (``groupstream pipeline run --until-caught-up``, ``[region] instances =
  2``; the scenario of ``test_spark_region``) shares one group on the cluster and writes every record to its
  table once.
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from spark_kit import source
from test_spark_region import region_of_two_until_caught_up

from groupstream.client.admin import Admin
from support.apache_kafka import ApacheKafkaCluster, ExternalKafkaCluster
from support.cluster_topics import create_topic, leaders, produce_round_robin, unique
from support.compat import confluent_read
from support.waiting import wait_until

pytestmark = [pytest.mark.broker_apache, pytest.mark.compat]

Cluster = ApacheKafkaCluster | ExternalKafkaCluster
TopicPart = tuple[str, int]


def spread_topic(bs: str, prefix: str, partitions: int) -> str:
    """A new topic whose partitions are led by at least two nodes (Kafka spreads leaders round-robin)."""
    topic = unique(prefix)
    create_topic(bs, topic, partitions)
    led_by = set(leaders(bs, topic).values())
    assert len(led_by) >= 2, f"{topic}: every partition led by {led_by}; nothing would cross nodes"
    return topic


def test_a_batch_read_returns_every_record_once_at_its_offset(spark: Any, apache_cluster: Cluster) -> None:
    bs = apache_cluster.bootstrap
    topic = spread_topic(bs, "sp-batch", 6)
    placed = produce_round_robin(bs, topic, 6000, 6)

    for options in ({}, {"minPartitions": "12"}):  # one task per partition, then ranges cut across them
        df = source(spark, bs, subscribe=topic, **options)
        rows = df.select("topic", "partition", "offset", "key", "value").collect()
        got = {(r.partition, r.offset): (bytes(r.key), bytes(r.value)) for r in rows}
        assert len(rows) == len(got), f"{options}: {len(rows) - len(got)} records read twice"
        assert {r.topic for r in rows} == {topic}
        missing, extra = placed.keys() - got.keys(), got.keys() - placed.keys()
        assert not missing and not extra, f"{options}: missing {sorted(missing)[:5]}, extra {sorted(extra)[:5]}"
        wrong = [pos for pos, rec in placed.items() if got[pos] != rec]
        assert not wrong, f"{options}: other records than produced at {wrong[:5]}"


class BatchLog:
    """What each micro-batch of a ``foreachBatch`` query saw: its records, and the group's committed offsets
    read through our Admin while the batch ran (on Spark's driver, in this process)."""

    def __init__(self, bs: str, group: str) -> None:
        self.group = group
        self.admin = Admin({"bootstrap.servers": bs})
        self.batches: list[tuple[int, list[tuple[int, int, bytes, bytes]], dict[TopicPart, int]]] = []
        self.lock = threading.Lock()

    def __call__(self, df: Any, batch_id: int) -> None:
        rows = [(r.partition, r.offset, bytes(r.key), bytes(r.value))
                for r in df.select("partition", "offset", "key", "value").collect()]  # fmt: skip
        committed = {tp: om.offset for tp, om in self.admin.list_group_offsets(self.group).items()}
        with self.lock:
            self.batches.append((batch_id, rows, committed))

    def read(self) -> dict[tuple[int, int], tuple[bytes, bytes]]:
        with self.lock:
            return {(p, o): (k, v) for _id, rows, _c in self.batches for p, o, k, v in rows}

    def count(self) -> int:
        with self.lock:
            return sum(len(rows) for _id, rows, _c in self.batches)


def test_a_stream_commits_each_batch_to_its_group_and_reads_partitions_added_while_it_runs(
    spark: Any, apache_cluster: Cluster, tmp_path: Path
) -> None:
    bs = apache_cluster.bootstrap
    topic, group = spread_topic(bs, "sp-stream", 3), unique("spark-apache")
    placed = produce_round_robin(bs, topic, 1500, 3)
    log = BatchLog(bs, group)
    df = (
        spark.readStream.format("groupstream").option("kafka.bootstrap.servers", bs).option("subscribe", topic)
        .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "400").option("group.id", group)
        .load()
    )  # fmt: skip
    query = (
        df.writeStream.foreachBatch(log)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )

    def explain() -> str:
        return f"read {log.count()} records in {len(log.batches)} batches; query error: {query.exception()}"

    def has_read(expected: dict[tuple[int, int], tuple[bytes, bytes]]) -> bool:
        assert query.isActive, f"the query stopped: {query.exception()}"
        return log.read().keys() >= expected.keys()

    try:
        wait_until(lambda: has_read(placed), 120, "the stream to read the first 1500 records", explain=explain)
        with Admin({"bootstrap.servers": bs}) as admin:
            admin.create_partitions(topic, 6)
            wait_until(lambda: admin.describe_topics([topic])[topic].partition_count == 6, 30, "6 partitions")
        wait_until(lambda: len(set(leaders(bs, topic).values()) - {-1}) >= 2 and len(leaders(bs, topic)) == 6,
                   30, "the new partitions led")  # fmt: skip
        placed |= produce_round_robin(bs, topic, 900, 6, first=1500)
        wait_until(lambda: has_read(placed), 120, "the stream to read the records of the new partitions",
                   explain=explain)  # fmt: skip
        with Admin({"bootstrap.servers": bs}) as admin:
            ends = {tp: o.offset for tp, o in admin.list_offsets({(topic, p): "latest" for p in range(6)}).items()}

            def committed() -> dict[TopicPart, int]:
                return {tp: om.offset for tp, om in admin.list_group_offsets(group).items()}

            # the next trigger's plan commits the last batch's end, data or not
            wait_until(lambda: committed() == ends, 30, f"the group's offsets to reach the log ends {ends}")
    finally:
        query.stop()
        log.admin.close()
    assert query.exception() is None, query.exception()

    got = log.read()
    assert log.count() == len(got), f"{log.count() - len(got)} records read twice"
    assert got == placed, f"missing {sorted(placed.keys() - got.keys())[:5]}, extra {sorted(got.keys() - placed.keys())[:5]}"
    assert {p for p, _o in got} == set(range(6))

    # in every batch the group already held where the batches before it ended (0 for a partition not read yet)
    next_offset: dict[TopicPart, int] = {}
    ids = [batch_id for batch_id, _rows, _c in log.batches]
    assert ids == list(range(len(ids))), f"batch ids {ids}"
    for batch_id, rows, committed_then in log.batches:
        expected = {tp: next_offset.get(tp, 0) for tp in committed_then}
        assert committed_then == expected, f"batch {batch_id}: group offsets {committed_then}, batches ended at {expected}"
        assert next_offset.keys() <= committed_then.keys(), (
            f"batch {batch_id}: partitions read before but not committed: {sorted(next_offset.keys() - committed_then.keys())}"
        )
        for p, o, _k, _v in rows:
            next_offset[(topic, p)] = max(next_offset.get((topic, p), 0), o + 1)
    assert len(log.batches) >= 5, f"only {len(log.batches)} batches: maxOffsetsPerTrigger was not applied"
    assert any(len(c) == 6 for _i, _r, c in log.batches), "no batch saw the new partitions committed"


def test_the_sink_writes_rows_an_independent_reader_reads_back_exactly(spark: Any, apache_cluster: Cluster) -> None:
    bs = apache_cluster.bootstrap
    topic = spread_topic(bs, "sp-sink", 6)
    rows = [(f"k{i}", f"v{i}", i % 6) for i in range(3000)]
    df = spark.createDataFrame(rows, "key string, value string, partition int").repartition(3)
    df.write.format("groupstream").option("kafka.bootstrap.servers", bs).option("topic", topic).mode("append").save()

    consumed, ends = confluent_read(bs, topic, 6, len(rows))
    positions = Counter((c.partition, c.offset) for c in consumed)
    assert max(positions.values()) == 1, "a position read twice"
    assert sorted((c.partition, c.key, c.value) for c in consumed) == sorted(
        (p, k.encode(), v.encode()) for k, v, p in rows
    )
    per_partition = Counter(p for _k, _v, p in rows)
    for p, n in per_partition.items():
        assert sorted(o for q, o in positions if q == p) == list(range(n)), f"partition {p}: offsets not 0..{n - 1}"
        assert ends[p] == n, f"partition {p}: high watermark {ends[p]}, {n} rows written there"


@pytest.mark.slow
def test_a_region_of_two_pipeline_instances_writes_every_record_once(apache_cluster: Cluster, tmp_path: Path) -> None:
    region_of_two_until_caught_up(apache_cluster.bootstrap, tmp_path)
