"""The asyncio shell around the sans-IO protocol: one `KafkaConnection` per client socket.

Requests may be pipelined; each gets a slot in arrival order and responses leave strictly in that order, even
when a later request (a Produce with acks=1) completes before an earlier one (a long-polling Fetch). Produce
with acks=0 takes no slot. A peer that breaks framing or sends an undecodable request is logged once and
disconnected; a request for an API we do not serve is answered only for ApiVersions, as Kafka does.

On a TLS listener (SSL, SASL_SSL) the socket's bytes pass through a sans-IO `TlsSession` and responses through a
`TlsSocketWriter`; nothing reaches the protocol before the handshake ends. On a SASL listener a `SaslConnection`
sees each request first: before authentication only ApiVersions and the SASL requests pass, and the bytes held
for unfinished requests are bounded by ``sasl.server.max.receive.size``. Whatever a client does wrong (plaintext
on a TLS port, a bad handshake, a wrong password, a request before authentication) closes that connection alone,
with one log line saying what happened.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from groupstream.broker.authentication import RawTokens, SaslConnection
from groupstream.broker.socket_writer import SocketWriter
from groupstream.broker.tls_writer import TlsSocketWriter
from groupstream.protocol.connection import Request, ServerConnection, UnsupportedRequest
from groupstream.protocol.errors import ProtocolError
from groupstream.protocol.headers import RequestHeader
from groupstream.security.config import SecurityProtocol
from groupstream.security.principal import NoMatchingRule, distinguished_name
from groupstream.security.sasl import Admission, SaslState
from groupstream.security.tls_session import TlsClosed, TlsError, TlsSession

if TYPE_CHECKING:
    from groupstream.broker.config import ListenerConfig
    from groupstream.broker.node import Broker

log = logging.getLogger("groupstream.broker.server")

NO_RESPONSE: Any = object()
"""Returned by a handler for a request that gets no response at all (Produce with acks=0)."""

_MAX_IN_FLIGHT = 256  # stop reading a connection with this many unanswered requests
_MAX_UNSENT_BYTES = 64 * 1024 * 1024  # ... or with this much response data the peer has not taken yet
_READ_SIZE = 256 * 1024  # bytes per read, as asyncio's transports read
_Got = TypeVar("_Got", bytes, int)  # what one read gives: the bytes (recv) or their count (recv_into)
ANONYMOUS = "User:ANONYMOUS"
_LINGER_S = 1.0  # how long a refused client has to hang up by itself (see KafkaConnection._linger)


class _Slot:
    __slots__ = ("received", "request", "result", "sasl")

    def __init__(self, request: Request, result: Any, sasl: bool = False) -> None:
        self.request = request
        self.result = result
        self.sasl = sasl  # a SASL request answered by the connection's SaslConnection
        self.received = time.monotonic()  # made as the request is handled: its time in the broker starts here


class KafkaConnection:
    """One client socket, driven straight from the event loop's selector.

    The connection owns its socket and reads it with ``loop.add_reader``; responses go out through a
    `SocketWriter` on the same socket, watched with ``loop.add_writer`` on the same descriptor. asyncio's
    transports are not used: a transport keeps its socket to itself, so writing around it (for scatter-gather
    sends without copies) needed a second descriptor per connection, and a broker out of descriptors fell
    over at half the connections it could have served.

    What the connection table needs to enforce its limits is kept here: when something last happened
    (``idle_since``: bytes received, a response handed over, or unsent response bytes taken by the peer),
    whether a request is being answered (``busy``), and how much of a request has arrived without its end
    (``partial_bytes``, since ``partial_since``).
    """

    def __init__(
        self,
        broker: Broker,
        sock: socket.socket,
        peer: tuple[Any, ...],
        listener: ListenerConfig | None = None,
        tls_context: ssl.SSLContext | None = None,
    ) -> None:
        """``sock`` is a connected, non-blocking socket this object now owns; ``listener`` the listener that
        accepted it (None: a plain listener), with ``tls_context`` when it speaks TLS."""
        self._broker = broker
        self._table = broker.connections
        self._loop = asyncio.get_running_loop()
        self._sock = sock
        self._fd = sock.fileno()
        self._conn = ServerConnection(broker.apis, broker.config.max_frame)
        self._slots: deque[_Slot] = deque()
        self._reading_paused = False
        self._closed = False
        self._closing: str | None = None  # close once everything handed to the writer is sent, for this reason
        self._linger_timer: asyncio.TimerHandle | None = None
        self.ip: str = str(peer[0])
        self.peer = f"{peer[0]}:{peer[1]}"
        self.client_host = f"/{peer[0]}"
        self.listener = listener
        self.principal = ANONYMOUS
        """Kafka's principal of the client: ``User:`` + its SASL user name or its certificate's mapped name."""
        self._tls: TlsSession | None = None
        self._writer: SocketWriter
        if tls_context is not None:
            self._tls = TlsSession(tls_context)
            self._writer = TlsSocketWriter(self._loop, sock, self._tls, self._on_drained)
        else:
            self._writer = SocketWriter(self._loop, sock, self._on_drained)
        self._sasl: SaslConnection | None = None
        self._raw: RawTokens | None = None  # bare SASL tokens after a SaslHandshake v0
        where = str(listener) if listener is not None else "the listener"
        self._where = where
        if listener is not None and listener.protocol.sasl and listener.security is not None:
            self._sasl = SaslConnection(
                listener.security, broker.credentials, broker.sasl_secret, broker.auth_executor,
                broker.config.failed_auth_delay_ms, self.peer, where, lambda: broker.auth_clock(),
            )  # fmt: skip
            self._sasl.on_authenticated = self._authenticated
        now = self._loop.time()
        self.last_active = now
        self.partial_bytes = 0
        self.partial_since = now
        self._table.add(self)
        self._loop.add_reader(self._fd, self._on_readable)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def busy(self) -> bool:
        """A request is being answered (a handler or a long poll has not produced its response yet): not idle,
        whatever the clock. Responses waiting for the peer to read them do not count: a peer that takes none
        of them for connections.max.idle.ms is as idle as one that sends nothing."""
        return bool(self._slots)

    @property
    def idle_since(self) -> float:
        """Loop time of the last sign of life: bytes received, a response handed over, or sent bytes taken."""
        return max(self.last_active, self._writer.progress_at)

    # --- reading -----------------------------------------------------------------------------------------

    def _on_readable(self) -> None:
        if self._tls is None and self._raw is None and (self._sasl is None or self._sasl.authenticated):
            self._read_into()
            return
        data = self._recv(lambda: self._sock.recv(_READ_SIZE))
        if data is None:
            return
        if self._tls is not None:
            self._tls_received(data)
            return
        self.data_received(data)

    def _read_into(self) -> None:
        """Plaintext, once authenticated if at all: the socket's bytes go straight into the request reader's
        buffer, and a large request (a Produce of a megabyte) into a buffer of its own once an eighth of it has
        arrived, so its bytes are copied about once, socket to request, instead of received, appended to a
        buffer and sliced out of it again. (Before SASL authentication ends, reads stay small, so that
        ``sasl.server.max.receive.size`` bounds what a client can make the broker hold.)"""
        conn = self._conn
        n = self._recv(lambda: self._sock.recv_into(conn.recv_buffer()))
        if n is None:
            return
        conn.advance(n)
        self._take_requests()

    def _recv(self, read: Callable[[], _Got]) -> _Got | None:
        """One read from the socket; None when there was nothing to read or the connection ended (it is
        aborted then: a reset or an orderly close is how many clients hang up)."""
        try:
            got = read()
        except (BlockingIOError, InterruptedError):
            return None
        except OSError as e:
            self._abort(f"read failed: {e}", logging.DEBUG)
            return None
        if not got:
            self._abort("the client closed the connection", logging.DEBUG)
            return None
        self.last_active = self._loop.time()
        return got

    # --- TLS ---------------------------------------------------------------------------------------------------

    def _tls_received(self, data: bytes) -> None:
        tls = self._tls
        writer = self._writer
        assert tls is not None and isinstance(writer, TlsSocketWriter)
        was_established = tls.established
        try:
            if tls.feed(data):
                if not was_established:
                    writer.flush()  # the end of the handshake and the session tickets
                    if not self._tls_established(tls):
                        return
                self._tls_read(tls)
        except TlsClosed:
            writer.flush_now()
            self._abort("the client closed the TLS session", logging.DEBUG)
            return
        except TlsError as e:
            writer.flush_now()  # the alert, so that the client learns why
            if was_established:
                self._abort(f"TLS error: {e}")
            else:
                self._abort(f"TLS handshake failed on {self._where}: {e}{self._tls_hint(tls)}", logging.INFO)
            return
        if self._closed:
            return
        writer.flush()
        if writer.error is not None:
            self._abort(f"write failed: {writer.error}", logging.DEBUG)

    def _tls_read(self, tls: TlsSession) -> None:
        """The plaintext of what was fed. Once requests are read as such (no bare SASL tokens, SASL over if any),
        it is decrypted straight into the request reader's buffer (its pull mode, recv_buffer and advance), a large
        request into a buffer of its own: two copies of every byte fewer than through the session's buffer and
        `data_received` (a few per cent of the decryption's CPU; OpenSSL's SSL_read per TLS record is the rest).
        Before that (SASL exchanges) it goes through `data_received`."""
        conn = self._conn
        while not self._closed:
            if self._raw is not None or (self._sasl is not None and not self._sasl.authenticated):
                plain = tls.plaintext()
                if plain:
                    self.data_received(plain)
                return
            view = conn.recv_buffer()
            if not view:  # a whole large request not taken yet (not expected: every read below takes them)
                self.data_received(b"")  # dispatches the requests now whole
                view = conn.recv_buffer()
                if not view or self._closed:
                    return
            n = tls.read_into(view)
            if n:
                conn.advance(n)
                self.data_received(b"")  # dispatches the requests now whole
            if n < len(view):
                return

    @staticmethod
    def _tls_hint(tls: TlsSession) -> str:
        head = tls.first_bytes
        if len(head) >= 6 and head[0] == 0 and int.from_bytes(head[4:6], "big") < 100:
            return " (the client sent a plaintext Kafka request: is it configured with security.protocol=SSL or SASL_SSL?)"
        if head[:1] != b"\x16":
            return f" (the client does not speak TLS: first bytes {head!r})"
        return ""

    def _tls_established(self, tls: TlsSession) -> bool:
        """The handshake just ended: on an SSL listener the client certificate, if any, gives the principal.
        False when the connection was closed for it."""
        listener = self.listener
        if listener is None or listener.protocol is not SecurityProtocol.SSL:
            return True
        cert = tls.peer_certificate()
        if cert is None:
            self.principal = ANONYMOUS
        else:
            dn = distinguished_name(cert.get("subject", ()))
            mapper = listener.security.principal_mapper if listener.security is not None else None
            try:
                name = mapper.name(dn) if mapper is not None else dn
            except NoMatchingRule as e:
                self._abort(f"TLS client certificate refused on {self._where}: {e}", logging.INFO)
                return False
            self.principal = f"User:{name}"
        log.debug("%s connected on %s with %s as %s", self.peer, self._where, tls.describe(), self.principal)
        return True

    def _authenticated(self, principal: str) -> None:
        self.principal = principal

    # --- receiving -------------------------------------------------------------------------------------------

    def data_received(self, data: bytes | memoryview) -> None:
        if self._raw is not None:
            data = self._raw_received(data)
            if not data:
                return
        self._conn.receive_data(data)
        self._take_requests()

    def _take_requests(self) -> None:
        """Dispatch every whole request received, in order."""
        conn = self._conn
        sasl = self._sasl
        if sasl is not None and not sasl.authenticated and conn.buffered > self._broker.config.sasl_max_receive_size:
            limit = self._broker.config.sasl_max_receive_size
            self._abort(
                f"{conn.buffered} bytes of requests before SASL authentication ended, over "
                f"sasl.server.max.receive.size ({limit}) (an oversized SASL token, or requests sent too early)"
            )
            return
        took = False
        while not self._closed:
            try:
                event = conn.next_event()
            except ProtocolError as e:
                self._abort(f"malformed request: {e}")
                return
            if event is None:
                break
            took = True
            if isinstance(event, UnsupportedRequest):
                self._unsupported(event)
            else:
                self._dispatch(event)
        if self._closed:
            return
        self._update_reading()
        partial = conn.buffered
        if partial != self.partial_bytes or took:
            self._table.partial_changed(self, partial, took)

    # --- dispatch --------------------------------------------------------------------------------------

    def _dispatch(self, request: Request) -> None:
        sasl = self._sasl
        if sasl is not None:
            verdict = sasl.admit(request)
            admission = verdict.admission
            if admission is Admission.REJECT:
                self._abort(f"{verdict.reason} on {self._where}")
                return
            if admission is not Admission.PASS:
                if admission is Admission.HANDSHAKE:
                    result = sasl.handshake(request)
                else:
                    result = sasl.authenticate(request)
                self._queue(_Slot(request, result, sasl=True))
                if admission is Admission.HANDSHAKE and sasl.session.raw_tokens and not self._closed:
                    self._start_raw_tokens()
                return
        handler = self._broker.handlers.get(request.api.key)
        if handler is None:
            self._abort(f"no handler for {request.api.name}")
            return
        broker = self._broker
        broker.current_client_host = self.client_host
        broker.current_principal = self.principal
        broker.config.serving_listener = self.listener
        try:
            result = handler(broker, request)
        except Exception:
            log.exception("handler for %s v%d from %s failed", request.api.name, request.version, self.peer)
            self._abort(f"internal error handling {request.api.name}")
            return
        finally:
            broker.config.serving_listener = None
        if result is NO_RESPONSE:
            return
        self._queue(_Slot(request, result))

    def _queue(self, slot: _Slot) -> None:
        self._slots.append(slot)
        result = slot.result
        if isinstance(result, asyncio.Future) and not result.done():
            result.add_done_callback(self._on_done)
        else:
            self._flush_ready()

    # --- bare SASL tokens (after a SaslHandshake v0) ----------------------------------------------------------

    def _start_raw_tokens(self) -> None:
        if self._conn.buffered:
            self._abort("bytes sent after SaslHandshake v0 before its answer (SASL tokens must wait for it)")
            return
        self._raw = RawTokens(self._broker.config.sasl_max_receive_size)

    def _raw_received(self, data: bytes | memoryview) -> bytes:
        """Feed bare tokens to the SASL exchange; returns the bytes that follow it once it is over."""
        raw, sasl = self._raw, self._sasl
        assert raw is not None and sasl is not None
        raw.feed(data)
        while not self._closed and self._raw is raw:
            if sasl.session.state is not SaslState.AUTHENTICATING:
                if raw.buffered:
                    self._abort(f"bytes sent during SASL {sasl.session.mechanism} authentication before the answer")
                return b""
            try:
                token = raw.next_token()
            except ProtocolError as e:
                self._abort(f"{e} on {self._where}")
                return b""
            if token is None:
                return b""
            sasl.raw_token(token, self._send_raw, self._close_now)
            if sasl.authenticated:
                self._raw = None
                return raw.rest()
        return b""

    def _send_raw(self, parts: list[bytes]) -> None:
        if self._closed:
            return
        self._writer.write(parts)
        if self._writer.error is not None:
            self._abort(f"write failed: {self._writer.error}", logging.DEBUG)
            return
        sasl = self._sasl
        if self._raw is not None and sasl is not None and sasl.authenticated:
            self._raw = None  # a PLAIN check ended off the loop: what follows is requests again

    def _close_now(self, reason: str) -> None:
        self._abort(reason, logging.INFO)

    def _on_done(self, _fut: asyncio.Future[Any]) -> None:
        if not self._closed:
            self._flush_ready()
            self._update_reading()

    def _on_drained(self) -> None:
        writer = self._writer
        if writer.error is not None:
            self._abort(f"write failed: {writer.error}", logging.DEBUG)
            return
        if self._closing is not None:
            self._linger()
            return
        self.last_active = self._loop.time()
        self._update_reading()

    def _close_when_sent(self, reason: str) -> None:
        """Take no more requests, and close once the writer has sent what it holds (a refusal) and the client
        hung up, or _LINGER_S after: see `_linger`."""
        self._closing = reason
        if not self._reading_paused:
            self._loop.remove_reader(self._fd)
            self._reading_paused = True
        if self._writer.buffered == 0:
            self._linger()

    def _linger(self) -> None:
        """The refusal is sent: let the client hang up first. A client that finds the end of the connection in the
        same read as its last response may drop the response (kafka-python reports 'socket disconnected' instead
        of the authentication failure); clients close at once when refused, and one that does not is closed
        _LINGER_S later. Bytes it sends meanwhile are read and dropped."""
        if self._linger_timer is not None or self._closed:
            return
        self._linger_timer = self._loop.call_later(_LINGER_S, self._linger_over)
        self._loop.add_reader(self._fd, self._on_linger_readable)
        self._reading_paused = False

    def _on_linger_readable(self) -> None:
        try:
            data = self._sock.recv(_READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._linger_over()

    def _linger_over(self) -> None:
        self._abort(self._closing or "closing", logging.INFO)

    def _flush_ready(self) -> None:
        writer = self._writer
        slots = self._slots
        while slots and self._closing is None:
            slot = slots[0]
            body = slot.result
            if isinstance(body, asyncio.Future):
                if not body.done():
                    return
                if body.cancelled():
                    self._abort(f"{slot.request.api.name} was cancelled")
                    return
                exc = body.exception()
                if exc is not None:
                    log.error(
                        "handler for %s from %s failed",
                        slot.request.api.name,
                        self.peer,
                        exc_info=(type(exc), exc, exc.__traceback__),
                    )
                    self._abort(f"internal error handling {slot.request.api.name}")
                    return
                body = body.result()
            slots.popleft()
            req = slot.request
            try:
                parts = ServerConnection.encode_response(req.api, req.version, req.header.correlation_id, body)
            except ProtocolError:
                log.exception("cannot encode the %s v%d response for %s", req.api.name, req.version, self.peer)
                self._abort(f"internal error encoding {req.api.name}")
                return
            writer.write(parts)
            if writer.error is not None:
                self._abort(f"write failed: {writer.error}", logging.INFO)
                return
            self._broker.metrics.request_done(req.api.name, req.version, (time.monotonic() - slot.received) * 1000)
            self.last_active = self._loop.time()
            if slot.sasl and self._sasl is not None and self._sasl.failure is not None:
                self._close_when_sent(self._sasl.failure)
                return

    def _unsupported(self, event: UnsupportedRequest) -> None:
        if event.api_key != 18:
            self._abort(f"unsupported api key {event.api_key} version {event.api_version}")
            return
        # Kafka answers an ApiVersions it cannot parse at v0, with error 35 and its ranges, and keeps the
        # connection; the answer still waits its turn behind earlier requests.
        req = Request(RequestHeader(18, 0, event.correlation_id), self._broker.apis[18], None)
        self._slots.append(_Slot(req, self._broker.api_versions_body(error_code=35)))
        self._flush_ready()

    # --- flow control and closing -------------------------------------------------------------------------

    def _update_reading(self) -> None:
        if self._closed or self._closing is not None:
            return
        want_pause = self._writer.buffered > _MAX_UNSENT_BYTES or len(self._slots) >= _MAX_IN_FLIGHT
        if want_pause and not self._reading_paused:
            self._loop.remove_reader(self._fd)
            self._reading_paused = True
        elif not want_pause and self._reading_paused:
            self._loop.add_reader(self._fd, self._on_readable)
            self._reading_paused = False

    def _abort(self, reason: str, level: int = logging.WARNING) -> None:
        """Close at once: responses not yet sent are dropped, requests in flight are cancelled."""
        if self._closed:
            return
        log.log(level, "closing connection from %s: %s", self.peer, reason)
        self._closed = True
        if self._linger_timer is not None:
            self._linger_timer.cancel()
        if not self._reading_paused:
            self._loop.remove_reader(self._fd)
        writer = self._writer
        if self._tls is not None and isinstance(writer, TlsSocketWriter) and writer.buffered == 0:
            self._tls.close_notify()
            writer.flush_now()
        writer.close()
        self._sock.close()
        for slot in self._slots:
            if isinstance(slot.result, asyncio.Future) and not slot.result.done():
                slot.result.cancel()
        self._slots.clear()
        self._table.discard(self)

    def close(self, reason: str = "broker shutting down", level: int = logging.DEBUG) -> None:
        self._abort(reason, level)
