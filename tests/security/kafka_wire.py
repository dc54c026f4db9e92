"""A blocking Kafka client for poking the broker's security from tests: one socket (optionally TLS), requests
encoded with our own sans-IO codec, SASL exchanges driven step by step, and a way to tell that the broker closed
the connection. Not a client for anything else."""

from __future__ import annotations

import socket
import ssl
import struct
from typing import Any

from groupstream.protocol.connection import ClientConnection
from groupstream.protocol.messages import APIS, by_name
from groupstream.security.scram import ScramClient, ScramMechanism

HOST = "127.0.0.1"


def client_tls(ca: str | None, cert: str | None = None, key: str | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=ca)
    if cert is not None:
        ctx.load_cert_chain(cert, key)
    return ctx


class WireClient:
    def __init__(self, port: int, tls: ssl.SSLContext | None = None, timeout: float = 10.0) -> None:
        sock = socket.create_connection((HOST, port), timeout=timeout)
        if tls is not None:
            sock = tls.wrap_socket(sock, server_hostname="localhost")
        self.sock = sock
        self.conn = ClientConnection(APIS, "security-test")

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- Kafka requests ------------------------------------------------------------------------------------

    def send(self, api_name: str, version: int, **fields: Any) -> None:
        api = by_name(api_name)
        _, wire = self.conn.send_request(api, version, api.Request(**fields))
        self.sock.sendall(wire)

    def receive(self) -> Any:
        while True:
            got = self.conn.next_response()
            if got is not None:
                return got[3]
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("the broker closed the connection")
            self.conn.receive_data(data)

    def request(self, api_name: str, version: int, **fields: Any) -> Any:
        self.send(api_name, version, **fields)
        return self.receive()

    def metadata(self) -> Any:
        return self.request("Metadata", 12, topics=[], allow_auto_topic_creation=False)

    def closed_by_broker(self, timeout: float = 10.0) -> bool:
        """True once the broker closed the connection (EOF or reset) within ``timeout``; bytes it sends first are
        read and dropped."""
        self.sock.settimeout(timeout)
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    return True
        except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
            return True
        except TimeoutError:
            return False

    # --- SASL ------------------------------------------------------------------------------------------------

    def scram(self, user: str, password: str, mechanism: ScramMechanism = ScramMechanism.SCRAM_SHA_256,
              version: int = 1) -> Any:  # fmt: skip
        """Handshake and SCRAM exchange; returns the last SaslAuthenticate response (an error one if refused)."""
        hs = self.request("SaslHandshake", 1, mechanism=mechanism.mechanism_name)
        assert hs.error_code == 0, hs
        client = ScramClient(mechanism, user, password, "wireclientnonce")
        first = self.request("SaslAuthenticate", version, auth_bytes=client.first_message())
        if first.error_code:
            return first
        final = self.request("SaslAuthenticate", version, auth_bytes=client.final_message(first.auth_bytes))
        if final.error_code == 0:
            client.check_server_final(final.auth_bytes)
        return final

    def plain(self, user: str, password: str, version: int = 1) -> Any:
        hs = self.request("SaslHandshake", 1, mechanism="PLAIN")
        assert hs.error_code == 0, hs
        return self.request("SaslAuthenticate", version, auth_bytes=f"\0{user}\0{password}".encode())

    def send_token(self, token: bytes) -> None:
        """A bare size-prefixed SASL token (after SaslHandshake v0)."""
        self.sock.sendall(struct.pack(">i", len(token)) + token)

    def receive_token(self) -> bytes:
        head = self._exactly(4)
        (size,) = struct.unpack(">i", head)
        return self._exactly(size)

    def _exactly(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            data = self.sock.recv(n - len(buf))
            if not data:
                raise ConnectionError("the broker closed the connection")
            buf += data
        return buf
