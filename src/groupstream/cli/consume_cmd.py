"""``groupstream consume TOPIC``: read partitions in assign mode (no group), print records, stop at the end.

Like Kafka's console consumer it starts at the end unless told ``--from-beginning`` or ``--offset N``; unlike
it, it exits once every partition is read to its high watermark, unless ``--follow``. Records go to stdout,
one per line; the closing count goes to stderr so stdout can be piped. Records are read by our `Consumer`
(assigned, seeked, polled: the fetch path every application uses); the Admin checks the topic and finds the
offsets to start and, without ``--follow``, to stop at (each partition's end when the command started).
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from typing import Any

from groupstream.cli.common import (
    add_bootstrap,
    client_config,
    non_negative_int,
    open_admin,
    positive_int,
    stderr,
)
from groupstream.cli.errors import UserError
from groupstream.client.consumer.consumer import Consumer
from groupstream.client.consumer.records import ConsumerRecord

_POLL_S = 0.5  # how long one poll waits for records; the loop checks its ends between polls


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("consume", help="print a topic's records (assign mode, no consumer group)")
    p.add_argument("topic")
    add_bootstrap(p)
    p.add_argument("--partition", type=non_negative_int, action="append", default=None,
                   help="partition to read (repeatable; default: all)")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at the earliest offset")
    start.add_argument("--offset", type=non_negative_int, default=None, help="start at this offset in each partition")
    p.add_argument("--max-messages", type=positive_int, default=None, help="stop after this many records")
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format (default text)")
    p.add_argument("--print-key", action="store_true", help="print the key before the value (text format)")
    p.add_argument("--key-separator", default="\t", metavar="SEP", help="between key and value (default tab)")
    p.add_argument("--follow", action="store_true", help="keep waiting for new records instead of exiting at the end")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    with open_admin(args) as admin:
        desc = admin.describe_topics([args.topic])[args.topic]
        available = [p.partition for p in desc.partitions]
        if args.partition is None:
            partitions = available
        else:
            partitions = sorted(set(args.partition))
            missing = [p for p in partitions if p not in available]
            if missing:
                raise UserError(
                    f"topic {args.topic!r} has {len(available)} partition{'s' if len(available) != 1 else ''} "
                    f"(0-{len(available) - 1}); there is no partition {missing[0]}"
                )
        starts, ends = _start_offsets(admin, args, partitions)
    count = _consume(args, starts, ends)
    stderr.print(f"consumed {count} record{'s' if count != 1 else ''} from {args.topic!r} "
                 f"(partition{'s' if len(partitions) != 1 else ''} {', '.join(map(str, partitions))})")
    return 0


def _consume(args: argparse.Namespace, starts: dict[int, int], ends: dict[int, int]) -> int:
    """Print records from ``starts`` until every partition reached its end in ``ends`` (or for ever with
    ``--follow``), at most ``--max-messages``; returns how many were printed."""
    out = sys.stdout
    count = 0
    topic = args.topic
    config = client_config(args, enable_auto_commit=False)
    with Consumer(config) as consumer:
        consumer.assign([(topic, p) for p in starts], offsets={(topic, p): o for p, o in starts.items()})
        open_parts = {p for p in starts if args.follow or starts[p] < ends[p]}
        while open_parts:
            for rec in consumer.poll(_POLL_S):
                if not args.follow and rec.offset >= ends[rec.partition]:
                    continue  # written after the command started: the next run's
                out.write(_format(args, rec))
                out.write("\n")
                count += 1
                if args.max_messages is not None and count >= args.max_messages:
                    out.flush()
                    return count
            if args.follow:
                out.flush()
            else:
                open_parts = {p for p in open_parts if consumer.position((topic, p)) < ends[p]}
    out.flush()
    return count


def _start_offsets(
    admin: Any, args: argparse.Namespace, partitions: list[int]
) -> tuple[dict[int, int], dict[int, int]]:
    """Where each partition starts, and where it ends now."""
    topic = args.topic
    earliest = admin.list_offsets({(topic, p): "earliest" for p in partitions})
    latest = admin.list_offsets({(topic, p): "latest" for p in partitions})
    starts: dict[int, int] = {}
    for p in partitions:
        lo, hi = earliest[(topic, p)].offset, latest[(topic, p)].offset
        if args.offset is not None:
            if not lo <= args.offset <= hi:
                raise UserError(f"--offset {args.offset} is outside partition {p} of {topic!r} "
                                f"(offsets {lo} to {hi})")
            starts[p] = args.offset
        else:
            starts[p] = lo if args.from_beginning else hi
    return starts, {p: latest[(topic, p)].offset for p in partitions}


def _text(data: bytes | None) -> str:
    return "null" if data is None else data.decode("utf-8", errors="replace")


def _json_bytes(data: bytes | None) -> dict[str, Any]:
    if data is None:
        return {"": None}
    try:
        return {"": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"_base64": base64.b64encode(data).decode("ascii")}


def _format(args: argparse.Namespace, rec: ConsumerRecord) -> str:
    if args.format == "text":
        value = _text(rec.value)
        return f"{_text(rec.key)}{args.key_separator}{value}" if args.print_key else value
    doc: dict[str, Any] = {"topic": args.topic, "partition": rec.partition, "offset": rec.offset,
                           "timestamp": rec.timestamp}
    for name, data in (("key", rec.key), ("value", rec.value)):
        for suffix, v in _json_bytes(data).items():
            doc[name + suffix] = v
    if rec.headers:
        doc["headers"] = [[k, _text(v) if v is not None else None] for k, v in rec.headers]
    return json.dumps(doc, ensure_ascii=False)
