"""A Spark streaming driver for the exactly-once sink's crash test, run as its own process: copy a topic's
records (key, value) into another topic through the groupstream source and the sink with ``exactlyOnce=true``.

``python kafka_eos_job.py BOOTSTRAP IN_TOPIC OUT_TOPIC CHECKPOINT [--until-caught-up]``: without the flag it runs
until killed (small triggers, so a kill lands mid-batch or mid-commit as often as between batches); with it, it
runs with Trigger.AvailableNow and exits once everything present has been written.
"""

from __future__ import annotations

import sys

from job_kit import local_session, run_until_killed_or_caught_up, topic_stream


def main(argv: list[str]) -> int:
    bootstrap, in_topic, out_topic, checkpoint = argv[:4]
    spark = local_session("groupstream-eos-crash-test")
    df = topic_stream(spark, bootstrap, in_topic).select("key", "value")
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
    return run_until_killed_or_caught_up(spark, writer, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
