"""What the request-manager tests share: their constants, and answering an `UnsentRequest` with a response encoded
and decoded at the version named, as the network client would."""

from __future__ import annotations

from typing import Any

from groupstream.assignment.types import TopicPartition
from groupstream.client.consumer.classic_member_state import ClassicMemberState
from groupstream.client.errors import KafkaConnectionError
from groupstream.client.net.requests import ClientResponse, UnsentRequest
from groupstream.protocol.messages import by_name

S = ClassicMemberState
COMMIT, FETCH, FIND = by_name("OffsetCommit"), by_name("OffsetFetch"), by_name("FindCoordinator")
JOIN, SYNC, HEARTBEAT, LEAVE = (by_name(n) for n in ("JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup"))
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
U0 = TopicPartition("u", 0)


def answer(req: UnsentRequest, body: Any, now_ms: int, version: int) -> None:
    """Answer ``req`` with ``body`` as the wire carries it at ``version`` (the codec drops what it lacks)."""
    api = req.api
    decoded = api.decode_response(api.encode_response(body, version), version)  # type: ignore[attr-defined]
    req.handler(
        ClientResponse(req, req.node_id if req.node_id is not None else -1, version, decoded, None, now_ms)
    )


def disconnect(req: UnsentRequest, now_ms: int) -> None:
    req.handler(
        ClientResponse(req, req.node_id or -1, 0, None, KafkaConnectionError("h:1", "closed"), now_ms)
    )


def request_body(req: UnsentRequest, version: int) -> Any:
    """The request body at ``version``, checked to encode at it."""
    body = req.body_for(version)
    req.api.encode_request(body, version)  # type: ignore[attr-defined]
    return body
