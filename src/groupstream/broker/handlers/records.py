"""DeleteRecords: move partitions' log start offsets forward (``kafka-delete-records.sh``, Admin.delete_records).

An offset of -1 means the high watermark; an offset past it is OFFSET_OUT_OF_RANGE. The new start is persisted
before the answer; segments go once they lie wholly below it. Internal topics are refused: the group
coordinator's state lives in them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from groupstream.broker.handlers import handles
from groupstream.broker.handlers.refusals import partition_refusal
from groupstream.broker.offsets_topic import is_internal
from groupstream.protocol.bodies import DELETE_RECORDS, DeleteRecordsResponse
from groupstream.protocol.connection import Request
from groupstream.protocol.error_codes import ErrorCode
from groupstream.security.acl import Operation
from groupstream.storage.errors import OffsetOutOfRange

if TYPE_CHECKING:
    from groupstream.broker.node import Broker

    _PartitionResult = DeleteRecordsResponse.DeleteRecordsTopicResult.DeleteRecordsPartitionResult

HIGH_WATERMARK = -1


@handles("DeleteRecords")
def handle_delete_records(broker: Broker, request: Request) -> DeleteRecordsResponse:
    R = DELETE_RECORDS.Response
    answered = []
    for t in DELETE_RECORDS.body_of(request).topics:
        refusal = partition_refusal(broker, t.name, Operation.DELETE)
        answered.append(R.DeleteRecordsTopicResult(name=t.name, partitions=[
            _delete(broker, t.name, p.partition_index, p.offset, refusal(p.partition_index)) for p in t.partitions
        ]))  # fmt: skip
    return R(throttle_time_ms=0, topics=answered)


def _delete(broker: Broker, topic: str, index: int, offset: int, code: int) -> _PartitionResult:
    """One partition's answer: ``code`` when it is refused; else its records below ``offset`` are deleted (an
    internal topic's never are) and the new log start is answered."""
    low = -1
    if code == ErrorCode.NONE and is_internal(topic):
        code = ErrorCode.INVALID_TOPIC_EXCEPTION
    elif code == ErrorCode.NONE:
        plog = broker.catalog.log(topic, index)
        try:
            low = plog.delete_records(plog.high_watermark if offset == HIGH_WATERMARK else offset)
        except OffsetOutOfRange:
            code = ErrorCode.OFFSET_OUT_OF_RANGE
    return DELETE_RECORDS.Response.DeleteRecordsTopicResult.DeleteRecordsPartitionResult(
        partition_index=index, low_watermark=low, error_code=code
    )
