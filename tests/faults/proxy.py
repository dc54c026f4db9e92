"""A TCP proxy on loopback between the clients and the broker, which injects latency, resets and stalls.

The broker advertises the proxy's address, so every connection a client opens (bootstrap, then the node it
learns from Metadata) goes through it. The proxy reads the client id from the first request header of each
connection (Kafka request headers v1 and later start ``size, api_key, api_version, correlation_id,
client_id``), so a fault can target the connections of one client (a member's client id is its name) or all
of them:

- ``set_latency(ms, jitter_ms)``: each chunk is delivered ``ms`` (+ up to ``jitter_ms``) after it arrived, in
  both directions, order kept;
- ``stall()`` / ``unstall()``: bytes stop flowing both ways and the connections stay open, as behind a
  partition that drops packets; they flow again, in order, when it ends;
- ``reset()``: the connections are closed with RST (SO_LINGER 0), as a middlebox resetting them would.

It runs an asyncio loop in a thread of the process that owns it; the methods are thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

_LINGER_RST = struct.pack("ii", 1, 0)
_CHUNK = 65536


@dataclass
class Rule:
    """A fault on the connections whose client id starts with ``target`` ("" for all)."""

    target: str
    latency_ms: float = 0.0
    jitter_ms: float = 0.0
    stalled: bool = False


@dataclass(eq=False)
class _Conn:
    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter | None = None
    client_id: str | None = None
    head: bytearray = field(default_factory=bytearray)

    def sniff(self, data: bytes) -> None:
        """Learn the client id from the first request header (up to 1 KiB of it)."""
        if self.client_id is not None:
            return
        self.head += data[: 1024 - len(self.head)]
        if len(self.head) < 14:
            if len(self.head) >= 1024:
                self.client_id = ""
            return
        (n,) = struct.unpack_from(">h", self.head, 12)
        if n < 0:
            self.client_id = ""
        elif len(self.head) >= 14 + n:
            self.client_id = bytes(self.head[14 : 14 + n]).decode("utf-8", "replace")
        elif len(self.head) >= 1024:
            self.client_id = ""


class FaultProxy:
    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self._port = port
        self.upstream: tuple[str, int] | None = None
        self._rules: list[Rule] = []
        self._conns: set[_Conn] = set()
        self._rng = random.Random(0)  # jitter only; the schedule's randomness is the nemesis'
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-proxy", daemon=True)
        self._server: asyncio.Server | None = None
        self._changed: asyncio.Condition | None = None
        self.connections_total = 0
        self.resets_total = 0

    # -- lifecycle (any thread) ------------------------------------------------------------------------------

    def start(self, upstream_host: str, upstream_port: int) -> FaultProxy:
        self.upstream = (upstream_host, upstream_port)
        self._thread.start()
        self._call(self._start())
        return self

    @property
    def port(self) -> int:
        if self._server is None:
            if self._port == 0:
                self._port = _free_port(self.host)  # reserved before the broker starts advertising it
            return self._port
        sock: socket.socket = self._server.sockets[0]
        port: int = sock.getsockname()[1]
        return port

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        self._call(self._close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- faults (any thread) ---------------------------------------------------------------------------------

    def set_latency(self, ms: float, jitter_ms: float = 0.0, target: str = "") -> None:
        self._call(self._update(target, latency_ms=ms, jitter_ms=jitter_ms))

    def stall(self, target: str = "") -> None:
        self._call(self._update(target, stalled=True))

    def unstall(self, target: str = "") -> None:
        self._call(self._update(target, stalled=False))

    def heal(self) -> None:
        """No latency, no stall, on any connection."""
        self._call(self._heal())

    def reset(self, target: str = "") -> int:
        """RST every connection of ``target``; returns how many were reset."""
        n: int = self._call(self._reset(target))
        return n

    def connections(self, target: str = "") -> int:
        n: int = self._call(self._count(target))
        return n

    def _call(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=30)

    # -- the loop's side -------------------------------------------------------------------------------------

    async def _start(self) -> None:
        self._changed = asyncio.Condition()
        self._server = await asyncio.start_server(self._accept, self.host, self.port, reuse_address=True)

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self._conns):
            _abort(conn.client)
            if conn.upstream is not None:
                _abort(conn.upstream)

    async def _update(self, target: str, **changes: Any) -> None:
        rule = next((r for r in self._rules if r.target == target), None)
        if rule is None:
            rule = Rule(target)
            self._rules.append(rule)
        for k, v in changes.items():
            setattr(rule, k, v)
        await self._notify()

    async def _heal(self) -> None:
        self._rules.clear()
        await self._notify()

    async def _notify(self) -> None:
        assert self._changed is not None
        async with self._changed:
            self._changed.notify_all()

    async def _reset(self, target: str) -> int:
        hit = [c for c in self._conns if (c.client_id or "").startswith(target) or target == ""]
        for conn in hit:
            self._conns.discard(conn)
            _abort(conn.client, rst=True)
            if conn.upstream is not None:
                _abort(conn.upstream, rst=True)
        self.resets_total += len(hit)
        return len(hit)

    async def _count(self, target: str) -> int:
        return sum(1 for c in self._conns if target == "" or (c.client_id or "").startswith(target))

    def _rules_for(self, conn: _Conn) -> list[Rule]:
        cid = conn.client_id or ""
        return [r for r in self._rules if r.target == "" or (conn.client_id is not None and cid.startswith(r.target))]

    def _stalled(self, conn: _Conn) -> bool:
        return any(r.stalled for r in self._rules_for(conn))

    def _delay_s(self, conn: _Conn) -> float:
        ms = 0.0
        for r in self._rules_for(conn):
            if r.latency_ms or r.jitter_ms:
                ms = max(ms, r.latency_ms + self._rng.uniform(0, r.jitter_ms))
        return ms / 1000

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = _Conn(writer)
        self._conns.add(conn)
        self.connections_total += 1
        assert self.upstream is not None
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            self._conns.discard(conn)
            _abort(writer)  # the broker is down: the client sees the connection closed and retries
            return
        conn.upstream = up_writer
        queues: tuple[asyncio.Queue[tuple[float, bytes] | None], asyncio.Queue[tuple[float, bytes] | None]] = (
            asyncio.Queue(), asyncio.Queue())  # fmt: skip
        tasks = [
            asyncio.create_task(self._read(reader, queues[0], conn, sniff=True)),
            asyncio.create_task(self._write(up_writer, queues[0], conn)),
            asyncio.create_task(self._read(up_reader, queues[1], conn, sniff=False)),
            asyncio.create_task(self._write(writer, queues[1], conn)),
        ]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in tasks:
                t.cancel()
            self._conns.discard(conn)
            _abort(writer)
            _abort(up_writer)

    async def _read(self, reader: asyncio.StreamReader, out: asyncio.Queue[tuple[float, bytes] | None],
                    conn: _Conn, *, sniff: bool) -> None:  # fmt: skip
        """Reads chunks and stamps each with the time it is due at the other side (order kept)."""
        due = 0.0
        with contextlib.suppress(OSError):
            while True:
                data = await reader.read(_CHUNK)
                if not data:
                    break
                if sniff:
                    conn.sniff(data)
                due = max(due, time.monotonic() + self._delay_s(conn))
                out.put_nowait((due, data))
        out.put_nowait(None)

    async def _write(self, writer: asyncio.StreamWriter, src: asyncio.Queue[tuple[float, bytes] | None], conn: _Conn) -> None:
        assert self._changed is not None
        with contextlib.suppress(OSError):
            while True:
                item = await src.get()
                if item is None:
                    return
                due, data = item
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)  # the injected latency itself
                if self._stalled(conn):
                    async with self._changed:
                        await self._changed.wait_for(lambda: not self._stalled(conn))
                writer.write(data)
                await writer.drain()


def _abort(writer: asyncio.StreamWriter, *, rst: bool = False) -> None:
    transport = writer.transport
    if rst:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RST)
    transport.abort()


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port
