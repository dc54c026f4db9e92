"""Request header v0-v2 and response header v0-v1.

The header version follows from the body's version: flexible versions use request header v2 and response header
v1, except ApiVersions responses, which always use header v0 so that a client that does not yet know the
broker's versions can read them. The client id stays a classic nullable string even in header v2.
"""

from __future__ import annotations

import struct as _struct
from dataclasses import dataclass

from groupstream.protocol import primitives as P
from groupstream.protocol.errors import PeerProtocolError

API_VERSIONS_KEY = 18


_HEAD = _struct.Struct(">hhi")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None
    unknown_tags: tuple[tuple[int, bytes], ...] = ()


def peek_request_header(frame: bytes | memoryview) -> tuple[int, int, int]:
    """api_key, api_version, correlation_id: readable even when the API or version is unknown."""
    if len(frame) < 8:
        raise PeerProtocolError(f"request of {len(frame)} bytes is too short for a header")
    key, version, corr = _HEAD.unpack_from(frame, 0)
    return key, version, corr


def decode_request_header(frame: memoryview, flexible: bool) -> tuple[RequestHeader, int]:
    key, version, corr = peek_request_header(frame)
    try:
        client_id, pos = P.read_nullable_string(frame, 8)
    except _struct.error:
        raise PeerProtocolError("truncated request header") from None
    except UnicodeDecodeError:
        raise PeerProtocolError("client id is not UTF-8") from None
    tags: tuple[tuple[int, bytes], ...] = ()
    if flexible:
        fields, pos = P.read_tagged_fields(frame, pos)
        tags = tuple((t, bytes(raw)) for t, raw in fields)
    return RequestHeader(key, version, corr, client_id, tags), pos


def encode_request_header(header: RequestHeader, flexible: bool, out: list[bytes]) -> None:
    out.append(_HEAD.pack(header.api_key, header.api_version, header.correlation_id))
    P.write_nullable_string(header.client_id, out)
    if flexible:
        if header.unknown_tags:
            P.write_tagged_fields(list(header.unknown_tags), out)
        else:
            out.append(b"\x00")


def response_header_flexible(api_key: int, body_flexible: bool) -> bool:
    return body_flexible and api_key != API_VERSIONS_KEY


def encode_response_header(correlation_id: int, flexible: bool, out: list[bytes]) -> None:
    out.append(P.I32.pack(correlation_id))
    if flexible:
        out.append(b"\x00")


def decode_response_header(frame: memoryview, flexible: bool) -> tuple[int, int]:
    """correlation_id and the position of the body."""
    if len(frame) < 4:
        raise PeerProtocolError("response too short for a header")
    (corr,) = P.I32.unpack_from(frame, 0)
    pos = 4
    if flexible:
        _, pos = P.read_tagged_fields(frame, pos)
    return corr, pos
