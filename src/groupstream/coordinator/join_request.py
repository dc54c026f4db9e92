"""A JoinGroup request's fields, normalised across versions, as the membership handlers use them."""

from __future__ import annotations

from dataclasses import dataclass

from groupstream.coordinator.classic_group import Parked, Protocol
from groupstream.coordinator.request import ShardRequest, body_as
from groupstream.coordinator.responses import JOIN_GROUP

__all__ = ["JoinRequest", "join_request"]


@dataclass(frozen=True, slots=True)
class JoinRequest:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    parked: Parked

    @property
    def version(self) -> int:
        return self.parked.version


def join_request(req: ShardRequest) -> JoinRequest:
    body = body_as(JOIN_GROUP, req)
    session = int(body.session_timeout_ms)
    rebalance = int(body.rebalance_timeout_ms)
    return JoinRequest(
        member_id=str(body.member_id),
        instance_id=body.group_instance_id,
        client_id=req.client_id,
        client_host=req.client_host,
        session_timeout_ms=session,
        # v0 has no rebalance timeout: Kafka uses the session timeout.
        rebalance_timeout_ms=session if req.version < 1 or rebalance < 0 else rebalance,
        protocol_type=str(body.protocol_type),
        protocols=tuple(Protocol(str(p.name), bytes(p.metadata)) for p in body.protocols),
        parked=Parked(req.token, req.version),
    )
