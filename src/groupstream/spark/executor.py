"""What a Spark task runs: read one offset range of one partition and hand it to Spark as Arrow record batches.

A task reads exactly ``[start, end)`` from the partition leader with a plain assign-mode fetch loop, so a task
that Spark retries reads the same records again and a restarted query re-reads nothing it committed (seed
003's offline load: one task per topic-partition range, restartable without duplicates). Records come out
column by column, a batch at a time, with no per-record Row objects.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from groupstream.client.admin import Admin
from groupstream.client.errors import KafkaError
from groupstream.client.lite import fetch_range
from groupstream.client.net.blocking import BlockingConnection
from groupstream.protocol.error_codes import ErrorCode
from groupstream.spark.cluster import DataLossError, admin_config
from groupstream.spark.planning import OffsetRange

__all__ = ["ARROW_BATCH_ROWS", "ReadSpec", "arrow_schema", "read_range"]

ARROW_BATCH_ROWS = 8192
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
    """Arrow record batches of ``rng``'s records, in offset order."""
    import pyarrow as pa

    schema = arrow_schema(spec.include_headers)
    conf = admin_config(spec.bootstrap_servers, dict(spec.client_config))
    with Admin(conf) as admin:
        leader = _leader(admin, rng)
        conn = BlockingConnection(leader[0], leader[1], client_id=conf["client.id"],
                                  timeout_s=spec.poll_timeout_ms / 1000)
        try:
            start = _start(admin, spec, rng)
            cols: dict[str, list[Any]] = {f.name: [] for f in schema}
            last = start - 1
            for rec in _records(conn, admin, spec, rng, start):
                cols["key"].append(rec.key)
                cols["value"].append(rec.value)
                cols["offset"].append(rec.offset)
                cols["timestamp"].append(rec.timestamp * 1000)
                cols["timestampType"].append(rec.timestamp_type)
                if spec.include_headers:
                    cols["headers"].append([{"key": k, "value": v} for k, v in rec.headers])
                last = rec.offset
                if len(cols["offset"]) >= ARROW_BATCH_ROWS:
                    yield _batch(pa, schema, rng, cols)
            if cols["offset"]:
                yield _batch(pa, schema, rng, cols)
            if last < rng.end - 1 and spec.fail_on_data_loss:
                _check_end(admin, rng, last)
        finally:
            conn.close()


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


def _records(conn: BlockingConnection, admin: Admin, spec: ReadSpec, rng: OffsetRange, start: int) -> Iterator[Any]:
    if start >= rng.end:
        return
    try:
        for rec in fetch_range(conn, rng.topic, rng.partition, start, stop_at_end=True):
            if rec.offset >= rng.end:
                return
            yield rec
    except KafkaError as e:
        if e.code != ErrorCode.OFFSET_OUT_OF_RANGE:
            raise
        # retention moved the log start past our position while we read
        if spec.fail_on_data_loss:
            raise DataLossError(f"{rng.topic}-{rng.partition}: {e}") from e
        begin = _start(admin, spec, rng)
        for rec in fetch_range(conn, rng.topic, rng.partition, begin, stop_at_end=True):
            if rec.offset >= rng.end:
                return
            yield rec


def _check_end(admin: Admin, rng: OffsetRange, last: int) -> None:
    """The partition ended before the range did: records the plan counted on are gone (a topic deleted and
    created again, or a log truncated). Gaps inside the range are normal (compaction, transaction markers)."""
    end = admin.list_offsets({(rng.topic, rng.partition): "latest"})[(rng.topic, rng.partition)].offset
    if end < rng.end:
        raise DataLossError(
            f"{rng.topic}-{rng.partition} ends at offset {end} now, but offsets up to {rng.end - 1} were to be read"
        )


def _batch(pa: Any, schema: Any, rng: OffsetRange, cols: dict[str, list[Any]]) -> Any:
    n = len(cols["offset"])
    arrays = []
    for f in schema:
        if f.name == "topic":
            arrays.append(pa.array([rng.topic] * n, pa.string()))
        elif f.name == "partition":
            arrays.append(pa.array([rng.partition] * n, pa.int32()))
        else:
            arrays.append(pa.array(cols[f.name], f.type))
        if f.name in cols:
            cols[f.name] = []
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
