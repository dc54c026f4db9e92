"""Kafka requests built by hand, for readiness and for asking a broker what it holds without the client or the
codec under test: ApiVersions v0 (our broker's and Tansu's readiness), Metadata v1 (brokers, controller,
partition leaders, replicas and ISRs: a Kafka node's readiness) and FindCoordinator v1."""

from __future__ import annotations

import socket
import struct
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PartitionState:
    partition: int
    error: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class MetadataAnswer:
    brokers: dict[int, tuple[str, int]]
    controller: int
    topics: dict[str, tuple[int, list[PartitionState]]]  # name -> (error code, partitions)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> tuple[int, ...]:
        values = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return values

    def i8(self) -> int:
        return self.take(">b")[0]

    def i16(self) -> int:
        return self.take(">h")[0]

    def i32(self) -> int:
        return self.take(">i")[0]

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        s = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return s

    def int_array(self) -> tuple[int, ...]:
        return tuple(self.i32() for _ in range(self.i32()))


def _string(s: str) -> bytes:
    raw = s.encode()
    return struct.pack(">h", len(raw)) + raw


def _call(host: str, port: int, api_key: int, version: int, body: bytes, timeout: float) -> _Reader:
    corr = 0x4B41
    header = struct.pack(">hhi", api_key, version, corr) + _string("groupstream-kafka-probe")
    frame = header + body
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(struct.pack(">i", len(frame)) + frame)
        (size,) = struct.unpack(">i", _recv_exact(s, 4))
        if size < 4 or size > 64 << 20:
            raise ConnectionError(f"implausible response size {size}")
        reader = _Reader(_recv_exact(s, size))
    if reader.i32() != corr:
        raise ConnectionError("correlation id mismatch")
    return reader


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed before the whole response arrived")
        buf += chunk
    return bytes(buf)


def api_versions_probe(host: str, port: int, timeout: float = 2.0) -> bool:
    """True when host:port answers an ApiVersions v0 request with error code 0 and a non-empty key list."""
    try:
        r = _call(host, port, 18, 0, b"", timeout)
        return r.i16() == 0 and r.i32() > 0
    except (OSError, struct.error):
        return False


def metadata(host: str, port: int, topics: Sequence[str] = (), timeout: float = 5.0) -> MetadataAnswer:
    """Metadata v1 for ``topics`` (none: only brokers and controller). Raises OSError when unreachable."""
    body = struct.pack(">i", len(topics)) + b"".join(_string(t) for t in topics)
    r = _call(host, port, 3, 1, body, timeout)
    brokers: dict[int, tuple[str, int]] = {}
    for _ in range(r.i32()):
        node, h, p = r.i32(), r.string(), r.i32()
        r.string()  # rack
        brokers[node] = (h or "", p)
    controller = r.i32()
    out: dict[str, tuple[int, list[PartitionState]]] = {}
    for _ in range(r.i32()):
        err, name = r.i16(), r.string()
        r.i8()  # is_internal
        parts = []
        for _ in range(r.i32()):
            perr, pid, leader = r.i16(), r.i32(), r.i32()
            parts.append(PartitionState(pid, perr, leader, r.int_array(), r.int_array()))
        out[name or ""] = (err, sorted(parts, key=lambda ps: ps.partition))
    return MetadataAnswer(brokers, controller, out)


def find_group_coordinator(host: str, port: int, group: str, timeout: float = 5.0) -> tuple[int, int]:
    """FindCoordinator v1 for a group: (error code, coordinator node id)."""
    r = _call(host, port, 10, 1, _string(group) + struct.pack(">b", 0), timeout)
    r.i32()  # throttle
    err = r.i16()
    r.string()  # error message
    return err, r.i32()
