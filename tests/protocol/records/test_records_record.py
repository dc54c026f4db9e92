"""Record varint layout: encode/decode round trips, boundaries, and malformed records."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from records_strategies import headers, payload, record_specs

from groupstream.protocol.errors import LocalProtocolError, PeerProtocolError
from groupstream.protocol.records.record import (
    ControlType,
    EndTxnMarker,
    Record,
    decode_records,
    encode_control_key,
    encode_end_txn_value,
    encode_record,
    encode_varint,
    encode_varlong,
    parse_control_key,
    parse_end_txn_marker,
)


def _zigzag_reference(n: int) -> bytes:
    """Kafka's ByteUtils.writeVarlong, written out bit by bit as the reference."""
    z = (n << 1) ^ (n >> 63)
    z &= (1 << 64) - 1
    out = []
    while True:
        if z < 0x80:
            out.append(z)
            return bytes(out)
        out.append((z & 0x7F) | 0x80)
        z >>= 7


@pytest.mark.parametrize(
    "n,encoded",
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (63, b"\x7e"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (8191, b"\xfe\x7f"),
        (8192, b"\x80\x80\x01"),
    ],
)
def test_varint_known_encodings(n: int, encoded: bytes) -> None:
    assert encode_varint(n) == encoded == encode_varlong(n)


@given(st.integers(min_value=-(1 << 31), max_value=(1 << 31) - 1))
def test_varint_matches_reference(n: int) -> None:
    assert encode_varint(n) == _zigzag_reference(n)


@given(st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1))
def test_varlong_matches_reference(n: int) -> None:
    assert encode_varlong(n) == _zigzag_reference(n)


def test_varint_range_is_enforced() -> None:
    with pytest.raises(LocalProtocolError):
        encode_varint(1 << 31)
    with pytest.raises(LocalProtocolError):
        encode_varlong(-(1 << 63) - 1)
    assert len(encode_varlong(-(1 << 63))) == 10


def test_record_layout_by_hand() -> None:
    # length 12 | attrs 0 | tsDelta 5 | offsetDelta 2 | key "k" | value "vv" | 1 header "h" -> null
    raw = encode_record(2, 5, b"k", b"vv", [("h", None)])
    assert raw == bytes([24, 0, 10, 4, 2]) + b"k" + bytes([4]) + b"vv" + bytes([2, 2]) + b"h" + bytes([1])


@settings(max_examples=200, deadline=None)
@given(specs=record_specs(max_size=40), base_offset=st.integers(0, 1 << 50))
def test_round_trip(
    specs: list[tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]],
    base_offset: int,
) -> None:
    base_ts = specs[0][1]
    data = b"".join(encode_record(od, ts - base_ts, k, v, h) for od, ts, k, v, h in specs)
    records = decode_records(data, len(specs), base_offset, base_ts)
    assert records == [Record(base_offset + od, ts, k, v, h) for od, ts, k, v, h in specs]
    assert all(type(r) is Record for r in records)


@settings(max_examples=100, deadline=None)
@given(key=payload, value=payload, hdrs=headers)
def test_decoded_fields_are_bytes(
    key: bytes | None, value: bytes | None, hdrs: tuple[tuple[str, bytes | None], ...]
) -> None:
    (r,) = decode_records(
        encode_record(0, 0, bytearray(key) if key is not None else None, value, hdrs), 1, 0, 0
    )
    assert r.key == key and (r.key is None or type(r.key) is bytes)
    assert r.headers == hdrs


ONE = encode_record(0, 0, b"key", b"value", [("h", b"x")])


@pytest.mark.parametrize("cut", range(1, len(ONE)))
def test_truncated_record(cut: int) -> None:
    with pytest.raises(PeerProtocolError):
        decode_records(ONE[:cut], 1, 0, 0)


def test_count_mismatch_and_trailing_bytes() -> None:
    two = ONE + encode_record(1, 0, None, None)
    with pytest.raises(PeerProtocolError, match="remain"):
        decode_records(two, 1, 0, 0)
    with pytest.raises(PeerProtocolError, match="truncated"):
        decode_records(two, 3, 0, 0)
    assert len(decode_records(two, 2, 0, 0)) == 2


