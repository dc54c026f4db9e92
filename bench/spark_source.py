"""The Spark source and sink against our own client on the same data, broker and run (issue 14's targets).

One broker process (ours), one topic of ``--partitions`` partitions holding ``--records`` keyed records of
``--value-size`` random bytes. Every reader counts records by touching them (the sum of the values' lengths is
checked against what was written), and each is timed on its own:

- ``poll_arrow``: our Consumer in assign mode over every partition from offset 0, one thread, Arrow batches
  (the base of the read ratios);
- ``task code``: the Spark tasks' read (`executor.read_range`) of every partition in turn, no Spark;
- ``spark batch``: ``spark.read.format("groupstream")`` into Spark's ``noop`` sink at ``local[2]``, the rows
  counted and their values' lengths summed by ``DataFrame.observe`` on the way (target: >= 0.7x poll_arrow);
- ``spark stream``: the same through ``readStream`` with Trigger.AvailableNow into ``noop``, observed the same
  way in each micro-batch (target: >= 0.5x poll_arrow);
- ``spark ceiling``: what Spark alone costs: a Python data source whose tasks yield ready Arrow batches of the
  same schema, rows and value size (no broker, no client) into ``noop``, observed the same way. No source
  reading through Spark's Python Data Source API can beat it.

Then writing, to new topics of the same shape, acks=all and idempotent as the sink produces:

- ``produce``: our Producer, one ``produce`` call per record, keyed, timed to the end of the flush (the base of
  the sink ratio);
- ``produce_arrow``: our Producer given the same records as Arrow batches of 16,384 rows;
- ``spark sink``: a DataFrame of the same keys and values (cached in Spark first) written with
  ``format("groupstream")`` at ``local[2]`` (target: >= 0.8x produce). The topics' end offsets are checked.

Spark runs two tasks at once on the machine's cores; the clients run in one thread (plus their network
thread). A warm-up query runs first, so JVM and Python worker start-up are not counted. The best of
``--repeat`` runs counts.

    .venv/bin/python bench/spark_source.py [--records 1000000] [--value-size 100] [--partitions 4]
        [--repeat 3] [--write-results]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # for support.brokers

from groupstream.assignment.types import TopicPartition  # noqa: E402
from groupstream.client.admin import Admin, NewTopic  # noqa: E402
from groupstream.client.consumer.consumer import Consumer  # noqa: E402
from groupstream.client.producer import Producer  # noqa: E402
from groupstream.spark.executor import CONSUMERS, ReadSpec, read_range  # noqa: E402
from groupstream.spark.planning import OffsetRange  # noqa: E402
from results import machine, write_section  # noqa: E402
from support.brokers import BrokerKind, BrokerProcess  # noqa: E402

ARROW_ROWS = 16_384
PRODUCER = {"acks": "all", "enable.idempotence": True, "linger.ms": 5}


def records(n: int, size: int) -> pa.Table:
    """``n`` keyed rows; values are random bytes, each row's its own slice of one buffer."""
    data = os.urandom(size * n)
    offsets = pa.py_buffer(pa.array(range(0, size * n + 1, size), pa.int32()).buffers()[1])
    values = pa.Array.from_buffers(pa.binary(), n, [None, offsets, pa.py_buffer(data)])
    keys = pa.array([b"%d" % i for i in range(n)], pa.binary())
    return pa.table({"key": keys, "value": values})


def create(bootstrap: str, topic: str, partitions: int) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions)])


