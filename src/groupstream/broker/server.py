"""The asyncio shell around the sans-IO protocol: one `KafkaProtocol` per client socket.

Requests may be pipelined; each gets a slot in arrival order and responses leave strictly in that order, even
when a later request (a Produce with acks=1) completes before an earlier one (a long-polling Fetch). Produce
with acks=0 takes no slot. A peer that breaks framing or sends an undecodable request is logged once and
disconnected; a request for an API we do not serve is answered only for ApiVersions, as Kafka does.
"""

from __future__ import annotations

import asyncio
import logging
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


class _Slot:
    __slots__ = ("request", "result")

    def __init__(self, request: Request, result: Any) -> None:
        self.request = request
        self.result = result


class KafkaProtocol(asyncio.Protocol):
    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._conn = ServerConnection(broker.apis, broker.config.max_frame)
        self._slots: deque[_Slot] = deque()
        self._transport: asyncio.Transport | None = None
        self._reading_paused = False
        self._writer: SocketWriter | None = None
        self._closed = False
        self.peer = "?"
        self.client_host = "/?"

    # --- asyncio callbacks -------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        sock = transport.get_extra_info("socket")
        self._writer = SocketWriter(asyncio.get_running_loop(), sock.fileno(), self._update_reading)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.client_host = f"/{peer[0]}" if peer else "/?"
        self._broker.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        if self._writer is not None:
            self._writer.close()
        self._broker.connections.discard(self)
        for slot in self._slots:
            if isinstance(slot.result, asyncio.Future) and not slot.result.done():
                slot.result.cancel()
        self._slots.clear()

    def data_received(self, data: bytes) -> None:
        self._conn.receive_data(data)
        while not self._closed:
            try:
                event = self._conn.next_event()
            except ProtocolError as e:
                self._abort(f"malformed request: {e}")
                return
            if event is None:
                break
            if isinstance(event, UnsupportedRequest):
                self._unsupported(event)
            else:
                self._dispatch(event)
        self._update_reading()

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

    def _flush_ready(self) -> None:
        writer = self._writer
        assert writer is not None
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

    def _unsupported(self, event: UnsupportedRequest) -> None:
        if event.api_key != 18:
            self._abort(f"unsupported api key {event.api_key} version {event.api_version}")
            return
        # Kafka answers an ApiVersions it cannot parse at v0, with error 35 and its ranges, and keeps the
        # connection; the answer still waits its turn behind earlier requests.
        req = Request(RequestHeader(18, 0, event.correlation_id), self._broker.apis[18], None)
        self._slots.append(_Slot(req, self._broker.api_versions_body(error_code=35)))
        self._flush_ready()

    # --- flow control and errors -------------------------------------------------------------------------

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None or self._closed:
            return
        writer = self._writer
        backlog = writer.buffered if writer is not None else 0
        want_pause = backlog > _MAX_UNSENT_BYTES or len(self._slots) >= _MAX_IN_FLIGHT
        if want_pause and not self._reading_paused:
            transport.pause_reading()
            self._reading_paused = True
        elif not want_pause and self._reading_paused:
            transport.resume_reading()
            self._reading_paused = False

    def _abort(self, reason: str, level: int = logging.WARNING) -> None:
        if self._closed:
            return
        log.log(level, "closing connection from %s: %s", self.peer, reason)
        self._closed = True
        if self._transport is not None:
            self._transport.close()

    def close(self) -> None:
        self._abort("broker shutting down", logging.DEBUG)
