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
  reading through Spark's Python Data Source API can beat it (the batch read's ratio to it is shown);
- ``stream ceiling``: the same through a Python streaming data source, one AvailableNow micro-batch (the
  stream's ratio to it is shown: what of the stream's cost is ours, Spark's streaming fixed cost included in
  both);
- ``spark parquet``: Spark's own vectorized Parquet reader (in the JVM, no Python worker) over the same rows,
  written once before the rounds as uncompressed local files, one a partition, into ``noop``, observed the same
  way: what Spark does with the rows when no source of any kind, Python or JVM, stands in front of it.

Then writing, to new topics of the same shape, acks=all and idempotent as the sink produces:

- ``produce``: our Producer, one ``produce`` call per record, keyed, timed to the end of the flush (the base of
  the sink ratio);
- ``produce_arrow``: our Producer given the same records as Arrow batches of 16,384 rows;
- ``spark sink``: a DataFrame of the same keys and values (cached in Spark first) written with
  ``format("groupstream")`` at ``local[2]`` (target: >= 0.8x produce). The topics' end offsets are checked.

Spark runs two tasks at once on the machine's cores; the clients run in one thread (plus their network
thread). Fairness, as measured before this bench was changed (a 1,000,000-record read after a 10,000-record
warm-up mostly timed the JVM's JIT and each query's fixed cost):

- the warm-up is ``--warmup`` full-size reads of every read path (the ceiling and the stream too), so the JIT
  has compiled what is then timed;
- the default is 4,000,000 records, and each Spark path's fixed cost per query (planning, task launch,
  commit) is measured as a read of a 1-record topic and printed beside the rates;
- each of ``--repeat`` rounds runs every read path once, in an order rotated by one each round, and a Spark
  path's ratio is the median of its per-round ratios to that round's poll_arrow (the machine is shared, so
  ratios inside a round are what compare); rates are medians of the rounds.

Writes use ``--write-records`` (default 1,000,000) records, best of the rounds.

    .venv/bin/python bench/spark_source.py [--records 4000000] [--value-size 100] [--partitions 4]
        [--warmup 2] [--repeat 5] [--write-records 1000000] [--write-results]
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
from kit import rotated  # noqa: E402
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


def parquet_copy(bootstrap: str, topic: str, end: dict[int, int], directory: Path) -> Path:
    """The topic's rows as ``poll_arrow`` returns them (without the headers column), written once as
    uncompressed Parquet files, one a partition: what ``spark parquet`` reads."""
    import pyarrow.parquet as pq

    directory.mkdir()
    with Consumer({"bootstrap.servers": bootstrap, "max.poll.records": ARROW_ROWS}) as consumer:
        for p, rows in end.items():
            tp = TopicPartition(topic, p)
            consumer.assign([tp], offsets={tp: 0})
            parts, got = [], 0
            while got < rows:
                batch = consumer.poll_arrow(5.0)
                got += batch.num_rows
                if batch.num_rows:
                    parts.append(batch.drop_columns(["headers"]) if "headers" in batch.schema.names else batch)
            pq.write_table(pa.Table.from_batches(parts), directory / f"part-{p}.parquet", compression="none")
    return directory


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


def _observed(df: Any, name: Any) -> Any:
    """``df`` with its rows counted and its values' lengths summed as metrics ``name`` (a name, or an Observation)."""
    from pyspark.sql import functions as F

    return df.observe(name, F.count(F.lit(1)).alias("rows"), F.sum(F.length("value")).alias("size"))


def spark_batch(spark: Any, bootstrap: str, topic: str, fmt: str = "groupstream") -> tuple[float, tuple[int, int]]:

    df = spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic).load()
    return timed_noop(df)


def timed_noop(df: Any) -> tuple[float, tuple[int, int]]:
    """``df`` written to Spark's ``noop`` sink, its rows counted and their values' lengths summed on the way."""
    from pyspark.sql import Observation

    seen = Observation("read")
    observed = _observed(df, seen)
    t0 = time.perf_counter()
    observed.write.format("noop").mode("overwrite").save()
    secs = time.perf_counter() - t0
    return secs, (int(seen.get["rows"]), int(seen.get["size"]))


