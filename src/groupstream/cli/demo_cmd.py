"""``groupstream demo``: the main job, with nothing to set up.

Starts the broker in this process (or uses ``--bootstrap-server``), streams a live page-view feed into the
``page-views`` topic with our producer, and runs a Spark Structured Streaming pipeline over it (`page_views`):
views per page and event-time minute with a watermark, written exactly-once to a Delta table (``--sink parquet``:
Spark's Parquet file sink), its progress
committed to the consumer group ``groupstream-demo``. When every event is counted the query stops, and the
demo prints the result, the group's lag (zero) and a check that the table counts every produced event exactly
once. Exits 1 if the check fails. Point it at another broker and Spark master with ``--bootstrap-server`` and
``--master``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from groupstream.broker.config import BrokerConfig
from groupstream.cli.common import positive_int, stderr, stdout
from groupstream.cli.demo_data import PageView, page_views
from groupstream.cli.errors import UserError
from groupstream.client.admin import Admin, NewTopic
from groupstream.client.errors import KafkaError

TOPIC = "page-views"
PARTITIONS = 4
GROUP = "groupstream-demo"
SINKS = ("delta", "parquet")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("demo", help="the main job: a live page-view stream aggregated by Spark into Parquet, "
                                    "checked exactly-once")  # fmt: skip
    p.add_argument("--data-dir", type=Path, default=Path("data/demo"),
                   help="broker data and pipeline output (default ./data/demo)")  # fmt: skip
    p.add_argument("--events", type=positive_int, default=60_000, help="page views to stream (default 60000)")
    p.add_argument("--rate", type=positive_int, default=20_000, help="events per second the feed sends (default 20000)")
    p.add_argument("--bootstrap-server", metavar="HOST:PORT", help="use this broker instead of an embedded one")
    p.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    p.add_argument("--timeout", type=positive_int, default=100, help="seconds to wait for the pipeline (default 100)")
    p.add_argument("--seed", type=int, default=2024, help="seed of the generated stream")
    p.add_argument("--sink", choices=SINKS, default=SINKS[0],
                   help="the output table: delta (its log makes it exactly-once for every reader) or parquet "
                        "(Spark's file sink: exactly-once for Spark readers)")  # fmt: skip
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise UserError("the demo runs on Spark: pip install 'groupstream[spark]'") from None
    started = time.monotonic()
    with _broker(args) as (bootstrap, console):
        events = _events(args)
        _prepare(bootstrap, args.data_dir)
        stdout.print(f"[bold]groupstream demo[/]: broker {bootstrap}, Spark {args.master}, "
                     f"{len(events) - 1:,} page views into {TOPIC!r} ({PARTITIONS} partitions)")  # fmt: skip
        if console is not None:
            stdout.print(f"console: {console}/groups/{GROUP} while the demo runs (metrics at {console}/metrics)")
        spark = _spark(args.master)
        try:
            rows, lag = _run_pipeline(spark, bootstrap, events, args)
        finally:
            spark.stop()
    ok = _report(rows, lag, events, time.monotonic() - started, args.sink)
    return 0 if ok else 1


@contextlib.contextmanager
def _broker(args: argparse.Namespace) -> Iterator[tuple[str, str | None]]:
    """The bootstrap address, and the embedded broker's console (None for a broker of the user's)."""
    if args.bootstrap_server:
        yield args.bootstrap_server, None
        return
    from groupstream.cli.embedded import EmbeddedBroker  # the broker's modules load only when embedded

    config = BrokerConfig(data_dir=args.data_dir / "broker", host="127.0.0.1", port=0, http=("127.0.0.1", 0))
    config.apply({"group.initial.rebalance.delay.ms": "0"})
    broker = EmbeddedBroker(config)
    try:
        broker.start()
    except OSError as e:  # data dir not writable, no free port, ...
        raise UserError(f"cannot start the embedded broker with data in {args.data_dir}: {e}") from None
    with broker:
        http = config.http  # the port bound once started
        yield broker.bootstrap, f"http://{http[0]}:{http[1]}" if http is not None else None


def _events(args: argparse.Namespace) -> list[PageView]:
    from groupstream.spark.page_views import END_PAGE, WATERMARK_MS, WINDOW_MS

    now = time.time_ns() // 1_000_000
    events = list(page_views(args.events, args.seed, now - args.events * 20))
    last = max(json.loads(e.value or b"{}")["ts"] for e in events)
    marker_ts = last + WATERMARK_MS + 2 * WINDOW_MS
    marker = {"event_id": "end", "user_id": "", "page": END_PAGE, "ts": marker_ts}
    events.append(PageView(json.dumps(marker).encode(), b"end", marker_ts))
    return events


def _prepare(bootstrap: str, data_dir: Path) -> None:
    """A fresh topic, group and output, so that every run checks exactly what it produced."""
    with Admin({"bootstrap.servers": bootstrap, "client.id": "groupstream-demo"}) as admin:
        if TOPIC in admin.list_topics():
            admin.delete_topics([TOPIC])
        deadline = time.monotonic() + 30
        while True:  # a Kafka cluster deletes topics in the background
            try:
                admin.create_topics([NewTopic(TOPIC, PARTITIONS)])
                break
            except KafkaError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        with contextlib.suppress(KafkaError):
            admin.delete_groups([GROUP])
    for sub in ("output", "checkpoint"):
        shutil.rmtree(data_dir / "pipeline" / sub, ignore_errors=True)


def _spark(master: str) -> Any:
    from groupstream.spark.session import spark_session

    stderr.print(f"starting Spark ({master}) ...")
    return spark_session(master, "groupstream-demo")


def _feed(bootstrap: str, events: list[PageView], rate: int, done: threading.Event,
          sent: list[int], failures: list[BaseException]) -> None:
    """Send the events at about ``rate`` per second, as a live site would, then the end marker."""
    from groupstream.client.producer import Producer

    def delivered(error: BaseException | None, _metadata: Any) -> None:
        if error is not None:
            failures.append(error)

    try:
        with Producer({"bootstrap.servers": bootstrap, "client.id": "groupstream-demo-feed", "linger.ms": 5,
                       "compression.type": "lz4"}) as producer:  # fmt: skip
            t0 = time.monotonic()
            chunk = max(rate // 10, 1)
            for i in range(0, len(events), chunk):
                for e in events[i : i + chunk]:
                    producer.produce(TOPIC, e.value, e.key, timestamp=e.timestamp_ms, on_delivery=delivered)
                producer.poll(0)
                sent[0] = min(i + chunk, len(events))
                ahead = t0 + sent[0] / rate - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)  # pacing the feed to its rate, not waiting for a condition
            producer.flush()
    except BaseException as e:
        failures.append(e)
    finally:
        done.set()


def _run_pipeline(spark: Any, bootstrap: str, events: list[PageView], args: argparse.Namespace) -> tuple[
    list[Any], dict[int, tuple[int, int]]
]:
    from groupstream.spark.page_views import expected_counts, page_view_counts

    out = args.data_dir / "pipeline" / "output"
    stream = (
        spark.readStream.format("groupstream")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", TOPIC)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(max(args.rate, 1000)))
        .option("group.id", GROUP)
        .load()
    )
    checkpoint = args.data_dir / "pipeline" / "checkpoint"
    writer = page_view_counts(stream).writeStream.outputMode("append").option("checkpointLocation", str(checkpoint))
    if args.sink == "delta":
        from groupstream.spark.delta_table import DeltaBatchSink

        writer = writer.foreachBatch(DeltaBatchSink(out, checkpoint))
    else:
        writer = writer.format("parquet").option("path", str(out))
    query = writer.trigger(processingTime="1 second").start()
    total = len(events)
    windows = len(expected_counts(_page_times(events)))
    done, sent = threading.Event(), [0]
    failures: list[BaseException] = []
    feeder = threading.Thread(target=_feed, args=(bootstrap, events, args.rate, done, sent, failures), daemon=True)
    feeder.start()
    counted: dict[int, int] = {}  # batch id -> input rows
    lag: dict[int, tuple[int, int]] = {}
    deadline = time.monotonic() + args.timeout
    try:
        with Progress(TextColumn("{task.description:<16}"), BarColumn(), MofNCompleteColumn(), TaskProgressColumn(),
                      TimeElapsedColumn(), console=stderr) as progress:  # fmt: skip
            produced_task = progress.add_task("produced", total=total)
            read_task = progress.add_task("read by Spark", total=total)
            windows_task = progress.add_task("windows written", total=windows)
            while True:
                if query.exception() is not None:
                    raise UserError(f"the Spark query failed: {query.exception()}")
                if failures:
                    raise UserError(f"the event feed failed: {failures[0]}")
                for p in query.recentProgress:
                    counted[p["batchId"]] = p["numInputRows"]
                read = sum(counted.values())
                progress.update(produced_task, completed=sent[0])
                progress.update(read_task, completed=min(read, total))
                if done.is_set() and read >= total:
                    # every event is in; windows are written as the watermark passes them
                    written = _count_rows(spark, out, args.sink)
                    progress.update(windows_task, completed=min(written, windows))
                    if written >= windows:
                        lag = _lag(bootstrap)
                        if all(committed == end for committed, end in lag.values()):
                            break
                if time.monotonic() > deadline:
                    raise UserError(f"the pipeline did not finish within {args.timeout}s (read {read:,} of "
                                    f"{total:,} events)")  # fmt: skip
                query.awaitTermination(0.5)  # returns at once if the query died; otherwise the poll interval
    finally:
        query.stop()
        feeder.join(30)
    if args.sink == "delta":
        return [SimpleNamespace(**row) for row in _delta_table(out).to_pylist()], lag
    return spark.read.parquet(str(out)).collect(), lag


def _delta_table(out: Path) -> Any:
    """The Delta table as any reader sees it, without Spark: through its log (deltalake)."""
    from deltalake import DeltaTable

    return DeltaTable(str(out)).to_pyarrow_dataset().to_table()


def _count_rows(spark: Any, out: Path, sink: str) -> int:
    """Rows of the table so far, read through its log (Delta's, or Spark's file sink's for Parquet), so a
    half-written batch is never counted."""
    if sink == "delta":
        return int(_delta_table(out).num_rows) if (out / "_delta_log").is_dir() else 0
    if not (out / "_spark_metadata").is_dir():
        return 0
    return int(spark.read.parquet(str(out)).count())


def _page_times(events: list[PageView]) -> Iterator[tuple[str, int]]:
    for e in events:
        event = json.loads(e.value or b"{}")
        yield event["page"], event["ts"]


def _lag(bootstrap: str) -> dict[int, tuple[int, int]]:
    """Per partition: the group's committed offset (-1: none yet) and the log end."""
    with Admin({"bootstrap.servers": bootstrap, "client.id": "groupstream-demo"}) as admin:
        ends = admin.log_end_offsets((TOPIC, p) for p in range(PARTITIONS))
        lag = admin.consumer_lag(GROUP)
    return {p: (lag[(TOPIC, p)].committed if (TOPIC, p) in lag else -1, ends[(TOPIC, p)]) for p in range(PARTITIONS)}


def _report(rows: list[Any], lag: dict[int, tuple[int, int]], events: list[PageView], seconds: float,
            sink: str = "parquet") -> bool:
    from groupstream.spark.page_views import expected_counts

    expected = expected_counts(_page_times(events))
    got: Counter[tuple[str, int]] = Counter()
    duplicates = 0
    for r in rows:
        key = (r.page, int(r.window_start.timestamp() * 1000))
        duplicates += key in got
        got[key] += r.views

    pages: Counter[str] = Counter()
    durations: Counter[str] = Counter()
    for r in rows:
        pages[r.page] += r.views
        durations[r.page] += r.total_duration_ms
    kind = "Delta table, read with deltalake" if sink == "delta" else "Parquet table"
    table = Table(title=f"page views per page ({len(rows):,} one-minute windows in the {kind})")
    for col in ("page", "views", "avg time on page"):
        table.add_column(col, justify="left" if col == "page" else "right")
    for page, views in pages.most_common():
        table.add_row(page, f"{views:,}", f"{durations[page] / views / 1000:.1f} s")
    stdout.print(table)

    lag_table = Table(title=f"consumer group {GROUP}")
    for col in ("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"):
        lag_table.add_column(col, justify="left" if col == "TOPIC" else "right")
    for p, (committed, end) in sorted(lag.items()):
        lag_table.add_row(TOPIC, str(p), str(committed), str(end), str(end - committed if committed >= 0 else "-"))
    stdout.print(lag_table)
    behind = sum(end - committed if committed >= 0 else end for committed, end in lag.values())
    stdout.print(f"lag of {GROUP}: {behind:,} records behind across {len(lag)} partitions of {TOPIC}")

    total = sum(expected.values())
    missing = sum((expected - got).values())
    extra = sum((got - expected).values())
    ok = got == expected and duplicates == 0 and all(c == e for c, e in lag.values())
    if ok:
        stdout.print(f"[bold green]check passed[/]: all {total:,} page views counted exactly once "
                     f"({len(expected):,} windows; lag 0) in {seconds:.0f}s")  # fmt: skip
    else:
        stdout.print(f"[bold red]check FAILED[/]: {missing:,} views missing, {extra:,} counted too often, "
                     f"{duplicates} windows written twice")  # fmt: skip
    return ok
