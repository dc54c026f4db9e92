"""``groupstream produce TOPIC``: lines from stdin or a file (optionally ``key<sep>value``), or generated records.

Each line is one record, its trailing newline removed. The progress bar goes to stderr; the summary with
per-partition offsets (where the records landed) to stdout.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import BinaryIO

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from groupstream.cli.common import (
    COMPRESSIONS,
    add_bootstrap,
    format_bytes,
    non_negative_int,
    open_admin,
    positive_int,
    stderr,
    stdout,
)
from groupstream.cli.errors import UserError
from groupstream.client.lite import DEFAULT_BATCH_SIZE, ProduceResult, ProducerRecord, produce

_ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("produce", help="produce lines from stdin or a file, or generated records, to a topic")
    p.add_argument("topic")
    add_bootstrap(p)
    p.add_argument("--file", type=Path, default=None, help="read lines from this file instead of stdin")
    p.add_argument("--key-separator", default=None, metavar="SEP",
                   help="split each line at the first SEP into key and value")
    p.add_argument("--partition", type=non_negative_int, default=None,
                   help="send every record to this partition (default: by key, or sticky round-robin)")
    p.add_argument("--acks", choices=sorted(_ACKS), default="all", help="acknowledgements to wait for (default all)")
    p.add_argument("--compression", choices=COMPRESSIONS, default="none", help="batch compression codec")
    p.add_argument("--batch-size", type=positive_int, default=DEFAULT_BATCH_SIZE, help="batch size in bytes")
    p.add_argument("--generate", type=positive_int, default=None, metavar="N",
                   help="produce N generated records instead of reading lines")
    p.add_argument("--value-size", type=positive_int, default=100, metavar="B",
                   help="value size in bytes of generated records (default 100)")
    p.set_defaults(func=run)


def _lines(stream: BinaryIO, separator: bytes | None) -> Iterator[ProducerRecord]:
    for number, line in enumerate(stream, 1):
        if line.endswith(b"\n"):
            line = line[:-1]
            if line.endswith(b"\r"):
                line = line[:-1]
        if separator is None:
            yield ProducerRecord(line)
            continue
        key, sep, value = line.partition(separator)
        if not sep:
            raise UserError(f"line {number} has no key separator {separator.decode()!r}: {line[:60]!r}")
        yield ProducerRecord(value, key)


def _generated(count: int, value_size: int) -> Iterator[ProducerRecord]:
    filler = bytes(range(97, 123)) * (value_size // 26 + 1)
    for i in range(count):
        head = b"%010d " % i
        yield ProducerRecord((head + filler)[:value_size])


def run(args: argparse.Namespace) -> int:
    if args.generate is not None and (args.file is not None or args.key_separator is not None):
        raise UserError("--generate makes its own records: it cannot be combined with --file or --key-separator")
    if args.key_separator == "":
        raise UserError("--key-separator must not be empty")
    separator = args.key_separator.encode() if args.key_separator is not None else None
    acks = _ACKS[args.acks]
    started = time.monotonic()
    with ExitStack() as stack:
        admin = stack.enter_context(open_admin(args))
        if args.generate is not None:
            progress = stack.enter_context(
                Progress(
                    TextColumn("producing to [bold]{task.fields[topic]}"),
                    BarColumn(),
                    MofNCompleteColumn(),
                    TimeRemainingColumn(),
                    console=stderr,
                    transient=True,
                )
            )
            task = progress.add_task("produce", total=args.generate, topic=args.topic)
            result = produce(
                admin.connection, args.topic, _generated(args.generate, args.value_size), args.partition,
                acks=acks, compression=args.compression, batch_size=args.batch_size,
                on_progress=lambda n: progress.advance(task, n),
            )
        else:
            if args.file is not None:
                try:
                    stream: BinaryIO = stack.enter_context(args.file.open("rb"))
                except OSError as e:
                    raise UserError(f"--file {args.file}: {e.strerror}") from None
            else:
                stream = sys.stdin.buffer
            result = produce(
                admin.connection, args.topic, _lines(stream, separator), args.partition,
                acks=acks, compression=args.compression, batch_size=args.batch_size,
            )
    _summary(result, time.monotonic() - started, acks)
    return 0


def _summary(result: ProduceResult, elapsed: float, acks: int) -> None:
    rate = result.records / elapsed if elapsed > 0 else 0.0
    stdout.print(
        f"produced {result.records} records ({format_bytes(result.bytes)} on the wire) to {result.topic!r} "
        f"in {elapsed:.2f}s ({rate:,.0f} records/s)"
    )
    if not result.partitions:
        return
    table = Table()
    table.add_column("partition", justify="right")
    table.add_column("records", justify="right")
    table.add_column("first offset", justify="right")
    table.add_column("last offset", justify="right")
    for p in sorted(result.partitions.values(), key=lambda s: s.partition):
        unknown = "-" if acks == 0 else None
        table.add_row(str(p.partition), str(p.records), unknown or str(p.first_offset), unknown or str(p.last_offset))
    stdout.print(table)
