"""A Spark streaming driver for the crash test, run as its own process: copy a topic's records into a Parquet
table through the groupstream source, committing progress to a consumer group.

``python stream_job.py BOOTSTRAP TOPIC OUT CHECKPOINT GROUP [--until-caught-up]``: without the flag it runs
until killed (small triggers, so a kill lands mid-batch as often as between batches); with it, it runs with
Trigger.AvailableNow and exits once everything present has been written.
"""

from __future__ import annotations

import sys

from job_kit import local_session, run_until_killed_or_caught_up, topic_stream


def main(argv: list[str]) -> int:
    bootstrap, topic, out, checkpoint, group = argv[:5]
    spark = local_session("groupstream-crash-test")
    df = topic_stream(spark, bootstrap, topic, **{"group.id": group})
    df = df.select("topic", "partition", "offset", "key", "value")
    writer = df.writeStream.format("parquet").option("path", out).option("checkpointLocation", checkpoint)
    return run_until_killed_or_caught_up(spark, writer, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
