"""Fetch one request at a time over a `NodeChannel` of the network core: what the Spark executor still uses
until it reads through the Consumer's fetch path (issue 14); then this module goes.

The CLI, the Admin, the region control plane and the tests no longer use it (they produce with our Producer and
read with our Consumer). Each helper talks to the broker at the other end of ``conn``, which must lead the
partitions involved (always true for a one-node cluster). Keyed records go where the Java client puts them
(murmur2 of the key); unkeyed ones stick to one partition until its batch is full, then move on.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from groupstream.client.errors import KafkaError
from groupstream.client.net.sync_client import NodeChannel
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name
from groupstream.protocol.records import (
    RecordBatch,
    iter_record_batches,
)

DEFAULT_PARTITION_FETCH_BYTES = 1024 * 1024  # Kafka's max.partition.fetch.bytes
DEFAULT_FETCH_MAX_BYTES = 50 * 1024 * 1024  # Kafka's fetch.max.bytes
# Fetch v13 names topics by id; the helpers name them, which every broker still serves.
_MAX_FETCH_VERSION = 12
_FETCH = by_name("Fetch")

Header = tuple[str, bytes | None]


class ConsumedRecord(NamedTuple):
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
    timestamp_type: int = 0  # 0 CreateTime, 1 LogAppendTime


def fetch_range(
    conn: NodeChannel,
    topic: str,
    partition: int,
    start_offset: int,
    max_records: int | None = None,
    stop_at_end: bool = True,
    *,
    max_wait_ms: int = 500,
) -> Iterator[ConsumedRecord]:
    """Records of one partition from ``start_offset``; see `fetch_partitions`."""
    return fetch_partitions(conn, topic, {partition: start_offset}, max_records, stop_at_end, max_wait_ms=max_wait_ms)


def fetch_partitions(
    conn: NodeChannel,
    topic: str,
    starts: Mapping[int, int],
    max_records: int | None = None,
    stop_at_end: bool = True,
    *,
    max_wait_ms: int = 500,
    partition_max_bytes: int = DEFAULT_PARTITION_FETCH_BYTES,
) -> Iterator[ConsumedRecord]:
    """Records from each ``partition: offset`` in ``starts``, in offset order within a partition.

    With ``stop_at_end`` a partition is done once its position reaches the high watermark the broker last
    reported; otherwise fetches long-poll (``max_wait_ms``) for new records forever. Control batches
    (transaction markers) are skipped. Stops after ``max_records`` if given.
    """
    if max_records is not None and max_records <= 0:
        return
    yielded = 0
    for p, batch, position in fetch_batches(conn, topic, starts, stop_at_end, max_wait_ms=max_wait_ms,
                                            partition_max_bytes=partition_max_bytes):  # fmt: skip
        ts_type = batch.timestamp_type
        for r in batch.records():
            if r.offset < position:
                continue
            yield ConsumedRecord(p, r.offset, r.timestamp, r.key, r.value, r.headers, ts_type)
            yielded += 1
            if max_records is not None and yielded >= max_records:
                return


def fetch_batches(
    conn: NodeChannel,
    topic: str,
    starts: Mapping[int, int],
    stop_at_end: bool = True,
    *,
    max_wait_ms: int = 500,
    partition_max_bytes: int = DEFAULT_PARTITION_FETCH_BYTES,
) -> Iterator[tuple[int, RecordBatch, int]]:
    """``(partition, batch, position)`` for every data batch at or past each partition's position, in
    offset order within a partition; records of a batch below ``position`` (the batch the start offset falls
    in) are the caller's to skip. For callers that take records a batch at a time (columnar readers)."""
    version = conn.version_for("Fetch", _MAX_FETCH_VERSION)
    positions = dict(starts)
    limits = dict.fromkeys(positions, partition_max_bytes)
    R: Any = _FETCH.Request
    T = R.FetchTopic
    while positions:
        order = sorted(positions)
        body = R(
            replica_id=-1,
            # Data is waiting whenever we fetch below the high watermark, so the wait costs nothing; a zero
            # wait is not used because Tansu 0.6.0 never answers a fetch with max.wait.ms 0.
            max_wait_ms=min(max_wait_ms, 100) if stop_at_end else max_wait_ms,
            min_bytes=1,
            max_bytes=DEFAULT_FETCH_MAX_BYTES,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[T(topic=topic, partitions=[
                T.FetchPartition(partition=p, fetch_offset=positions[p], partition_max_bytes=limits[p])
                for p in order
            ])],
            forgotten_topics_data=[],
        )
        resp = conn.request("Fetch", body, version, timeout_ms=conn.client.config.request_timeout_ms + max_wait_ms)
        if version >= 7 and resp.error_code != ErrorCode.NONE:
            raise KafkaError(resp.error_code, resource=topic)
        for tr in resp.responses:
            for pd in tr.partitions:
                p = pd.partition_index
                if p not in positions:
                    continue
                if pd.error_code != ErrorCode.NONE:
                    raise _fetch_error(topic, p, positions[p], pd)
                position = positions[p]
                progressed = False
                for batch in iter_record_batches(pd.records or b""):
                    if batch.next_offset <= position:
                        continue
                    progressed = True
                    if not batch.is_control:
                        yield p, batch, position
                    position = positions[p] = batch.next_offset
                if progressed:
                    limits[p] = partition_max_bytes
                elif position < pd.high_watermark:
                    # a batch larger than the limit came back cut short: ask for more next time
                    limits[p] = min(limits[p] * 2, DEFAULT_FETCH_MAX_BYTES)
                if stop_at_end and position >= pd.high_watermark:
                    del positions[p]


def _fetch_error(topic: str, partition: int, offset: int, pd: Any) -> KafkaError:
    code = pd.error_code
    where = f"{topic}[{partition}]"
    if code == ErrorCode.OFFSET_OUT_OF_RANGE:
        return KafkaError(code, f"offset {offset} is outside the log (start {pd.log_start_offset}, "
                                f"end {pd.high_watermark})", resource=where)
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return KafkaError(code, f"topic {topic!r} or its partition {partition} does not exist", resource=where)
    return KafkaError(code, resource=where)
