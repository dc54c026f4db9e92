"""The group APIs: FindCoordinator answered here, everything else routed to the coordinator shard of the group.

A request naming one group goes to that group's shard. Requests naming several (DescribeGroups, DeleteGroups,
OffsetFetch v8+) are split by shard, each shard answers its part, and the parts are merged back in the order
of the request. ListGroups asks every shard; one still loading turns the answer into
COORDINATOR_LOAD_IN_PROGRESS (with the groups of the others), as Kafka does.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict, deque
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from groupstream.broker.coordinator_runtime import CoordinatorRuntime, ShardStatus
from groupstream.broker.group_errors import (
    delete_group_errors,
    describe_group_errors,
    error_response,
    offset_fetch_group_errors,
)
from groupstream.broker.handlers import handles
from groupstream.protocol.bodies import (
    CONSUMER_GROUP_DESCRIBE,
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    FIND_COORDINATOR,
    LIST_GROUPS,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
    FindCoordinatorResponse,
    ListGroupsResponse,
)
from groupstream.protocol.connection import Request
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.primitives import ZERO_UUID
from groupstream.security.acl import Operation, ResourceType

if TYPE_CHECKING:
    from groupstream.broker.node import Broker

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


def _client(broker: Broker, request: Request) -> tuple[str, str]:
    return request.header.client_id or "", broker.current_client_host


def _to_group_shard(broker: Broker, request: Request, group_id: str) -> asyncio.Future[Any]:
    runtime = broker.coordinator
    client_id, host = _client(broker, request)
    return runtime.submit(runtime.partition_for(group_id), request.api, request.version, request.body, client_id, host)


# -- FindCoordinator -----------------------------------------------------------------------------------


def _lookup(broker: Broker, key_type: int, key: str) -> tuple[int, str | None]:
    if key_type == GROUP_KEY_TYPE and not broker.authorizer.allowed(Operation.DESCRIBE, ResourceType.GROUP, key):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, broker.authorizer.denial(Operation.DESCRIBE, ResourceType.GROUP, key)
    if key_type == TRANSACTION_KEY_TYPE:
        from groupstream.broker.handlers.transactions import lookup_transaction_coordinator

        return lookup_transaction_coordinator(broker, key)
    if key_type != GROUP_KEY_TYPE:
        return ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {key_type}"
    runtime = broker.coordinator
    status = runtime.status(runtime.partition_for(key))
    if status is ShardStatus.ACTIVE:
        return ErrorCode.NONE, None
    if status is ShardStatus.LOADING:
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None
    return ErrorCode.COORDINATOR_NOT_AVAILABLE, "the coordinator of this group is unloaded"


@handles("FindCoordinator")
def handle_find_coordinator(broker: Broker, request: Request) -> FindCoordinatorResponse:
    R = FIND_COORDINATOR.Response
    req = FIND_COORDINATOR.body_of(request)
    node = broker.config.node_id
    host, port = broker.config.advertised
    if request.version >= 4:
        out = []
        for key in req.coordinator_keys:
            code, message = _lookup(broker, req.key_type, key)
            ok = code == ErrorCode.NONE
            out.append(
                R.Coordinator(
                    key=key,
                    node_id=node if ok else -1,
                    host=host if ok else "",
                    port=port if ok else -1,
                    error_code=code,
                    error_message=message,
                )
            )
        return R(throttle_time_ms=0, coordinators=out)
    code, message = _lookup(broker, req.key_type, req.key)
    ok = code == ErrorCode.NONE
    return R(
        throttle_time_ms=0,
        error_code=code,
        error_message=message,
        node_id=node if ok else -1,
        host=host if ok else "",
        port=port if ok else -1,
    )


# -- one group per request ---------------------------------------------------------------------------------


class _OneGroup(Protocol):
    """The body of a request naming one group (JoinGroup ... ConsumerGroupHeartbeat, OffsetFetch v0-7)."""

    @property
    def group_id(self) -> str: ...


def _to_authorized_group_shard(broker: Broker, request: Request, operation: Operation) -> Any:
    """A request naming one group, answered GROUP_AUTHORIZATION_FAILED as a whole when the principal may not
    perform ``operation`` on the group (Kafka's table: READ to be a member or commit, DESCRIBE to fetch
    offsets, DELETE to delete offsets)."""
    body: _OneGroup = request.body
    if not broker.authorizer.allowed(operation, ResourceType.GROUP, body.group_id):
        return error_response(request.api, request.version, body, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    return _to_group_shard(broker, request, body.group_id)


def handle_member_request(broker: Broker, request: Request) -> Any:
    """A member's request (join, sync, heartbeat, leave; the classic and the KIP-848 protocols): READ on its
    group, then its group's shard."""
    return _to_authorized_group_shard(broker, request, Operation.READ)


