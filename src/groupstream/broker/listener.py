"""Accepting connections and keeping them within limits: Kafka's acceptor, connection quotas, idle expiry and
bound on request memory, for a broker that runs on one event loop.

- **Accept loop.** Our own listening sockets, watched with ``loop.add_reader``; each wake-up accepts what is
  queued, up to a batch, so a connection storm cannot starve the connections already open. When accepting runs
  out of descriptors (EMFILE, ENFILE) or kernel memory (ENOBUFS, ENOMEM), the listener stops watching for a
  back-off period (50 ms doubling to 1 s, or until a connection closes and frees a descriptor) instead of
  retrying at once: asyncio's own server retries on every loop iteration and logs a traceback each time, which
  starved every client and filled the disk with log. Connections that cannot be accepted wait in the kernel's
  listen backlog and get in as descriptors free up. Failures are logged at most once a minute.
- **max.connections.** At the limit the listener stops watching until a connection closes, as Kafka's acceptor
  waits for a free slot; new clients wait in the backlog meanwhile. The default is derived from the descriptor
  limit (`groupstream.broker.descriptors.default_max_connections`) so that the logs always have descriptors.
- **max.connections.per.ip.** A connection from an address that already has that many is accepted and closed
  at once, as Kafka does, with a log line at most once a minute.
- **connections.max.idle.ms.** A connection with no request being answered that has shown no sign of life for
  that long (nothing received, no response handed over, none of its unsent response taken) is closed, as Kafka
  closes idle connections. This also ends a request that started and never finished (its connection receives
  nothing more) and a client that stopped reading its responses (up to 64 MiB of them wait in memory).
- **queued.max.request.bytes.** Bounds the bytes of partially received requests summed over all connections:
  beyond it, the connection whose partial request has been pending longest is closed, then the next, until the
  total is within the bound. See `ConnectionTable.partial_changed` for why closing beats pausing.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from groupstream.broker.config import BrokerConfig
from groupstream.broker.descriptors import default_max_connections, descriptor_reserve, nofile_limit
from groupstream.broker.rate_limited_log import RateLimitedLog

if TYPE_CHECKING:
    from groupstream.broker.server import KafkaConnection

log = logging.getLogger("groupstream.broker.listener")

LISTEN_BACKLOG = 1024
"""Connections the kernel completes and queues for us while we are not accepting (at max.connections, or out of
descriptors); those beyond wait in the client's SYN retries."""

_ACCEPT_BATCH = 64
_BACKOFF_FIRST_S = 0.05
_BACKOFF_MAX_S = 1.0
_RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_TRANSIENT_ERRNOS = frozenset({errno.ECONNABORTED, errno.EPROTO, errno.EPERM, errno.EINTR, errno.ENETDOWN,
                               errno.ENOPROTOOPT, errno.EHOSTDOWN, errno.ENONET, errno.EHOSTUNREACH,
                               errno.EOPNOTSUPP, errno.ENETUNREACH})  # fmt: skip
"""accept(2) errors about the one connection being accepted (Linux passes pending network errors on): go on."""

@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """The connection limits in force, with the defaults resolved."""

    max_connections: int
    max_connections_per_ip: int | None
    idle_ms: int
    partial_request_bytes: int | None
    descriptor_limit: int | None
    descriptor_reserve: int
    max_connections_derived: bool

    @classmethod
    def resolve(cls, config: BrokerConfig, descriptor_limit: int | None, in_use: int | None) -> ConnectionLimits:
        """``in_use``: descriptors open once the logs are loaded, for the default max.connections."""
        derived = config.max_connections is None
        return cls(
            max_connections=default_max_connections(descriptor_limit, in_use)
            if config.max_connections is None
            else config.max_connections,
            max_connections_per_ip=config.max_connections_per_ip,
            idle_ms=config.connections_max_idle_ms,
            partial_request_bytes=config.partial_request_bytes_limit,
            descriptor_limit=descriptor_limit,
            descriptor_reserve=0 if descriptor_limit is None else descriptor_reserve(descriptor_limit),
            max_connections_derived=derived,
        )

    def describe(self) -> str:
        limit = "unlimited" if self.descriptor_limit is None else str(self.descriptor_limit)
        how = f" (derived from the descriptor limit {limit})" if self.max_connections_derived else ""
        per_ip = "unlimited" if self.max_connections_per_ip is None else str(self.max_connections_per_ip)
        partial = "unbounded" if self.partial_request_bytes is None else str(self.partial_request_bytes)
        reserve = "" if self.descriptor_limit is None else f"; {self.descriptor_reserve} descriptors kept for the logs"
        return (f"max.connections {self.max_connections}{how}, max.connections.per.ip {per_ip}, "
                f"connections.max.idle.ms {self.idle_ms}, queued.max.request.bytes {partial}{reserve}")  # fmt: skip


