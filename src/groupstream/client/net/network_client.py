"""The I/O shell of the client: sockets, one selector, and the node connections it drives.

Everything here runs on the network thread except ``wakeup``. The decisions live in pure objects:
`NodeConnection` (states, versions, in-flight, backoff) and `MetadataCache` (brokers, leaders, refreshes);
this class only moves bytes and calls handlers.

Requests wait in one unsent queue, in the order given, until their node has a ready connection with room
under ``max.in.flight.requests.per.connection``; waiting starts a connection if there is none. A request whose
node is None goes to the least loaded node. A request that waits longer than its timeout fails with
REQUEST_TIMED_OUT; one whose node cannot be reached fails with NETWORK_EXCEPTION, and so do the requests in
flight on a connection that drops. Both are retriable ``KafkaError``s: the manager that sent the request
decides whether and when to retry.

Reachability: every failed connection attempt is logged at DEBUG. Once every bootstrap server has failed its
latest attempt with no connection ready, the client logs one WARNING naming the addresses and errors and
keeps ``unreachable`` set to that text (which closing clients use to explain what they give up); it keeps
retrying quietly, and only a connection that succeeds and a new round of failures warns again. Java's client
logs a warning per attempt instead, which buries the one fact that matters under retries.

A refused SASL authentication is different: the same settings will be refused again, so it is fatal, as Java's
AuthenticationException is. ``fatal`` keeps the error (a non-retriable SASL_AUTHENTICATION_FAILED `KafkaError`
whose text names the user, the mechanism and the broker's message); every request waiting or sent later fails
with it, so Producer deliveries, Consumer.poll and Admin calls report it instead of retrying forever.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import random
import secrets
import selectors
import socket
from collections import deque
from collections.abc import Callable
from typing import Any

from groupstream.client.errors import ClientError, KafkaError
from groupstream.client.net.config import NetworkConfig
from groupstream.client.net.metadata import MetadataCache
from groupstream.client.net.node_connection import SETTING_UP, Completion, ConnectionState, NodeConnection
from groupstream.client.net.requests import ClientResponse, UnsentRequest
from groupstream.protocol.error_codes import ErrorCode

log = logging.getLogger("groupstream.client.net")

_MAX_READS_PER_EVENT = 8
_JITTER = 0.2  # Java's reconnect backoff jitter: +-20%
UNREACHABLE = "no bootstrap server can be reached"


def os_error_text(code: int) -> str:
    """``connection refused`` for ECONNREFUSED: the words a user searches for, not the symbol."""
    text = os.strerror(code)
    return text[:1].lower() + text[1:]


class NetworkClient:
    """Owns the node connections, the selector and the metadata cache. Not thread-safe except ``wakeup``."""

    def __init__(
        self,
        config: NetworkConfig,
        metadata: MetadataCache,
        clock: Callable[[], int],
        *,
        warn_unreachable: bool = True,
    ) -> None:
        self.config = config
        self._warn_unreachable = warn_unreachable
        self.metadata = metadata
        self._clock = clock
        self._rng = random.Random()
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._conns: dict[int, NodeConnection] = {}
        self._socks: dict[int, socket.socket] = {}
        self._masks: dict[int, int] = {}
        self._unsent: deque[UnsentRequest] = deque()
        self._bootstrap = {-(i + 1): hp for i, hp in enumerate(config.bootstrap_servers)}
        self._bootstrap_addresses = [f"{h}:{p}" for h, p in config.bootstrap_servers]
        self._failed: dict[str, str] = {}  # address -> why its latest attempt failed, since the last success
        self.unreachable: str | None = None  # set while no bootstrap server can be reached (see the module doc)
        self.fatal: KafkaError | None = None  # a refused authentication (see the module doc)
        self._closed = False
        # wakeup protocol: the loop sets ``sleeping`` before it checks for work and blocks; another thread that
        # adds work afterwards sees it and writes one byte; ``_woken`` keeps that to one byte per sleep
        self.sleeping = False
        self._woken = False

    # --- public --------------------------------------------------------------------------------------------

    def send(self, request: UnsentRequest, now_ms: int) -> None:
        """Queue ``request``; it goes out at the next ``poll`` its node allows."""
        if self._closed:
            self._complete(request, -1, -1, None, ClientError("the network client is closed"), now_ms)
            return
        if self.fatal is not None:
            self._complete(request, -1, -1, None, self.fatal, now_ms)
            return
        request.created_ms = now_ms
        self._unsent.append(request)

    def wakeup(self) -> None:
        """Interrupt a blocking ``poll`` (any thread)."""
        if self.sleeping and not self._woken:
            self._woken = True
            with contextlib.suppress(OSError):  # full (a byte is already there) or closing
                self._wake_w.send(b"\0")

    @property
    def pending_requests(self) -> int:
        """Requests unsent or in flight (what closing waits for)."""
        return len(self._unsent) + sum(c.in_flight for c in self._conns.values())

    def in_flight(self, node_id: int) -> int:
        conn = self._conns.get(node_id)
        return conn.in_flight if conn is not None else 0

    def connection(self, node_id: int) -> NodeConnection | None:
        return self._conns.get(node_id)

    @property
    def bootstrap_nodes(self) -> dict[int, tuple[str, int]]:
        """The stand-in node ids of the bootstrap servers (negative, in the order given) and their addresses."""
        return dict(self._bootstrap)

    def address(self, node_id: int) -> tuple[str, int] | None:
        """Where ``node_id`` is reached: a bootstrap server, a broker of the metadata or one added to it."""
        return self._address(node_id)

    def ready(self, node_id: int, now_ms: int) -> bool:
        """Whether ``node_id`` can take a request now; if not, start connecting to it when its backoff allows
        (Java's ``NetworkClient.ready``). Raises KafkaError when the node has no known address."""
        conn = self._connection_for(node_id)
        if conn is None:
            raise KafkaError(ErrorCode.NETWORK_EXCEPTION, f"node {node_id} is not in the cluster metadata")
        if conn.can_connect(now_ms) and self.fatal is None:
            self._connect(conn, now_ms)
        return conn.is_ready

    def poll(self, timeout_ms: int | None, now_ms: int, has_work: Callable[[], bool] | None = None) -> int:
        """Send what can be sent, wait up to ``timeout_ms`` for I/O (less when a deadline is nearer), complete
        handlers, expire overdue requests. ``has_work`` is checked after the client has announced that it is
        going to sleep, so work added concurrently either is seen here or wakes the selector. Returns the
        time after the I/O."""
        meta = self.metadata.poll(now_ms)
        for req in meta.unsent_requests:
            self.send(req, now_ms)
        self._dispatch(now_ms)
        self._flush_writes(now_ms)
        timeout = self._select_timeout(timeout_ms, meta.next_poll_delay_ms, now_ms)
        self.sleeping = True
        if has_work is not None and has_work():
            timeout = 0
        try:
            events = self._selector.select(None if timeout is None else timeout / 1000)
        finally:
            self.sleeping = False
        now_ms = self._clock()
        for key, mask in events:
            node_id = key.data
            if node_id is None:
                self._drain_wakeups()
                continue
            self._on_socket_event(node_id, mask, now_ms)
        self._woken = False
        self._expire(now_ms)
        self._dispatch(now_ms)
        self._flush_writes(now_ms)
        return now_ms

    def close(self) -> None:
        """Close every socket and fail whatever is unsent or in flight."""
        if self._closed:
            return
        self._closed = True
        now = self._clock()
        for node_id in list(self._conns):
            self._disconnect(node_id, now, "the client is closing")
        while self._unsent:
            req = self._unsent.popleft()
            self._complete(req, -1, -1, None, ClientError("the network client closed before sending it"), now)
        with contextlib.suppress(Exception):
            self._selector.unregister(self._wake_r)
        self._wake_r.close()
        self._wake_w.close()
        self._selector.close()

    # --- choosing nodes ---------------------------------------------------------------------------------------

    def _known_nodes(self) -> list[int]:
        brokers = sorted(self.metadata.brokers)
        return brokers if brokers else sorted(self._bootstrap, reverse=True)

    def least_loaded_node(self, now_ms: int) -> int | None:
        """A ready node with room, fewest requests in flight first; else a ready node without room (the request
        waits its turn there); else one being connected; else one that may be connected now; else None (every
        node is backing off). Bootstrap servers stand in until the metadata names the brokers, and again when
        none of those can be reached."""
        for candidates in (self._known_nodes(), sorted(self._bootstrap, reverse=True)):
            best: int | None = None
            busy: int | None = None
            connecting: int | None = None
            connectable: int | None = None
            for node in candidates:
                conn = self._conns.get(node)
                if conn is None:
                    connectable = node if connectable is None else connectable
                elif conn.is_ready:
                    if conn.can_send():
                        if best is None or conn.in_flight < self._conns[best].in_flight:
                            best = node
                    elif busy is None or conn.in_flight < self._conns[busy].in_flight:
                        busy = node
                elif conn.state in SETTING_UP:
                    connecting = node if connecting is None else connecting
                elif conn.can_connect(now_ms) and connectable is None:
                    connectable = node
            for found in (best, busy, connecting, connectable):
                if found is not None:
                    return found
        return None

    def _address(self, node_id: int) -> tuple[str, int] | None:
        if node_id < 0:
            return self._bootstrap.get(node_id)
        b = self.metadata.broker(node_id)
        return (b.host, b.port) if b is not None else None

    def _connection_for(self, node_id: int) -> NodeConnection | None:
        conn = self._conns.get(node_id)
        address = self._address(node_id)
        if conn is not None:
            if (
                address is not None
                and (conn.host, conn.port) != address
                and conn.state is ConnectionState.DISCONNECTED
            ):
                conn.host, conn.port = address  # the broker moved; the next attempt goes to the new address
            return conn
        if address is None:
            return None
        conn = NodeConnection(node_id, address[0], address[1], self.config, jitter=self._jitter, nonce=_nonce)
        self._conns[node_id] = conn
        return conn

    def _jitter(self) -> float:
        return 1.0 + self._rng.uniform(-_JITTER, _JITTER)

    # --- sending ---------------------------------------------------------------------------------------------

    def _dispatch(self, now_ms: int) -> None:
        if not self._unsent:
            return
        waiting: deque[UnsentRequest] = deque()
        blocked: set[int] = set()  # nodes where an earlier request waits: later ones keep their order
        unsent = self._unsent
        self._unsent = waiting  # handlers that run meanwhile and send again append here
        while unsent:
            req = unsent.popleft()
            timeout = self.config.request_timeout_ms if req.timeout_ms is None else req.timeout_ms
            node_id = req.node_id if req.node_id is not None else self.least_loaded_node(now_ms)
            if node_id is None or node_id in blocked:
                if now_ms - req.created_ms >= timeout:
                    self._fail_unsent(req, node_id, now_ms, "no connection became available")
                else:
                    waiting.append(req)
                continue
            conn = self._connection_for(node_id)
            if conn is None:
                self.metadata.request_update()
                self._complete(
                    req, node_id, -1, None,
                    KafkaError(ErrorCode.NETWORK_EXCEPTION, f"node {node_id} is not in the cluster metadata"), now_ms,
                )  # fmt: skip
                continue
            if conn.can_connect(now_ms):
                self._connect(conn, now_ms)
            if not conn.can_send():
                if now_ms - req.created_ms >= timeout:
                    self._fail_unsent(req, node_id, now_ms, f"node {node_id} ({conn.address}) was not ready")
                else:
                    blocked.add(node_id)
                    waiting.append(req)
                continue
            self._send_now(conn, req, now_ms)

    def _send_now(self, conn: NodeConnection, req: UnsentRequest, now_ms: int) -> None:
        try:
            version = conn.version_for(req.api, req.max_version)
            conn.send(
                req, req.api, version, req.body_for(version), now_ms,
                expect_response=req.expect_response, timeout_ms=req.timeout_ms,
            )  # fmt: skip
        except ClientError as e:
            self._complete(req, conn.node_id, -1, None, e, now_ms)
            return
        if not req.expect_response:
            self._complete(req, conn.node_id, version, None, None, now_ms)

    def _fail_unsent(self, req: UnsentRequest, node_id: int | None, now_ms: int, why: str) -> None:
        timeout = self.config.request_timeout_ms if req.timeout_ms is None else req.timeout_ms
        err = KafkaError(ErrorCode.REQUEST_TIMED_OUT, f"{req.api.name} not sent within {timeout} ms: {why}")
        self._complete(req, -1 if node_id is None else node_id, -1, None, err, now_ms)

    def _flush_writes(self, now_ms: int) -> None:
        for node_id, conn in list(self._conns.items()):
            if conn.has_output() and conn.state not in (ConnectionState.DISCONNECTED, ConnectionState.CONNECTING):
                self._write(node_id, conn, now_ms)
            self._update_interest(node_id)

    def _write(self, node_id: int, conn: NodeConnection, now_ms: int) -> None:
        sock = self._socks[node_id]
        while conn.has_output():
            try:
                sent = sock.sendmsg(conn.output_chunks())
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                self._disconnect(
                    node_id, now_ms, f"connection to {conn.address} lost while sending: {e.strerror or e}"
                )
                return
            if sent == 0:
                return
            conn.on_sent(sent)

    # --- connections ----------------------------------------------------------------------------------------

    def _connect(self, conn: NodeConnection, now_ms: int) -> None:
        conn.connect_started(now_ms)
        try:
            infos = socket.getaddrinfo(conn.host, conn.port, type=socket.SOCK_STREAM)
            family, stype, proto, _, addr = infos[0]
            sock = socket.socket(family, stype, proto)
        except OSError as e:
            self._connection_failed(conn, now_ms, f"{conn.address}: cannot resolve host: {e.strerror or e}")
            return
        sock.setblocking(False)
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        rc = sock.connect_ex(addr)
        if rc not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY):
            sock.close()
            self._connection_failed(conn, now_ms, f"{conn.address}: {os_error_text(rc)}")
            return
        self._socks[conn.node_id] = sock
        self._masks[conn.node_id] = selectors.EVENT_WRITE
        self._selector.register(sock, selectors.EVENT_WRITE, conn.node_id)
        if rc == 0:
            conn.connect_established(now_ms)

    def _connection_failed(self, conn: NodeConnection, now_ms: int, reason: str) -> None:
        conn.disconnected(now_ms, reason)
        self._attempt_failed(conn, reason)
        self._fail_bound_unsent(conn, now_ms, reason)

    def _attempt_failed(self, conn: NodeConnection, reason: str) -> None:
        """A connection attempt failed before the connection was ready: warn once every bootstrap server has
        failed since the last success (see the module docstring)."""
        if self._closed or self.fatal is not None:
            return
        self._failed[conn.address] = reason
        log.debug("connection to %s failed (node %d, attempt %d): %s", conn.address, conn.node_id, conn.failures, reason)
        if self.unreachable is not None or any(c.is_ready for c in self._conns.values()):
            return
        if all(a in self._failed for a in self._bootstrap_addresses):
            self.unreachable = f"{UNREACHABLE}: " + "; ".join(self._failed[a] for a in self._bootstrap_addresses)
            if not self._warn_unreachable:  # the caller raises this text instead (a blocking façade)
                return
            log.warning("%s: %s; retrying in the background (backoff up to reconnect.backoff.max.ms=%d)",
                        self.config.client_id, self.unreachable, self.config.reconnect_backoff_max_ms)  # fmt: skip

    def _reached(self, conn: NodeConnection) -> None:
        """A connection became ready: the next outage is a new one, worth a new warning."""
        self._failed.clear()
        if self.unreachable is not None:
            self.unreachable = None
            log.info("%s: connected to %s (node %d)", self.config.client_id, conn.address, conn.node_id)

    def _fail_bound_unsent(self, conn: NodeConnection, now_ms: int, reason: str) -> None:
        """Requests waiting for a node that could not be reached fail now: their managers retry with backoff
        (or choose another node) instead of waiting out the request timeout."""
        unsent = self._unsent  # filtered in place: ``_dispatch`` may be appending to this very deque
        failed = [req for req in unsent if req.node_id == conn.node_id]
        if not failed:
            return
        keep = [req for req in unsent if req.node_id != conn.node_id]
        unsent.clear()
        unsent.extend(keep)
        for req in failed:
            err = KafkaError(
                ErrorCode.NETWORK_EXCEPTION, f"cannot reach node {conn.node_id} ({conn.address}): {reason}"
            )
            self._complete(req, conn.node_id, -1, None, err, now_ms)

    def _disconnect(self, node_id: int, now_ms: int, reason: str, timed_out: Any = None) -> None:
        conn = self._conns[node_id]
        sock = self._socks.pop(node_id, None)
        self._masks.pop(node_id, None)
        if sock is not None:
            with contextlib.suppress(Exception):
                self._selector.unregister(sock)
            sock.close()
        was_ready = conn.is_ready
        tags = conn.disconnected(now_ms, reason)
        if was_ready and not self._closed:
            log.info("disconnected from node %s (%s): %s", node_id, conn.address, reason)
        elif not was_ready:
            self._attempt_failed(conn, reason)
        self.metadata.request_update()  # a leader may have moved or gone
        for req in tags:
            code = ErrorCode.REQUEST_TIMED_OUT if req is timed_out else ErrorCode.NETWORK_EXCEPTION
            self._complete(req, node_id, -1, None, KafkaError(code, reason), now_ms)
        if not was_ready and self.fatal is None:
            self._fail_bound_unsent(conn, now_ms, reason)

    def _update_interest(self, node_id: int) -> None:
        sock = self._socks.get(node_id)
        conn = self._conns.get(node_id)
        if sock is None or conn is None:
            return
        if conn.state is ConnectionState.CONNECTING:
            mask = selectors.EVENT_WRITE
        else:
            mask = selectors.EVENT_READ | (selectors.EVENT_WRITE if conn.has_output() else 0)
        if self._masks.get(node_id) != mask:
            self._masks[node_id] = mask
            self._selector.modify(sock, mask, node_id)

    # --- events --------------------------------------------------------------------------------------------

    def _on_socket_event(self, node_id: int, mask: int, now_ms: int) -> None:
        conn = self._conns.get(node_id)
        sock = self._socks.get(node_id)
        if conn is None or sock is None:
            return
        if conn.state is ConnectionState.CONNECTING:
            err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                reason = f"{conn.address}: {os_error_text(err)}"
                self._disconnect(node_id, now_ms, reason)
                return
            conn.connect_established(now_ms)
            self._write(node_id, conn, now_ms)
            self._update_interest(node_id)
            return
        if mask & selectors.EVENT_READ:
            self._read(node_id, conn, sock, now_ms)
        if node_id in self._socks and mask & selectors.EVENT_WRITE:
            self._write(node_id, conn, now_ms)

    def _read(self, node_id: int, conn: NodeConnection, sock: socket.socket, now_ms: int) -> None:
        ready = conn.is_ready
        for _ in range(_MAX_READS_PER_EVENT):
            view = conn.recv_buffer()  # a large response is read straight into its own buffer: one copy
            room = len(view)
            try:
                n = sock.recv_into(view)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                self._disconnect(node_id, now_ms, f"connection to {conn.address} lost: {e.strerror or e}")
                return
            del view
            if not n:
                self._disconnect(node_id, now_ms, f"{conn.address} closed the connection{conn.closed_hint()}")
                return
            result = conn.on_received(n, now_ms)
            if not ready and conn.is_ready:  # ApiVersions answered: the node is reachable
                ready = True
                self._reached(conn)
            self._deliver(node_id, result.completions, now_ms)
            if result.fatal and result.failure is not None:
                self._authentication_failed(node_id, conn, result.failure, now_ms)
                return
            if result.failure is not None:
                if conn.is_ready:  # a failed negotiation is a failed attempt: ``_attempt_failed`` reports it
                    log.warning("closing the connection to node %s: %s", node_id, result.failure)
                self._disconnect(node_id, now_ms, result.failure)
                return
            if n < room:
                return

    def _authentication_failed(self, node_id: int, conn: NodeConnection, reason: str, now_ms: int) -> None:
        """Fatal: log it once, close the connection and fail every waiting request with it (module doc)."""
        self.fatal = KafkaError(ErrorCode.SASL_AUTHENTICATION_FAILED, f"{conn.address}: {reason}")
        log.error("%s: %s", self.config.client_id, self.fatal.detail)
        self._disconnect(node_id, now_ms, reason)
        while self._unsent:
            req = self._unsent.popleft()
            self._complete(req, -1 if req.node_id is None else req.node_id, -1, None, self.fatal, now_ms)

    def _deliver(self, node_id: int, completions: list[Completion], now_ms: int) -> None:
        for c in completions:
            self._complete(c.tag, node_id, c.version, c.body, None, now_ms)

    def _expire(self, now_ms: int) -> None:
        for node_id, conn in list(self._conns.items()):
            if conn.maybe_reauthenticate(now_ms):
                log.debug("re-authenticating with node %s (%s) before its SASL session ends", node_id, conn.address)
            overdue = conn.check_timeouts(now_ms)
            if overdue is not None:
                reason, tag = overdue
                self._disconnect(node_id, now_ms, reason, timed_out=tag)

    def _select_timeout(self, timeout_ms: int | None, metadata_delay: int | None, now_ms: int) -> int | None:
        deadlines: list[int] = []
        if timeout_ms is not None:
            deadlines.append(now_ms + timeout_ms)
        if metadata_delay is not None:
            deadlines.append(now_ms + metadata_delay)
        for conn in self._conns.values():
            d = conn.next_deadline_ms()
            if d is not None and (conn.state is not ConnectionState.DISCONNECTED or self._unsent):
                deadlines.append(d)
        for req in self._unsent:
            timeout = self.config.request_timeout_ms if req.timeout_ms is None else req.timeout_ms
            deadlines.append(req.created_ms + timeout)
            break  # the oldest is first (close enough: timeouts rarely differ)
        if not deadlines:
            return None
        return max(0, min(deadlines) - now_ms)

    def _drain_wakeups(self) -> None:
        with contextlib.suppress(OSError):
            while self._wake_r.recv(4096):
                pass

    def _complete(
        self,
        req: UnsentRequest,
        node_id: int,
        version: int,
        body: Any,
        error: BaseException | None,
        now_ms: int,
    ) -> None:
        try:
            req.handler(ClientResponse(req, node_id, version, body, error, now_ms))
        except Exception:
            log.exception("handler of a %s request failed", req.api.name)


def _nonce() -> str:
    """A SCRAM client nonce (RFC 5802: printable, no comma): the randomness the pure connection does not draw."""
    return secrets.token_urlsafe(24)
