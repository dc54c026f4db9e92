"""Peers on real loopback sockets for the failures a healthy broker does not show on demand: one that never
answers, one that negotiates and then hangs up. Each serves connections in a thread until closed."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable
from types import TracebackType

from net_wire import API_VERSIONS, all_versions

from groupstream.protocol.connection import Request, ServerConnection, UnsupportedRequest
from groupstream.protocol.messages import APIS

HOST = "127.0.0.1"
Behaviour = Callable[[socket.socket], None]


class Peer:
    def __init__(self, behaviour: Behaviour) -> None:
        self._listener = socket.create_server((HOST, 0))
        self.port: int = self._listener.getsockname()[1]
        self.connections = 0
        self._behaviour = behaviour
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            with sock, contextlib.suppress(OSError):
                self._behaviour(sock)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self._thread.join(10)

    def __enter__(self) -> Peer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def unused_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
    return port


def _next(sock: socket.socket, server: ServerConnection) -> Request | UnsupportedRequest | None:
    while True:
        event = server.next_event()
        if event is not None:
            return event
        data = sock.recv(65536)
        if not data:
            return None
        server.receive_data(data)


def silent(sock: socket.socket) -> None:
    """Accepts and reads, never answers."""
    while sock.recv(65536):
        pass


def negotiate_then_hang_up(sock: socket.socket) -> None:
    """Answers ApiVersions like a broker, then closes the connection when the next request arrives."""
    server = ServerConnection(APIS)
    event = _next(sock, server)
    assert isinstance(event, Request)
    body = API_VERSIONS.Response(error_code=0, api_keys=all_versions())
    sock.sendall(
        b"".join(
            ServerConnection.encode_response(API_VERSIONS, event.version, event.header.correlation_id, body)
        )
    )
    _next(sock, server)
