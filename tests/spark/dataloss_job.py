"""A Spark driver for the data-loss tests, run as its own process so that the test sees every line the source
logs (the planner and the tasks run in Python processes the JVM starts, whose stderr is the driver's).

``python dataloss_job.py stream BOOTSTRAP TOPIC WORKDIR``: two streaming queries over TOPIC, ``strict``
(failOnDataLoss=true) and ``lenient`` (false), each writing every micro-batch to ``WORKDIR/<query>/`` as a
Parquet file (renamed into place, so a reader never sees half a file); it prints a JSON line when a query
fails, and stops both queries once ``WORKDIR/stop`` exists.

``python dataloss_job.py batch BOOTSTRAP TOPIC WORKDIR``: plans two batch reads of TOPIC (``df.rdd`` makes
Spark ask the source for its tasks), prints ``planned``, waits for ``WORKDIR/go``, then runs both: the strict
read's error or the lenient read's rows (``WORKDIR/lenient/batch.parquet``) are what the test checks.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

from job_kit import local_session


def session() -> Any:
    return local_session("groupstream-dataloss-test")


def say(**fields: Any) -> None:
    print(json.dumps(fields, sort_keys=True), flush=True)


def write_arrow(table: Any, directory: Path, name: str) -> None:
    import pyarrow.parquet as pq

    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{name}.tmp"
    pq.write_table(table, tmp)
    os.replace(tmp, directory / name)


def reader(spark: Any, bootstrap: str, topic: str, fail_on_data_loss: bool, streaming: bool) -> Any:
    r = spark.readStream if streaming else spark.read
    r = (
        r.format("groupstream")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("failOnDataLoss", str(fail_on_data_loss).lower())
    )
    if streaming and not fail_on_data_loss:  # progress committed to a group: to a deleted topic too, quietly
        r = r.option("group.id", f"{topic}-lenient")
    return r.load().selectExpr("topic", "partition", "offset", "CAST(value AS STRING) AS value")


def stream(spark: Any, bootstrap: str, topic: str, work: Path) -> int:
    queries = {}
    for name, strict in (("strict", True), ("lenient", False)):
        out = work / name

        def write(df: Any, batch_id: int, out: Path = out) -> None:
            write_arrow(df.toArrow(), out, f"batch-{batch_id:06d}.parquet")

        queries[name] = (
            reader(spark, bootstrap, topic, strict, streaming=True)
            .writeStream.foreachBatch(write)
            .option("checkpointLocation", str(work / f"{name}.checkpoint"))
            .trigger(processingTime="500 milliseconds")
            .queryName(name)
            .start()
        )
    say(event="started")
    stop = _command_on_stdin("stop")
    reported: set[str] = set()
    while len(reported) < len(queries) and not stop.is_set():
        # returns as soon as a query terminates (raising its error, reported below), else after 1 s to look at stdin
        with contextlib.suppress(Exception):
            spark.streams.awaitAnyTermination(1.0)
        spark.streams.resetTerminated()
        for name, query in queries.items():
            if name not in reported and not query.isActive:
                reported.add(name)
                error = query.exception()
                say(event="terminated", query=name, error=None if error is None else str(error))
    stop.wait()
    for query in queries.values():
        if query.isActive:
            query.stop()
    say(event="stopped")
    return 0


def batch(spark: Any, bootstrap: str, topic: str, work: Path) -> int:
    strict = reader(spark, bootstrap, topic, True, streaming=False)
    lenient = reader(spark, bootstrap, topic, False, streaming=False)
    planned = {"strict": strict.rdd, "lenient": lenient.rdd}  # Spark asks the source for its tasks here
    say(event="planned")
    _command_on_stdin("go").wait()
    try:
        planned["strict"].count()
        say(event="read", query="strict")
    except Exception as e:
        say(event="failed", query="strict", error=str(e))
    import pyarrow as pa

    rows = planned["lenient"].collect()
    table = pa.table({
        "topic": [r.topic for r in rows], "partition": [r.partition for r in rows],
        "offset": [r.offset for r in rows], "value": [r.value for r in rows],
    })  # fmt: skip
    write_arrow(table, work / "lenient", "batch.parquet")
    say(event="read", query="lenient", rows=len(rows))
    return 0


def _command_on_stdin(word: str) -> threading.Event:
    """An event set once the test writes ``word`` on this process's stdin (or closes it)."""
    said = threading.Event()

    def read() -> None:
        for line in sys.stdin:
            if line.strip() == word:
                break
        said.set()

    threading.Thread(target=read, name=f"stdin-{word}", daemon=True).start()
    return said


def main(argv: list[str]) -> int:
    mode, bootstrap, topic, work = argv[:4]
    spark = session()
    try:
        return {"stream": stream, "batch": batch}[mode](spark, bootstrap, topic, Path(work))
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
