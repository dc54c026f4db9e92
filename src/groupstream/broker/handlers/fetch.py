"""Fetch: whole batches as byte ranges of the segment, long-polled in the purgatory until ``min_bytes`` arrive.

Fetch sessions (KIP-227) are declined by answering session id 0, so every fetch is a full fetch; librdkafka and
aiokafka never ask for one and the Java client falls back to full fetches.

A fetch at offsets whose bytes on disk are damaged (`CorruptRangeError`) is answered CORRUPT_MESSAGE for that
partition alone, as Kafka answers a batch that fails its checks: the Java consumer raises a KafkaException,
librdkafka reports a consumer error, and either can seek past the range. The protocol carries no message for a
partition error, so the broker logs one WARNING per range naming the partition, the offsets and the next
readable offset, which is where the consumer must seek to go on.

On a PLAINTEXT listener a partition's records of at least ``ZERO_COPY_FROM`` bytes are answered as a range of
the segment file (`groupstream.storage.file_range.FileRange`) that the connection's writer sends with
sendfile, as Kafka does: the bytes never pass through Python. The range's batch boundaries come from the offset
index and the batches' headers (`Segment.whole_span`), so the records are the same whole batches a copying read
returns. TLS and SASL listeners read the bytes, as before (TLS has to encrypt them; SASL listeners are kept on
the path their tests cover).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import TYPE_CHECKING, Any

from groupstream.broker.handlers import handles
from groupstream.protocol.bodies import FETCH
from groupstream.protocol.connection import Request
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.topic_partition import TopicPartition
from groupstream.security.acl import Operation, ResourceType
from groupstream.security.config import SecurityProtocol
from groupstream.storage.errors import CorruptRangeError, LogOfflineError, OffsetOutOfRange
from groupstream.storage.file_range import FileRange
from groupstream.storage.log import PartitionLog

if TYPE_CHECKING:
    from groupstream.broker.node import Broker

log = logging.getLogger("groupstream.broker.fetch")

READ_COMMITTED = 1
ZERO_COPY_FROM = 32 * 1024
"""Records at least this large are sent from the file; below it the copy costs less than the descriptor
duplicate and the extra send call a range takes."""

# The damaged ranges already reported, per partition log (a reopened log starts over).
_warned: weakref.WeakKeyDictionary[PartitionLog, set[tuple[int, int]]] = weakref.WeakKeyDictionary()


def _warn_once(plog: PartitionLog, exc: CorruptRangeError) -> None:
    seen = _warned.setdefault(plog, set())
    key = (exc.first_offset, exc.last_offset)
    if key not in seen:
        seen.add(key)
        log.warning("fetch answered CORRUPT_MESSAGE: %s; a consumer that accepts the loss seeks to %d", exc,
                    exc.next_offset)  # fmt: skip


@handles("Fetch")
def handle_fetch(broker: Broker, request: Request) -> Any:
    req = FETCH.body_of(request)
    denied = _denied_topics(broker, request)  # now: a later answer is built while others are being served
    listener = broker.config.serving_listener  # None: the plain listener
    zero_copy = ZERO_COPY_FROM if listener is None or listener.protocol is SecurityProtocol.PLAINTEXT else 0
    body, total, keys, failed, sizes = _collect(broker, request, denied, zero_copy)
    if req.max_wait_ms <= 0 or total >= req.min_bytes or failed or not keys:
        return _counted(broker, body, sizes)
    woken = broker.purgatory.watch(keys, req.min_bytes - total, req.max_wait_ms)
    read_committed = request.version >= 4 and req.isolation_level == READ_COMMITTED

    async def answer_later() -> Any:
        nonlocal woken
        loop = asyncio.get_running_loop()
        deadline = loop.time() + req.max_wait_ms / 1000
        while True:
            by_data = await woken
            later, later_total, later_keys, later_failed, later_sizes = _collect(broker, request, denied, zero_copy)
            # Bytes of open transactions wake a read_committed fetch but are not its to read: it waits on
            # for the last stable offset to move until min_bytes are readable or its time is up. Any append
            # (a marker moves the LSO over bytes counted before) wakes it to read again.
            left_ms = int((deadline - loop.time()) * 1000)
            if (not read_committed or not by_data or later_total >= req.min_bytes or later_failed or left_ms <= 0
                    or not later_keys):  # fmt: skip
                return _counted(broker, later, later_sizes)
            woken = broker.purgatory.watch(later_keys, 1, left_ms)

    return asyncio.ensure_future(answer_later())


def _counted(broker: Broker, body: Any, sizes: dict[str, int]) -> Any:
    """The answer that is sent, its record bytes counted per topic (an answer built and then held back for
    more data is not counted)."""
    for topic, n in sizes.items():
        broker.metrics.fetched(topic, n)
    return body


def _denied_topics(broker: Broker, request: Request) -> frozenset[str]:
    """The requested topics the principal may not READ."""
    auth = broker.authorizer
    if not auth.enabled:
        return frozenset()
    by_id = request.version >= 13
    names = set()
    for ft in request.body.topics:
        topic = broker.catalog.topic_by_id(ft.topic_id) if by_id else broker.catalog.get_topic(ft.topic)
        if topic is not None:
            names.add(topic.name)
    return frozenset(n for n in names if not auth.allowed(Operation.READ, ResourceType.TOPIC, n))


def _collect(
    broker: Broker, request: Request, denied: frozenset[str], zero_copy_from: int
) -> tuple[Any, int, list[TopicPartition], bool, dict[str, int]]:
    """Read every requested partition once: (response, bytes read, partitions watched, any error, bytes read
    per topic). ``zero_copy_from`` > 0: records of that size or more may be file ranges (see the module)."""
    req = request.body
    version = request.version
    R = request.api.Response
    TR = R.FetchableTopicResponse
    PD = TR.PartitionData
    catalog = broker.catalog
    by_id = version >= 13
    remaining = req.max_bytes if version >= 3 else 0x7FFFFFFF
    read_committed = version >= 4 and req.isolation_level == READ_COMMITTED
    total = 0
    failed = False
    keys: list[TopicPartition] = []
    sizes: dict[str, int] = {}
    topics_out = []
    for ft in req.topics:
        topic = catalog.topic_by_id(ft.topic_id) if by_id else catalog.get_topic(ft.topic)
        parts = []
        for fp in ft.partitions:
            idx = fp.partition
            if topic is not None and topic.name in denied:
                parts.append(PD(partition_index=idx, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, high_watermark=-1,
                                last_stable_offset=-1, log_start_offset=-1, records=b""))  # fmt: skip
                failed = True
                continue
            if topic is None or not 0 <= idx < topic.partitions:
                code = ErrorCode.UNKNOWN_TOPIC_ID if by_id and topic is None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                parts.append(PD(partition_index=idx, error_code=code, high_watermark=-1, last_stable_offset=-1,
                                log_start_offset=-1, records=b""))
                failed = True
                continue
            plog = catalog.log(topic.name, idx)
            hw = plog.log_end_offset
            lso = plog.last_stable_offset
            start = plog.log_start_offset
            records: bytes | FileRange = b""
            aborted: list[Any] | None = None
            code = ErrorCode.NONE
            limit = min(fp.partition_max_bytes, remaining)
            try:
                if limit > 0 or total == 0:
                    result = plog.read_for_send(fp.fetch_offset, max(limit, 1), total == 0,
                                                lso if read_committed else hw, zero_copy_from)  # fmt: skip
                    records = result.records
                if read_committed:
                    aborted = [] if not records else [
                        PD.AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
                        for a in plog.aborted_transactions(fp.fetch_offset, result.next_offset)
                    ]  # fmt: skip
            except OffsetOutOfRange:
                code = ErrorCode.OFFSET_OUT_OF_RANGE
                failed = True
            except CorruptRangeError as exc:
                _warn_once(plog, exc)
                code = ErrorCode.CORRUPT_MESSAGE
                failed = True
            except LogOfflineError:  # a failed fsync: the partition serves nothing until a restart
                code = ErrorCode.KAFKA_STORAGE_ERROR
                failed = True
            n = len(records)
            total += n
            sizes[topic.name] = sizes.get(topic.name, 0) + n
            remaining = max(0, remaining - n)
            keys.append(TopicPartition(topic.name, idx))
            parts.append(
                PD(
                    partition_index=idx,
                    error_code=code,
                    high_watermark=hw,
                    last_stable_offset=lso,
                    log_start_offset=start,
                    aborted_transactions=[] if read_committed and aborted is None else aborted,
                    preferred_read_replica=-1,
                    records=records,
                )
            )
        topics_out.append(TR(topic=ft.topic, topic_id=ft.topic_id, partitions=parts))
    body = R(throttle_time_ms=0, error_code=0, session_id=0, responses=topics_out)
    return body, total, keys, failed, sizes
