"""DescribeAcls, CreateAcls and DeleteAcls: managing the ACLs online, with Kafka's validation and errors.

Without an authorizer (no ``authorizer.class.name``) Kafka answers each with SECURITY_DISABLED, and so do we.
Describing needs DESCRIBE on the cluster, changing needs ALTER. A change is written to disk before it is in
force and before the answer goes (`groupstream.security.acl_store`): a refused write answers
KAFKA_STORAGE_ERROR for every binding of the request and changes nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from groupstream.broker.handlers import handles
from groupstream.protocol.bodies import CREATE_ACLS, DELETE_ACLS, DESCRIBE_ACLS
from groupstream.protocol.connection import Request
from groupstream.protocol.error_codes import ErrorCode
from groupstream.security.acl import (
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    binding_problem,
    parse_enum,
)

if TYPE_CHECKING:
    from groupstream.broker.node import Broker

log = logging.getLogger("groupstream.broker.acls")

_DISABLED = "No Authorizer is configured (set authorizer.class.name to turn ACLs on)"
_NOT_AUTHORIZED = "not authorized to {} the cluster's ACLs"


def _filter(body: Any) -> AclFilter:
    return AclFilter(
        parse_enum(ResourceType, body.resource_type_filter),
        body.resource_name_filter,
        parse_enum(PatternType, body.pattern_type_filter),
        body.principal_filter,
        body.host_filter,
        parse_enum(Operation, body.operation),
        parse_enum(Permission, body.permission_type),
    )


@handles("DescribeAcls")
def handle_describe_acls(broker: Broker, request: Request) -> Any:
    R = DESCRIBE_ACLS.Response
    auth = broker.authorizer

    def refuse(code: ErrorCode, message: str) -> Any:
        return R(throttle_time_ms=0, error_code=code, error_message=message, resources=[])

    if not auth.enabled:
        return refuse(ErrorCode.SECURITY_DISABLED, _DISABLED)
    if not auth.allowed_on_cluster(Operation.DESCRIBE):
        return refuse(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, _NOT_AUTHORIZED.format("describe"))
    f = _filter(DESCRIBE_ACLS.body_of(request))
    problem = f.problem()
    if problem is not None:
        return refuse(ErrorCode.INVALID_REQUEST, problem)
    grouped: dict[tuple[ResourceType, str, PatternType], list[AclBinding]] = defaultdict(list)
    for b in auth.store.matching(f):
        grouped[(b.resource_type, b.resource_name, b.pattern_type)].append(b)
    Res = R.DescribeAclsResource
    resources = [
        Res(resource_type=t, resource_name=n, pattern_type=p,
            acls=[Res.AclDescription(principal=b.principal, host=b.host, operation=b.operation,
                                     permission_type=b.permission) for b in bs])
        for (t, n, p), bs in sorted(grouped.items())
    ]  # fmt: skip
    return R(throttle_time_ms=0, error_code=0, error_message=None, resources=resources)


@handles("CreateAcls")
def handle_create_acls(broker: Broker, request: Request) -> Any:
    return asyncio.ensure_future(_create(broker, request))


async def _create(broker: Broker, request: Request) -> Any:
    R = CREATE_ACLS.Response
    Result = R.AclCreationResult
    auth = broker.authorizer
    creations = CREATE_ACLS.body_of(request).creations
    if not auth.enabled:
        return R(throttle_time_ms=0, results=[Result(error_code=ErrorCode.SECURITY_DISABLED, error_message=_DISABLED)
                                              for _ in creations])  # fmt: skip
    if not auth.allowed_on_cluster(Operation.ALTER):
        message = _NOT_AUTHORIZED.format("alter")
        return R(throttle_time_ms=0, results=[Result(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                     error_message=message) for _ in creations])  # fmt: skip
    principal = broker.current_principal
    results: list[tuple[int, str | None]] = []
    new: list[AclBinding] = []
    for c in creations:
        b = AclBinding(
            parse_enum(ResourceType, c.resource_type),
            c.resource_name,
            parse_enum(PatternType, c.resource_pattern_type),
            c.principal,
            c.host,
            parse_enum(Operation, c.operation),
            parse_enum(Permission, c.permission_type),
        )
        problem = binding_problem(b)
        results.append((ErrorCode.INVALID_REQUEST, problem) if problem is not None else (0, None))
        if problem is None:
            new.append(b)
    if new:
        async with auth.lock:
            bindings = [*auth.store.bindings, *new]
            try:
                await asyncio.get_running_loop().run_in_executor(None, auth.store.save, bindings)
            except OSError as e:
                message = f"cannot write the ACLs: {e.strerror or e}"
                log.error("%s", message)
                results = [(ErrorCode.KAFKA_STORAGE_ERROR, message) if code == 0 else (code, m) for code, m in results]
            else:
                log.info("ACLs added by %s: %s", principal, "; ".join(_describe(b) for b in new))
    return R(throttle_time_ms=0, results=[Result(error_code=code, error_message=m) for code, m in results])


@handles("DeleteAcls")
def handle_delete_acls(broker: Broker, request: Request) -> Any:
    return asyncio.ensure_future(_delete(broker, request))


async def _delete(broker: Broker, request: Request) -> Any:
    R = DELETE_ACLS.Response
    FR = R.DeleteAclsFilterResult
    M = FR.DeleteAclsMatchingAcl
    auth = broker.authorizer
    filters = DELETE_ACLS.body_of(request).filters

    def refused(code: ErrorCode, message: str) -> Any:
        return R(throttle_time_ms=0, filter_results=[FR(error_code=code, error_message=message, matching_acls=[])
                                                     for _ in filters])  # fmt: skip

    if not auth.enabled:
        return refused(ErrorCode.SECURITY_DISABLED, _DISABLED)
    if not auth.allowed_on_cluster(Operation.ALTER):
        return refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, _NOT_AUTHORIZED.format("alter"))
    async with auth.lock:
        parsed = [_filter(f) for f in filters]
        current = auth.store.bindings
        matched = [[] if f.problem() else [b for b in current if f.matches(b)] for f in parsed]
        removed = {b for bs in matched for b in bs}
        store_error: str | None = None
        if removed:
            try:
                await asyncio.get_running_loop().run_in_executor(
                    None, auth.store.save, [b for b in current if b not in removed]
                )
            except OSError as e:
                store_error = f"cannot write the ACLs: {e.strerror or e}"
                log.error("%s", store_error)
            else:
                log.info("ACLs removed by %s: %s", broker.current_principal, "; ".join(_describe(b) for b in sorted(removed)))
    results = []
    for f, bs in zip(parsed, matched, strict=True):
        problem = f.problem()
        if problem is not None:
            results.append(FR(error_code=ErrorCode.INVALID_REQUEST, error_message=problem, matching_acls=[]))
            continue
        if store_error is not None:
            results.append(FR(error_code=ErrorCode.KAFKA_STORAGE_ERROR, error_message=store_error, matching_acls=[]))
            continue
        results.append(FR(error_code=0, error_message=None, matching_acls=[
            M(error_code=0, error_message=None, resource_type=b.resource_type, resource_name=b.resource_name,
              pattern_type=b.pattern_type, principal=b.principal, host=b.host, operation=b.operation,
              permission_type=b.permission) for b in bs]))  # fmt: skip
    return R(throttle_time_ms=0, filter_results=results)


def _describe(b: AclBinding) -> str:
    return (
        f"{b.principal} {b.permission.name} {b.operation.name} from {b.host} on "
        f"{b.resource_type.name}:{b.pattern_type.name}:{b.resource_name}"
    )
