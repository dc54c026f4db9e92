"""The sink's task body: produce a task's rows with our idempotent producer and wait for every ack.

Rows carry ``value`` (required) and optionally ``key``, ``topic``, ``partition`` and ``headers``, as Spark's
Kafka sink expects; strings are encoded as UTF-8. The ``topic`` option, when given, wins over a row's topic
column, as in Spark. Spark hands the task its rows as Arrow record batches, which go to the producer whole
(``produce_arrow``): keys and values are encoded from the columns' buffers, with no Python object per row.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from groupstream.client.producer import Producer
from groupstream.client.producer.future import BulkDelivery
from groupstream.spark.options import SinkOptions, SourceOptionError

__all__ = ["check_sink_columns", "write_batches"]

_COLUMNS = ("key", "value", "topic", "partition", "headers")


def check_sink_columns(options: SinkOptions, fields: Sequence[str]) -> None:
    """The mistakes a sink's schema alone shows, named before any record is produced."""
    if "value" not in fields:
        raise SourceOptionError("the groupstream sink needs a 'value' column")
    if options.topic is None and "topic" not in fields:
        raise SourceOptionError("the groupstream sink needs the option 'topic' or a 'topic' column")


def _check_types(batch: Any) -> None:
    import pyarrow as pa

    for name in ("key", "value", "topic"):
        if name not in batch.schema.names:
            continue
        t = batch.schema.field(name).type
        if not (pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_string(t)
                or pa.types.is_large_string(t) or pa.types.is_null(t)):  # fmt: skip
            raise SourceOptionError(f"column {name!r} must be binary or string, got {t}")
    if "partition" in batch.schema.names and not pa.types.is_integer(batch.schema.field("partition").type):
        raise SourceOptionError(f"column 'partition' must be an integer, got {batch.schema.field('partition').type}")


def rows_to_produce(options: SinkOptions, batches: Iterator[Any]) -> Iterator[Any]:
    """Spark's Arrow batches as `Producer.produce_arrow` takes them: types checked on the first, empty ones
    skipped, only the sink's columns (no 'topic' column when the option names the topic), every row with a
    topic."""
    checked = False
    for batch in batches:
        if not checked:
            _check_types(batch)
            checked = True
        if not batch.num_rows:
            continue
        wanted = [n for n in _COLUMNS if n in batch.schema.names and not (n == "topic" and options.topic)]
        rows = batch.select(wanted)
        if options.topic is None and rows.column("topic").null_count:
            raise SourceOptionError("a row has no topic (null 'topic' column and no 'topic' option)")
        yield rows


def write_batches(options: SinkOptions, fields: Sequence[str], batches: Iterator[Any]) -> int:
    """Produce every row of ``batches`` (pyarrow record batches); returns how many, once all are acknowledged."""
    check_sink_columns(options, fields)
    config = {"bootstrap.servers": options.bootstrap_servers, "client.id": "groupstream-spark-sink",
              "acks": "all", "enable.idempotence": True, "linger.ms": 5, **options.client_config}  # fmt: skip
    count = 0
    deliveries: list[BulkDelivery] = []
    with Producer(config) as producer:
        for rows in rows_to_produce(options, batches):
            deliveries.append(producer.produce_arrow(rows, options.topic))
            count += rows.num_rows
        remaining = producer.flush()
        if remaining:
            raise RuntimeError(f"{remaining} records were not acknowledged before the flush ended")
        for delivery in deliveries:
            error = delivery.exception(0)
            if error is not None:
                raise RuntimeError(f"records of this task were not delivered ({count} were to be): {error}") from error
    return count
