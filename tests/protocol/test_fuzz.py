"""Fuzz the decoding side: whatever bytes a peer sends, only `ProtocolError` subclasses may escape.

Inputs are random bytes and valid encodings with a few mutations (flipped, overwritten, inserted, deleted and
truncated bytes). Whatever the decoder accepts must be a message we can encode again and that decodes to itself,
so a malformed frame can never turn into an object the rest of the broker cannot handle.
"""

from __future__ import annotations

import struct
from itertools import pairwise
from typing import Any

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import message

from groupstream.protocol.compiler import CompiledApi
from groupstream.protocol.connection import Request, ServerConnection, UnsupportedRequest
from groupstream.protocol.errors import PeerProtocolError, ProtocolError
from groupstream.protocol.headers import RequestHeader, encode_request_header
from groupstream.protocol.messages import APIS
from groupstream.protocol.records.batch_header import CRC_START, HEADER_SIZE, LOG_OVERHEAD, iter_batches

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SORTED_APIS = sorted(APIS.values(), key=lambda a: a.key)


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` with one to four random edits; a clean copy is never returned for non-empty input."""
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(("flip", "set", "insert", "delete", "truncate")))
        at = draw(st.integers(0, max(len(buf) - 1, 0)))
        if op == "flip" and buf:
            buf[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "set" and buf:
            buf[at] = draw(st.sampled_from((0x00, 0x01, 0x7F, 0x80, 0xFF)))
        elif op == "insert":
            buf[at:at] = draw(st.binary(min_size=1, max_size=6))
        elif op == "delete" and buf:
            del buf[at : at + draw(st.integers(1, 4))]
        elif op == "truncate":
            del buf[at:]
    return bytes(buf)


def _decode(api: CompiledApi, data: bytes, version: int, kind: str) -> Any:
    return api.decode_request(data, version) if kind == "request" else api.decode_response(data, version)


def _encode(api: CompiledApi, msg: Any, version: int, kind: str) -> bytes:
    return api.encode_request(msg, version) if kind == "request" else api.encode_response(msg, version)


@pytest.mark.parametrize("kind", ["request", "response"])
@pytest.mark.parametrize("api", SORTED_APIS, ids=lambda a: a.name)
def test_decode_never_raises_anything_else(api: CompiledApi, kind: str) -> None:
    @FUZZ
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        version = data.draw(st.integers(api.min_version, api.max_version), label="version")
        valid = _encode(api, data.draw(message(api, version, kind), label="message"), version, kind)
        raw = data.draw(st.one_of(st.binary(max_size=64), mutated(valid)), label="raw")
        try:
            msg = _decode(api, raw, version, kind)
        except ProtocolError:
            return
        # Accepted input is a well-formed message: it re-encodes, and that encoding is a fixed point.
        again = _encode(api, msg, version, kind)
        assert _encode(api, _decode(api, again, version, kind), version, kind) == again

    check()


@pytest.mark.parametrize("api", SORTED_APIS, ids=lambda a: a.name)
def test_unknown_versions_are_peer_errors(api: CompiledApi) -> None:
    for version in (api.min_version - 1, api.max_version + 1):
        with pytest.raises(PeerProtocolError):
            api.decode_request(b"", version)


# --- the connection ----------------------------------------------------------------------------------------


@st.composite
def request_frames(draw: st.DrawFn) -> tuple[bytes, RequestHeader, Any]:
    """A framed, valid request of any API and version: ``(frame, header, body)``."""
    api = draw(st.sampled_from(SORTED_APIS))
    version = draw(st.integers(api.min_version, api.max_version))
    body = draw(message(api, version, "request"))
    header = RequestHeader(
        api.key, version, draw(st.integers(0, 2**31 - 1)), draw(st.none() | st.text(max_size=8))
    )
    parts: list[bytes] = []
    encode_request_header(header, api.is_flexible(version), parts)
    payload = b"".join(parts) + api.encode_request(body, version)
    return struct.pack(">i", len(payload)) + payload, header, body


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in pairwise(points)]


def _drain(conn: ServerConnection, data: bytes, cuts: list[int]) -> list[Request | UnsupportedRequest]:
    events: list[Request | UnsupportedRequest] = []
    for chunk in _chunks(data, cuts):
        conn.receive_data(chunk)
        while (event := conn.next_event()) is not None:
            events.append(event)
    return events


@FUZZ
@given(
    frames=st.lists(request_frames(), min_size=1, max_size=3),
    cuts=st.lists(st.integers(0, 10_000), max_size=6),
)
def test_connection_reassembles_valid_requests_from_any_chunking(
    frames: list[tuple[bytes, RequestHeader, Any]], cuts: list[int]
) -> None:
    conn = ServerConnection(APIS)
    events = _drain(conn, b"".join(f for f, _, _ in frames), cuts)
    assert len(events) == len(frames)
    for event, (_, header, body) in zip(events, frames, strict=True):
        assert isinstance(event, Request)
        assert event.header == header
        assert event.body == body


@FUZZ
@given(
    data=st.one_of(
        st.binary(max_size=256),
        request_frames().flatmap(lambda f: mutated(f[0])),
        st.lists(request_frames(), min_size=2, max_size=3).flatmap(
            lambda fs: mutated(b"".join(f[0] for f in fs))
        ),
    ),
    cuts=st.lists(st.integers(0, 10_000), max_size=6),
)
def test_connection_raises_only_peer_errors(data: bytes, cuts: list[int]) -> None:
    conn = ServerConnection(APIS, max_frame=1 << 16)
    try:
        events = _drain(conn, data, cuts)
    except PeerProtocolError:
        return
    for event in events:
        assert isinstance(event, Request | UnsupportedRequest)
        if isinstance(event, Request):
            assert event.api.key == event.header.api_key


# --- record batches ----------------------------------------------------------------------------------------


@st.composite
def batches(draw: st.DrawFn) -> bytes:
    """A record batch with a valid v2 header and CRC around arbitrary record bytes (never parsed here)."""
    records = draw(st.binary(max_size=48))
    count = draw(st.integers(0, 5))
    body = (
        struct.pack(
            ">hiqqqhii",
            draw(st.integers(0, 0x7F)),  # attributes
            max(count - 1, 0),  # last offset delta
            draw(st.integers(0, 2**40)),  # base timestamp
            draw(st.integers(0, 2**40)),  # max timestamp
            draw(st.integers(-1, 2**40)),  # producer id
            draw(st.integers(-1, 2**10)),  # producer epoch
            draw(st.integers(-1, 2**20)),  # base sequence
            count,
        )
        + records
    )
    crc = crc32c.crc32c(body)
    length = HEADER_SIZE - LOG_OVERHEAD + len(records)
    head = struct.pack(">qiibI", draw(st.integers(0, 2**40)), length, draw(st.integers(-1, 100)), 2, crc)
    batch = head + body
    assert len(head) == CRC_START and len(batch) == HEADER_SIZE + len(records)
    return batch


@FUZZ
@given(valid=st.lists(batches(), max_size=4))
def test_iter_batches_finds_every_valid_batch(valid: list[bytes]) -> None:
    data = b"".join(valid)
    positions = [pos for pos, _ in iter_batches(data)]
    expected = [sum(len(b) for b in valid[:i]) for i in range(len(valid))]
    assert positions == expected


@FUZZ
@given(
    data=st.one_of(
        st.binary(max_size=200),
        st.lists(batches(), min_size=1, max_size=3).flatmap(lambda bs: mutated(b"".join(bs))),
    ),
    validate_crc=st.booleans(),
)
def test_iter_batches_raises_only_peer_errors(data: bytes, validate_crc: bool) -> None:
    try:
        found = list(iter_batches(data, validate_crc=validate_crc))
    except PeerProtocolError:
        return
    end = 0
    for pos, header in found:
        assert pos == end
        end = pos + header.size
    assert end == len(data)