for _member_api in ("JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "ConsumerGroupHeartbeat"):
    handles(_member_api)(handle_member_request)


@handles("OffsetCommit")
def handle_offset_commit(broker: Broker, request: Request) -> Any:
    return _with_topics_authorized(broker, request, Operation.READ, Operation.READ)


@handles("OffsetDelete")
def handle_offset_delete(broker: Broker, request: Request) -> Any:
    return _with_topics_authorized(broker, request, Operation.DELETE, Operation.READ)


def _with_topics_authorized(broker: Broker, request: Request, group_op: Operation, topic_op: Operation) -> Any:
    """OffsetCommit and OffsetDelete: the group checked first; then the topics the principal may not
    ``topic_op`` are taken out of the request and answered TOPIC_AUTHORIZATION_FAILED per partition, beside
    the coordinator's answer for the rest, as Kafka does."""
    auth = broker.authorizer
    body = OFFSET_COMMIT.body_of(request) if request.api is OFFSET_COMMIT else OFFSET_DELETE.body_of(request)
    if not auth.allowed(group_op, ResourceType.GROUP, body.group_id):
        return error_response(request.api, request.version, body, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    topics: list[Any] = list(body.topics)  # OffsetCommit's or OffsetDelete's request topics
    denied = [t for t in topics if not auth.allowed(topic_op, ResourceType.TOPIC, _topic_name(broker, t))]
    if not denied:
        return _to_group_shard(broker, request, body.group_id)
    refused = _partition_errors(request, denied, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    rest = [t for t in topics if t not in denied]
    if not rest:
        return error_response(request.api, request.version, body._replace(topics=[]), ErrorCode.NONE)._replace(
            topics=refused
        )
    inner = _to_group_shard(broker, replace(request, body=body._replace(topics=rest)), body.group_id)

    async def merged() -> Any:
        answer = await inner
        return answer._replace(topics=[*answer.topics, *refused])

    return asyncio.ensure_future(merged())


def _topic_name(broker: Broker, topic: Any) -> str:
    """A request topic's name: OffsetCommit v10+ may name it by id only."""
    if topic.name:
        return str(topic.name)
    found = broker.catalog.topic_by_id(getattr(topic, "topic_id", ZERO_UUID))
    return found.name if found is not None else ""


def _partition_errors(request: Request, topics: list[Any], code: int) -> list[Any]:
    """OffsetCommit's or OffsetDelete's answer for ``topics`` of the request: ``code`` for each partition."""
    if request.api is OFFSET_COMMIT:
        T = OFFSET_COMMIT.Response.OffsetCommitResponseTopic
        P = T.OffsetCommitResponsePartition
        return [T(name=t.name, topic_id=t.topic_id, partitions=[P(partition_index=p.partition_index, error_code=code)
                                                                for p in t.partitions]) for t in topics]  # fmt: skip
    D = OFFSET_DELETE.Response.OffsetDeleteResponseTopic
    DP = D.OffsetDeleteResponsePartition
    return [D(name=t.name, partitions=[DP(partition_index=p.partition_index, error_code=code) for p in t.partitions])
            for t in topics]  # fmt: skip


# -- several groups per request ------------------------------------------------------------------------------


def _split(runtime: CoordinatorRuntime, items: Iterable[Any], group_of: Callable[[Any], str]) -> dict[int, list[Any]]:
    by_partition: dict[int, list[Any]] = defaultdict(list)
    for item in items:
        by_partition[runtime.partition_for(group_of(item))].append(item)
    return by_partition


def _in_request_order(
    wanted: Iterable[str], parts: Iterable[Any], group_of: Callable[[Any], str]
) -> list[Any]:
    """Entries of the shards' answers, reordered as the request named their groups."""
    pool: dict[str, deque[Any]] = defaultdict(deque)
    for entry in parts:
        pool[group_of(entry)].append(entry)
    out = [pool[g].popleft() for g in wanted if pool.get(g)]
    for rest in pool.values():
        out.extend(rest)
    return out


def _scatter(
    broker: Broker,
    request: Request,
    items: list[Any],
    group_of: Callable[[Any], str],
    with_items: Callable[[list[Any]], Any],
    entries_of: Callable[[Any], list[Any]],
    entry_group: Callable[[Any], str],
    merged: Callable[[list[Any]], Any],
) -> Any:
    runtime = broker.coordinator
    by_partition = _split(runtime, items, group_of)
    client_id, host = _client(broker, request)
    if len(by_partition) <= 1:
        partition = next(iter(by_partition), runtime.partition_for(""))
        return runtime.submit(partition, request.api, request.version, with_items(items), client_id, host)
    futures = [
        runtime.submit(p, request.api, request.version, with_items(subset), client_id, host)
        for p, subset in by_partition.items()
    ]
    wanted = [group_of(i) for i in items]

    async def gather() -> Any:
        answers = await asyncio.gather(*futures)
        parts = [entry for answer in answers for entry in entries_of(answer)]
        return merged(_in_request_order(wanted, parts, entry_group))

    return asyncio.ensure_future(gather())


def _scatter_authorized(
    broker: Broker,
    request: Request,
    operation: Operation,
    items: list[Any],
    group_of: Callable[[Any], str],
    refusals: Callable[[list[str]], list[Any]],
    with_items: Callable[[list[Any]], Any],
    entries_of: Callable[[Any], list[Any]],
    entry_group: Callable[[Any], str],
    merged: Callable[[list[Any]], Any],
) -> Any:
    """`_scatter` for the groups the principal may perform ``operation`` on; the others are answered
    GROUP_AUTHORIZATION_FAILED (``refusals``), in the request's order with the rest."""
    auth = broker.authorizer
    allowed = [i for i in items if auth.allowed(operation, ResourceType.GROUP, group_of(i))]
    if len(allowed) == len(items):
        return _scatter(broker, request, items, group_of, with_items, entries_of, entry_group, merged)
    refused = refusals([group_of(i) for i in items if i not in allowed])
    wanted = [group_of(i) for i in items]
    if not allowed:
        return merged(refused)
    inner = _scatter(broker, request, allowed, group_of, with_items, entries_of, entry_group, merged)

    async def combined() -> Any:
        answer = await inner
        return merged(_in_request_order(wanted, [*entries_of(answer), *refused], entry_group))

    return asyncio.ensure_future(combined())


@handles("DescribeGroups")
def handle_describe_groups(broker: Broker, request: Request) -> Any:
    body = DESCRIBE_GROUPS.body_of(request)
    R = DESCRIBE_GROUPS.Response
    return _scatter_authorized(
        broker, request, Operation.DESCRIBE, list(body.groups), lambda g: g,
        lambda ids: describe_group_errors(R, ids, ErrorCode.GROUP_AUTHORIZATION_FAILED),
        lambda subset: body._replace(groups=subset),
        lambda answer: list(answer.groups), lambda entry: entry.group_id,
        lambda entries: R(throttle_time_ms=0, groups=entries),
    )


@handles("ConsumerGroupDescribe")
def handle_consumer_group_describe(broker: Broker, request: Request) -> Any:
    body = CONSUMER_GROUP_DESCRIBE.body_of(request)
    R = CONSUMER_GROUP_DESCRIBE.Response
    return _scatter_authorized(
        broker, request, Operation.DESCRIBE, list(body.group_ids), lambda g: g,
        lambda ids: error_response(request.api, request.version, body._replace(group_ids=ids),
                                   ErrorCode.GROUP_AUTHORIZATION_FAILED).groups,
        lambda subset: body._replace(group_ids=subset),
        lambda answer: list(answer.groups), lambda entry: entry.group_id,
        lambda entries: R(throttle_time_ms=0, groups=entries),
    )


@handles("DeleteGroups")
def handle_delete_groups(broker: Broker, request: Request) -> Any:
    body = DELETE_GROUPS.body_of(request)
    R = DELETE_GROUPS.Response
    return _scatter_authorized(
        broker, request, Operation.DELETE, list(body.groups_names), lambda g: g,
        lambda ids: delete_group_errors(R, ids, ErrorCode.GROUP_AUTHORIZATION_FAILED),
        lambda subset: body._replace(groups_names=subset),
        lambda answer: list(answer.results), lambda entry: entry.group_id,
        lambda entries: R(throttle_time_ms=0, results=entries),
    )


@handles("OffsetFetch")
def handle_offset_fetch(broker: Broker, request: Request) -> Any:
    body = OFFSET_FETCH.body_of(request)
    if request.version < 8:
        return _to_authorized_group_shard(broker, request, Operation.DESCRIBE)
    R = OFFSET_FETCH.Response
    return _scatter_authorized(
        broker, request, Operation.DESCRIBE, list(body.groups), lambda g: g.group_id,
        lambda ids: offset_fetch_group_errors(R, ids, ErrorCode.GROUP_AUTHORIZATION_FAILED),
        lambda subset: body._replace(groups=subset),
        lambda answer: list(answer.groups), lambda entry: entry.group_id,
        lambda entries: R(throttle_time_ms=0, groups=entries),
    )


@handles("ListGroups")
def handle_list_groups(broker: Broker, request: Request) -> asyncio.Future[ListGroupsResponse]:
    runtime = broker.coordinator
    R = LIST_GROUPS.Response
    client_id, host = _client(broker, request)
    loading = any(runtime.status(p) is ShardStatus.LOADING for p in range(runtime.num_partitions))
    auth = broker.authorizer
    may_describe_all = auth.allowed_on_cluster(Operation.DESCRIBE)
    may = auth.checker()  # for this request's principal: the answer is built after others were served
    futures = [
        runtime.submit(p, request.api, request.version, request.body, client_id, host)
        for p in runtime.active_partitions()
    ]

    async def gather() -> ListGroupsResponse:
        answers: list[ListGroupsResponse] = await asyncio.gather(*futures)
        code: int = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if loading else ErrorCode.NONE
        for answer in answers:
            if answer.error_code and answer.error_code != ErrorCode.NOT_COORDINATOR and not code:
                code = answer.error_code
        groups = [g for answer in answers if answer.error_code == ErrorCode.NONE for g in answer.groups]
        if not may_describe_all:  # only the groups the principal may describe, as Kafka does
            groups = [g for g in groups if may(Operation.DESCRIBE, ResourceType.GROUP, g.group_id)]
        return R(throttle_time_ms=0, error_code=code, groups=groups)

    return asyncio.ensure_future(gather())
