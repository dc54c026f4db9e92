"""What a Spark task runs: read one offset range of one partition and hand it to Spark as Arrow record batches.

A task reads exactly ``[start, end)`` with our Consumer in assign mode, so a task that Spark retries reads the
same records again and a restarted query re-reads nothing it committed (seed 003's offline load: one task per
topic-partition range, restartable without duplicates). Records go from the fetched batches into Arrow columns
as ``poll_arrow`` builds them (the C decoder appends to Arrow buffers), with no Python object per record.
Consumers are kept between the tasks a Python worker runs (`CONSUMERS`), so a task starts on open connections
and known leaders: its own cost is one Metadata request before the read and one after, where the topic's id is
checked.

A range carries the id of the topic it was planned in. A task that finds the topic deleted, or deleted and
created again, since then fails under failOnDataLoss; otherwise a streaming task reads nothing (the next
micro-batch's plan sees the change, warns once and reads the new topic from its earliest offsets), and a batch
task warns and reads its partition of the new topic from its earliest offset to its end instead.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Generator, Hashable, Iterator
from dataclasses import replace
from typing import Any, cast

import pyarrow.compute as pc

from groupstream.assignment.types import TopicPartition
from groupstream.client.consumer.consumer import Consumer
from groupstream.client.consumer.errors import OffsetOutOfRangeError
from groupstream.client.errors import KafkaError
from groupstream.client.metadata import TopicDescription
from groupstream.client.net.security import SECURITY_PROPERTIES
from groupstream.protocol.error_codes import ErrorCode
from groupstream.spark.client_cache import ClientCache, close_at_exit
from groupstream.spark.cluster import DataLossError, topic_id
from groupstream.spark.planning import OffsetRange, ReadSpec

__all__ = ["ARROW_BATCH_ROWS", "CONSUMERS", "ReadSpec", "arrow_schema", "read_range"]

ARROW_BATCH_ROWS = 16_384  # at most this many rows per Arrow batch (max.poll.records): Spark pays per batch
_QUIET_S = 1.0  # a poll this long without records: look at the partition (at its end? deleted?)
_TASK_CONFIG: dict[str, Any] = {
    "client.id": "groupstream-spark",
    "auto.offset.reset": "none",  # a position outside the log is data loss to report, not a jump to make
    "enable.auto.commit": False,
    "max.poll.records": ARROW_BATCH_ROWS,
    # a task reads a range that the plan saw in the log, so the broker has its records at once; past them
    # there is nothing to wait for, and a long wait would hold up the next task's first fetch on that broker
    "fetch.max.wait.ms": 10,
}
_PASSED_ON = frozenset({
    "client.id", "request.timeout.ms", "reconnect.backoff.ms", "reconnect.backoff.max.ms",
    "socket.connection.setup.timeout.ms", "metadata.max.age.ms", "retry.backoff.ms", "retry.backoff.max.ms",
    "receive.message.max.bytes", "fetch.min.bytes", "fetch.max.bytes", "fetch.max.wait.ms",
    "max.partition.fetch.bytes", "check.crcs", "default.api.timeout.ms", *SECURITY_PROPERTIES,
})  # fmt: skip
"""The ``kafka.`` options a task's consumer takes (the security ones among them); the rest (group, commits,
resets, deserializers) are the source's business, as in Spark's Kafka source."""

log = logging.getLogger("groupstream.spark")


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


def _consumer(key: Hashable) -> Consumer:
    bootstrap, client = cast(tuple[str, tuple[tuple[str, str], ...]], key)
    return Consumer({"bootstrap.servers": bootstrap, **_TASK_CONFIG, **dict(client)})


def _close(consumer: Consumer) -> None:
    consumer.close(5.0)


def _unassign(consumer: Consumer) -> None:
    """An idle consumer fetches nothing (and drops what it fetched past its task's range)."""
    consumer.assign([])


CONSUMERS: ClientCache[Consumer] = close_at_exit(ClientCache(_consumer, _close))
"""The consumers of this Python worker's tasks, by bootstrap servers and client properties."""


def _key(spec: ReadSpec) -> Hashable:
    return spec.bootstrap_servers, tuple(sorted((k, v) for k, v in spec.client_config if k in _PASSED_ON))


def read_range(spec: ReadSpec, rng: OffsetRange) -> Generator[Any, None, None]:
    """Arrow record batches of ``rng``'s records, in offset order, of at most `ARROW_BATCH_ROWS` rows each."""
    with CONSUMERS.lend(_key(spec), _unassign) as consumer:
        yield from _read(consumer, spec, rng)


def _read(consumer: Consumer, spec: ReadSpec, rng: OffsetRange) -> Iterator[Any]:
    timeout_s = spec.poll_timeout_ms / 1000
    checked = _check_topic(consumer, spec, rng, _describe(consumer, rng.topic, timeout_s))
    if checked is None or checked.start >= checked.end:
        return
    rng = checked
    tp = TopicPartition(rng.topic, rng.partition)
    consumer.assign([tp], offsets={tp: rng.start})
    columns = list(range(len(arrow_schema(spec.include_headers))))
    position = rng.start
    progress_at = time.monotonic()
    while position < rng.end:
        try:
            batch = consumer.poll_arrow(_QUIET_S)
        except OffsetOutOfRangeError as e:
            if e.resource != str(tp):
                continue  # a late answer for an earlier task's partition
            moved = _start(consumer, spec, rng, consumer.position(tp), timeout_s)
            if moved is not None:  # retention deleted what was next
                position = moved
                consumer.seek(tp, position)
            continue
        if batch.num_rows:
            progress_at = time.monotonic()
            if batch.column(4)[-1].as_py() >= rng.end:  # fetched past the range: cut it there
                batch = batch.slice(0, pc.sum(pc.less(batch.column(4), rng.end)).as_py() or 0)
            if batch.num_rows:
                yield batch.select(columns)
            position = consumer.position(tp)
            continue
        position = consumer.position(tp)
        if position >= rng.end or not _quiet(consumer, spec, rng, position, progress_at, timeout_s):
            break
    if rng.topic_id is not None:
        _check_still_the_topic(consumer, spec, rng, timeout_s)


def _quiet(consumer: Consumer, spec: ReadSpec, rng: OffsetRange, position: int, progress_at: float,
           timeout_s: float) -> bool:  # fmt: skip
    """No records came for a while at ``position``: whether to keep waiting. Not when the topic was deleted, or
    the partition now ends at or before ``position`` (it was truncated, or deleted and created again: the plan
    counted on records that are gone); a partition that has the records but does not serve them fails the
    task after ``kafkaConsumer.pollTimeoutMs``."""
    desc = _describe(consumer, rng.topic, timeout_s)
    if desc is None or rng.partition >= desc.partition_count:
        _lost(spec, f"{_planned(rng)}: topic {rng.topic} was deleted while this task read it", "goes on")
        return False
    tp = TopicPartition(rng.topic, rng.partition)
    end = consumer.end_offsets([tp], timeout_s)[tp]
    if end <= position:
        _lost(spec, f"Partition {rng.topic}-{rng.partition}'s offset was changed from {rng.end} to {end}, some data "
              "may have been missed", "goes on")  # fmt: skip
        return False
    if time.monotonic() - progress_at > timeout_s:
        raise TimeoutError(
            f"{rng.topic}-{rng.partition}: no record at offset {position} came within kafkaConsumer.pollTimeoutMs "
            f"({spec.poll_timeout_ms} ms), though the partition ends at {end}"
        )
    return True


def _describe(consumer: Consumer, topic: str, timeout_s: float) -> TopicDescription | None:
    desc = consumer.describe_topics([topic], timeout_s).topics.get(topic)
    if desc is None or desc.error_code in _GONE:
        return None
    if desc.error_code != ErrorCode.NONE:
        raise KafkaError(desc.error_code, resource=topic)
    return desc


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


def _check_topic(consumer: Consumer, spec: ReadSpec, rng: OffsetRange, desc: TopicDescription | None) -> OffsetRange | None:
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
    tp = TopicPartition(t, p)
    timeout_s = spec.poll_timeout_ms / 1000
    first, end = consumer.beginning_offsets([tp], timeout_s)[tp], consumer.end_offsets([tp], timeout_s)[tp]
    return replace(rng, start=first, end=end, topic_id=now_id)


def _check_still_the_topic(consumer: Consumer, spec: ReadSpec, rng: OffsetRange, timeout_s: float) -> None:
    """After the read: a topic recreated while the task read it may have answered some fetches."""
    desc = _describe(consumer, rng.topic, timeout_s)
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


def _start(consumer: Consumer, spec: ReadSpec, rng: OffsetRange, position: int, timeout_s: float) -> int | None:
    """A fetch found the position outside the log: where to go on from (the log's start, unless that skips
    records the range holds: an error under failOnDataLoss), or None where ``position`` is in the log (the
    error was about a fetch from before a seek)."""
    tp = TopicPartition(rng.topic, rng.partition)
    log_start = consumer.beginning_offsets([tp], timeout_s)[tp]
    if log_start <= position:
        end = consumer.end_offsets([tp], timeout_s)[tp]
        if position <= end:
            return None
        # past the log's end: the partition was truncated, or recreated, under the read
        _lost(spec, f"Partition {rng.topic}-{rng.partition}'s offset was changed from {rng.end} to {end}, some data "
              "may have been missed", "goes on")  # fmt: skip
        return rng.end
    lost = (
        f"{rng.topic}-{rng.partition} starts at offset {log_start} now, but offsets {position} to "
        f"{min(log_start, rng.end) - 1} were to be read"
    )
    if spec.fail_on_data_loss:
        raise DataLossError(lost)
    log.warning("%s; skipping them (failOnDataLoss=false)", lost)
    return min(log_start, rng.end)
