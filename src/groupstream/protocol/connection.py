"""Sans-IO Kafka connections, in the manner of h11: feed bytes in, take events out, get bytes to send.

`ServerConnection` is what the broker drives for each socket; `ClientConnection` is what our client drives.
Neither does I/O, reads a clock or keeps more than one frame of unparsed input.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from groupstream.protocol.compiler import CompiledApi
from groupstream.protocol.errors import LocalProtocolError, PeerProtocolError
from groupstream.protocol.framing import DEFAULT_MAX_FRAME, FrameReader, frame
from groupstream.protocol.headers import (
    RequestHeader,
    decode_request_header,
    decode_response_header,
    encode_request_header,
    encode_response_header,
    peek_request_header,
    response_header_flexible,
)


@dataclass(frozen=True, slots=True)
class Request:
    header: RequestHeader
    api: CompiledApi
    body: Any

    @property
    def version(self) -> int:
        return self.header.api_version


@dataclass(frozen=True, slots=True)
class UnsupportedRequest:
    """A request for an API key or version we have no schema for; only ApiVersions gets an answer."""

    api_key: int
    api_version: int
    correlation_id: int


class ServerConnection:
    def __init__(self, apis: Mapping[int, CompiledApi], max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self._apis = apis
        self._reader = FrameReader(max_frame, pool_size=0, direct_share=8)

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        self._reader.receive_data(data)

    def recv_buffer(self) -> memoryview:
        """Where a socket read should put the next bytes (instead of ``receive_data``; see FrameReader): a large
        request (a Produce) is read straight into a buffer of its own, so its bytes are copied once."""
        return self._reader.recv_buffer()

    def advance(self, n: int) -> None:
        self._reader.advance(n)

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned as events: once ``next_event`` returns None, the part of a
        request still being received (what a server bounds across connections)."""
        return self._reader.buffered

    def next_event(self) -> Request | UnsupportedRequest | None:
        """The next request, or None until more bytes arrive; raises PeerProtocolError when the connection
        must be closed (bad framing or a malformed request)."""
        raw = self._reader.next_frame()
        if raw is None:
            return None
        mv = memoryview(raw)
        key, version, corr = peek_request_header(mv)
        api = self._apis.get(key)
        if api is None or not api.min_version <= version <= api.max_version:
            return UnsupportedRequest(key, version, corr)
        header, pos = decode_request_header(mv, api.is_flexible(version))
        body = api.decode_request(mv, version, pos)
        return Request(header, api, body)

    @staticmethod
    def encode_response(api: CompiledApi, version: int, correlation_id: int, body: Any) -> list[bytes]:
        """Framed response parts, ready for ``writelines``; records are not copied into one buffer."""
        parts: list[bytes] = []
        encode_response_header(correlation_id, response_header_flexible(api.key, api.is_flexible(version)), parts)
        api.encode_response_into(body, version, parts)
        return frame(parts)


class ClientConnection:
    def __init__(
        self, apis: Mapping[int, CompiledApi], client_id: str | None, max_frame: int = DEFAULT_MAX_FRAME
    ) -> None:
        self._apis = apis
        self._client_id = client_id
        self._reader = FrameReader(max_frame)
        self._next_corr = 0
        self._pending: dict[int, tuple[CompiledApi, int]] = {}

    def send_request(self, api: CompiledApi, version: int, body: Any, expect_response: bool = True) -> tuple[int, bytes]:
        corr, parts = self.send_request_parts(api, version, body, expect_response)
        return corr, b"".join(parts)

    def send_request_parts(
        self, api: CompiledApi, version: int, body: Any, expect_response: bool = True
    ) -> tuple[int, list[bytes]]:
        """The framed request as the encoder's pieces, not joined: a record batch in the body is one of them,
        the caller's own buffer, so a writer that sends the pieces as they are copies no batch."""
        corr = self._next_corr
        parts: list[bytes] = []
        encode_request_header(RequestHeader(api.key, version, corr, self._client_id), api.is_flexible(version), parts)
        api.encode_request_into(body, version, parts)
        self._next_corr = (corr + 1) & 0x7FFFFFFF  # after the encoder: a body it refuses takes no id
        if expect_response:
            self._pending[corr] = (api, version)
        return corr, frame(parts)

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        self._reader.receive_data(data)

    def recv_buffer(self) -> memoryview:
        """Where a socket read should put the next bytes (instead of ``receive_data``; see FrameReader)."""
        return self._reader.recv_buffer()

    def advance(self, n: int) -> None:
        self._reader.advance(n)

    def next_response(self) -> tuple[int, CompiledApi, int, Any] | None:
        raw = self._reader.next_frame()
        if raw is None:
            return None
        mv = memoryview(raw)
        if len(mv) < 4:
            raise PeerProtocolError("response too short for a header")
        corr = int.from_bytes(mv[:4], "big", signed=True)
        pending = self._pending.pop(corr, None)
        if pending is None:
            raise PeerProtocolError(f"response with unknown correlation id {corr}")
        api, version = pending
        _, pos = decode_response_header(mv, response_header_flexible(api.key, api.is_flexible(version)))
        return corr, api, version, api.decode_response(mv, version, pos)

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def forget(self, corr: int) -> None:
        if self._pending.pop(corr, None) is None:
            raise LocalProtocolError(f"no request in flight with correlation id {corr}")
