"""Our Spark source against Spark's own Kafka connector (``spark-sql-kafka-0-10``), same topic, same broker (ours),
same Spark session, in one run (issue 13: ours >= 0.8x the connector).

One broker process (ours), one topic of ``--partitions`` partitions holding ``--records`` keyed records of
``--value-size`` random bytes. Each reader is timed on its own, every row counted and its value's length summed
by ``DataFrame.observe`` on the way (checked against what was written):

- ``batch``: ``spark.read.format(F)`` of the whole topic into Spark's ``noop`` sink;
- ``stream``: ``spark.readStream.format(F)`` from the earliest offsets with Trigger.AvailableNow into ``noop``
  (a fresh checkpoint each run), the observed metrics summed over its micro-batches;

for F = ``groupstream`` (ours) and ``kafka`` (the connector), each with its own defaults: both plan one task per
partition; the connector's executors read with the Java KafkaConsumer and its defaults, ours with our consumer.
Spark runs at ``local[2]``; the connector's jars are on the session's ``spark.jars``; a warm-up query of each
format runs first, so JVM, class loading and Python worker start-up are not counted. The two formats take turns
in each round; the best of ``--repeat`` rounds counts.

The connector: ``org.apache.spark:spark-sql-kafka-0-10_2.13`` matching PySpark where Maven serves it, with
``kafka-clients``, ``commons-pool2`` and ``spark-token-provider-kafka-0-10`` (``bench/spark_kafka/pom.xml``),
copied by Maven into ``~/.cache/groupstream/spark-kafka-<version>-<pom hash>/`` on first use.

    .venv/bin/python bench/spark_connector.py [--records 1000000] [--value-size 100] [--partitions 4] [--repeat 3]
        [--write-results]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from groupstream.client.admin import Admin, NewTopic
from groupstream.client.producer import Producer
from kit import Broker, command_line, machine, os_load, write_section
from support.kafka_jars import cache_root

POM = Path(__file__).resolve().parent / "spark_kafka" / "pom.xml"
# Of the pom's runtime dependencies, what PySpark does not already ship (its own Scala, Hadoop, Snappy... stay).
CONNECTOR_JARS = ("spark-sql-kafka-0-10_", "spark-token-provider-kafka-0-10_", "kafka-clients-", "commons-pool2-")
FORMATS = ("groupstream", "kafka")


def connector_version() -> str:
    m = re.search(r"<spark\.version>([^<]+)</spark\.version>", POM.read_text())
    assert m is not None, POM
    return m.group(1)


def connector_jars() -> list[Path]:
    """The connector's jars, fetched by Maven (through ~/.m2) into the cache on first use."""
    digest = hashlib.sha256(POM.read_bytes()).hexdigest()[:12]
    libs = cache_root() / f"spark-kafka-{connector_version()}-{digest}"
    if not (libs / ".complete").is_file():
        mvn = shutil.which("mvn")
        if mvn is None:
            raise SystemExit("Maven (mvn) is not installed: `apt-get install maven`")
        staging = libs.with_name(f"{libs.name}.partial-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        cmd = [mvn, "-B", "-q", "-f", str(POM), "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies",
               "-DincludeScope=runtime", f"-DoutputDirectory={staging}"]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
        (staging / ".complete").write_text("\n".join(sorted(p.name for p in staging.glob("*.jar"))) + "\n")
        shutil.rmtree(libs, ignore_errors=True)
        staging.rename(libs)
    jars = [j for j in sorted(libs.glob("*.jar")) if j.name.startswith(CONNECTOR_JARS)]
    if len(jars) != len(CONNECTOR_JARS):
        raise SystemExit(f"expected {CONNECTOR_JARS} in {libs}, found {[j.name for j in jars]}")
    return jars


def fill(bootstrap: str, topic: str, partitions: int, n: int, size: int) -> None:
    """``n`` records keyed by their number (so every partition gets a share), random values of ``size`` bytes."""
    import pyarrow as pa

    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions)])
    data = os.urandom(size * n)
    offsets = pa.py_buffer(pa.array(range(0, size * n + 1, size), pa.int32()).buffers()[1])
    values = pa.Array.from_buffers(pa.binary(), n, [None, offsets, pa.py_buffer(data)])
    table = pa.table({"key": pa.array([b"%d" % i for i in range(n)], pa.binary()), "value": values})
    with Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5}) as producer:
        producer.produce_arrow(table, topic)
        if producer.flush(300):
            raise RuntimeError("fill: records not delivered")