class ConnectionTable:
    """The open connections: counts per address, the idle sweep and the bound on partially received requests.

    Connections register themselves (`add`, `discard`) and report their partial request (`partial_changed`);
    ``on_close`` (the acceptor) hears when a connection closes, since that frees a slot and a descriptor.
    """

    def __init__(self) -> None:
        self._conns: set[KafkaConnection] = set()
        self._per_ip: dict[str, int] = {}
        self._partial: set[KafkaConnection] = set()
        self.partial_total = 0
        self._limits: ConnectionLimits | None = None
        self._on_close: Callable[[], None] | None = None
        self._sweep_timer: asyncio.TimerHandle | None = None
        self._shed_log = RateLimitedLog(log, logging.WARNING)

    def start(self, limits: ConnectionLimits, on_close: Callable[[], None]) -> None:
        self._limits = limits
        self._on_close = on_close
        self._schedule_sweep()

    def __len__(self) -> int:
        return len(self._conns)

    def __iter__(self) -> Iterator[KafkaConnection]:
        return iter(list(self._conns))

    def count_for(self, ip: str) -> int:
        return self._per_ip.get(ip, 0)

    def add(self, conn: KafkaConnection) -> None:
        self._conns.add(conn)
        self._per_ip[conn.ip] = self._per_ip.get(conn.ip, 0) + 1

    def discard(self, conn: KafkaConnection) -> None:
        if conn not in self._conns:
            return
        self._conns.discard(conn)
        left = self._per_ip[conn.ip] - 1
        if left:
            self._per_ip[conn.ip] = left
        else:
            del self._per_ip[conn.ip]
        if conn in self._partial:
            self._partial.discard(conn)
            self.partial_total -= conn.partial_bytes
            conn.partial_bytes = 0
        if self._on_close is not None:
            self._on_close()

    # --- queued.max.request.bytes ---------------------------------------------------------------------------

    def partial_changed(self, conn: KafkaConnection, partial: int, progressed: bool) -> None:
        """``conn`` now holds ``partial`` bytes of a request not yet complete (``progressed``: it completed at
        least one request in the same read, so what it holds is a new request).

        Past queued.max.request.bytes, the connection whose partial request has been pending longest is
        closed, then the next, until the total is within the bound. Pausing reads instead (what Kafka does
        with its memory pool) deadlocks here: a paused connection cannot finish its request, so the total
        never falls, and a client that stopped mid-request holds everyone else's requests paused until the
        idle timeout, minutes later. Closing frees the memory at once. The oldest partial request is chosen,
        not the largest, because healthy clients send a request in one go (it is partial for the milliseconds
        it takes to arrive) while one that stalls or trickles keeps its request pending: the stalled one is
        closed first, and an attacker cannot make its requests look young without completing them. A client
        that is closed reconnects and retries, as after any dropped connection.

        A single request larger than the bound is never received whole: set queued.max.request.bytes at least
        to socket.request.max.bytes (the default is twice it).
        """
        old = conn.partial_bytes
        self.partial_total += partial - old
        conn.partial_bytes = partial
        if partial:
            if old == 0 or progressed:
                conn.partial_since = asyncio.get_running_loop().time()
            self._partial.add(conn)
        else:
            self._partial.discard(conn)
        limits = self._limits
        if limits is None or limits.partial_request_bytes is None or self.partial_total <= limits.partial_request_bytes:
            return
        bound = limits.partial_request_bytes
        while self.partial_total > bound and self._partial:
            self._shed(min(self._partial, key=lambda c: c.partial_since), bound)

    def _shed(self, victim: KafkaConnection, bound: int) -> None:
        total, held, peer = self.partial_total, victim.partial_bytes, victim.peer
        self._shed_log.note(
            lambda: (f"partial requests hold {total} bytes, over queued.max.request.bytes ({bound}): closing the "
                     f"connection whose request has been pending longest ({peer}, {held} bytes); further "
                     f"closings are summed up once a minute"),
            lambda n: f"{n} connections closed in the last minute: partial requests over queued.max.request.bytes ({bound})",
        )  # fmt: skip
        victim.close(f"queued.max.request.bytes ({bound}) exceeded", logging.DEBUG)

    # --- connections.max.idle.ms ------------------------------------------------------------------------------

    def _schedule_sweep(self) -> None:
        assert self._limits is not None
        interval_s = min(1.0, max(0.01, self._limits.idle_ms / 10_000))
        self._sweep_timer = asyncio.get_running_loop().call_later(interval_s, self._sweep)

    def _sweep(self) -> None:
        assert self._limits is not None
        idle_ms = self._limits.idle_ms
        cutoff = asyncio.get_running_loop().time() - idle_ms / 1000
        idle = [c for c in self._conns if c.idle_since < cutoff and not c.busy]
        for conn in idle:
            what = f" with {conn.partial_bytes} bytes of an unfinished request" if conn.partial_bytes else ""
            conn.close(f"idle{what} for more than connections.max.idle.ms ({idle_ms})", logging.DEBUG)
        self._schedule_sweep()

    def close_all(self) -> None:
        """Close every connection (shutdown) and stop the sweep."""
        if self._sweep_timer is not None:
            self._sweep_timer.cancel()
            self._sweep_timer = None
        self._on_close = None
        for conn in list(self._conns):
            conn.close()
        self._shed_log.close()


