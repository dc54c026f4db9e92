"""What a Spark task runs: read one offset range of one partition and hand it to Spark as Arrow record batches.

A task reads exactly ``[start, end)`` from the partition leader with a plain assign-mode fetch loop, so a task
that Spark retries reads the same records again and a restarted query re-reads nothing it committed (seed
003's offline load: one task per topic-partition range, restartable without duplicates). Records come out
column by column, a batch at a time, with no per-record Row objects.

A range carries the id of the topic it was planned in. A task that finds the topic deleted, or deleted and
created again, since then fails under failOnDataLoss; otherwise a streaming task reads nothing (the next
micro-batch's plan sees the change, warns once and reads the new topic from its earliest offsets), and a batch
task warns and reads its partition of the new topic from its earliest offset to its end instead.
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from groupstream.client.admin import Admin
from groupstream.client.errors import KafkaError
from groupstream.client.lite import fetch_batches
from groupstream.client.metadata import TopicDescription
from groupstream.client.net.blocking import BlockingConnection
from groupstream.protocol.error_codes import ErrorCode
from groupstream.spark.cluster import DataLossError, admin_config, topic_id
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
    streaming: bool = False  # a micro-batch's task (its plan deals with lost partitions) or a batch read's


_GONE = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID)
_GOES_ON = "failOnDataLoss=false, so"


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
        desc = _describe(admin, rng.topic)
        checked = _check_topic(admin, spec, rng, desc)
        if checked is None:
            return
        rng = checked
        assert desc is not None
        host, port = _leader(admin, rng, desc)
        conn = BlockingConnection(host, port, client_id=conf["client.id"], timeout_s=spec.poll_timeout_ms / 1000)
        try:
            start = _start(admin, spec, rng)
            last = start - 1
            pending: list[Any] = []
            types: list[int] = []
            try:
                for batch_type, records in _record_lists(conn, admin, spec, rng, start):
                    pending.extend(records)
                    types.extend([batch_type] * len(records))
                    if len(pending) >= ARROW_BATCH_ROWS:
                        last = pending[-1].offset
                        yield _arrow(pa, pc, schema, rng, pending, types, spec.include_headers)
                        pending, types = [], []
            except KafkaError as e:
                if e.code not in _GONE:
                    raise
                _lost(spec, f"{_planned(rng)}: topic {rng.topic} was deleted while this task read it", "goes on")
                return
            if pending:
                last = pending[-1].offset
                yield _arrow(pa, pc, schema, rng, pending, types, spec.include_headers)
            if last < rng.end - 1:
                _check_end(admin, spec, rng, last)
            _check_still_the_topic(admin, spec, rng)
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


def _describe(admin: Admin, topic: str) -> TopicDescription | None:
    try:
        return admin.describe_topics([topic])[topic]
    except KafkaError as e:
        if e.code in _GONE:
            return None
        raise


def _planned(rng: OffsetRange) -> str:
    return (
        f"Partition {rng.topic}-{rng.partition}'s offsets {rng.start} to {rng.end - 1} are gone, some data may have "
        "been missed"
    )


def _lost(spec: ReadSpec, what: str, how: str) -> None:
    """Records this task was to read are gone: an error under failOnDataLoss; else a streaming task leaves it
    to the next micro-batch's plan, which warns once for the whole topic, and a batch task warns."""
    if spec.fail_on_data_loss:
        raise DataLossError(what)
    if spec.streaming:
        log.info("%s; the next micro-batch's plan deals with it", what)
    else:
        log.warning("%s; %s the read %s", what, _GOES_ON, how)


def _check_topic(admin: Admin, spec: ReadSpec, rng: OffsetRange, desc: TopicDescription | None) -> OffsetRange | None:
    """``rng`` when its partition is still in the topic it was planned in; else what to read instead (a batch
    task's partition of a recreated topic, from its earliest offset to its end), or None: nothing."""
    t, p = rng.topic, rng.partition
    now_id = None if desc is None else topic_id(desc)
    if desc is None or p >= desc.partition_count:
        cause = f"topic {t} was deleted" if desc is None else f"topic {t} has no partition {p} now"
        _lost(spec, f"{_planned(rng)}: {cause} after this read was planned", "goes on without it")
        return None
    if rng.topic_id is None or now_id is None or now_id == rng.topic_id:
        return rng
    what = f"{_planned(rng)}: topic {t} was deleted and created again (topic id {rng.topic_id} is now {now_id}) " \
           "after this read was planned"  # fmt: skip
    if spec.streaming or spec.fail_on_data_loss:
        _lost(spec, what, "")
        return None
    if not rng.first:
        log.info("%s; the first task of partition %s-%d reads it in the new topic", what, t, p)
        return None
    log.warning("%s; %s the read takes partition %s-%d of the new topic from its earliest offset instead", what,
                _GOES_ON, t, p)  # fmt: skip
    ends = admin.list_offsets({(t, p): "earliest"}), admin.list_offsets({(t, p): "latest"})
    return replace(rng, start=ends[0][(t, p)].offset, end=ends[1][(t, p)].offset, topic_id=now_id)


def _check_still_the_topic(admin: Admin, spec: ReadSpec, rng: OffsetRange) -> None:
    """After the read: a topic recreated while the task read it may have answered some fetches."""
    if rng.topic_id is None:
        return
    desc = _describe(admin, rng.topic)
    now_id = None if desc is None else topic_id(desc)
    if now_id is not None and now_id != rng.topic_id:
        what = (
            f"Topic {rng.topic} was deleted and created again (topic id {rng.topic_id} is now {now_id}) while "
            f"partition {rng.topic}-{rng.partition}'s offsets {rng.start} to {rng.end - 1} were read: some records "
            "read may be of the new topic, some data may have been missed"
        )
        if spec.fail_on_data_loss:
            raise DataLossError(what)
        log.warning("%s; %s the read goes on", what, _GOES_ON)


def _leader(admin: Admin, rng: OffsetRange, desc: TopicDescription) -> tuple[str, int]:
    parts = {p.partition: p for p in desc.partitions}
    info = parts[rng.partition]
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


def _check_end(admin: Admin, spec: ReadSpec, rng: OffsetRange, last: int) -> None:
    """The partition ended before the range did: records the plan counted on are gone (a topic deleted and
    created again, or a log truncated). Gaps inside the range are normal (compaction, transaction markers)."""
    end = admin.list_offsets({(rng.topic, rng.partition): "latest"})[(rng.topic, rng.partition)].offset
    if end < rng.end:
        _lost(spec, f"Partition {rng.topic}-{rng.partition}'s offset was changed from {rng.end} to {end}, some data "
              "may have been missed", "goes on")  # fmt: skip