def spark_session(jars: list[Path]) -> Any:
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]").appName("groupstream-bench-connector")
        .config("spark.jars", ",".join(str(j) for j in jars))
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )  # fmt: skip
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _observed(df: Any, name: Any) -> Any:
    from pyspark.sql import functions as F

    return df.observe(name, F.count(F.lit(1)).alias("rows"), F.sum(F.length("value")).alias("size"))


def batch(spark: Any, fmt: str, bootstrap: str, topic: str) -> tuple[float, tuple[int, int]]:
    from pyspark.sql import Observation

    df = (spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
          .option("startingOffsets", "earliest").load())  # fmt: skip
    seen = Observation("read")
    t0 = time.perf_counter()
    _observed(df, seen).write.format("noop").mode("overwrite").save()
    secs = time.perf_counter() - t0
    return secs, (int(seen.get["rows"]), int(seen.get["size"] or 0))


def stream(spark: Any, fmt: str, bootstrap: str, topic: str, checkpoint: Path) -> tuple[float, tuple[int, int]]:
    df = (spark.readStream.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
          .option("startingOffsets", "earliest").load())  # fmt: skip
    t0 = time.perf_counter()
    query = (_observed(df, "read").writeStream.format("noop").option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())  # fmt: skip
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args()
    n, parts, size = args.records, args.partitions, args.value_size
    import pyspark

    jars = connector_jars()
    load = os_load()
    print(f"{machine()}; load average {load}; PySpark {pyspark.__version__}; connector {connector_version()}: "
          + ", ".join(j.name for j in jars), flush=True)  # fmt: skip
    best: dict[tuple[str, str], float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-spark-connector-") as tmp, Broker("groupstream", Path(tmp)) as broker:
        bs = broker.bootstrap
        fill(bs, "warmup", parts, 10_000, size)
        fill(bs, "data", parts, n, size)
        spark = spark_session(jars)
        try:
            for fmt in FORMATS:
                batch(spark, fmt, bs, "warmup")
                stream(spark, fmt, bs, "warmup", Path(tmp) / f"warm-{fmt}")
            for r in range(args.repeat):
                for fmt in FORMATS:
                    for mode, (secs, got) in (
                        ("batch", batch(spark, fmt, bs, "data")),
                        ("stream", stream(spark, fmt, bs, "data", Path(tmp) / f"ck-{fmt}-{r}")),
                    ):
                        if got != (n, n * size):
                            raise RuntimeError(f"{fmt} {mode}: read {got}, wrote {(n, n * size)}")
                        best[(fmt, mode)] = min(best.get((fmt, mode), secs), secs)
                        print(f"  run {r + 1}: {fmt:<11} {mode:<6} {n / secs:>10,.0f} records/s", flush=True)
        finally:
            spark.stop()
    lines = [
        f"{machine()}; load average {load} at the start. Our broker; {n:,} keyed records of {size} B in {parts} "
        f"partitions, no compression. Spark {pyspark.__version__} local[2]; Spark's connector "
        f"spark-sql-kafka-0-10_2.13 {connector_version()} (Maven serves it up to {connector_version()}, not "
        f"{pyspark.__version__}) with " + ", ".join(j.name for j in jars if "spark-sql-kafka" not in j.name)
        + " on spark.jars; both formats with their own defaults, one task per partition, after a warm-up query "
        f"each; rows counted and values' lengths summed by `DataFrame.observe` on the way to the `noop` sink; the "
        f"formats take turns; best of {args.repeat}.",
        "",
        f"Command: `{command_line('spark_connector.py')}`",
        "",
        "| read | ours (`groupstream`) records/s | Spark's connector (`kafka`) records/s | ours/connector | target |",
        "|---|---:|---:|---:|---:|",
    ]
    for mode in ("batch", "stream"):
        ours, theirs = n / best[("groupstream", mode)], n / best[("kafka", mode)]
        label = "batch into noop" if mode == "batch" else "stream (AvailableNow) into noop"
        lines.append(f"| {label} | {ours:,.0f} | {theirs:,.0f} | {ours / theirs:.2f}x | >= 0.8x |")
    text = "\n".join(lines)
    print(text)
    if args.write_results:
        write_section("spark_connector", f"## Spark source against Spark's Kafka connector (`bench/spark_connector.py`)"
                                         f"\n\n{text}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
