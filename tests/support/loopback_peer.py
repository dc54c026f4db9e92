"""Fake brokers on real loopback sockets, for the failures a healthy broker does not show on demand: a
listener served by a thread until closed, and a reader of the requests a client sends it. The client tests'
scripted peers (tests/client) and network peers (tests/client/net) are behaviours on top of it."""

from __future__ import annotations

import contextlib
import socket
import threading
from abc import ABC, abstractmethod

from groupstream.client.closing import ClosesOnExit
from groupstream.protocol.connection import Request, ServerConnection, UnsupportedRequest
from support.brokers import HOST

__all__ = ["LoopbackPeer", "next_request"]


class LoopbackPeer(ClosesOnExit, ABC):
    """Listens on a free loopback port and hands each accepted connection to ``_handle`` in a thread of its
    own, one connection at a time, at most ``max_connections`` of them (None: until closed). ``with`` closes
    it."""

    def __init__(self, max_connections: int | None = None) -> None:
        self._listener = socket.create_server((HOST, 0))
        self.port: int = self._listener.getsockname()[1]
        self.connections = 0
        self._max_connections = max_connections
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()  # subclasses set what _handle needs before they call this constructor

    @abstractmethod
    def _handle(self, sock: socket.socket) -> None:
        """Serve one connection; it is closed when this returns."""

    def _serve(self) -> None:
        with self._listener:
            while self._max_connections is None or self.connections < self._max_connections:
                try:
                    sock, _ = self._listener.accept()
                except OSError:
                    return
                self.connections += 1
                with sock:
                    self._handle(sock)

    def close(self) -> None:
        """Stop listening (waking a pending accept) and wait for the serving thread."""
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self._thread.join(10)


def next_request(sock: socket.socket, server: ServerConnection) -> Request | UnsupportedRequest | None:
    """The next request on ``sock``, or None when the client hangs up."""
    while True:
        event = server.next_event()
        if event is not None:
            return event
        data = sock.recv(65536)
        if not data:
            return None
        server.receive_data(data)
