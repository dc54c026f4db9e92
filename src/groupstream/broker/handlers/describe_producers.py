"""DescribeProducers: each partition's active producers from its producer state (`ProducerStateManager`): id,
epoch, last sequence, the max timestamp of its latest batch, the coordinator epoch of its last marker and the
first offset of its open transaction, which is what ``kafka-transactions.sh find-hanging`` and ``abort
--start-offset`` look for."""

from __future__ import annotations

from typing import TYPE_CHECKING

from groupstream.broker.handlers import handles
from groupstream.broker.handlers.refusals import partition_refusal
from groupstream.protocol.bodies import DESCRIBE_PRODUCERS, DescribeProducersResponse
from groupstream.protocol.connection import Request
from groupstream.protocol.error_codes import ErrorCode
from groupstream.security.acl import Operation

if TYPE_CHECKING:
    from groupstream.broker.node import Broker

    _PartitionResponse = DescribeProducersResponse.TopicResponse.PartitionResponse


@handles("DescribeProducers")
def handle_describe_producers(broker: Broker, request: Request) -> DescribeProducersResponse:
    R = DESCRIBE_PRODUCERS.Response
    topics_out = []
    for t in DESCRIBE_PRODUCERS.body_of(request).topics:
        refusal = partition_refusal(broker, t.name, Operation.READ)
        parts = [_partition(broker, t.name, idx, refusal(idx)) for idx in t.partition_indexes]
        topics_out.append(R.TopicResponse(name=t.name, partitions=parts))
    return R(throttle_time_ms=0, topics=topics_out)


def _partition(broker: Broker, topic: str, idx: int, refused: int) -> _PartitionResponse:
    """One partition's answer: the ``refused`` error, the log's failure, or its producers."""
    PR = DESCRIBE_PRODUCERS.Response.TopicResponse.PartitionResponse
    if refused:
        return PR(partition_index=idx, error_code=refused, active_producers=[])
    plog = broker.catalog.log(topic, idx)
    if plog.offline is not None:
        return PR(partition_index=idx, error_code=ErrorCode.KAFKA_STORAGE_ERROR, error_message=plog.offline,
                  active_producers=[])  # fmt: skip
    state = plog.producer_state
    producers = [
        PR.ProducerState(
            producer_id=pid,
            producer_epoch=entry.epoch,
            last_sequence=entry.batches[-1].last_sequence if entry.batches else -1,
            last_timestamp=entry.last_timestamp,
            coordinator_epoch=entry.coordinator_epoch,
            current_txn_start_offset=_or_none(state.txn_first_offset(pid)),
        )
        for pid, entry in state.producers.items()
    ]
    return PR(partition_index=idx, error_code=ErrorCode.NONE, active_producers=producers)


def _or_none(offset: int | None) -> int:
    """An offset, or -1 (Kafka's "none") when the producer has no open transaction."""
    return -1 if offset is None else offset