class Acceptor:
    """The listening sockets and the accept loop (see the module docstring for the limits it applies)."""

    def __init__(
        self,
        table: ConnectionTable,
        limits: ConnectionLimits,
        make_connection: Callable[[socket.socket, tuple[object, ...]], object],
    ) -> None:
        self._table = table
        self._limits = limits
        self._make_connection = make_connection
        self._loop = asyncio.get_running_loop()
        self._sockets: list[socket.socket] = []
        self._watching = False
        self._full = False  # at max.connections
        self._at_reserve = False  # the last connection took a descriptor from the logs' reserve
        self.failed_accepts = 0  # accept(2) failures for lack of descriptors or memory, for tests and operators
        self._backoff_s = _BACKOFF_FIRST_S
        self._backoff_timer: asyncio.TimerHandle | None = None
        self._closed = False
        self._resource_log = RateLimitedLog(log, logging.WARNING)
        self._per_ip_log = RateLimitedLog(log, logging.INFO)
        self._error_log = RateLimitedLog(log, logging.ERROR)
        self._full_log = RateLimitedLog(log, logging.WARNING)
        self._reserve_log = RateLimitedLog(log, logging.WARNING)

    @property
    def sockets(self) -> list[socket.socket]:
        return list(self._sockets)

    def listen(self, host: str, port: int) -> int:
        """Bind every address ``host`` resolves to (all of them on one port, the first one's when ``port`` is 0)
        and start accepting; returns the port. Raises OSError when an address cannot be bound."""
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        seen: set[tuple[int, object]] = set()
        try:
            for family, type_, proto, _, addr in infos:
                if (family, addr) in seen:
                    continue
                seen.add((family, addr))
                sock = socket.socket(family, type_, proto)
                self._sockets.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind((addr[0], port, *addr[2:]))
                if port == 0:
                    port = sock.getsockname()[1]
                sock.listen(LISTEN_BACKLOG)
                sock.setblocking(False)
        except OSError:
            for sock in self._sockets:
                sock.close()
            self._sockets.clear()
            raise
        self._watch()
        return port

    # --- watching the listening sockets ---------------------------------------------------------------------

    def _watch(self) -> None:
        if self._watching or self._closed:
            return
        for sock in self._sockets:
            self._loop.add_reader(sock.fileno(), self._on_acceptable, sock)
        self._watching = True

    def _unwatch(self) -> None:
        if not self._watching:
            return
        for sock in self._sockets:
            self._loop.remove_reader(sock.fileno())
        self._watching = False

    def connection_closed(self) -> None:
        """A connection closed: a slot and a descriptor are free, so accept again if we had stopped."""
        if self._closed:
            return
        if self._full:
            if len(self._table) >= self._limits.max_connections:
                return
            self._full = False
        self._at_reserve = False
        if self._backoff_timer is not None:
            self._backoff_timer.cancel()
            self._backoff_timer = None
        self._watch()

    # --- accepting -----------------------------------------------------------------------------------------

    def _on_acceptable(self, lsock: socket.socket) -> None:
        table = self._table
        limits = self._limits
        for _ in range(_ACCEPT_BATCH):
            if not self._watching:  # stopped by the last connection (the descriptor reserve)
                return
            if len(table) >= limits.max_connections:
                self._stop_when_full()
                return
            try:
                sock, addr = lsock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                if e.errno in _RESOURCE_ERRNOS:
                    self._out_of_resources(e)
                    return
                if e.errno in _TRANSIENT_ERRNOS:
                    continue
                self._accept_failed(lsock, e)
                return
            self._backoff_s = _BACKOFF_FIRST_S
            self._admit(sock, addr)

    def _accept_failed(self, lsock: socket.socket, e: OSError) -> None:
        where = lsock.getsockname()
        self._error_log.note(
            lambda: f"accept on {where} failed: {e}; retrying every {_BACKOFF_MAX_S:g}s",
            lambda n: f"{n} accepts failed in the last minute on {where}: {e}",
        )
        self._back_off(_BACKOFF_MAX_S)

    def _admit(self, sock: socket.socket, addr: tuple[object, ...]) -> None:
        ip = str(addr[0])
        per_ip = self._limits.max_connections_per_ip
        if per_ip is not None and self._table.count_for(ip) >= per_ip:
            sock.close()
            self._per_ip_log.note(
                lambda: (f"closed a connection from {ip}: it already has max.connections.per.ip ({per_ip}) "
                         f"connections (further ones are summed up once a minute)"),
                lambda n: f"{n} connections closed in the last minute: over max.connections.per.ip ({per_ip})",
            )  # fmt: skip
            return
        fd = sock.fileno()
        try:
            sock.setblocking(False)
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._make_connection(sock, addr)
        except OSError as e:  # the peer is already gone
            log.debug("dropping a connection from %s: %s", ip, e)
            sock.close()
            return
        limit = self._limits.descriptor_limit
        if limit is not None and fd >= limit - self._limits.descriptor_reserve:
            self._stop_at_reserve(fd, limit)

    def _stop_at_reserve(self, fd: int, limit: int) -> None:
        """The descriptor just accepted is within the reserve kept for the logs: every lower descriptor is in
        use (the kernel hands out the lowest free one), so at most ``limit - fd - 1`` are left. Stop accepting
        until a connection closes; this holds whatever max.connections says, since a broker whose logs cannot
        open a descriptor can no longer flush, roll a segment or create a partition."""
        self._at_reserve = True
        self._unwatch()
        reserve = self._limits.descriptor_reserve
        open_now = len(self._table)
        self._reserve_log.note(
            lambda: (f"connections reached the {reserve} descriptors kept for the logs (descriptor {fd} of limit "
                     f"{limit}, {open_now} connections open): not accepting until a connection closes; new clients "
                     f"wait in the listen backlog"),
            lambda n: f"connections reached the descriptors kept for the logs {n} more times in the last minute",
        )  # fmt: skip

    def _stop_when_full(self) -> None:
        self._full = True
        self._unwatch()
        limit = self._limits.max_connections
        self._full_log.note(
            lambda: (f"max.connections ({limit}) reached: not accepting until a connection closes; new clients "
                     f"wait in the listen backlog"),
            lambda n: f"max.connections ({limit}) reached {n} more times in the last minute",
        )

    def _out_of_resources(self, e: OSError) -> None:
        self.failed_accepts += 1
        reason = os.strerror(e.errno) if e.errno is not None else str(e)
        reason = reason[:1].lower() + reason[1:]
        limit = nofile_limit()
        shown = "unlimited" if limit is None else str(limit)
        open_now = len(self._table)
        self._resource_log.note(
            lambda: (f"cannot accept connections: {reason} (limit {shown}, {open_now} connections open); they wait "
                     f"in the listen backlog until descriptors free up (further failures are summed up once a "
                     f"minute)"),
            lambda n: (f"{n} accepts failed in the last minute: {reason} (limit {shown}); connections wait in the "
                       f"listen backlog"),
        )  # fmt: skip
        self._back_off(self._backoff_s)
        self._backoff_s = min(_BACKOFF_MAX_S, self._backoff_s * 2)

    def _back_off(self, delay_s: float) -> None:
        self._unwatch()
        if self._backoff_timer is not None:
            self._backoff_timer.cancel()
        self._backoff_timer = self._loop.call_later(delay_s, self._end_backoff)

    def _end_backoff(self) -> None:
        self._backoff_timer = None
        if not self._full and not self._at_reserve:
            self._watch()

    def close(self) -> None:
        """Stop accepting and close the listening sockets."""
        if self._closed:
            return
        self._closed = True
        self._unwatch()
        if self._backoff_timer is not None:
            self._backoff_timer.cancel()
            self._backoff_timer = None
        for sock in self._sockets:
            sock.close()
        self._sockets.clear()
        for rate_limited in (self._resource_log, self._per_ip_log, self._error_log, self._full_log,
                             self._reserve_log):
            rate_limited.close()
