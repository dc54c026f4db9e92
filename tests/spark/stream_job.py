"""A Spark streaming driver for the crash test, run as its own process: copy a topic's records into a Parquet
table through the groupstream source, committing progress to a consumer group.

``python stream_job.py BOOTSTRAP TOPIC OUT CHECKPOINT GROUP [--until-caught-up]``: without the flag it runs
until killed (small triggers, so a kill lands mid-batch as often as between batches); with it, it runs with
Trigger.AvailableNow and exits once everything present has been written.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession


def main(argv: list[str]) -> int:
    bootstrap, topic, out, checkpoint, group = argv[:5]
    until_caught_up = "--until-caught-up" in argv
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("groupstream-crash-test")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    df = (
        spark.readStream.format("groupstream")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "700")
        .option("group.id", group)
        .load()
        .select("topic", "partition", "offset", "key", "value")
    )
    writer = df.writeStream.format("parquet").option("path", out).option("checkpointLocation", checkpoint)
    if until_caught_up:
        query = writer.trigger(availableNow=True).start()
    else:
        query = writer.trigger(processingTime="200 milliseconds").start()
    print("query started", flush=True)
    query.awaitTermination()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
