"""The main demo pipeline: page views per page and event-time minute, with a watermark, written to Parquet.

Structured Streaming reads the ``page-views`` topic through the groupstream source, parses each JSON value,
and counts views (and total time on page) per page in one-minute event-time windows. Events may arrive up to
the watermark delay late and still count; a window is written once the watermark passes its end, in append
mode, to a Parquet table that Spark's file sink commits with the checkpoint: exactly-once output, whatever
restarts happen. ``expected_counts`` computes the same table from the generated events in plain Python, so the
demo can check that every event was counted exactly once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

__all__ = [
    "END_PAGE",
    "VALUE_SCHEMA",
    "WATERMARK_MS",
    "WINDOW_MS",
    "expected_counts",
    "page_view_counts",
]

WINDOW_MS = 60_000
WATERMARK_MS = 300_000  # far more than the 90 s by which the feed is late, plus skew between partitions
END_PAGE = "__end_of_stream__"  # a marker event far ahead in event time: it moves the watermark past every window
VALUE_SCHEMA = (
    "event_id string, user_id string, page string, referrer string, device string, country string, "
    "duration_ms long, ts long"
)


def page_view_counts(stream: Any) -> Any:
    """The aggregation over a ``readStream.format("groupstream")`` frame (columns of the Kafka source)."""
    from pyspark.sql import functions as F

    events = (
        stream.select(F.from_json(F.col("value").cast("string"), VALUE_SCHEMA).alias("e"))
        .select("e.*")
        .withColumn("event_time", F.timestamp_millis(F.col("ts")))
    )
    return (
        events.withWatermark("event_time", f"{WATERMARK_MS // 1000} seconds")
        .groupBy(F.window("event_time", f"{WINDOW_MS // 1000} seconds").alias("window"), F.col("page"))
        .agg(F.count(F.lit(1)).alias("views"), F.sum("duration_ms").alias("total_duration_ms"))
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "page",
            "views",
            "total_duration_ms",
        )
    )


def window_start(ts_ms: int) -> int:
    return ts_ms - ts_ms % WINDOW_MS


def expected_counts(events: Iterable[tuple[str, int]]) -> Counter[tuple[str, int]]:
    """Views per (page, window start in ms) of ``(page, event time ms)`` pairs, the end marker left out."""
    return Counter((page, window_start(ts)) for page, ts in events if page != END_PAGE)
