"""The values request managers and the network client exchange (seed 002: managers return unsent requests).

A request manager never sends anything itself: its ``poll(now_ms)`` returns a `PollResult` holding the requests
it wants sent and how long it can wait before it must be polled again. The network client sends them when a
connection allows and calls each request's handler with a `ClientResponse`, on the network thread, exactly
once: with the decoded body, or with an error (a disconnection, a timeout, no shared API version).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from groupstream.protocol.compiler import CompiledApi


@dataclass(slots=True)
class ClientResponse:
    """The outcome of one request. ``error`` set means ``body`` is None: the request failed before or
    without an answer; a Kafka error code inside a decoded body is the handler's business."""

    request: UnsentRequest
    node_id: int
    version: int
    body: Any
    error: BaseException | None
    received_ms: int


Handler = Callable[[ClientResponse], None]


@dataclass(slots=True, eq=False)
class UnsentRequest:
    """A request a manager wants sent.

    ``node_id`` None means any node (the least loaded one). ``body`` is the API's Request value, or a function
    of the negotiated version returning it (for requests whose shape depends on the version). ``max_version``
    caps the version (a manager that cannot fill a newer version's fields). ``expect_response`` False is for
    Produce with acks=0: the handler runs once the request is handed to the socket, with ``body`` None.
    ``timeout_ms`` None means the client's ``request.timeout.ms``; it bounds the wait for a connection too.
    """

    api: CompiledApi
    body: Any
    handler: Handler
    node_id: int | None = None
    max_version: int | None = None
    expect_response: bool = True
    timeout_ms: int | None = None
    # set by the network client
    created_ms: int = -1
    attempted_node: int | None = field(default=None, repr=False)

    def body_for(self, version: int) -> Any:
        body = self.body
        return body(version) if callable(body) else body


@dataclass(frozen=True, slots=True)
class PollResult:
    """What a manager's poll returns. ``next_poll_delay_ms`` None: nothing is due until something happens
    (a response, an event); 0: poll again at once."""

    unsent_requests: Sequence[UnsentRequest] = ()
    next_poll_delay_ms: int | None = None


EMPTY_POLL = PollResult()


class RequestManager(Protocol):
    """Anything the network thread polls. Implementations are pure: no I/O, no clock, never block."""

    def poll(self, now_ms: int) -> PollResult: ...


def min_delay(a: int | None, b: int | None) -> int | None:
    """The earlier of two optional delays (None is "no deadline")."""
    if a is None:
        return b
    if b is None:
        return a
    return a if a < b else b
