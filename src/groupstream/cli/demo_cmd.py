"""``groupstream demo``: the whole path in one command, with nothing to set up.

Starts the broker in this process, (re)creates a 3-partition topic, produces a page-view stream keyed by user,
reads it back in assign mode and checks, partition by partition, that what was read is exactly what was
produced (same keys, values, timestamps and headers, in order, at consecutive offsets). Exits 1 if not.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TaskProgressColumn, TextColumn
from rich.table import Table

from groupstream.broker.config import BrokerConfig
from groupstream.cli.common import COMPRESSIONS, positive_int, stderr, stdout
from groupstream.cli.demo_data import page_views
from groupstream.cli.errors import UserError
from groupstream.client.admin import Admin, NewTopic
from groupstream.client.lite import ConsumedRecord, ProduceResult, ProducerRecord, fetch_partitions, produce
from groupstream.protocol.partitioner import default_partition

TOPIC = "page-views"
PARTITIONS = 3
_MB = 1024 * 1024

Row = tuple[bytes | None, bytes | None, int, tuple[tuple[str, bytes | None], ...]]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("demo", help="run an embedded broker, produce a sample stream, read it back and check it")
    p.add_argument("--data-dir", type=Path, default=Path("data/demo"), help="broker data directory (default ./data/demo)")
    p.add_argument("--events", type=positive_int, default=50_000, help="page-view events to produce (default 50000)")
    p.add_argument("--compression", choices=COMPRESSIONS, default="lz4", help="batch compression (default lz4)")
    p.add_argument("--seed", type=int, default=2024, help="seed of the generated stream")
    p.set_defaults(func=run)


def _progress() -> Progress:
    return Progress(TextColumn("{task.description:<10}"), BarColumn(), MofNCompleteColumn(), TaskProgressColumn(),
                    console=stderr, transient=False)


def run(args: argparse.Namespace) -> int:
    from groupstream.cli.embedded import EmbeddedBroker  # the broker's modules load only for this command

    config = BrokerConfig(data_dir=args.data_dir, host="127.0.0.1", port=0)
    events = list(page_views(args.events, args.seed, time.time_ns() // 1_000_000 - args.events * 20))
    expected = _by_partition(events)
    broker = EmbeddedBroker(config)
    try:
        broker.start()
    except OSError as e:  # data dir not writable, no free port, ...
        raise UserError(f"cannot start the embedded broker with data in {args.data_dir}: {e}") from None
    with broker:
        stdout.print(f"[bold]groupstream demo[/]: embedded broker on {broker.bootstrap}, data in {args.data_dir}")
        with Admin({"bootstrap.servers": broker.bootstrap, "client.id": "groupstream-demo"}) as admin:
            if TOPIC in admin.list_topics():
                admin.delete_topics([TOPIC])
            admin.create_topics([NewTopic(TOPIC, PARTITIONS)])
            stdout.print(f"created topic {TOPIC!r} with {PARTITIONS} partitions; producing {len(events):,} "
                         f"page views keyed by user ({args.compression})")
            with _progress() as progress:
                task = progress.add_task("produce", total=len(events))
                t0 = time.monotonic()
                result = produce(admin.connection, TOPIC, events, compression=args.compression,
                                 on_progress=lambda n: progress.advance(task, n))
                produce_s = time.monotonic() - t0
            starts = admin.list_offsets({(TOPIC, p): "earliest" for p in range(PARTITIONS)})
            with _progress() as progress:
                task = progress.add_task("consume", total=len(events))
                t0 = time.monotonic()
                got: dict[int, list[ConsumedRecord]] = {p: [] for p in range(PARTITIONS)}
                for rec in _advancing(fetch_partitions(admin.connection, TOPIC,
                                                       {p: starts[(TOPIC, p)].offset for p in range(PARTITIONS)}),
                                      progress, task):
                    got[rec.partition].append(rec)
                consume_s = time.monotonic() - t0
    ok = _report(expected, got, result, produce_s, consume_s, _payload_bytes(events))
    return 0 if ok else 1


def _advancing(records: Iterator[ConsumedRecord], progress: Progress, task: TaskID) -> Iterator[ConsumedRecord]:
    step = 0
    for rec in records:
        yield rec
        step += 1
        if step == 1000:
            progress.advance(task, step)
            step = 0
    progress.advance(task, step)


def _by_partition(events: list[ProducerRecord]) -> dict[int, list[Row]]:
    out: dict[int, list[Row]] = {p: [] for p in range(PARTITIONS)}
    for e in events:
        assert e.key is not None and e.timestamp_ms is not None
        out[default_partition(e.key, PARTITIONS)].append((e.key, e.value, e.timestamp_ms, e.headers))
    return out


def _payload_bytes(events: list[ProducerRecord]) -> int:
    return sum(len(e.key or b"") + len(e.value or b"") for e in events)


def _report(
    expected: dict[int, list[Row]],
    got: dict[int, list[ConsumedRecord]],
    result: ProduceResult,
    produce_s: float,
    consume_s: float,
    payload: int,
) -> bool:
    table = Table(title=f"topic {TOPIC}")
    for col in ("partition", "produced", "consumed", "first offset", "last offset", "identical"):
        table.add_column(col, justify="right" if col != "identical" else "center")
    all_ok = True
    for p in range(PARTITIONS):
        want = expected[p]
        recs = got[p]
        rows = [(r.key, r.value, r.timestamp, r.headers) for r in recs]
        offsets = [r.offset for r in recs]
        first = offsets[0] if offsets else -1
        ok = rows == want and offsets == list(range(first, first + len(offsets)))
        all_ok &= ok
        produced = result.partitions[p].records if p in result.partitions else 0
        table.add_row(str(p), f"{produced:,}", f"{len(recs):,}", str(first) if recs else "-",
                      str(offsets[-1]) if recs else "-", "[green]yes[/]" if ok else "[red]NO[/]")
    stdout.print(table)
    total = sum(len(v) for v in got.values())
    speed = Table(title="throughput (payload = keys + values)")
    for col in ("phase", "records", "payload MB", "seconds", "records/s", "MB/s"):
        speed.add_column(col, justify="right" if col != "phase" else "left")
    for phase, n, secs in (("produce", result.records, produce_s), ("consume", total, consume_s)):
        secs = max(secs, 1e-9)
        speed.add_row(phase, f"{n:,}", f"{payload / _MB:.1f}", f"{secs:.2f}", f"{n / secs:,.0f}",
                      f"{payload / _MB / secs:.1f}")
    stdout.print(speed)
    if all_ok:
        stdout.print(f"[bold green]check passed[/]: all {total:,} records read back exactly as produced")
    else:
        stdout.print("[bold red]check FAILED[/]: what was read differs from what was produced")
    return all_ok
