"""``groupstream produce TOPIC``: lines from stdin or a file (optionally ``key<sep>value``), or generated records.

Each line is one record, its trailing newline removed. Records go through our `Producer` (the client every
application uses, so the CLI exercises it); the topic and a forced partition are checked with the Admin first, so
a typo fails at once instead of after ``max.block.ms``. The progress bar goes to stderr; the summary with
per-partition offsets (where the records landed) to stdout.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from groupstream.cli.common import (
    COMPRESSIONS,
    add_bootstrap,
    client_config,
    format_bytes,
    non_negative_int,
    open_admin,
    positive_int,
    stderr,
    stdout,
)
from groupstream.cli.errors import UserError
from groupstream.client.errors import KafkaError
from groupstream.client.producer import DeliveryHandle, Producer
from groupstream.protocol.error_codes import ErrorCode

_ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}
DEFAULT_BATCH_SIZE = 16 * 1024  # Kafka's batch.size

Record = tuple[bytes | None, bytes]  # (key, value)


@dataclass
class PartitionProduced:
    """Offsets are -1 with acks=0 (the broker does not answer)."""

    partition: int
    records: int = 0
    bytes: int = 0
    first_offset: int = -1
    last_offset: int = -1


@dataclass
class ProduceResult:
    topic: str
    partitions: dict[int, PartitionProduced] = field(default_factory=dict)
    error: BaseException | None = None

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions.values())

    @property
    def bytes(self) -> int:
        return sum(p.bytes for p in self.partitions.values())

    def settle(self, pending: deque[tuple[DeliveryHandle, int]], *, wait: bool) -> None:
        """Account the records of ``pending`` (handle, key and value bytes) that were delivered, oldest first:
        only those already done, or every one with ``wait``. The first failure is kept in ``error``."""
        while pending and (wait or pending[0][0].done()):
            handle, size = pending.popleft()
            try:
                metadata = handle.result()
            except Exception as e:  # the record's own delivery error, raised once everything is settled
                self.error = self.error or e
                continue
            stats = self.partitions.setdefault(metadata.partition, PartitionProduced(metadata.partition))
            stats.records += 1
            stats.bytes += size
            if metadata.offset >= 0:
                if stats.first_offset < 0 or metadata.offset < stats.first_offset:
                    stats.first_offset = metadata.offset
                stats.last_offset = max(stats.last_offset, metadata.offset)


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


def _lines(stream: BinaryIO, separator: bytes | None) -> Iterator[Record]:
    for number, line in enumerate(stream, 1):
        if line.endswith(b"\n"):
            line = line[:-1]
            if line.endswith(b"\r"):
                line = line[:-1]
        if separator is None:
            yield None, line
            continue
        key, sep, value = line.partition(separator)
        if not sep:
            raise UserError(f"line {number} has no key separator {separator.decode()!r}: {line[:60]!r}")
        yield key, value


def _generated(count: int, value_size: int) -> Iterator[Record]:
    filler = bytes(range(97, 123)) * (value_size // 26 + 1)
    for i in range(count):
        head = b"%010d " % i
        yield None, (head + filler)[:value_size]


def run(args: argparse.Namespace) -> int:
    if args.generate is not None and (args.file is not None or args.key_separator is not None):
        raise UserError("--generate makes its own records: it cannot be combined with --file or --key-separator")
    if args.key_separator == "":
        raise UserError("--key-separator must not be empty")
    separator = args.key_separator.encode() if args.key_separator is not None else None
    acks = _ACKS[args.acks]
    started = time.monotonic()
    with open_admin(args) as admin:
        desc = admin.describe_topics([args.topic])[args.topic]
        n = desc.partition_count
        if args.partition is not None and args.partition >= n:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"topic {args.topic!r} has {n} partition{'s' if n != 1 else ''}; "
                             f"there is no partition {args.partition}", resource=args.topic)  # fmt: skip
    config = client_config(args, acks=args.acks, compression_type=args.compression, batch_size=args.batch_size)
    result = ProduceResult(args.topic)
    with ExitStack() as stack:
        producer = Producer(config)
        stack.callback(producer.close)
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
            records = _generated(args.generate, args.value_size)
            _send(producer, args, records, result, lambda: progress.update(task, completed=result.records))
        else:
            if args.file is not None:
                try:
                    stream: BinaryIO = stack.enter_context(args.file.open("rb"))
                except OSError as e:
                    raise UserError(f"--file {args.file}: {e.strerror}") from None
            else:
                stream = sys.stdin.buffer
            _send(producer, args, _lines(stream, separator), result, lambda: None)
    if result.error is not None:
        raise result.error
    _summary(result, time.monotonic() - started, acks)
    return 0


_PROGRESS_EVERY = 1000  # records between looks at what was delivered (and redraws of the progress bar)


def _send(producer: Producer, args: argparse.Namespace, records: Iterator[Record], result: ProduceResult,
          progressed: Callable[[], None]) -> None:  # fmt: skip
    """Produce every record, accounting deliveries as they complete (so a long stream holds only the records
    in flight), then wait for the rest. Handles, not callbacks: a record without a callback takes the
    producer's fast path."""
    pending: deque[tuple[DeliveryHandle, int]] = deque()
    for i, (key, value) in enumerate(records, 1):
        handle = producer.produce(args.topic, value, key, partition=args.partition)
        pending.append((handle, len(value) + (len(key) if key is not None else 0)))
        if i % _PROGRESS_EVERY == 0:
            result.settle(pending, wait=False)
            progressed()
            if result.error is not None:
                break
    producer.flush()
    result.settle(pending, wait=True)
    progressed()


def _summary(result: ProduceResult, elapsed: float, acks: int) -> None:
    rate = result.records / elapsed if elapsed > 0 else 0.0
    stdout.print(
        f"produced {result.records} records ({format_bytes(result.bytes)} of keys and values) to {result.topic!r} "
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
