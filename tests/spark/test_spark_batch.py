"""Batch reads and writes through ``format("groupstream")`` on a real local Spark, against our broker (and
the read path against Tansu too): every record exactly once, Spark Kafka source options, data loss, errors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from spark_kit import fill, new_topic, offsets_by_partition, source

from groupstream.client.admin import Admin
from support.brokers import BrokerKind, BrokerProcess

pytestmark = pytest.mark.compat


def test_a_batch_read_returns_every_record_once_in_kafka_columns(spark: Any, broker: BrokerProcess) -> None:
    bs = broker.bootstrap
    topic = new_topic(bs, 6)
    produced = fill(bs, topic, 6000)
    df = source(spark, bs, subscribe=topic, includeHeaders="true")
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "binary"), ("value", "binary"), ("topic", "string"), ("partition", "int"), ("offset", "bigint"),
        ("timestamp", "timestamp"), ("timestampType", "int"), ("headers", "array<struct<key:string,value:binary>>"),
    ]  # fmt: skip
    assert df.rdd.getNumPartitions() == 6  # one task per partition range
    rows = df.collect()
    assert len(rows) == 6000
    assert {bytes(r.key): bytes(r.value) for r in rows} == produced
    assert all(r.topic == topic and r.timestampType == 0 for r in rows)
    assert all([(h.key, bytes(h.value)) for h in r.headers] == [("i", r.value[1:])] for r in rows)
    by_partition = offsets_by_partition(rows)
    assert sorted(by_partition) == list(range(6))
    for p, offsets in by_partition.items():
        assert offsets == list(range(len(offsets))), p

    split = source(spark, bs, subscribe=topic, minPartitions="20")
    assert 20 <= split.rdd.getNumPartitions() <= 20 + 6  # large ranges cut by size into at least 20 tasks
    again = split.select("partition", "offset").collect()
    assert sorted((r.partition, r.offset) for r in again) == sorted((r.partition, r.offset) for r in rows)


def test_assign_with_per_partition_starting_and_ending_offsets(spark: Any, broker: BrokerProcess) -> None:
    bs = broker.bootstrap
    topic = new_topic(bs, 3)
    for p in range(3):
        fill(bs, topic, 20, first=100 * p, partition=p)
    df = source(spark, bs, assign=f'{{"{topic}": [0, 2]}}', startingOffsets=f'{{"{topic}": {{"0": 5, "2": -2}}}}',
                endingOffsets=f'{{"{topic}": {{"0": 10, "2": -1}}}}')  # fmt: skip
    rows = df.collect()
    assert offsets_by_partition(rows) == {0: list(range(5, 10)), 2: list(range(20))}
    assert sorted(bytes(r.key) for r in rows if r.partition == 0) == sorted(b"k%d" % i for i in range(5, 10))


def test_subscribe_pattern_reads_matching_topics_only(spark: Any, broker: BrokerProcess) -> None:
    bs = broker.bootstrap
    a, b = new_topic(bs, 1, prefix="pat-x"), new_topic(bs, 2, prefix="pat-x")
    other = new_topic(bs, 1, prefix="nopat")
    fill(bs, a, 10)
    fill(bs, b, 20)
    fill(bs, other, 5)
    rows = source(spark, bs, subscribePattern="pat-x-.*").collect()
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.topic] = counts.get(r.topic, 0) + 1
    assert {t: c for t, c in counts.items() if t in (a, b, other)} == {a: 10, b: 20}


def test_starting_offsets_by_timestamp(spark: Any, broker: BrokerProcess) -> None:
    bs = broker.bootstrap
    topic = new_topic(bs, 1)
    fill(bs, topic, 100, timestamp_ms=1_700_000_000_000)  # record i has timestamp base + i
    rows = source(spark, bs, subscribe=topic, startingTimestamp=str(1_700_000_000_000 + 40)).collect()
    assert sorted(r.offset for r in rows) == list(range(40, 100))
    assert min(r.timestamp for r in rows).timestamp() * 1000 == pytest.approx(1_700_000_000_040)
    late = str(1_800_000_000_000)
    with pytest.raises(Exception, match="has a timestamp at or after"):
        source(spark, bs, subscribe=topic, startingTimestamp=late).collect()
    assert source(spark, bs, subscribe=topic, startingTimestamp=late,
                  startingOffsetsByTimestampStrategy="latest").count() == 0  # fmt: skip


def test_deleted_records_fail_the_read_unless_fail_on_data_loss_is_false(spark: Any, broker: BrokerProcess) -> None:
    bs = broker.bootstrap
    topic = new_topic(bs, 1)
    fill(bs, topic, 100)
    with Admin({"bootstrap.servers": bs}) as admin:
        assert admin.delete_records({(topic, 0): 60}) == {(topic, 0): 60}
    from_zero = f'{{"{topic}": {{"0": 0}}}}'
    with pytest.raises(Exception, match="failOnDataLoss"):
        source(spark, bs, subscribe=topic, startingOffsets=from_zero).collect()
    rows = source(spark, bs, subscribe=topic, startingOffsets=from_zero, failOnDataLoss="false").collect()
    assert sorted(r.offset for r in rows) == list(range(60, 100))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"subscribe": "no-such-topic"}, "names topic 'no-such-topic', which does not exist"),
        ({"subscribe": "t", "startingOffsets": "latest"}, "cannot be latest for a batch query"),
        ({"subscribe": "t", "fetch.max.bytes": "1"}, "unknown option 'fetch.max.bytes'"),
    ],
)
def test_mistakes_reach_the_user_with_the_option_named(
    spark: Any, broker: BrokerProcess, options: dict[str, str], message: str
) -> None:
    with pytest.raises(Exception, match=message):
        source(spark, broker.bootstrap, **options).collect()


def test_the_sink_produces_rows_that_read_back_unchanged(spark: Any, broker: BrokerProcess) -> None:
    bs = broker.bootstrap
    topic = new_topic(bs, 2)
    rows = [(f"k{i}", f"v{i}", i % 2) for i in range(500)]
    df = spark.createDataFrame(rows, "key string, value string, partition int")
    df.write.format("groupstream").option("kafka.bootstrap.servers", bs).option("topic", topic).mode("append").save()
    back = source(spark, bs, subscribe=topic).collect()
    assert sorted((bytes(r.key).decode(), bytes(r.value).decode(), r.partition) for r in back) == sorted(rows)


def test_the_sink_needs_a_value_column(spark: Any, broker: BrokerProcess) -> None:
    df = spark.createDataFrame([("k",)], "key string")
    with pytest.raises(Exception, match="needs a 'value' column"):
        df.write.format("groupstream").option("kafka.bootstrap.servers", broker.bootstrap).option(
            "topic", "x").mode("append").save()  # fmt: skip


@pytest.fixture(scope="module")
def tansu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(BrokerKind.TANSU, Path(tmp_path_factory.mktemp("spark-tansu"))) as b:
        yield b


@pytest.mark.broker_tansu
def test_a_batch_read_of_a_broker_we_did_not_write(spark: Any, tansu: BrokerProcess) -> None:
    """Tansu 0.6.0 answers ListOffsets(latest) with a stale offset, so the job names its ending offsets."""
    bs = tansu.bootstrap
    topic = new_topic(bs, 2)
    produced = fill(bs, topic, 500, partition=0) | fill(bs, topic, 500, first=500, partition=1)
    ending = f'{{"{topic}": {{"0": 500, "1": 500}}}}'
    rows = source(spark, bs, subscribe=topic, minPartitions="4", endingOffsets=ending).collect()
    assert {bytes(r.key): bytes(r.value) for r in rows} == produced
    assert offsets_by_partition(rows) == {0: list(range(500)), 1: list(range(500))}
