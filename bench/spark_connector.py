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
from pathlib import Path

from kit import Broker, command_line, machine, os_load, write_section
from spark_source import fill, records, spark_batch, spark_session, spark_stream
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
        fill(bs, "warmup", parts, records(10_000, size))
        fill(bs, "data", parts, records(n, size))
        spark = spark_session(jars)
        try:
            for fmt in FORMATS:
                spark_batch(spark, bs, "warmup", fmt)
                spark_stream(spark, bs, "warmup", Path(tmp) / f"warm-{fmt}", fmt)
            for r in range(args.repeat):
                for fmt in FORMATS:
                    for mode, (secs, got) in (
                        ("batch", spark_batch(spark, bs, "data", fmt)),
                        ("stream", spark_stream(spark, bs, "data", Path(tmp) / f"ck-{fmt}-{r}", fmt)),
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
