"""A bare blocking socket that speaks Kafka through our sans-IO `ClientConnection`: what broker tests use to
send exactly the requests they mean (or garbage on ``sock``) and to see how the broker answers or closes."""

from __future__ import annotations

import socket
from typing import Any

from groupstream.protocol.compiler import CompiledApi
from groupstream.protocol.connection import ClientConnection
from groupstream.protocol.messages import APIS
from support.brokers import HOST

__all__ = ["RawClient"]

API_VERSIONS = APIS[18]


class RawClient:
    """One connection to a broker on this machine: from ``source`` (an address to bind) or over ``sock``."""

    def __init__(
        self, port: int, client_id: str, source: str | None = None, sock: socket.socket | None = None
    ) -> None:
        if sock is None:
            sock = socket.create_connection((HOST, port), timeout=10, source_address=(source, 0) if source else None)
        self.sock = sock
        self.conn = ClientConnection(APIS, client_id=client_id)

    def send(self, api: CompiledApi, version: int, body: Any) -> int:
        """Send a request; returns its correlation id."""
        corr, wire = self.conn.send_request(api, version, body)
        self.sock.sendall(wire)
        return corr

    def receive(self) -> tuple[int, CompiledApi, int, Any]:
        """The next response, as `ClientConnection.next_response` gives it, blocking until it is whole."""
        while True:
            got = self.conn.next_response()
            if got is not None:
                return got
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed by the broker")
            self.conn.receive_data(data)

    def api_versions(self) -> bool:
        """Whether an ApiVersions v3 round trip succeeds: the cheapest proof the connection is served."""
        corr = self.send(API_VERSIONS, 3, API_VERSIONS.Request(client_software_name="t", client_software_version="1"))
        got = self.receive()
        return bool(got[0] == corr and got[3].error_code == 0)

    def is_closed_by_peer(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()
