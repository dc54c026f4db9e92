"""The Spark source's throughput against our client's raw consume rate, on the same data, in one run.

One broker process (ours), one topic of ``--partitions`` partitions holding ``--records`` records of
``--value-size`` random bytes (keyed, so every partition gets a share). Then, each timed on its own:

- ``client``: our client reading every partition from offset 0 to the end in one thread (the assign-mode fetch
  loop a Spark task runs, records decoded, nothing built);
- ``task code``: the same with each record put into Arrow batches, as the source's tasks do, still one thread
  and no Spark;
- ``spark batch``: ``spark.read.format("groupstream")`` into Spark's ``noop`` sink at ``local[2]`` (one task
  per partition), after a warm-up query, so JVM and Python worker start-up are not counted;
- ``spark stream``: the same data through ``readStream`` with Trigger.AvailableNow into ``noop``; time to
  first batch is from ``start()`` to the first finished micro-batch.

The best of ``--repeat`` runs counts. Ratios are to the client's rate (the issue's target: Spark ≥ 50%).

    .venv/bin/python bench/spark_source.py [--records 1000000] [--value-size 100] [--partitions 4]
        [--repeat 3] [--write-results]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # for support.brokers

from groupstream.client.admin import Admin, NewTopic  # noqa: E402
from groupstream.client.lite import fetch_partitions  # noqa: E402
from groupstream.client.producer import Producer  # noqa: E402
from groupstream.spark.executor import ReadSpec, read_range  # noqa: E402
from groupstream.spark.planning import OffsetRange  # noqa: E402
from results import machine, write_section  # noqa: E402
from support.brokers import BrokerKind, BrokerProcess  # noqa: E402


def fill(bootstrap: str, topic: str, partitions: int, n: int, size: int) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions)])
    value = os.urandom(size)
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 262_144}) as producer:
        for i in range(n):
            producer.produce(topic, value, key=b"%d" % i)
        assert producer.flush(300) == 0


def ends(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        listed = admin.list_offsets({(topic, p): "latest" for p in range(partitions)})
    return {p: listed[(topic, p)].offset for p in range(partitions)}


def client_read(bootstrap: str, topic: str, partitions: int) -> tuple[float, int]:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        t0 = time.perf_counter()
        n = sum(1 for _ in fetch_partitions(admin.connection, topic, dict.fromkeys(range(partitions), 0)))
        return time.perf_counter() - t0, n


def task_code_read(bootstrap: str, topic: str, end: dict[int, int]) -> tuple[float, int]:
    spec = ReadSpec(bootstrap, (), include_headers=False, fail_on_data_loss=True, poll_timeout_ms=120_000)
    t0 = time.perf_counter()
    n = sum(b.num_rows for p, e in end.items() for b in read_range(spec, OffsetRange(topic, p, 0, e)))
    return time.perf_counter() - t0, n


def spark_session() -> object:
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]").appName("groupstream-bench")
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )  # fmt: skip
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def spark_batch(spark: object, bootstrap: str, topic: str) -> float:
    df = spark.read.format("groupstream").option("kafka.bootstrap.servers", bootstrap).option(  # type: ignore[attr-defined]
        "subscribe", topic).load()  # fmt: skip
    t0 = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - t0


def spark_stream(spark: object, bootstrap: str, topic: str, checkpoint: Path) -> tuple[float, float, int]:
    df = spark.readStream.format("groupstream").option("kafka.bootstrap.servers", bootstrap).option(  # type: ignore[attr-defined]
        "subscribe", topic).option("startingOffsets", "earliest").load()  # fmt: skip
    t0 = time.perf_counter()
    query = df.writeStream.format("noop").option("checkpointLocation", str(checkpoint)).trigger(
        availableNow=True).start()  # fmt: skip
    first = None
    while query.isActive:
        if first is None and any(p["numInputRows"] for p in query.recentProgress):
            first = time.perf_counter() - t0
        query.awaitTermination(0.05)
    total = time.perf_counter() - t0
    if query.exception() is not None:
        raise RuntimeError(query.exception())
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    if first is None:
        first = total
    return total, first, rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args()
    n, parts = args.records, args.partitions
    with tempfile.TemporaryDirectory() as tmp, BrokerProcess(BrokerKind.GROUPSTREAM, Path(tmp)) as broker:
        bs = broker.bootstrap
        fill(bs, "warmup", parts, 10_000, args.value_size)
        fill(bs, "data", parts, n, args.value_size)
        end = ends(bs, "data", parts)
        assert sum(end.values()) == n
        spark = spark_session()
        spark_batch(spark, bs, "warmup")
        best: dict[str, float] = {}
        first_batch = []
        for r in range(args.repeat):
            for name, (secs, got) in (
                ("client", client_read(bs, "data", parts)),
                ("task code", task_code_read(bs, "data", end)),
                ("spark batch", (spark_batch(spark, bs, "data"), n)),
            ):
                assert got == n, (name, got)
                best[name] = min(best.get(name, secs), secs)
            total, first, rows = spark_stream(spark, bs, "data", Path(tmp) / f"ck{r}")
            assert rows == n, rows
            best["spark stream"] = min(best.get("spark stream", total), total)
            first_batch.append(first)
        spark.stop()  # type: ignore[attr-defined]
    base = n / best["client"]
    lines = [
        f"{machine()}. Our broker; {n:,} keyed records of {args.value_size} B in {parts} partitions, no "
        f"compression; best of {args.repeat}. Spark {__import__('pyspark').__version__} local[2], noop sink, "
        "after a warm-up query. client and task code run in one thread; Spark runs two tasks at once.",
        "",
        f"Command: `python bench/spark_source.py --records {n} --value-size {args.value_size} --partitions "
        f"{parts} --repeat {args.repeat} --write-results`",
        "",
        "| path | records/s | of the client's rate |",
        "|---|---:|---:|",
    ]
    for name in ("client", "task code", "spark batch", "spark stream"):
        rate = n / best[name]
        lines.append(f"| {name} | {rate:,.0f} | {rate / base:.2f}x |")
    lines += ["", f"Time to first batch (streaming, AvailableNow, from start()): median "
                  f"{sorted(first_batch)[len(first_batch) // 2]:.2f} s over {len(first_batch)} runs."]
    text = "\n".join(lines)
    print(text)
    if args.write_results:
        write_section("spark_source", "## Spark source (`bench/spark_source.py`)\n\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