def test_declared_length_must_match_fields() -> None:
    body = ONE[1:]
    with pytest.raises(PeerProtocolError, match="declares"):
        decode_records(encode_varint(len(body) + 1) + body + b"\x00", 1, 0, 0)
    with pytest.raises(PeerProtocolError):
        decode_records(encode_varint(len(body) - 1) + body, 1, 0, 0)
    with pytest.raises(PeerProtocolError):
        decode_records(encode_varint(-5) + body, 1, 0, 0)


def _record_with_header_section(section: bytes) -> bytes:
    body = b"\x00\x00\x00\x01\x01" + section  # attrs, ts 0, od 0, null key, null value
    return encode_varint(len(body)) + body


def test_malformed_headers() -> None:
    with pytest.raises(PeerProtocolError, match="negative header count"):
        decode_records(_record_with_header_section(encode_varint(-1)), 1, 0, 0)
    with pytest.raises(PeerProtocolError, match="negative key length"):
        decode_records(_record_with_header_section(b"\x02" + encode_varint(-1) + b"\x01"), 1, 0, 0)
    with pytest.raises(PeerProtocolError, match="UTF-8"):
        decode_records(_record_with_header_section(b"\x02\x02\xff\x01"), 1, 0, 0)
    with pytest.raises(PeerProtocolError):
        decode_records(_record_with_header_section(b"\x04\x02a\x01"), 1, 0, 0)  # 2 headers, 1 present


def test_negative_lengths_other_than_minus_one_read_as_null() -> None:
    """Java's DefaultRecord treats any negative key/value size as null."""
    body = b"\x00\x00\x00" + encode_varint(-3) + encode_varint(-2) + b"\x00"
    (r,) = decode_records(encode_varint(len(body)) + body, 1, 7, 9)
    assert r == Record(7, 9, None, None, ())


def test_overlong_varint() -> None:
    body = b"\x00" + b"\xff" * 11 + b"\x00"
    with pytest.raises(PeerProtocolError, match="longer than 10"):
        decode_records(encode_varint(len(body)) + body, 1, 0, 0)


@settings(max_examples=400, deadline=None)
@given(data=st.binary(max_size=300), count=st.integers(0, 50))
def test_garbage_raises_only_peer_errors(data: bytes, count: int) -> None:
    try:
        out = decode_records(data, count, 0, 0)
    except PeerProtocolError:
        return
    assert len(out) == count


@settings(max_examples=300, deadline=None)
@given(specs=record_specs(max_size=5), data=st.data())
def test_mutated_records_raise_only_peer_errors(
    specs: list[tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]],
    data: st.DataObject,
) -> None:
    raw = bytearray(b"".join(encode_record(od, ts, k, v, h) for od, ts, k, v, h in specs))
    i = data.draw(st.integers(0, len(raw) - 1))
    raw[i] = data.draw(st.integers(0, 255))
    try:
        out = decode_records(bytes(raw), len(specs), 0, 0)
    except PeerProtocolError:
        return
    assert len(out) == len(specs)


def test_control_key_and_marker() -> None:
    assert encode_control_key(ControlType.COMMIT) == b"\x00\x00\x00\x01"
    assert encode_end_txn_value(7) == b"\x00\x00\x00\x00\x00\x07"
    rec = Record(0, 0, encode_control_key(ControlType.ABORT), encode_end_txn_value(3))
    assert parse_end_txn_marker(rec) == EndTxnMarker(ControlType.ABORT, 3, 0)
    # later versions append fields: the known prefix still reads
    assert parse_control_key(b"\x00\x01\x00\x01extra") == (1, 1)
    assert parse_end_txn_marker(
        Record(0, 0, b"\x00\x01\x00\x01", b"\x00\x01\x00\x00\x00\x09more")
    ) == EndTxnMarker(ControlType.COMMIT, 9, 1)
    assert parse_end_txn_marker(Record(0, 0, encode_control_key(ControlType.LEADER_CHANGE), b"")) is None
    for key in (None, b"\x00\x00\x00", b"\xff\xff\x00\x00"):
        with pytest.raises(PeerProtocolError):
            parse_control_key(key)
    with pytest.raises(PeerProtocolError):
        parse_end_txn_marker(Record(0, 0, encode_control_key(ControlType.COMMIT), b"\x00\x00\x00"))
