"""The asyncio shell around the sans-IO protocol: one `KafkaConnection` per client socket.

Requests may be pipelined; each gets a slot in arrival order and responses leave strictly in that order, even
when a later request (a Produce with acks=1) completes before an earlier one (a long-polling Fetch). Produce
with acks=0 takes no slot. A peer that breaks framing or sends an undecodable request is logged once and
disconnected; a request for an API we do not serve is answered only for ApiVersions, as Kafka does.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections import deque
from typing import TYPE_CHECKING, Any

from groupstream.broker.socket_writer import SocketWriter
from groupstream.protocol.connection import Request, ServerConnection, UnsupportedRequest
from groupstream.protocol.errors import ProtocolError
from groupstream.protocol.headers import RequestHeader

if TYPE_CHECKING:
    from groupstream.broker.node import Broker

log = logging.getLogger("groupstream.broker.server")

NO_RESPONSE: Any = object()
"""Returned by a handler for a request that gets no response at all (Produce with acks=0)."""

_MAX_IN_FLIGHT = 256  # stop reading a connection with this many unanswered requests
_MAX_UNSENT_BYTES = 64 * 1024 * 1024  # ... or with this much response data the peer has not taken yet
_READ_SIZE = 256 * 1024  # bytes per read, as asyncio's transports read


class _Slot:
    __slots__ = ("request", "result")

    def __init__(self, request: Request, result: Any) -> None:
        self.request = request
        self.result = result


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

    def __init__(self, broker: Broker, sock: socket.socket, peer: tuple[Any, ...]) -> None:
        """``sock`` is a connected, non-blocking socket this object now owns."""
        self._broker = broker
        self._table = broker.connections
        self._loop = asyncio.get_running_loop()
        self._sock = sock
        self._fd = sock.fileno()
        self._conn = ServerConnection(broker.apis, broker.config.max_frame)
        self._slots: deque[_Slot] = deque()
        self._reading_paused = False
        self._closed = False
        self._writer = SocketWriter(self._loop, sock, self._on_drained)
        self.ip: str = str(peer[0])
        self.peer = f"{peer[0]}:{peer[1]}"
        self.client_host = f"/{peer[0]}"
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
        try:
            data = self._sock.recv(_READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:  # a reset is how many clients hang up
            self._abort(f"read failed: {e}", logging.DEBUG)
            return
        if not data:
            self._abort("the client closed the connection", logging.DEBUG)
            return
        self.last_active = self._loop.time()
        self.data_received(data)

    def data_received(self, data: bytes) -> None:
        conn = self._conn
        conn.receive_data(data)
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
        handler = self._broker.handlers.get(request.api.key)
        if handler is None:
            self._abort(f"no handler for {request.api.name}")
            return
        self._broker.current_client_host = self.client_host
        try:
            result = handler(self._broker, request)
        except Exception:
            log.exception("handler for %s v%d from %s failed", request.api.name, request.version, self.peer)
            self._abort(f"internal error handling {request.api.name}")
            return
        if result is NO_RESPONSE:
            return
        slot = _Slot(request, result)
        self._slots.append(slot)
        if isinstance(result, asyncio.Future) and not result.done():
            result.add_done_callback(self._on_done)
        else:
            self._flush_ready()

    def _on_done(self, _fut: asyncio.Future[Any]) -> None:
        if not self._closed:
            self._flush_ready()
            self._update_reading()

    def _on_drained(self) -> None:
        writer = self._writer
        if writer.error is not None:
            self._abort(f"write failed: {writer.error}", logging.DEBUG)
            return
        self.last_active = self._loop.time()
        self._update_reading()

    def _flush_ready(self) -> None:
        writer = self._writer
        slots = self._slots
        while slots:
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
            self.last_active = self._loop.time()

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
        if self._closed:
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
        if not self._reading_paused:
            self._loop.remove_reader(self._fd)
        self._writer.close()
        self._sock.close()
        for slot in self._slots:
            if isinstance(slot.result, asyncio.Future) and not slot.result.done():
                slot.result.cancel()
        self._slots.clear()
        self._table.discard(self)

    def close(self, reason: str = "broker shutting down", level: int = logging.DEBUG) -> None:
        self._abort(reason, level)
