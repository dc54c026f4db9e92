"""Peers on real loopback sockets for the failures a healthy broker does not show on demand: one that never
answers, one that negotiates and then hangs up. Each serves connections in a thread until closed."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable

from net_wire import API_VERSIONS, all_versions

from groupstream.protocol.connection import Request, ServerConnection
from groupstream.protocol.messages import APIS
from support.brokers import HOST
from support.loopback_peer import LoopbackPeer, next_request

Behaviour = Callable[[socket.socket], None]


class Peer(LoopbackPeer):
    """Serves every connection with ``behaviour`` until closed; ``connections`` counts them."""

    def __init__(self, behaviour: Behaviour) -> None:
        self._behaviour = behaviour
        super().__init__()

    def _handle(self, sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            self._behaviour(sock)


def unused_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
    return port


def silent(sock: socket.socket) -> None:
    """Accepts and reads, never answers."""
    while sock.recv(65536):
        pass


def negotiate_then_hang_up(sock: socket.socket) -> None:
    """Answers ApiVersions like a broker, then closes the connection when the next request arrives."""
    server = ServerConnection(APIS)
    event = next_request(sock, server)
    assert isinstance(event, Request)
    body = API_VERSIONS.Response(error_code=0, api_keys=all_versions())
    sock.sendall(
        b"".join(
            ServerConnection.encode_response(API_VERSIONS, event.version, event.header.correlation_id, body)
        )
    )
    next_request(sock, server)
