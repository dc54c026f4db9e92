"""Handlers for the security APIs the broker answers like any request.

- SaslHandshake and SaslAuthenticate reach these handlers only where the connection's `SaslConnection` does not
  take them: on a listener without SASL, or after authentication by a client that cannot re-authenticate. Kafka
  answers them there with ILLEGAL_SASL_STATE, and so do we.
- DescribeUserScramCredentials and AlterUserScramCredentials manage the SCRAM credentials online, with Kafka's
  validation and errors: a user's changes in one request are applied all together or not at all, and the answer
  waits until they are on disk. Kafka asks for DESCRIBE or ALTER on the cluster (without an authorizer everyone
  may).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from groupstream.broker.handlers import Handler
from groupstream.protocol.connection import Request
from groupstream.protocol.error_codes import ErrorCode
from groupstream.security.acl import CLUSTER_NAME, Operation, ResourceType
from groupstream.security.scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramCredential,
    ScramMechanism,
    credential_from_salted_password,
)

if TYPE_CHECKING:
    from groupstream.broker.node import Broker

log = logging.getLogger("groupstream.broker.credentials")


def handle_sasl_handshake(broker: Broker, request: Request) -> Any:
    return request.api.Response(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])


def handle_sasl_authenticate(broker: Broker, request: Request) -> Any:
    return request.api.Response(
        error_code=ErrorCode.ILLEGAL_SASL_STATE,
        error_message="SaslAuthenticate request received after successful authentication, or on a listener "
        "without SASL",
        auth_bytes=b"",
        session_lifetime_ms=0,
    )


# --- DescribeUserScramCredentials --------------------------------------------------------------------------


def handle_describe_user_scram_credentials(broker: Broker, request: Request) -> Any:
    R = request.api.Response
    Result = R.DescribeUserScramCredentialsResult
    Info = Result.CredentialInfo
    if not broker.authorizer.allowed_on_cluster(Operation.DESCRIBE):
        # as Kafka's error response: the error at the top and on each user asked for (librdkafka 2.16 crashes
        # when a user it asked for has no result)
        message = broker.authorizer.denial(Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME)
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return R(throttle_time_ms=0, error_code=code, error_message=message, results=[
            Result(user=u.name, error_code=code, error_message=message, credential_infos=[])
            for u in request.body.users or ()])  # fmt: skip
    users = broker.credentials.snapshot()

    def infos(user: str) -> list[Any]:
        mechs = users[user]
        return [Info(mechanism=m.type_id, iterations=c.iterations) for m, c in sorted(mechs.items(), key=lambda kv: kv[0].type_id)]

    results = []
    wanted = request.body.users
    if not wanted:
        results = [Result(user=u, error_code=0, error_message=None, credential_infos=infos(u)) for u in sorted(users)]
    else:
        names = [u.name for u in wanted]
        for i, name in enumerate(names):
            if names.index(name) != i:
                continue
            if names.count(name) > 1:
                results.append(Result(user=name, error_code=ErrorCode.DUPLICATE_RESOURCE, credential_infos=[],
                                      error_message=f"Cannot describe SCRAM credentials for the same user twice "
                                                    f"in a single request: {name}"))  # fmt: skip
            elif name not in users:
                results.append(Result(user=name, error_code=ErrorCode.RESOURCE_NOT_FOUND, credential_infos=[],
                                      error_message=f"Attempt to describe a user credential that does not exist: "
                                                    f"{name}"))  # fmt: skip
            else:
                results.append(Result(user=name, error_code=0, error_message=None, credential_infos=infos(name)))
    return R(throttle_time_ms=0, error_code=0, error_message=None, results=results)


# --- AlterUserScramCredentials -----------------------------------------------------------------------------


def _validate(
    broker: Broker, body: Any
) -> tuple[dict[str, tuple[int, str]], list[tuple[str, ScramMechanism, ScramCredential]], list[tuple[str, ScramMechanism]], list[str]]:  # fmt: skip
    """Errors by user, the accepted upserts and deletions, and every user named (in order)."""
    errors: dict[str, tuple[int, str]] = {}
    order: list[str] = []
    seen: set[tuple[str, int]] = set()
    upserts: list[tuple[str, ScramMechanism, ScramCredential]] = []
    deletions: list[tuple[str, ScramMechanism]] = []

    def fail(user: str, code: int, message: str) -> None:
        errors.setdefault(user, (code, message))

    ops = [(d.name, d.mechanism, None) for d in body.deletions] + [(u.name, u.mechanism, u) for u in body.upsertions]
    for name, mech_id, upsert in ops:
        if name not in order:
            order.append(name)
        if (name, mech_id) in seen:
            fail(name, ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
            continue
        seen.add((name, mech_id))
        if not name:
            fail(name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
            continue
        mech = ScramMechanism.from_type(mech_id)
        if mech is None:
            fail(name, ErrorCode.UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism {mech_id}")
            continue
        if upsert is None:
            if broker.credentials.scram_credential(name, mech) is None:
                fail(name, ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
                continue
            deletions.append((name, mech))
            continue
        if upsert.iterations < MIN_ITERATIONS:
            fail(name, ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Too few iterations ({upsert.iterations} < {MIN_ITERATIONS})")
            continue
        if upsert.iterations > MAX_ITERATIONS:
            fail(name, ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Too many iterations ({upsert.iterations} > {MAX_ITERATIONS})")
            continue
        if not upsert.salt or len(upsert.salted_password) != mech.digest_size:
            fail(name, ErrorCode.UNACCEPTABLE_CREDENTIAL,
                 f"A {mech.mechanism_name} credential needs a salt and a salted password of {mech.digest_size} bytes")  # fmt: skip
            continue
        upserts.append(
            (name, mech, credential_from_salted_password(mech, upsert.salted_password, upsert.salt, upsert.iterations))
        )
    upserts = [op for op in upserts if op[0] not in errors]
    deletions = [op for op in deletions if op[0] not in errors]
    return errors, upserts, deletions, order


def handle_alter_user_scram_credentials(broker: Broker, request: Request) -> Any:
    if not broker.authorizer.allowed_on_cluster(Operation.ALTER):
        R = request.api.Response
        message = broker.authorizer.denial(Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME)
        users = dict.fromkeys(u.name for u in [*request.body.deletions, *request.body.upsertions])
        return R(throttle_time_ms=0, results=[
            R.AlterUserScramCredentialsResult(user=u, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                              error_message=message) for u in users])  # fmt: skip
    return asyncio.ensure_future(_alter(broker, request, broker.current_principal))


async def _alter(broker: Broker, request: Request, principal: str) -> Any:
    R = request.api.Response
    Result = R.AlterUserScramCredentialsResult
    async with broker.credentials_lock:  # one change at a time: each builds on the last one saved
        errors, upserts, deletions, order = _validate(broker, request.body)
        store_error: str | None = None
        if upserts or deletions:
            new = broker.credentials.changed(upserts, deletions)
            try:
                await asyncio.get_running_loop().run_in_executor(None, broker.credentials.save, new)
            except OSError as e:
                store_error = f"cannot write the SCRAM credentials: {e.strerror or e}"
                log.error("%s", store_error)
    changed = sorted({u for u, *_ in upserts} | {u for u, _ in deletions})
    if changed and store_error is None:
        log.info("SCRAM credentials changed for %s by %s (%s)", ", ".join(changed), principal,
                 request.header.client_id or "no client id")  # fmt: skip
    results = []
    for user in order:
        if user in errors:
            code, message = errors[user]
            results.append(Result(user=user, error_code=code, error_message=message))
        elif store_error is not None:
            results.append(Result(user=user, error_code=ErrorCode.KAFKA_STORAGE_ERROR, error_message=store_error))
        else:
            results.append(Result(user=user, error_code=0, error_message=None))
    return R(throttle_time_ms=0, results=results)


SECURITY_HANDLERS: dict[int, Handler] = {
    17: handle_sasl_handshake,
    36: handle_sasl_authenticate,
    50: handle_describe_user_scram_credentials,
    51: handle_alter_user_scram_credentials,
}
"""Registered by the broker beside `groupstream.broker.handlers.load_all`."""
