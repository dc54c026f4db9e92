"""ListOffsets: earliest follows the log start offset (retention, DeleteRecords), latest the log end, or for
isolation_level 1 (read_committed, v2+) the last stable offset, as Kafka answers."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from groupstream.broker.handlers import handles
from groupstream.broker.handlers.refusals import partition_refusal
from groupstream.protocol.bodies import LIST_OFFSETS, ListOffsetsResponse
from groupstream.protocol.connection import Request
from groupstream.protocol.error_codes import ErrorCode
from groupstream.security.acl import Operation
from groupstream.storage.errors import CorruptRangeError

if TYPE_CHECKING:
    from groupstream.broker.node import Broker

log = logging.getLogger("groupstream.broker")

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
READ_COMMITTED = 1


@handles("ListOffsets")
def handle_list_offsets(broker: Broker, request: Request) -> ListOffsetsResponse:
    req = LIST_OFFSETS.body_of(request)
    R = LIST_OFFSETS.Response
    TR = R.ListOffsetsTopicResponse
    PR = TR.ListOffsetsPartitionResponse
    topics_out = []
    for t in req.topics:
        refusal = partition_refusal(broker, t.name, Operation.DESCRIBE)
        parts = []
        for p in t.partitions:
            idx = p.partition_index
            if code := refusal(idx):
                parts.append(PR(partition_index=idx, error_code=code, timestamp=-1, offset=-1, leader_epoch=-1))
                continue
            plog = broker.catalog.log(t.name, idx)
            ts = p.timestamp
            timestamp, offset = -1, -1
            if plog.offline is not None:  # a failed fsync: nothing about it can be trusted until a restart
                parts.append(PR(partition_index=idx, error_code=ErrorCode.KAFKA_STORAGE_ERROR, timestamp=-1,
                                offset=-1, leader_epoch=-1))
                continue
            committed = request.version >= 2 and req.isolation_level == READ_COMMITTED
            if ts == LATEST:
                offset = plog.last_stable_offset if committed else plog.log_end_offset
            elif ts in (EARLIEST, EARLIEST_LOCAL):
                offset = plog.log_start_offset
            elif ts == LATEST_TIERED:
                offset = -1
            elif ts < 0 and ts != MAX_TIMESTAMP:
                parts.append(PR(partition_index=idx, error_code=ErrorCode.INVALID_REQUEST, timestamp=-1,
                                offset=-1, leader_epoch=-1))
                continue
            else:
                try:  # a search by timestamp may run into a damaged range, where the answer may lie
                    found = plog.max_timestamp_offset() if ts == MAX_TIMESTAMP else plog.offset_for_timestamp(ts)
                except CorruptRangeError as exc:
                    log.warning("ListOffsets for timestamp %d answered CORRUPT_MESSAGE: %s", ts, exc)
                    parts.append(PR(partition_index=idx, error_code=ErrorCode.CORRUPT_MESSAGE, timestamp=-1,
                                    offset=-1, leader_epoch=-1))
                    continue
                # As Kafka answers: a record at or past the last fetchable offset (the LSO under
                # read_committed) is not found.
                if found is not None and not (committed and found[0] >= plog.last_stable_offset):
                    offset, timestamp = found
            parts.append(PR(partition_index=idx, error_code=ErrorCode.NONE, timestamp=timestamp, offset=offset,
                            leader_epoch=0, old_style_offsets=_old_style(request.version, offset)))
        topics_out.append(TR(name=t.name, partitions=parts))
    return R(throttle_time_ms=0, topics=topics_out)


def _old_style(version: int, offset: int) -> list[int]:
    """ListOffsets v0 answers with a list of segment offsets; like Kafka today, we give the one offset found."""
    return [offset] if version == 0 and offset >= 0 else []
