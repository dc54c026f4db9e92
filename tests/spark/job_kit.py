"""What the Spark driver scripts that tests run as their own processes (``stream_job.py``, ``kafka_eos_job.py``,
``dataloss_job.py``) share: a local session on loopback, a topic read as a stream from its start, and a query
run until killed (small triggers, so a kill lands mid-batch as often as between batches) or, with
``--until-caught-up``, under Trigger.AvailableNow until everything present has been written."""

from __future__ import annotations

import os
import sys
from typing import Any

from pyspark.sql import SparkSession


def local_session(app_name: str) -> Any:
    """A ``local[2]`` session bound to loopback, without UI or progress bars, whose Python workers run this
    interpreter."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def topic_stream(spark: Any, bootstrap: str, topic: str, **options: str) -> Any:
    """The groupstream stream of ``topic`` from its earliest offsets, 700 records a trigger at most."""
    reader = (
        spark.readStream.format("groupstream")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "700")
    )
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def run_until_killed_or_caught_up(spark: Any, writer: Any, argv: list[str]) -> int:
    """Start ``writer``'s query (AvailableNow with ``--until-caught-up`` in ``argv``, else a 200 ms trigger),
    say so on stdout (the test waits for that line), and wait for it to end."""
    if "--until-caught-up" in argv:
        query = writer.trigger(availableNow=True).start()
    else:
        query = writer.trigger(processingTime="200 milliseconds").start()
    print("query started", flush=True)
    query.awaitTermination()
    spark.stop()
    return 0