def ends(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        listed = admin.list_offsets({(topic, p): "latest" for p in range(partitions)})
    return {p: listed[(topic, p)].offset for p in range(partitions)}


def fill(bootstrap: str, topic: str, partitions: int, table: pa.Table) -> None:
    create(bootstrap, topic, partitions)
    with Producer({"bootstrap.servers": bootstrap, **PRODUCER}) as producer:
        producer.produce_arrow(table, topic)
        assert producer.flush(300) == 0


def touched(batch: Any) -> tuple[int, int]:
    """Rows and the sum of their values' lengths: every value is looked at."""
    return batch.num_rows, pc.sum(pc.binary_length(batch.column("value"))).as_py() or 0


def poll_arrow_read(bootstrap: str, topic: str, end: dict[int, int]) -> tuple[float, tuple[int, int]]:
    tps = [TopicPartition(topic, p) for p in end]
    rows = size = 0
    want = sum(end.values())
    with Consumer({"bootstrap.servers": bootstrap, "max.poll.records": ARROW_ROWS}) as consumer:
        t0 = time.perf_counter()
        consumer.assign(tps, offsets=dict.fromkeys(tps, 0))
        while rows < want:
            n, s = touched(consumer.poll_arrow(5.0))
            rows, size = rows + n, size + s
        return time.perf_counter() - t0, (rows, size)


def task_code_read(bootstrap: str, topic: str, end: dict[int, int]) -> tuple[float, tuple[int, int]]:
    spec = ReadSpec(bootstrap, (), include_headers=False, fail_on_data_loss=True, poll_timeout_ms=120_000)
    rows = size = 0
    t0 = time.perf_counter()
    for p, e in end.items():
        for batch in read_range(spec, OffsetRange(topic, p, 0, e)):
            n, s = touched(batch)
            rows, size = rows + n, size + s
    return time.perf_counter() - t0, (rows, size)


def spark_session(jars: Sequence[Path] = ()) -> Any:
    """``local[2]``; ``jars`` on ``spark.jars`` (bench/spark_connector.py gives Spark's Kafka connector)."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.config("spark.jars", ",".join(map(str, jars))) if jars else SparkSession.builder
    spark = (
        builder.master("local[2]").appName("groupstream-bench")
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )  # fmt: skip
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _observed(df: Any, name: str) -> Any:
    from pyspark.sql import functions as F

    return df.observe(name, F.count(F.lit(1)).alias("rows"), F.sum(F.length("value")).alias("size"))


def spark_batch(spark: Any, bootstrap: str, topic: str, fmt: str = "groupstream") -> tuple[float, tuple[int, int]]:
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    df = spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic).load()
    seen = Observation("read")
    observed = df.observe(seen, F.count(F.lit(1)).alias("rows"), F.sum(F.length("value")).alias("size"))
    t0 = time.perf_counter()
    observed.write.format("noop").mode("overwrite").save()
    secs = time.perf_counter() - t0
    return secs, (int(seen.get["rows"]), int(seen.get["size"]))


def spark_ceiling(spark: Any, n: int, size: int, partitions: int) -> tuple[float, tuple[int, int]]:
    """What Spark itself costs: a Python data source whose tasks yield ready Arrow batches of the source's
    schema and shape (``n`` rows over ``partitions`` tasks, the same batch again and again), into ``noop``."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    schema_text = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int"

    class Reader(DataSourceReader):
        def partitions(self) -> list[InputPartition]:
            share, extra = divmod(n, partitions)
            return [InputPartition(share + (1 if i < extra else 0)) for i in range(partitions)]

        def read(self, partition: InputPartition) -> Any:
            from groupstream.spark.executor import arrow_schema

            rows = partition.value
            full = ready_batch(min(ARROW_ROWS, rows), size, arrow_schema(False))
            while rows > 0:
                yield full if rows >= full.num_rows else full.slice(0, rows)
                rows -= full.num_rows

    class Ready(DataSource):
        @classmethod
        def name(cls) -> str:
            return "groupstream-bench-ready"

        def schema(self) -> str:
            return schema_text

        def reader(self, schema: Any) -> DataSourceReader:
            return Reader()

    spark.dataSource.register(Ready)
    seen = Observation("ready")
    df = spark.read.format("groupstream-bench-ready").load()
    observed = df.observe(seen, F.count(F.lit(1)).alias("rows"), F.sum(F.length("value")).alias("size"))
    t0 = time.perf_counter()
    observed.write.format("noop").mode("overwrite").save()
    secs = time.perf_counter() - t0
    return secs, (int(seen.get["rows"]), int(seen.get["size"]))


def ready_batch(rows: int, size: int, schema: Any) -> Any:
    table = records(rows, size)
    return pa.RecordBatch.from_arrays([
        table.column("key").combine_chunks(), table.column("value").combine_chunks(), pa.array(["data"] * rows, pa.string()),
        pa.array([0] * rows, pa.int32()), pa.array(range(rows), pa.int64()),
        pa.array(range(rows), pa.int64()).cast(pa.timestamp("us", tz="UTC")), pa.array([0] * rows, pa.int32()),
    ], schema=schema)  # fmt: skip


def spark_stream(
    spark: Any, bootstrap: str, topic: str, checkpoint: Path, fmt: str = "groupstream"
) -> tuple[float, tuple[int, int]]:
    df = spark.readStream.format(fmt).option("kafka.bootstrap.servers", bootstrap).option(
        "subscribe", topic).option("startingOffsets", "earliest").load()  # fmt: skip
    t0 = time.perf_counter()
    query = _observed(df, "read").writeStream.format("noop").option("checkpointLocation", str(checkpoint)).trigger(
        availableNow=True).start()  # fmt: skip
    query.awaitTermination()
    secs = time.perf_counter() - t0
    if query.exception() is not None:
        raise RuntimeError(query.exception())
    rows = size = 0
    for progress in query.recentProgress:
        metrics = (progress.get("observedMetrics") or {}).get("read")
        if metrics:
            rows += int(metrics["rows"] or 0)
            size += int(metrics["size"] or 0)
    return secs, (rows, size)


def produce_each(bootstrap: str, topic: str, partitions: int, table: pa.Table) -> float:
    create(bootstrap, topic, partitions)
    keys, values = table.column("key").to_pylist(), table.column("value").to_pylist()
    with Producer({"bootstrap.servers": bootstrap, **PRODUCER}) as producer:
        produce = producer.produce
        t0 = time.perf_counter()
        for k, v in zip(keys, values, strict=True):
            produce(topic, v, key=k)
        assert producer.flush(300) == 0
        return time.perf_counter() - t0


def produce_arrow(bootstrap: str, topic: str, partitions: int, table: pa.Table) -> float:
    create(bootstrap, topic, partitions)
    batches = table.combine_chunks().to_batches(ARROW_ROWS)
    with Producer({"bootstrap.servers": bootstrap, **PRODUCER}) as producer:
        t0 = time.perf_counter()
        for batch in batches:
            producer.produce_arrow(batch, topic)
        assert producer.flush(300) == 0
        return time.perf_counter() - t0


def spark_sink(spark: Any, df: Any, bootstrap: str, topic: str, partitions: int) -> float:
    create(bootstrap, topic, partitions)
    t0 = time.perf_counter()
    df.write.format("groupstream").option("kafka.bootstrap.servers", bootstrap).option("topic", topic).mode(
        "append").save()  # fmt: skip
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args()
    n, parts, size = args.records, args.partitions, args.value_size
    table = records(n, size)
    expected = (n, n * size)
    best: dict[str, float] = {}

    def keep(name: str, secs: float) -> None:
        best[name] = min(best.get(name, secs), secs)

    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp, BrokerProcess(BrokerKind.GROUPSTREAM, Path(tmp)) as broker:
        bs = broker.bootstrap
        fill(bs, "warmup", parts, records(10_000, size))
        fill(bs, "data", parts, table)
        end = ends(bs, "data", parts)
        assert sum(end.values()) == n, end
        spark = spark_session()
        spark_batch(spark, bs, "warmup")
        frame = spark.createDataFrame(table.to_pandas(), "key binary, value binary").repartition(2).cache()
        assert frame.count() == n
        spark_sink(spark, frame.limit(10_000), bs, "warmup-sink", parts)
        for r in range(args.repeat):
            for name, (secs, got) in (
                ("poll_arrow", poll_arrow_read(bs, "data", end)),
                ("task code", task_code_read(bs, "data", end)),
                ("spark batch", spark_batch(spark, bs, "data")),
                ("spark ceiling", spark_ceiling(spark, n, size, parts)),
                ("spark stream", spark_stream(spark, bs, "data", Path(tmp) / f"ck{r}")),
            ):
                assert got == expected, (name, got, expected)
                keep(name, secs)
            for name, write in (
                ("produce", lambda t: produce_each(bs, t, parts, table)),
                ("produce_arrow", lambda t: produce_arrow(bs, t, parts, table)),
                ("spark sink", lambda t: spark_sink(spark, frame, bs, t, parts)),
            ):
                topic = f"out-{name.replace(' ', '-')}-{r}"
                keep(name, write(topic))
                assert sum(ends(bs, topic, parts).values()) == n, (name, topic)
        spark.stop()
        CONSUMERS.close()  # the task code's consumers, before their broker stops
    pyspark = __import__("pyspark").__version__
    lines = [
        f"{machine()}; load average {load:.1f} at the start. Our broker; {n:,} keyed records of {size} B in "
        f"{parts} partitions, no compression; best of {args.repeat}. Spark {pyspark} local[2] (two tasks at "
        "once), after a warm-up query; our clients in one thread. Readers count rows and sum the values' "
        "lengths (Spark through `DataFrame.observe` on the way to the `noop` sink); writers use acks=all and "
        "idempotence, and the topics' end offsets are checked.",
        "",
        f"Command: `python bench/spark_source.py --records {n} --value-size {size} --partitions {parts} "
        f"--repeat {args.repeat} --write-results`",
        "",
        "| path | records/s | ratio | target |",
        "|---|---:|---:|---:|",
    ]
    targets = {"spark batch": ">= 0.7x", "spark stream": ">= 0.5x", "spark sink": ">= 0.8x"}
    for name, base in (("poll_arrow", "poll_arrow"), ("task code", "poll_arrow"), ("spark batch", "poll_arrow"),
                       ("spark stream", "poll_arrow"), ("spark ceiling", "poll_arrow"), ("produce", "produce"),
                       ("produce_arrow", "produce"), ("spark sink", "produce")):  # fmt: skip
        rate = n / best[name]
        lines.append(f"| {name} | {rate:,.0f} | {rate / (n / best[base]):.2f}x of {base} | {targets.get(name, '')} |")
    text = "\n".join(lines)
    print(text)
    if args.write_results:
        day = f"{dt.datetime.now(dt.UTC):%Y-%m-%d}"
        write_section(f"spark_io_{day}", f"## Spark source and sink against our client, {day} (`bench/spark_source.py`)"
                      f"\n\n{text}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
