"""Error answers to group requests the coordinator cannot serve (loading, not coordinator, write failed).

Each mirrors Kafka's ``getErrorResponse`` for that request: the error goes where that version's clients look
for it (a top-level code, or one per partition, group or member), and the rest is the "unknown" value
clients expect next to an error (generation -1, empty member id, empty assignment).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from groupstream.protocol.compiler import CompiledApi


def _join_group(R: Any, version: int, body: Any, code: int) -> Any:
    return R(
        error_code=code,
        generation_id=-1,
        protocol_name=None if version >= 7 else "",
        leader="",
        member_id="",
        members=[],
    )


def _sync_group(R: Any, version: int, body: Any, code: int) -> Any:
    return R(error_code=code, assignment=b"")


def _heartbeat(R: Any, version: int, body: Any, code: int) -> Any:
    return R(error_code=code)


def _leave_group(R: Any, version: int, body: Any, code: int) -> Any:
    return R(error_code=code, members=[])


def _offset_commit(R: Any, version: int, body: Any, code: int) -> Any:
    T = R.OffsetCommitResponseTopic
    P = T.OffsetCommitResponsePartition
    return R(
        topics=[
            T(
                name=t.name,
                topic_id=t.topic_id,
                partitions=[P(partition_index=p.partition_index, error_code=code) for p in t.partitions],
            )
            for t in body.topics
        ]
    )


def offset_fetch_group_errors(R: Any, group_ids: Iterable[str], code: int) -> list[Any]:
    """OffsetFetch v8+: one errored entry per group."""
    G = R.OffsetFetchResponseGroup
    return [G(group_id=g, topics=[], error_code=code) for g in group_ids]


def _offset_fetch(R: Any, version: int, body: Any, code: int) -> Any:
    if version >= 8:
        return R(groups=offset_fetch_group_errors(R, (g.group_id for g in body.groups), code))
    if version >= 2:
        return R(topics=[], error_code=code)
    # v0-1 have no top-level error: every requested partition carries it.
    T = R.OffsetFetchResponseTopic
    P = T.OffsetFetchResponsePartition
    return R(
        topics=[
            T(
                name=t.name,
                partitions=[
                    P(partition_index=p, committed_offset=-1, metadata="", error_code=code)
                    for p in t.partition_indexes
                ],
            )
            for t in body.topics or ()
        ]
    )


def _offset_delete(R: Any, version: int, body: Any, code: int) -> Any:
    return R(error_code=code, topics=[])


def describe_group_errors(R: Any, group_ids: Iterable[str], code: int) -> list[Any]:
    G = R.DescribedGroup
    return [
        G(error_code=code, group_id=g, group_state="", protocol_type="", protocol_data="", members=[])
        for g in group_ids
    ]


def _describe_groups(R: Any, version: int, body: Any, code: int) -> Any:
    return R(groups=describe_group_errors(R, body.groups, code))


def delete_group_errors(R: Any, group_ids: Iterable[str], code: int) -> list[Any]:
    return [R.DeletableGroupResult(group_id=g, error_code=code) for g in group_ids]


def _delete_groups(R: Any, version: int, body: Any, code: int) -> Any:
    return R(throttle_time_ms=0, results=delete_group_errors(R, body.groups_names, code))


def _list_groups(R: Any, version: int, body: Any, code: int) -> Any:
    return R(error_code=code, groups=[])


def _consumer_group_heartbeat(R: Any, version: int, body: Any, code: int) -> Any:
    return R(error_code=code, member_epoch=0, heartbeat_interval_ms=0)


def _consumer_group_describe(R: Any, version: int, body: Any, code: int) -> Any:
    G = R.DescribedGroup
    return R(groups=[G(error_code=code, group_id=g, group_state="", group_epoch=0, assignment_epoch=0,
                       assignor_name="", members=[]) for g in body.group_ids])  # fmt: skip


def _txn_offset_commit(R: Any, version: int, body: Any, code: int) -> Any:
    T = R.TxnOffsetCommitResponseTopic
    P = T.TxnOffsetCommitResponsePartition
    return R(throttle_time_ms=0, topics=[
        T(name=t.name, partitions=[P(partition_index=p.partition_index, error_code=code) for p in t.partitions])
        for t in body.topics])  # fmt: skip


_BUILDERS: dict[str, Callable[[Any, int, Any, int], Any]] = {
    "JoinGroup": _join_group,
    "SyncGroup": _sync_group,
    "Heartbeat": _heartbeat,
    "LeaveGroup": _leave_group,
    "OffsetCommit": _offset_commit,
    "OffsetFetch": _offset_fetch,
    "OffsetDelete": _offset_delete,
    "TxnOffsetCommit": _txn_offset_commit,
    "DescribeGroups": _describe_groups,
    "DeleteGroups": _delete_groups,
    "ListGroups": _list_groups,
    "ConsumerGroupHeartbeat": _consumer_group_heartbeat,
    "ConsumerGroupDescribe": _consumer_group_describe,
}


def supports(api: CompiledApi) -> bool:
    return api.name in _BUILDERS


def error_response(api: CompiledApi, version: int, body: Any, code: int) -> Any:
    """The whole response to ``body`` (a request of ``api`` at ``version``) failing with ``code``."""
    return _BUILDERS[api.name](api.Response, version, body, code)
