"""The fault proxy does what the nemesis asks of it, against an echo server: it forwards bytes both ways,
delays them by the latency set, holds them during a stall and delivers them in order after it, resets
connections with RST, and targets the connections of one client id only."""

from __future__ import annotations

import contextlib
import socket
import socketserver
import struct
import threading
import time
from collections.abc import Iterator

import pytest

from support.waiting import wait_until

from .proxy import FaultProxy


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        with contextlib.suppress(ConnectionResetError):  # the proxy's RST reaches this side too
            while data := self.request.recv(65536):
                self.request.sendall(data)


@pytest.fixture
def proxy() -> Iterator[FaultProxy]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    p = FaultProxy().start("127.0.0.1", server.server_address[1])
    try:
        yield p
    finally:
        p.close()
        server.shutdown()
        server.server_close()


def request(client_id: str, body: bytes = b"") -> bytes:
    """A Kafka-shaped request frame: size, api key, version, correlation id, client id, body."""
    cid = client_id.encode()
    payload = struct.pack(">hhih", 18, 0, 7, len(cid)) + cid + body
    return struct.pack(">i", len(payload)) + payload


def connect(p: FaultProxy, client_id: str) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", p.port), timeout=10)
    frame = request(client_id)
    s.sendall(frame)
    assert recv_exact(s, len(frame)) == frame
    return s


def recv_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def round_trip(s: socket.socket, data: bytes = b"ping") -> float:
    start = time.monotonic()
    s.sendall(data)
    assert recv_exact(s, len(data)) == data
    return time.monotonic() - start


def test_forwards_and_delays(proxy: FaultProxy) -> None:
    s = connect(proxy, "m1")
    assert round_trip(s) < 0.2
    proxy.set_latency(150)
    assert round_trip(s) >= 0.3  # 150 ms each way
    proxy.heal()
    assert round_trip(s) < 0.2


def test_stall_holds_bytes_and_releases_them_in_order(proxy: FaultProxy) -> None:
    s = connect(proxy, "m1")
    proxy.stall()
    s.sendall(b"one")
    s.sendall(b"two")
    s.settimeout(0.5)
    with pytest.raises(TimeoutError):
        s.recv(10)  # nothing passes while stalled
    proxy.unstall()
    s.settimeout(10)
    assert recv_exact(s, 6) == b"onetwo"


def test_reset_and_targets(proxy: FaultProxy) -> None:
    a, b = connect(proxy, "g.m1.1"), connect(proxy, "g.m2.1")
    wait_until(lambda: proxy.connections() == 2, 10, "both connections known to the proxy")
    proxy.stall("g.m1.")
    assert round_trip(b) < 0.5  # the other client's connection still flows
    proxy.heal()
    assert round_trip(a) < 0.5
    assert proxy.reset("g.m2.") == 1
    with pytest.raises(ConnectionError):
        round_trip(b)
    assert round_trip(a) < 0.5
    assert proxy.reset() == 1
    with pytest.raises(ConnectionError):
        round_trip(a)
