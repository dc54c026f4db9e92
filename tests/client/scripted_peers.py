"""Scripted peers on real loopback sockets, for the failures a healthy broker never shows: a broker too old for
ApiVersions v3, one that accepts and never answers, one that hangs up, one that answers garbage.

Each serves exactly one connection at a time in a thread and records what it saw; `close()` joins the thread.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

from groupstream.protocol.connection import Request, ServerConnection, UnsupportedRequest
from groupstream.protocol.messages import APIS, by_name
from support.loopback_peer import LoopbackPeer, next_request

API_VERSIONS = by_name("ApiVersions")
ERROR_UNSUPPORTED_VERSION = 35

Behaviour = Callable[[socket.socket, "ScriptedPeer"], None]


class ScriptedPeer(LoopbackPeer):
    def __init__(self, behaviour: Behaviour, connections: int = 1) -> None:
        self.seen: list[tuple[int, int]] = []  # (api key, version) of each request received
        self._behaviour = behaviour
        super().__init__(max_connections=connections)

    def _handle(self, sock: socket.socket) -> None:
        self._behaviour(sock, self)


def old_broker(sock: socket.socket, peer: ScriptedPeer) -> None:
    """A broker that knows ApiVersions v0 only and Metadata v0-1, answering ApiVersions as Kafka does: an
    unsupported ApiVersions version gets a v0-format body with UNSUPPORTED_VERSION."""
    server = ServerConnection(APIS)
    R = API_VERSIONS.Response
    keys = [R.ApiVersion(api_key=18, min_version=0, max_version=0), R.ApiVersion(api_key=3, min_version=0, max_version=1)]
    while True:
        try:
            event = next_request(sock, server)
        except ConnectionResetError:  # the client closed with its Metadata request unanswered
            return
        if event is None:
            return
        if isinstance(event, UnsupportedRequest):
            peer.seen.append((event.api_key, event.api_version))
            continue
        peer.seen.append((event.api.key, event.version))
        if event.api is not API_VERSIONS:
            continue  # what a client asks after negotiating is not this peer's subject: it stays unanswered
        code = ERROR_UNSUPPORTED_VERSION if event.version > 0 else 0
        body = R(error_code=code, api_keys=keys)
        sock.sendall(b"".join(ServerConnection.encode_response(API_VERSIONS, 0, event.header.correlation_id, body)))


def silent(sock: socket.socket, peer: ScriptedPeer) -> None:
    """Accepts, reads, never answers; returns when the client hangs up."""
    while sock.recv(65536):
        pass


def hang_up(sock: socket.socket, peer: ScriptedPeer) -> None:
    """Accepts and closes at once."""


def wrong_correlation(sock: socket.socket, peer: ScriptedPeer) -> None:
    """Answers every ApiVersions with a well-formed body under a correlation id that was never sent (the
    client takes the first such answer for an old broker's and asks again at v0: that one is answered so too)."""
    server = ServerConnection(APIS)
    while True:
        event = next_request(sock, server)
        if event is None:
            return
        assert isinstance(event, Request)
        peer.seen.append((event.api.key, event.version))
        body = API_VERSIONS.Response(error_code=0, api_keys=[])
        sock.sendall(b"".join(ServerConnection.encode_response(API_VERSIONS, event.version, 4242, body)))