READY_SCHEMA = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int"


def ready_partitions(total: int, partitions: int) -> list[Any]:
    """``total`` rows shared out over ``partitions`` tasks (the ceilings' plan)."""
    from pyspark.sql.datasource import InputPartition

    share, extra = divmod(total, partitions)
    return [InputPartition(share + (1 if i < extra else 0)) for i in range(partitions)]


def ready_rows(rows: int, size: int) -> Any:
    """A ceiling task's read: the same ready Arrow batch again and again, ``rows`` rows in all."""
    from groupstream.spark.executor import arrow_schema

    full = ready_batch(min(ARROW_ROWS, rows), size, arrow_schema(False))
    while rows > 0:
        yield full if rows >= full.num_rows else full.slice(0, rows)
        rows -= full.num_rows


def spark_ceiling(spark: Any, n: int, size: int, partitions: int) -> tuple[float, tuple[int, int]]:
    """What Spark itself costs: a Python data source whose tasks yield ready Arrow batches of the source's
    schema and shape (``n`` rows over ``partitions`` tasks, the same batch again and again), into ``noop``."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class Reader(DataSourceReader):
        def partitions(self) -> list[InputPartition]:
            return ready_partitions(n, partitions)

        def read(self, partition: InputPartition) -> Any:
            return ready_rows(partition.value, size)

    class Ready(DataSource):
        @classmethod
        def name(cls) -> str:
            return "groupstream-bench-ready"

        def schema(self) -> str:
            return READY_SCHEMA

        def reader(self, schema: Any) -> DataSourceReader:
            return Reader()

    spark.dataSource.register(Ready)
    return timed_noop(spark.read.format("groupstream-bench-ready").load())


def spark_stream_ceiling(spark: Any, n: int, size: int, partitions: int, checkpoint: Path) -> tuple[float, tuple[int, int]]:
    """What Spark's streaming alone costs: a Python streaming data source (Trigger.AvailableNow, one
    micro-batch of ``n`` rows over ``partitions`` tasks) whose tasks yield ready Arrow batches, into ``noop``."""
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
    from pyspark.sql.streaming.datasource import ReadAllAvailable, SupportsTriggerAvailableNow

    class Reader(DataSourceStreamReader, SupportsTriggerAvailableNow):
        def initialOffset(self) -> dict[str, int]:
            return {"rows": 0}

        def prepareForTriggerAvailableNow(self) -> None:
            pass

        def getDefaultReadLimit(self) -> Any:
            return ReadAllAvailable()

        def latestOffset(self, start: dict[str, int], limit: Any) -> dict[str, int]:
            return {"rows": n}

        def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
            return ready_partitions(end["rows"] - start["rows"], partitions)

        def read(self, partition: InputPartition) -> Any:
            return ready_rows(partition.value, size)

        def commit(self, end: dict[str, int]) -> None:
            pass

    class ReadyStream(DataSource):
        @classmethod
        def name(cls) -> str:
            return "groupstream-bench-ready-stream"

        def schema(self) -> str:
            return READY_SCHEMA

        def streamReader(self, schema: Any) -> DataSourceStreamReader:
            return Reader()

    spark.dataSource.register(ReadyStream)
    return spark_stream(spark, "", "", checkpoint, fmt="groupstream-bench-ready-stream")


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
    reader = spark.readStream.format(fmt)
    if topic:
        reader = reader.option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic).option(
            "startingOffsets", "earliest")  # fmt: skip
    df = reader.load()
    t0 = time.perf_counter()
    query = _observed(df, "read").writeStream.format("noop").option("checkpointLocation", str(checkpoint)).trigger(
        availableNow=True).start()  # fmt: skip
    query.awaitTermination()
    secs = time.perf_counter() - t0
    STREAM_BATCHES.append(len(query.recentProgress))
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


STREAM_BATCHES: list[int] = []
"""How many micro-batches each `spark_stream` run took (Trigger.AvailableNow plans as many as
maxOffsetsPerTrigger asks; without it, one)."""

READS = ("poll_arrow", "task code", "spark batch", "spark ceiling", "spark stream", "stream ceiling", "spark parquet")
TARGETS = {"spark batch": ">= 0.7x", "spark stream": ">= 0.5x", "spark sink": ">= 0.8x"}


def _median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    return (s[(len(s) - 1) // 2] + s[len(s) // 2]) / 2


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=4_000_000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=2, help="full-size reads of every read path before timing")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--write-records", type=int, default=1_000_000)
    ap.add_argument("--no-writes", action="store_true", help="time the reads only")
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args()
    n, parts, size, wn = args.records, args.partitions, args.value_size, args.write_records
    table = records(n, size)
    expected = (n, n * size)
    rates: dict[str, list[float]] = {name: [] for name in READS}
    ratios: dict[str, list[float]] = {name: [] for name in READS}
    to_ceiling: dict[str, list[float]] = {"spark batch": [], "spark stream": []}
    fixed: dict[str, list[float]] = {"spark batch": [], "spark ceiling": [], "spark stream": [], "stream ceiling": []}
    best: dict[str, float] = {}
    loads = [os.getloadavg()[0]]

    with tempfile.TemporaryDirectory() as tmp, BrokerProcess(BrokerKind.GROUPSTREAM, Path(tmp)) as broker:
        bs = broker.bootstrap
        fill(bs, "data", parts, table)
        fill(bs, "one", parts, records(1, size))
        end = ends(bs, "data", parts)
        assert sum(end.values()) == n, end
        parquet = parquet_copy(bs, "data", end, Path(tmp) / "parquet")
        spark = spark_session()
        checkpoints = iter(range(1_000_000))
        paths = {
            "poll_arrow": lambda: poll_arrow_read(bs, "data", end),
            "task code": lambda: task_code_read(bs, "data", end),
            "spark batch": lambda: spark_batch(spark, bs, "data"),
            "spark ceiling": lambda: spark_ceiling(spark, n, size, parts),
            "spark stream": lambda: spark_stream(spark, bs, "data", Path(tmp) / f"ck{next(checkpoints)}"),
            "stream ceiling": lambda: spark_stream_ceiling(spark, n, size, parts, Path(tmp) / f"ck{next(checkpoints)}"),
            "spark parquet": lambda: timed_noop(spark.read.parquet(str(parquet))),
        }
        for w in range(args.warmup):
            for name in READS:
                secs, got = paths[name]()
                assert got == expected, (name, got, expected)
                print(f"warm-up {w}: {name} {n / secs:,.0f} records/s", flush=True)
        STREAM_BATCHES.clear()
        for _ in range(3):  # a query's fixed cost: the same paths over one record
            for name, (secs, got) in (
                ("spark batch", spark_batch(spark, bs, "one")),
                ("spark ceiling", spark_ceiling(spark, 1, size, 1)),
                ("spark stream", spark_stream(spark, bs, "one", Path(tmp) / f"ck{next(checkpoints)}")),
                ("stream ceiling", spark_stream_ceiling(spark, 1, size, 1, Path(tmp) / f"ck{next(checkpoints)}")),
            ):
                assert got == (1, size), (name, got)
                fixed[name].append(secs)
        STREAM_BATCHES.clear()
        for r in range(args.repeat):
            order = rotated(READS, r)
            took: dict[str, float] = {}
            for name in order:
                secs, got = paths[name]()
                assert got == expected, (name, got, expected)
                took[name] = secs
            loads.append(os.getloadavg()[0])
            for name in READS:
                rates[name].append(n / took[name])
                ratios[name].append(took["poll_arrow"] / took[name])
            to_ceiling["spark batch"].append(took["spark ceiling"] / took["spark batch"])
            to_ceiling["spark stream"].append(took["stream ceiling"] / took["spark stream"])
            print(f"round {r}: " + ", ".join(f"{k} {n / v:,.0f}" for k, v in took.items()), flush=True)
        if not args.no_writes:
            wtable = table.slice(0, wn)
            frame = spark.createDataFrame(wtable.to_pandas(), "key binary, value binary").repartition(2).cache()
            assert frame.count() == wn
            spark_sink(spark, frame, bs, "warmup-sink", parts)
            for r in range(max(args.repeat // 2, 1)):
                for name, write in (
                    ("produce", lambda t: produce_each(bs, t, parts, wtable)),
                    ("produce_arrow", lambda t: produce_arrow(bs, t, parts, wtable)),
                    ("spark sink", lambda t: spark_sink(spark, frame, bs, t, parts)),
                ):
                    topic = f"out-{name.replace(' ', '-')}-{r}"
                    secs = write(topic)
                    best[name] = min(best.get(name, secs), secs)
                    assert sum(ends(bs, topic, parts).values()) == wn, (name, topic)
        spark.stop()
        CONSUMERS.close()  # the task code's consumers, before their broker stops
    loads.append(os.getloadavg()[0])
    pyspark = __import__("pyspark").__version__
    fixed_ms = {k: 1000 * _median(v) for k, v in fixed.items()}
    lines = [
        f"{machine()}; load average {min(loads):.1f} to {max(loads):.1f} during the run (2 cores shared with other "
        f"sessions' tests). Our broker; {n:,} keyed records of {size} B in {parts} partitions, no compression. "
        f"Spark {pyspark} local[2] (two tasks at once); our clients in one thread. Warm-up: {args.warmup} full-size "
        f"read(s) of every read path; then {args.repeat} rounds, each running every read path once in an order "
        "rotated by one each round. Rates are the rounds' medians; a ratio is the median of the per-round ratios "
        "(within one round, so load moves both sides). Readers count rows and sum the values' lengths (Spark through "
        "`DataFrame.observe` on the way to the `noop` sink). A query's fixed cost (a read of a 1-record topic, "
        f"median of 3): spark batch {fixed_ms['spark batch']:.0f} ms, spark ceiling {fixed_ms['spark ceiling']:.0f} "
        f"ms, spark stream {fixed_ms['spark stream']:.0f} ms, stream ceiling {fixed_ms['stream ceiling']:.0f} ms (AvailableNow, one micro-batch"
        f"{'' if set(STREAM_BATCHES) <= {1} else f'; micro-batches per run: {sorted(set(STREAM_BATCHES))}'}).",
        "",
        f"Command: `python bench/spark_source.py --records {n} --value-size {size} --partitions {parts} "
        f"--warmup {args.warmup} --repeat {args.repeat} --write-records {wn}"
        f"{' --no-writes' if args.no_writes else ''} --write-results`",
        "",
        "| path | records/s (median) | range | ratio to poll_arrow | ratio to its ceiling | target |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name in READS:
        lo, hi = min(rates[name]), max(rates[name])
        ceil = f"{_median(to_ceiling[name]):.2f}x" if name in to_ceiling else ""
        lines.append(f"| {name} | {_median(rates[name]):,.0f} | {lo:,.0f}-{hi:,.0f} | {_median(ratios[name]):.2f}x "
                     f"| {ceil} | {TARGETS.get(name, '')} |")  # fmt: skip
    if best:
        lines += ["", f"Writes, {wn:,} records, acks=all and idempotence, best of {max(args.repeat // 2, 1)}; the "
                  "topics' end offsets are checked.", "", "| path | records/s | ratio | target |", "|---|---:|---:|---:|"]  # fmt: skip
        for name in ("produce", "produce_arrow", "spark sink"):
            rate = wn / best[name]
            lines.append(f"| {name} | {rate:,.0f} | {rate / (wn / best['produce']):.2f}x of produce | "
                         f"{TARGETS.get(name, '')} |")  # fmt: skip
    text = "\n".join(lines)
    print(text)
    if args.write_results:
        day = f"{dt.datetime.now(dt.UTC):%Y-%m-%d}"
        write_section(f"spark_io_warm_{day}", f"## Spark source and sink against our client, warm and in rounds, {day} "
                      f"(`bench/spark_source.py`)\n\n{text}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
