"""The sink's task body: produce a task's rows with our idempotent producer and wait for every ack.

Rows carry ``value`` (required) and optionally ``key``, ``topic``, ``partition`` and ``headers``, as Spark's
Kafka sink expects; strings are encoded as UTF-8. The ``topic`` option, when given, wins over a row's topic
column, as in Spark.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from groupstream.client.producer import Producer
from groupstream.spark.options import SinkOptions, SourceOptionError

__all__ = ["write_rows"]


def _bytes(value: Any, column: str) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    raise SourceOptionError(f"column {column!r} must be binary or string, got {type(value).__name__}")


def write_rows(options: SinkOptions, fields: Sequence[str], rows: Iterator[Any]) -> int:
    if "value" not in fields:
        raise SourceOptionError("the groupstream sink needs a 'value' column")
    if options.topic is None and "topic" not in fields:
        raise SourceOptionError("the groupstream sink needs the option 'topic' or a 'topic' column")
    has = set(fields)
    config = {"bootstrap.servers": options.bootstrap_servers, "client.id": "groupstream-spark-sink",
              "acks": "all", "enable.idempotence": True, "linger.ms": 5, **options.client_config}
    count = 0
    failures: list[BaseException] = []

    def delivered(error: BaseException | None, _metadata: Any) -> None:
        if error is not None:
            failures.append(error)

    with Producer(config) as producer:
        for row in rows:
            topic = options.topic or row["topic"]
            if not topic:
                raise SourceOptionError("a row has no topic (null 'topic' column and no 'topic' option)")
            headers = None
            if "headers" in has and row["headers"]:
                headers = [(h["key"], _bytes(h["value"], "headers.value")) for h in row["headers"]]
            producer.produce(
                topic,
                value=_bytes(row["value"], "value"),
                key=_bytes(row["key"], "key") if "key" in has else None,
                partition=row["partition"] if "partition" in has else None,
                headers=headers,
                on_delivery=delivered,
            )
            count += 1
        remaining = producer.flush()
        if remaining:
            raise RuntimeError(f"{remaining} records were not acknowledged before the flush ended")
        if failures:
            raise RuntimeError(f"{len(failures)} of {count} records were not delivered; the first: {failures[0]}")
    return count
