"""A tiny TCP proxy on 127.0.0.1 that forwards between Kafka clients and a broker and records every frame.

Each request frame is recorded with its api key, version and correlation id as soon as it is complete (before
it is forwarded, so its response can always be matched); each response frame is matched to its request by
correlation id on the same connection. Payloads are stored without the 4-byte size prefix.

The broker must advertise the proxy's address in Metadata, otherwise clients bypass the proxy after
bootstrapping: bind the proxy first (``CaptureProxy()`` binds at construction), start the broker advertising
``proxy.port``, then ``proxy.start(upstream)``.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Literal

_HEAD = struct.Struct(">hhi")
_I32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class CapturedFrame:
    seq: int  # order in which the proxy completed the frame, over all connections
    conn: int  # connection number, in accept order
    direction: Literal["req", "resp"]
    api_key: int  # -1 for a response whose request was not seen
    api_version: int
    correlation_id: int
    payload: bytes  # header + body, without the size prefix (as the client received it)
    rewritten: bool = False  # True when rewrite_response changed this frame


class _FrameCutter:
    """Cuts a byte stream into size-prefixed frames."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self._buf += data
        out: list[bytes] = []
        while len(self._buf) >= 4:
            (size,) = _I32.unpack_from(self._buf, 0)
            if size < 0:
                raise ValueError(f"negative frame size {size}")
            if len(self._buf) < 4 + size:
                break
            out.append(bytes(self._buf[4 : 4 + size]))
            del self._buf[: 4 + size]
        return out


class CaptureProxy:
    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        rewrite_response: Callable[[int, int, bytes], bytes] | None = None,
    ) -> None:
        """``rewrite_response(api_key, api_version, payload)`` may replace a response before the client sees
        it (the recorded frame is the one the client received); None forwards bytes untouched."""
        self._rewrite = rewrite_response
        self._listener = socket.create_server((host, port), reuse_port=False)
        self.host = host
        self.port: int = self._listener.getsockname()[1]
        self._upstream: tuple[str, int] | None = None
        self._lock = threading.Lock()
        self._frames: list[CapturedFrame] = []
        self._seq = 0
        self._conns = 0
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._closed = threading.Event()
        self.errors: list[str] = []  # framing violations seen on the wire
        self.disconnects: list[str] = []  # sockets that failed or closed mid-stream

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, upstream_host: str, upstream_port: int) -> None:
        self._upstream = (upstream_host, upstream_port)
        t = threading.Thread(target=self._accept_loop, name="capture-accept", daemon=True)
        t.start()
        self._threads.append(t)

    def frames(self) -> list[CapturedFrame]:
        with self._lock:
            return list(self._frames)

    def clear(self) -> None:
        with self._lock:
            self._frames.clear()

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._lock:
            socks = list(self._sockets)
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        for t in self._threads:
            t.join(timeout=5)

    def __enter__(self) -> CaptureProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _record(
        self,
        conn: int,
        direction: Literal["req", "resp"],
        key: int,
        version: int,
        corr: int,
        payload: bytes,
        rewritten: bool = False,
    ) -> None:
        with self._lock:
            self._frames.append(CapturedFrame(self._seq, conn, direction, key, version, corr, payload, rewritten))
            self._seq += 1

    def _accept_loop(self) -> None:
        assert self._upstream is not None
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self._upstream, timeout=10)
                upstream.settimeout(None)
            except OSError as e:
                self.disconnects.append(f"connect upstream: {e}")
                client.close()
                continue
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                conn = self._conns
                self._conns += 1
                self._sockets += [client, upstream]
            link = _Link(conn)
            on_response = partial(self._on_response, link, client)
            for args in (
                (conn, "requests", client, upstream, partial(self._on_request, link), True),
                (conn, "responses", upstream, client, on_response, self._rewrite is None),
            ):
                t = threading.Thread(target=self._pump, args=args, name=f"capture-{conn}", daemon=True)
                t.start()
                self._threads.append(t)

    def _pump(
        self,
        conn: int,
        what: str,
        src: socket.socket,
        dst: socket.socket,
        on_frame: Callable[[bytes], None],
        forward: bool,
    ) -> None:
        """Copy one direction of a connection until ``src`` ends, handing each whole frame to ``on_frame``.
        ``forward``: pass the bytes on as they arrive (else ``on_frame`` sends the frames it rewrote)."""
        cutter = _FrameCutter()
        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                for f in cutter.feed(data):
                    on_frame(f)
                if forward:
                    dst.sendall(data)
        except ValueError as e:
            self.errors.append(f"conn {conn} {what}: {e}")
        except OSError as e:  # a peer went away: normal at client shutdown
            self.disconnects.append(f"conn {conn} {what}: {e}")
        finally:
            _half_close(dst)

    def _on_request(self, link: _Link, f: bytes) -> None:
        """Record a request and remember its key and version for the response that will carry its correlation id."""
        if len(f) < 8:
            self.errors.append(f"conn {link.conn}: request of {len(f)} bytes")
            return
        key, version, corr = _HEAD.unpack_from(f, 0)
        with link.lock:
            link.pending[corr] = (key, version)
        self._record(link.conn, "req", key, version, corr, f)

    def _on_response(self, link: _Link, dst: socket.socket, f: bytes) -> None:
        """Record a response under its request's key and version; with a rewrite, send the rewritten frame on."""
        if len(f) < 4:
            self.errors.append(f"conn {link.conn}: response of {len(f)} bytes")
            return
        (corr,) = _I32.unpack_from(f, 0)
        with link.lock:
            key, version = link.pending.pop(corr, (-1, -1))
        rewritten = False
        if self._rewrite is not None:
            new = self._rewrite(key, version, f)
            rewritten = new != f
            f = new
            dst.sendall(_I32.pack(len(f)) + f)
        self._record(link.conn, "resp", key, version, corr, f, rewritten)


@dataclass
class _Link:
    """One proxied connection: its number, and its requests awaiting a response (correlation id -> key and
    version), shared by the two pump threads."""

    conn: int
    pending: dict[int, tuple[int, int]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _half_close(s: socket.socket) -> None:
    with contextlib.suppress(OSError):
        s.shutdown(socket.SHUT_WR)


def _read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def _skip_tags(buf: bytes, pos: int) -> int:
    count, pos = _read_uvarint(buf, pos)
    for _ in range(count):
        _, pos = _read_uvarint(buf, pos)
        size, pos = _read_uvarint(buf, pos)
        pos += size
    return pos


def canonical_api_versions(api_key: int, api_version: int, payload: bytes) -> bytes:
    """Rewrite an ApiVersions v3+ response without its tagged fields, leaving every other frame alone.

    Tansu writes the v3 tagged fields even at their default values (empty feature lists, epoch -1);
    librdkafka 2.0.2 (Debian's kcat) then fails with "Read underflow". Kafka omits default-valued tagged
    fields; so does this rewrite, which lets kcat run against Tansu as a self-check of the kcat harness.
    """
    if api_key != 18 or api_version < 3:
        return payload
    pos = 4 + 2  # correlation id, error code
    n, pos = _read_uvarint(payload, pos)
    out = bytearray(payload[:pos])
    for _ in range(max(n - 1, 0)):
        out += payload[pos : pos + 6] + b"\x00"
        pos = _skip_tags(payload, pos + 6)
    out += payload[pos : pos + 4] + b"\x00"  # throttle_time_ms, then an empty tagged-field section
    return bytes(out)
