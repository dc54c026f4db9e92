"""The C decoder (_crecords.c) is a fast path only: for any bytes, ``decode_batch_records`` and
``append_batch_columns`` must give what the pure-Python decoder gives, records or the same PeerProtocolError."""

from __future__ import annotations

import struct
from array import array
from typing import Any, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from records_strategies import record_specs

# `make test` builds the C extension (pip install -e .): a build that failed must fail here, not skip.
import groupstream.protocol.records._crecords  # noqa: F401
from groupstream.protocol.errors import PeerProtocolError
from groupstream.protocol.records import record as record_module
from groupstream.protocol.records.record import (
    append_batch_columns,
    decode_batch_records,
    encode_record,
    encode_varint,
)

Spec = tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]
BASE_OFFSET = 1_000
BASE_TS = 1_700_000_000_000


class Rec(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_type: int = 0


def _section(specs: list[Spec]) -> bytes:
    return b"".join(encode_record(od, ts - BASE_TS, k, v, h) for od, ts, k, v, h in specs)


def _both(data: bytes, count: int, fixed: int | None = None, min_offset: int = -1) -> tuple[Any, Any]:
    """(C result, Python result): a list of records or ("error", message)."""
    args = (data, count, BASE_OFFSET, BASE_TS, Rec, "t", 3, 1 if fixed is not None else 0, fixed, min_offset)
    out = []
    for c in (True, False):
        saved = record_module._c_decode
        if not c:
            record_module._c_decode = None
        try:
            out.append(decode_batch_records(*args))
        except PeerProtocolError as e:
            out.append(("error", str(e)))
        finally:
            record_module._c_decode = saved
    return out[0], out[1]


@settings(max_examples=300, deadline=None)
@given(specs=record_specs(max_size=20), fixed=st.none() | st.integers(-1, 1 << 45), cut=st.integers(-1, 25))
def test_well_formed_batches_decode_alike(specs: list[Spec], fixed: int | None, cut: int) -> None:
    c, py = _both(_section(specs), len(specs), fixed, BASE_OFFSET + cut)
    assert c == py
    assert not (isinstance(c, tuple) and c[0] == "error")
    assert all(type(r) is Rec for r in c)


@settings(max_examples=400, deadline=None)
@given(specs=record_specs(max_size=8), data=st.data())
def test_mutated_sections_decode_alike_or_fail_alike(specs: list[Spec], data: st.DataObject) -> None:
    raw = bytearray(_section(specs))
    for _ in range(data.draw(st.integers(1, 4))):
        action = data.draw(st.sampled_from(["flip", "cut", "extend"]))
        if action == "flip" and raw:
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
        elif action == "cut" and raw:
            del raw[data.draw(st.integers(0, len(raw) - 1)) :]
        else:
            raw += data.draw(st.binary(min_size=1, max_size=12))
    count = len(specs) + data.draw(st.integers(-1, 1))
    c, py = _both(bytes(raw), max(count, 0))
    assert c == py


@pytest.mark.parametrize(
    "record",
    [
        # a 10-byte varint beyond 64 bits (Python keeps the big int), as the timestamp delta
        b"\x00" + b"\xff" * 9 + b"\x7f" + encode_varint(0) + encode_varint(-1) + encode_varint(-1) + b"\x00",
        # an offset delta that overflows int64 from the base offset
        b"\x00" + encode_varint(0) + b"\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01" + encode_varint(-1) + encode_varint(-1) + b"\x00",
        # a header key that is not UTF-8
        b"\x00" + encode_varint(0) + encode_varint(0) + encode_varint(-1) + encode_varint(-1) + encode_varint(1)
        + encode_varint(1) + b"\xff" + encode_varint(-1),
        # a negative value length other than -1 is a null value
        b"\x00" + encode_varint(0) + encode_varint(0) + encode_varint(-1) + encode_varint(-7) + b"\x00",
        # a header count written in two bytes
        b"\x00" + encode_varint(0) + encode_varint(0) + encode_varint(-1) + encode_varint(-1) + b"\x80\x00",
    ],
)
def test_edge_records_decode_alike(record: bytes) -> None:
    data = encode_varint(len(record)) + record
    c, py = _both(data, 1)
    assert c == py


def test_min_offset_filters_only_above_the_base_offset() -> None:
    # a (corrupt but decodable) negative offset delta: the fetch offset filter only applies inside the batch
    record = b"\x00" + encode_varint(0) + encode_varint(-6) + encode_varint(-1) + encode_varint(0) + b"\x00"
    data = encode_varint(len(record)) + record
    for min_offset in (BASE_OFFSET, BASE_OFFSET + 1):
        saved = record_module._c_decode
        py = None
        try:
            record_module._c_decode = None
            py = decode_batch_records(data, 1, BASE_OFFSET, BASE_TS, Rec, "t", 3, 0, None, min_offset)
        finally:
            record_module._c_decode = saved
        assert decode_batch_records(data, 1, BASE_OFFSET, BASE_TS, Rec, "t", 3, 0, None, min_offset) == py
        assert len(py) == (1 if min_offset == BASE_OFFSET else 0)


def test_records_below_min_offset_are_dropped_and_log_append_time_applies() -> None:
    specs: list[Spec] = [(i, BASE_TS + i, None, b"v%d" % i, ()) for i in range(5)]
    recs = decode_batch_records(_section(specs), 5, BASE_OFFSET, BASE_TS, Rec, "t", 3, 1, 42, BASE_OFFSET + 3)
    assert [(r.offset, r.timestamp, r.value, r.timestamp_type) for r in recs] == [
        (BASE_OFFSET + 3, 42, b"v3", 1),
        (BASE_OFFSET + 4, 42, b"v4", 1),
    ]


def _columns() -> tuple[bytearray, ...]:
    return (bytearray(), bytearray(), bytearray(), bytearray(),
            bytearray(), bytearray(4), bytearray(), bytearray(), bytearray(4), bytearray())  # fmt: skip


def _unpack_columns(cols: tuple[bytearray, ...], n: int) -> list[tuple[Any, ...]]:
    offsets, stamps = array("q", bytes(cols[0])), array("q", bytes(cols[1]))
    parts, types = array("i", bytes(cols[2])), array("i", bytes(cols[3]))
    out = []
    for kind in (0, 1):
        valid, ends, data = cols[4 + 3 * kind], array("i", bytes(cols[5 + 3 * kind])), bytes(cols[6 + 3 * kind])
        out.append([data[ends[i] : ends[i + 1]] if valid[i] else None for i in range(n)])
    keys, values = out
    return [(offsets[i], stamps[i], parts[i], types[i], keys[i], values[i]) for i in range(n)]


def _columns_with_prefix() -> tuple[bytearray, ...]:
    """Columns already holding one row's fixed-width fields: what a batch appends must go after them."""
    cols = _columns()
    cols[0].extend(struct.pack("=q", 7))
    cols[1].extend(struct.pack("=q", 7))
    cols[2].extend(struct.pack("=i", 7))
    cols[3].extend(struct.pack("=i", 7))
    return cols


@settings(max_examples=300, deadline=None)
@given(specs=record_specs(max_size=20), fixed=st.none() | st.integers(-1, 1 << 45), cut=st.integers(-1, 25))
def test_columns_hold_what_the_records_hold(specs: list[Spec], fixed: int | None, cut: int) -> None:
    data, n, ts_type, min_offset = _section(specs), len(specs), int(fixed is not None), BASE_OFFSET + cut
    cols = _columns_with_prefix()
    got = append_batch_columns(data, n, BASE_OFFSET, BASE_TS, fixed, min_offset, 3, ts_type, cols)
    recs = decode_batch_records(data, n, BASE_OFFSET, BASE_TS, Rec, "t", 3, ts_type, fixed, min_offset)
    if any(s[4] for s in specs):  # batches with headers are the record decoder's: nothing appended
        assert got is None and cols == _columns_with_prefix()
        return
    assert got == (len(recs), recs[-1].offset if recs else -1)
    for i in range(4):
        del cols[i][: 8 if i < 2 else 4]
    half = 1 << 63
    assert _unpack_columns(cols, len(recs)) == [
        (r.offset, (r.timestamp * 1000 + half) % (1 << 64) - half, 3, r.timestamp_type, r.key, r.value) for r in recs
    ]


@settings(max_examples=300, deadline=None)
@given(specs=record_specs(max_size=8), data=st.data())
def test_columns_of_a_mutated_section_are_all_or_nothing(specs: list[Spec], data: st.DataObject) -> None:
    raw = bytearray(_section(specs))
    raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    cols = _columns()
    got = append_batch_columns(bytes(raw), len(specs), BASE_OFFSET, BASE_TS, None, -1, 0, 0, cols)
    try:
        recs = decode_batch_records(bytes(raw), len(specs), BASE_OFFSET, BASE_TS, Rec, "t", 0, 0, None, -1)
    except PeerProtocolError:
        assert got is None and cols == _columns()  # nothing appended: the record decoder raises
        return
    if got is None:
        assert cols == _columns()
    else:
        assert got[0] == len(recs)
        assert [row[4:] for row in _unpack_columns(cols, len(recs))] == [(r.key, r.value) for r in recs]
