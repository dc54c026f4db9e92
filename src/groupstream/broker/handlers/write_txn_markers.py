"""WriteTxnMarkers: COMMIT/ABORT markers written to partitions of this broker, as a Kafka partition leader
writes them for a transaction coordinator, and for Kafka's Admin aborting a hanging transaction
(``kafka-transactions.sh abort``: a transaction whose coordinator no longer knows it holds the last stable
offset back until someone writes its ABORT marker).

Our own coordinator writes its markers in-process (`groupstream.broker.transaction_wiring`); this handler is the
same append (`PartitionLog.append_marker`) behind Kafka's request. CLUSTER_ACTION on the cluster is required, as
in Kafka. Per partition: UNKNOWN_TOPIC_OR_PARTITION, INVALID_PRODUCER_EPOCH for a marker older than the
producer's epoch there, TRANSACTION_COORDINATOR_FENCED for one from an older coordinator epoch than the
producer's last marker, KAFKA_STORAGE_ERROR when the disk refuses it. Under ``log.flush.policy=always`` the
answer waits until the markers are durable, as an acks=all produce does, so an acknowledged marker survives a
crash.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from groupstream.broker.handlers import handles
from groupstream.broker.offsets_topic import OFFSETS_TOPIC
from groupstream.protocol.bodies import WRITE_TXN_MARKERS
from groupstream.protocol.connection import Request
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.topic_partition import TopicPartition
from groupstream.security.acl import Operation
from groupstream.storage.errors import StaleMarkerError, StorageError

if TYPE_CHECKING:
    from groupstream.broker.node import Broker

log = logging.getLogger("groupstream.broker.txn_markers")


@handles("WriteTxnMarkers")
def handle_write_txn_markers(broker: Broker, request: Request) -> Any:
    R = WRITE_TXN_MARKERS.Response
    MR = R.WritableTxnMarkerResult
    TR = MR.WritableTxnMarkerTopicResult
    PR = TR.WritableTxnMarkerPartitionResult
    allowed = broker.authorizer.allowed_on_cluster(Operation.CLUSTER_ACTION)
    now = broker.now_ms()
    waits: list[asyncio.Future[None]] = []
    markers_out = []
    for m in WRITE_TXN_MARKERS.body_of(request).markers:
        topics_out = []
        for t in m.topics:
            topic = broker.catalog.get_topic(t.name)
            parts = []
            for idx in t.partition_indexes:
                code: int
                if not allowed:
                    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                elif topic is None or not 0 <= idx < topic.partitions:
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    code = _write(broker, topic.name, idx, m, now, waits)
                parts.append(PR(partition_index=idx, error_code=code))
            topics_out.append(TR(name=t.name, partitions=parts))
        markers_out.append(MR(producer_id=m.producer_id, topics=topics_out))
    body = R(markers=markers_out)
    if not waits:
        return body

    async def when_durable() -> Any:
        outcomes = await asyncio.gather(*waits, return_exceptions=True)
        if any(isinstance(o, BaseException) for o in outcomes):  # written, not known durable: the caller retries
            for marker in body.markers:
                for t in marker.topics:
                    for p in t.partitions:
                        if p.error_code == ErrorCode.NONE:
                            p.error_code = ErrorCode.KAFKA_STORAGE_ERROR
        return body

    return asyncio.ensure_future(when_durable())


def _write(broker: Broker, topic: str, idx: int, m: Any, now: int, waits: list[asyncio.Future[None]]) -> int:
    plog = broker.catalog.log(topic, idx)
    try:
        info = plog.append_marker(m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch, now)
    except StaleMarkerError as e:
        log.info("WriteTxnMarkers refused: %s", e)
        return ErrorCode.TRANSACTION_COORDINATOR_FENCED if e.fenced_by_coordinator else ErrorCode.INVALID_PRODUCER_EPOCH
    except StorageError as e:
        log.warning("WriteTxnMarkers to %s-%d answered KAFKA_STORAGE_ERROR: %s", topic, idx, e)
        return ErrorCode.KAFKA_STORAGE_ERROR
    broker.purgatory.notify(TopicPartition(topic, idx), info.size_bytes)
    policy = plog.config.flush_policy
    broker.flusher.appended(plog, policy)
    if policy == "always":  # as an acks=all produce waits
        waits.append(broker.flusher.wait_flushed(plog, info.last_offset + 1))
    hook = broker.transactions.on_offsets_marker
    if topic == OFFSETS_TOPIC and hook is not None:
        hook(idx, m.producer_id, m.producer_epoch, m.transaction_result)
    return ErrorCode.NONE
