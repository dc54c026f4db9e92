"""Produce and fetch one request at a time over a `NodeChannel` of the network core: what the Spark executor and
a few tests still use until they move to the Producer and the Consumer's fetch path (issue 14); then it goes.

The CLI, the Admin and the region control plane no longer use it. Each helper talks to the broker at the other
end of ``conn``, which must lead the partitions involved (always true for a one-node cluster). Keyed records go where the Java client puts them
(murmur2 of the key); unkeyed ones stick to one partition until its batch is full, then move on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from groupstream.client.errors import KafkaError
from groupstream.client.metadata import describe_one
from groupstream.client.net.sync_client import NodeChannel
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name
from groupstream.protocol.partitioner import default_partition
from groupstream.protocol.records import (
    BatchBuilder,
    Codec,
    RecordBatch,
    codec_from_name,
    iter_record_batches,
)

DEFAULT_BATCH_SIZE = 16 * 1024  # Kafka's batch.size
DEFAULT_REQUEST_BYTES = 1024 * 1024  # Kafka's max.request.size
DEFAULT_PARTITION_FETCH_BYTES = 1024 * 1024  # Kafka's max.partition.fetch.bytes
DEFAULT_FETCH_MAX_BYTES = 50 * 1024 * 1024  # Kafka's fetch.max.bytes
# Produce v13 and Fetch v13 name topics by id; the helpers name them, which every broker still serves.
_MAX_PRODUCE_VERSION = 12
_MAX_FETCH_VERSION = 12
_PRODUCE = by_name("Produce")
_FETCH = by_name("Fetch")

Header = tuple[str, bytes | None]


@dataclass(frozen=True)
class ProducerRecord:
    value: bytes | None
    key: bytes | None = None
    timestamp_ms: int | None = None
    headers: tuple[Header, ...] = ()
    partition: int | None = None


OutRecord = ProducerRecord | tuple[bytes | None, bytes | None] | bytes


class ConsumedRecord(NamedTuple):
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
    timestamp_type: int = 0  # 0 CreateTime, 1 LogAppendTime


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

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions.values())

    @property
    def bytes(self) -> int:
        return sum(p.bytes for p in self.partitions.values())


def _as_record(r: OutRecord) -> ProducerRecord:
    if isinstance(r, ProducerRecord):
        return r
    if isinstance(r, bytes | bytearray):
        return ProducerRecord(bytes(r))
    key, value = r
    return ProducerRecord(value, key)


def produce(
    conn: NodeChannel,
    topic: str,
    records: Iterable[OutRecord],
    partition: int | None = None,
    acks: int = -1,
    compression: str | int = "none",
    batch_size: int = DEFAULT_BATCH_SIZE,
    *,
    max_request_bytes: int = DEFAULT_REQUEST_BYTES,
    allow_auto_create: bool = False,
    on_progress: Callable[[int], None] | None = None,
    clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
) -> ProduceResult:
    """Produce ``records`` (ProducerRecord, ``(key, value)`` or a bare value) and wait for the acks.

    ``partition`` forces every record there (a record's own ``partition`` wins over it). ``on_progress`` is
    called with the number of records each acknowledged request carried. Raises KafkaError for an unknown
    topic or partition and for any partition the broker refused.
    """
    if acks not in (-1, 0, 1):
        raise ValueError(f"acks must be -1 (all), 0 or 1, got {acks}")
    if batch_size <= 0:
        raise ValueError(f"batch size must be positive, got {batch_size}")
    codec = codec_from_name(compression) if isinstance(compression, str) else Codec(compression)
    desc = describe_one(conn, topic, allow_auto_create)
    n = desc.partition_count
    version = conn.version_for("Produce", _MAX_PRODUCE_VERSION)
    result = ProduceResult(topic)
    builders: dict[int, BatchBuilder] = {}
    ready: dict[int, list[bytes]] = {}
    ready_counts: dict[int, int] = {}
    ready_bytes = 0
    sticky = 0

    def check_partition(p: int) -> int:
        if not 0 <= p < n:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"topic {topic!r} has {n} partition{'s' if n != 1 else ''}; there is no partition {p}",
                             resource=topic)
        return p

    if partition is not None:
        check_partition(partition)

    def seal(p: int) -> None:
        nonlocal ready_bytes
        b = builders.pop(p)
        data = b.build()
        ready.setdefault(p, []).append(data)
        ready_counts[p] = ready_counts.get(p, 0) + len(b)
        ready_bytes += len(data)

    def send() -> None:
        nonlocal ready_bytes
        if not ready:
            return
        _send_produce(conn, version, topic, acks, ready, ready_counts, result)
        if on_progress is not None:
            on_progress(sum(ready_counts.values()))
        ready.clear()
        ready_counts.clear()
        ready_bytes = 0

    for raw in records:
        rec = _as_record(raw)
        if rec.partition is not None:
            p = check_partition(rec.partition)
        elif partition is not None:
            p = partition
        elif rec.key is not None:
            p = default_partition(rec.key, n)
        else:
            p = sticky
        b = builders.get(p)
        if b is None:
            b = builders[p] = BatchBuilder(compression=codec)
        ts = rec.timestamp_ms if rec.timestamp_ms is not None else clock_ms()
        b.append(ts, rec.key, rec.value, rec.headers)
        if b.uncompressed_size >= batch_size:
            seal(p)
            if p == sticky:
                sticky = (sticky + 1) % n
            if ready_bytes >= max_request_bytes:
                send()
    for p in sorted(builders):
        seal(p)
    send()
    return result


def _send_produce(
    conn: NodeChannel,
    version: int,
    topic: str,
    acks: int,
    ready: Mapping[int, list[bytes]],
    counts: Mapping[int, int],
    result: ProduceResult,
) -> None:
    R: Any = _PRODUCE.Request
    T = R.TopicProduceData
    parts = [T.PartitionProduceData(index=p, records=b"".join(batches)) for p, batches in sorted(ready.items())]
    body = R(transactional_id=None, acks=acks, timeout_ms=conn.client.config.request_timeout_ms,
             topic_data=[T(name=topic, partition_data=parts)])
    resp = conn.request("Produce", body, version, expect_response=acks != 0)
    offsets: dict[int, int] = {}
    if resp is not None:
        for tr in resp.responses:
            for pr in tr.partition_responses:
                if pr.error_code != ErrorCode.NONE:
                    raise KafkaError(pr.error_code, pr.error_message if version >= 8 else None,
                                     resource=f"{topic}[{pr.index}]")
                offsets[pr.index] = pr.base_offset
    for p, batches in ready.items():
        stats = result.partitions.setdefault(p, PartitionProduced(p))
        count = counts[p]
        stats.records += count
        stats.bytes += sum(len(b) for b in batches)
        base = offsets.get(p, -1)
        if base >= 0:
            if stats.first_offset < 0:
                stats.first_offset = base
            stats.last_offset = base + count - 1


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
