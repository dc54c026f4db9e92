"""Response bodies of the group APIs, shaped for the version each request was sent at.

The runtime encodes what the shard returns with the request's version; what a version can carry differs
(JoinGroup before v7 has a non-null protocol name; LeaveGroup before v3 answers one member with a top-level
error), so the shard builds each body knowing the version.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from groupstream.protocol.bodies import (
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_GROUPS,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
    SYNC_GROUP,
)
from groupstream.protocol.error_codes import ErrorCode

__all__ = [
    "DELETE_GROUPS",
    "DESCRIBE_GROUPS",
    "HEARTBEAT",
    "JOIN_GROUP",
    "LEAVE_GROUP",
    "LIST_GROUPS",
    "OFFSET_COMMIT",
    "OFFSET_DELETE",
    "OFFSET_FETCH",
    "SYNC_GROUP",
    "JoinMember",
    "heartbeat_response",
    "join_error",
    "join_response",
    "sync_response",
]


JoinMember = tuple[str, str | None, bytes]
"""(member id, group instance id, metadata) as the leader's JoinGroup response lists them."""


def join_response(
    version: int,
    *,
    member_id: str,
    generation: int,
    protocol_type: str | None,
    protocol_name: str | None,
    leader: str,
    members: Sequence[JoinMember] = (),
    skip_assignment: bool = False,
    error: ErrorCode = ErrorCode.NONE,
) -> Any:
    R = JOIN_GROUP.Response
    return R(
        throttle_time_ms=0,
        error_code=int(error),
        generation_id=generation,
        protocol_type=protocol_type,
        # Before v7 the name is not nullable: Kafka sends "" where it has none.
        protocol_name=protocol_name if protocol_name is not None or version >= 7 else "",
        leader=leader,
        skip_assignment=skip_assignment and version >= 9,
        member_id=member_id,
        members=[
            R.JoinGroupResponseMember(member_id=mid, group_instance_id=iid, metadata=md)
            for mid, iid, md in members
        ],
    )


def join_error(version: int, error: ErrorCode, member_id: str = "") -> Any:
    return join_response(
        version,
        member_id=member_id,
        generation=-1,
        protocol_type=None,
        protocol_name=None,
        leader="",
        error=error,
    )


def sync_response(
    version: int,
    error: ErrorCode = ErrorCode.NONE,
    assignment: bytes = b"",
    protocol_type: str | None = None,
    protocol_name: str | None = None,
) -> Any:
    return SYNC_GROUP.Response(
        throttle_time_ms=0,
        error_code=int(error),
        protocol_type=protocol_type if version >= 5 else None,
        protocol_name=protocol_name if version >= 5 else None,
        assignment=assignment,
    )


def heartbeat_response(error: ErrorCode = ErrorCode.NONE) -> Any:
    return HEARTBEAT.Response(throttle_time_ms=0, error_code=int(error))
