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

HIGH_WATERMARK = -1


@handles("DeleteRecords")
def handle_delete_records(broker: Broker, request: Request) -> DeleteRecordsResponse:
    R = DELETE_RECORDS.Response
    T = R.DeleteRecordsTopicResult
    P = T.DeleteRecordsPartitionResult
    topics = []
    for t in DELETE_RECORDS.body_of(request).topics:
        refusal = partition_refusal(broker, t.name, Operation.DELETE)
        parts = []
        for p in t.partitions:
            code, low = refusal(p.partition_index), -1
            if code == ErrorCode.NONE and is_internal(t.name):
                code = ErrorCode.INVALID_TOPIC_EXCEPTION
            elif code == ErrorCode.NONE:
                plog = broker.catalog.log(t.name, p.partition_index)
                target = plog.high_watermark if p.offset == HIGH_WATERMARK else p.offset
                try:
                    low = plog.delete_records(target)
                except OffsetOutOfRange:
                    code = ErrorCode.OFFSET_OUT_OF_RANGE
            parts.append(P(partition_index=p.partition_index, low_watermark=low, error_code=code))
        topics.append(T(name=t.name, partitions=parts))
    return R(throttle_time_ms=0, topics=topics)
