"""A Spark streaming driver for the exactly-once sink's crash test, run as its own process: copy a topic's
records (key, value) into another topic through the groupstream source and the sink with ``exactlyOnce=true``.

``python kafka_eos_job.py BOOTSTRAP IN_TOPIC OUT_TOPIC CHECKPOINT [--until-caught-up]``: without the flag it runs
until killed (small triggers, so a kill lands mid-batch or mid-commit as often as between batches); with it, it
runs with Trigger.AvailableNow and exits once everything present has been written.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession


def main(argv: list[str]) -> int:
    bootstrap, in_topic, out_topic, checkpoint = argv[:4]
    until_caught_up = "--until-caught-up" in argv
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("groupstream-eos-crash-test")
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
        .option("subscribe", in_topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "700")
        .load()
        .select("key", "value")
    )
    writer = (
        df.writeStream.format("groupstream")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", out_topic)
        .option("exactlyOnce", "true")
        # long enough for a decided batch to outlive a driver's restart on a loaded machine; short enough that a
        # killed attempt's transaction no later task takes over ends within the test
        .option("kafka.transaction.timeout.ms", "60000")
        .option("checkpointLocation", checkpoint)
    )
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
