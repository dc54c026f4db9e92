"""What a Spark task runs: read one offset range of one partition and hand it to Spark as Arrow record batches.

A task reads exactly ``[start, end)`` from the partition leader with a plain assign-mode fetch loop, so a task
that Spark retries reads the same records again and a restarted query re-reads nothing it committed (seed
003's offline load: one task per topic-partition range, restartable without duplicates). Records come out
column by column, a batch at a time, with no per-record Row objects.
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from groupstream.client.admin import Admin
from groupstream.client.errors import KafkaError
from groupstream.client.lite import fetch_batches
from groupstream.client.net.blocking import BlockingConnection
from groupstream.protocol.error_codes import ErrorCode
from groupstream.spark.cluster import DataLossError, admin_config
from groupstream.spark.planning import OffsetRange

__all__ = ["ARROW_BATCH_ROWS", "ReadSpec", "arrow_schema", "read_range"]

ARROW_BATCH_ROWS = 16_384  # Kafka batches are gathered up to this many rows: Spark pays per Arrow batch

log = logging.getLogger("groupstream.spark")


@dataclass(frozen=True)
class ReadSpec:
    """What every task of a query needs besides its range (pickled once per task)."""

    bootstrap_servers: str
    client_config: tuple[tuple[str, str], ...]
    include_headers: bool
    fail_on_data_loss: bool
    poll_timeout_ms: int


def arrow_schema(include_headers: bool) -> Any:
    import pyarrow as pa

    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
        fields.append(pa.field("headers", pa.list_(header)))
    return pa.schema(fields)


def read_range(spec: ReadSpec, rng: OffsetRange) -> Iterator[Any]:
    """Arrow record batches of ``rng``'s records, in offset order, of about `ARROW_BATCH_ROWS` rows each."""
    import pyarrow as pa
    import pyarrow.compute as pc

    schema = arrow_schema(spec.include_headers)
    conf = admin_config(spec.bootstrap_servers, dict(spec.client_config))
    with Admin(conf) as admin:
        host, port = _leader(admin, rng)
        conn = BlockingConnection(host, port, client_id=conf["client.id"], timeout_s=spec.poll_timeout_ms / 1000)
        try:
            start = _start(admin, spec, rng)
            last = start - 1
            pending: list[Any] = []
            types: list[int] = []
            for batch_type, records in _record_lists(conn, admin, spec, rng, start):
                pending.extend(records)
                types.extend([batch_type] * len(records))
                if len(pending) >= ARROW_BATCH_ROWS:
                    last = pending[-1].offset
                    yield _arrow(pa, pc, schema, rng, pending, types, spec.include_headers)
                    pending, types = [], []
            if pending:
                last = pending[-1].offset
                yield _arrow(pa, pc, schema, rng, pending, types, spec.include_headers)
            if last < rng.end - 1 and spec.fail_on_data_loss:
                _check_end(admin, rng, last)
        finally:
            conn.close()


def _arrow(pa: Any, pc: Any, schema: Any, rng: OffsetRange, records: list[Any], types: list[int],
           include_headers: bool) -> Any:
    """One Arrow batch from decoded records: the columns are transposed in C (``zip``), not record by record."""
    offsets, timestamps, keys, values, headers = zip(*records, strict=True)
    n = len(offsets)
    columns = [
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.array([rng.topic] * n, pa.string()),
        pa.array([rng.partition] * n, pa.int32()),
        pa.array(offsets, pa.int64()),
        pc.multiply(pa.array(timestamps, pa.int64()), 1000).cast(schema.field("timestamp").type),
        pa.array(types, pa.int32()),
    ]
    if include_headers:
        columns.append(pa.array([[{"key": k, "value": v} for k, v in h] for h in headers],
                                schema.field("headers").type))  # fmt: skip
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _leader(admin: Admin, rng: OffsetRange) -> tuple[str, int]:
    desc = admin.describe_topics([rng.topic])[rng.topic]
    parts = {p.partition: p for p in desc.partitions}
    info = parts.get(rng.partition)
    if info is None:
        raise DataLossError(f"partition {rng.topic}-{rng.partition} no longer exists")
    brokers = {b.node_id: b for b in admin.describe_cluster().brokers}
    broker = brokers.get(info.leader)
    if broker is None:
        conn = admin.connection
        return conn.host, conn.port
    return broker.host, broker.port


def _start(admin: Admin, spec: ReadSpec, rng: OffsetRange) -> int:
    """Where to begin: the range start, unless retention deleted it (an error under failOnDataLoss)."""
    log_start = admin.list_offsets({(rng.topic, rng.partition): "earliest"})[(rng.topic, rng.partition)].offset
    if log_start <= rng.start:
        return rng.start
    lost = (
        f"{rng.topic}-{rng.partition} starts at offset {log_start} now, but offsets {rng.start} to "
        f"{min(log_start, rng.end) - 1} were to be read"
    )
    if spec.fail_on_data_loss:
        raise DataLossError(lost)
    log.warning("%s; skipping them (failOnDataLoss=false)", lost)
    return min(log_start, rng.end)


def _record_lists(
    conn: BlockingConnection, admin: Admin, spec: ReadSpec, rng: OffsetRange, start: int
) -> Iterator[tuple[int, list[Any]]]:
    """``(timestamp type, records)`` per Kafka batch, cut to ``[start, rng.end)``."""
    if start >= rng.end:
        return
    try:
        yield from _cut(conn, rng, start)
    except KafkaError as e:
        if e.code != ErrorCode.OFFSET_OUT_OF_RANGE:
            raise
        # retention moved the log start past our position while we read
        if spec.fail_on_data_loss:
            raise DataLossError(f"{rng.topic}-{rng.partition}: {e}") from e
        yield from _cut(conn, rng, _start(admin, spec, rng))


def _cut(conn: BlockingConnection, rng: OffsetRange, start: int) -> Iterator[tuple[int, list[Any]]]:
    for _, batch, position in fetch_batches(conn, rng.topic, {rng.partition: start}, stop_at_end=True):
        records = batch.records()
        lo = bisect_left(records, position, key=_offset) if records and records[0].offset < position else 0
        hi = bisect_left(records, rng.end, key=_offset) if records and records[-1].offset >= rng.end else len(records)
        if lo < hi:
            yield batch.timestamp_type, records[lo:hi] if lo or hi < len(records) else records
        if batch.next_offset >= rng.end:
            return


def _offset(record: Any) -> int:
    return int(record.offset)


def _check_end(admin: Admin, rng: OffsetRange, last: int) -> None:
    """The partition ended before the range did: records the plan counted on are gone (a topic deleted and
    created again, or a log truncated). Gaps inside the range are normal (compaction, transaction markers)."""
    end = admin.list_offsets({(rng.topic, rng.partition): "latest"})[(rng.topic, rng.partition)].offset
    if end < rng.end:
        raise DataLossError(
            f"{rng.topic}-{rng.partition} ends at offset {end} now, but offsets up to {rng.end - 1} were to be read"
        )
