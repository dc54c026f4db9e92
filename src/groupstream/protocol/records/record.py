"""One record inside a v2 batch: its varint layout, a decoder tuned for CPython, and an encoder.

Layout (all varints are zig-zag): length varint (bytes after it), attributes int8 (unused, 0),
timestampDelta varlong, offsetDelta varint, keyLength varint (-1 = null), key, valueLength varint (-1 = null),
value, headerCount varint, then per header: keyLength varint, key (UTF-8), valueLength varint (-1 = null), value.

The decoder is the client's hot loop, so it is written for few bytecodes per record: one- and two-byte
varints (all lengths below 8 KiB, offset deltas below 8192) are a table lookup, longer ones call out. Records are built with ``tuple.__new__`` so no Python-level
``__new__`` runs. Bounds are checked once per record (its declared length) and once per section, not per
field: an IndexError or a slice that runs short is caught and reported as PeerProtocolError.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import IntEnum
from typing import Any, NamedTuple, cast

from groupstream.protocol.errors import LocalProtocolError, PeerProtocolError

Buffer = bytes | bytearray | memoryview
Header = tuple[str, bytes | None]


class Record(NamedTuple):
    """A decoded record: absolute offset and timestamp, key and value bytes (None for null), headers."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


_new_record = cast(Callable[[type[tuple[Any, ...]], tuple[Any, ...]], Any], tuple.__new__)

# zig-zag decode of every one-byte varint, and of every two-byte varint indexed by (b1 << 7) | (b0 & 0x7F)
_ZZ1: tuple[int, ...] = tuple((i >> 1) ^ -(i & 1) for i in range(128))
_ZZ2: tuple[int, ...] = tuple((i >> 1) ^ -(i & 1) for i in range(1 << 14))


def _read_varint_slow(d: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint of any length up to 10 bytes (varlong); the fast paths handle 1 and 2 bytes."""
    result = 0
    shift = 0
    while True:
        b = d[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise PeerProtocolError("record varint is longer than 10 bytes")


def _read_varint(d: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint at ``pos`` and the position after it: for the fields off the hot loop (headers), which
    ``decode_records`` does not inline."""
    b = d[pos]
    if b < 0x80:
        return _ZZ1[b], pos + 1
    return _read_varint_slow(d, pos)


def _read_headers(d: bytes, pos: int) -> tuple[tuple[Header, ...], int]:
    count, pos = _read_varint(d, pos)
    if count < 0:
        raise PeerProtocolError(f"record has a negative header count {count}")
    headers: list[Header] = []
    for _ in range(count):
        kl, pos = _read_varint(d, pos)
        if kl < 0:
            raise PeerProtocolError(f"record header has a negative key length {kl}")
        key = d[pos : pos + kl].decode()
        pos += kl
        vl, pos = _read_varint(d, pos)
        if vl < 0:
            headers.append((key, None))
        else:
            headers.append((key, d[pos : pos + vl]))
            pos += vl
    return tuple(headers), pos


def decode_records(
    d: bytes,
    count: int,
    base_offset: int,
    base_timestamp: int,
    record_type: type[tuple[Any, ...]] = Record,
    prefix: tuple[Any, ...] = (),
    suffix: tuple[Any, ...] = (),
) -> list[Any]:
    """Decode exactly ``count`` records filling all of ``d`` (a batch's uncompressed records section).

    Each record is a ``record_type`` tuple of ``prefix + (offset, timestamp, key, value, headers) + suffix``:
    a consumer builds its own record type (topic and partition first) in the same pass, with no second tuple
    per record. (Concatenating an empty tuple costs nothing: CPython returns the other operand.)

    Raises PeerProtocolError if a record is truncated, longer or shorter than its declared length, or if
    bytes remain after the last one (Java rejects the same batches).
    """
    out: list[Record] = []
    append = out.append
    zz = _ZZ1
    zz2 = _ZZ2
    slow = _read_varint_slow
    new = _new_record
    rec = record_type
    pre, post = prefix, suffix
    no_headers: tuple[Header, ...] = ()
    pos = 0
    try:
        for _ in range(count):
            # length: two bytes for records of 64..8191 bytes, the common size
            b = d[pos]
            if b < 0x80:
                length = zz[b]
                pos += 1
            else:
                b2 = d[pos + 1]
                if b2 < 0x80:
                    length = zz2[(b2 << 7) | b - 0x80]
                    pos += 2
                else:
                    length, pos = slow(d, pos)
            end = pos + length
            # attributes (ignored) then timestampDelta
            b = d[pos + 1]
            if b < 0x80:
                ts = zz[b]
                pos += 2
            else:
                ts, pos = slow(d, pos + 1)
            b = d[pos]
            if b < 0x80:
                od = zz[b]
                pos += 1
            else:
                b2 = d[pos + 1]
                if b2 < 0x80:
                    od = zz2[(b2 << 7) | b - 0x80]
                    pos += 2
                else:
                    od, pos = slow(d, pos)
            b = d[pos]
            if b < 0x80:
                kl = zz[b]
                pos += 1
            else:
                kl, pos = slow(d, pos)
            if kl < 0:
                key = None
            else:
                key = d[pos : pos + kl]
                pos += kl
            b = d[pos]
            if b < 0x80:
                vl = zz[b]
                pos += 1
            else:
                b2 = d[pos + 1]
                if b2 < 0x80:
                    vl = zz2[(b2 << 7) | b - 0x80]
                    pos += 2
                else:
                    vl, pos = slow(d, pos)
            if vl < 0:
                value = None
            else:
                value = d[pos : pos + vl]
                pos += vl
            if d[pos] == 0:
                pos += 1
                headers = no_headers
            else:
                headers, pos = _read_headers(d, pos)
            if pos != end:
                raise PeerProtocolError(
                    f"record declares {length} bytes but its fields take {length + pos - end}"
                )
            append(new(rec, pre + (base_offset + od, base_timestamp + ts, key, value, headers) + post))  # noqa: RUF005 (faster than unpacking when both are empty, the common case)
    except IndexError:
        raise PeerProtocolError("record batch records are truncated") from None
    except UnicodeDecodeError:
        raise PeerProtocolError("record header key is not valid UTF-8") from None
    if pos != len(d):
        if pos > len(d):
            raise PeerProtocolError("record batch records are truncated")
        raise PeerProtocolError(f"{len(d) - pos} bytes remain after the batch's {count} records")
    return out


_c_decode: Callable[..., list[Any]] | None
_c_append_columns: Callable[..., tuple[int, int]] | None
try:  # the C decoder, built by `pip install` (setup.py); without a compiler the Python one above runs alone
    from groupstream.protocol.records._crecords import Fallback as _CFallback
    from groupstream.protocol.records._crecords import append_columns as _c_append_columns
    from groupstream.protocol.records._crecords import decode as _c_decode
except ImportError:  # pragma: no cover - depends on the build

    class _CFallback(Exception):  # type: ignore[no-redef]
        pass

    _c_decode = _c_append_columns = None


def c_decoder_loaded() -> bool:
    """Whether the C decoder was built and loaded (``groupstream --version`` says which runs)."""
    return _c_decode is not None


def decode_batch_records(
    d: Buffer,
    count: int,
    base_offset: int,
    base_timestamp: int,
    record_type: type[tuple[Any, ...]],
    topic: str,
    partition: int,
    timestamp_type: int,
    fixed_timestamp: int | None = None,
    min_offset: int = -1,
) -> list[Any]:
    """A consumer's records of one batch: ``record_type`` tuples of ``(topic, partition, offset, timestamp, key,
    value, headers, timestamp_type)``, only those at or above ``min_offset``; ``fixed_timestamp`` (the batch's
    LogAppendTime) replaces every record's timestamp.

    The C decoder does well-formed batches; anything it does not take for granted goes to ``decode_records``,
    which returns the same records or raises PeerProtocolError, so the result never depends on which ran.
    """
    if _c_decode is not None:
        try:
            return _c_decode(d, count, base_offset, base_timestamp, record_type, topic, partition, timestamp_type,
                             fixed_timestamp, min_offset)  # fmt: skip
        except _CFallback:
            pass
    recs = decode_records(d if isinstance(d, bytes) else bytes(d), count, base_offset, base_timestamp,
                          record_type, (topic, partition), (timestamp_type,))  # fmt: skip
    if fixed_timestamp is not None:
        recs = [r._replace(timestamp=fixed_timestamp) for r in recs]
    if min_offset > base_offset:
        recs = [r for r in recs if r.offset >= min_offset]
    return recs


def append_batch_columns(
    d: Buffer,
    count: int,
    base_offset: int,
    base_timestamp: int,
    fixed_timestamp: int | None,
    min_offset: int,
    partition: int,
    timestamp_type: int,
    columns: tuple[bytearray, ...],
) -> tuple[int, int] | None:
    """Append a batch's records from ``min_offset`` on to Arrow column buffers without a Python object per
    record (the C decoder; see ``append_columns`` in _crecords.c for the ten ``columns``). Returns how many
    records were appended and the last one's offset (-1 if none), or None, having appended nothing, when the
    batch is for ``decode_batch_records`` (it has headers, anything unusual, or there is no C decoder)."""
    if _c_append_columns is None:
        return None
    try:
        return _c_append_columns(d, count, base_offset, base_timestamp, fixed_timestamp, min_offset, partition,
                                 timestamp_type, columns)  # fmt: skip
    except _CFallback:
        return None


# --- encoding -----------------------------------------------------------------------------------------


def _encode_zigzag(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


_SMALL_MIN = -64
_SMALL_MAX = 8191
_SMALL: tuple[bytes, ...] = tuple(_encode_zigzag(i) for i in range(_SMALL_MIN, _SMALL_MAX + 1))
_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


def encode_varint(n: int) -> bytes:
    """Zig-zag varint of an int32 (record lengths, deltas, counts)."""
    if _SMALL_MIN <= n <= _SMALL_MAX:
        return _SMALL[n - _SMALL_MIN]
    if not _INT32_MIN <= n <= _INT32_MAX:
        raise LocalProtocolError(f"varint field cannot hold {n}")
    return _encode_zigzag(n)


def encode_varlong(n: int) -> bytes:
    """Zig-zag varint of an int64 (the timestamp delta)."""
    if _SMALL_MIN <= n <= _SMALL_MAX:
        return _SMALL[n - _SMALL_MIN]
    if not _INT64_MIN <= n <= _INT64_MAX:
        raise LocalProtocolError(f"varlong field cannot hold {n}")
    return _encode_zigzag(n)


_NULL = _SMALL[-1 - _SMALL_MIN]


def _append_nullable(parts: list[bytes], data: Buffer | None) -> None:
    """Keys, values and header keys and values share one layout: length varint (-1 for null), then bytes."""
    if data is None:
        parts.append(_NULL)
    else:
        parts.append(encode_varint(len(data)))
        parts.append(bytes(data))


def encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: Buffer | None,
    value: Buffer | None,
    headers: Sequence[tuple[str, Buffer | None]] = (),
) -> bytes:
    """One record, length prefix included."""
    parts = [b"\x00", encode_varlong(timestamp_delta), encode_varint(offset_delta)]
    _append_nullable(parts, key)
    _append_nullable(parts, value)
    parts.append(encode_varint(len(headers)))
    for hkey, hvalue in headers:
        _append_nullable(parts, hkey.encode())
        _append_nullable(parts, hvalue)
    body = b"".join(parts)
    return encode_varint(len(body)) + body


# --- control records ----------------------------------------------------------------------------------


class ControlType(IntEnum):
    """Control record key types (ControlRecordType): transaction markers, then KRaft's own."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4


class EndTxnMarker(NamedTuple):
    """The value of an ABORT/COMMIT control record."""

    control_type: ControlType
    coordinator_epoch: int
    version: int = 0


def encode_control_key(control_type: int, version: int = 0) -> bytes:
    return version.to_bytes(2, "big", signed=True) + control_type.to_bytes(2, "big", signed=True)


def encode_end_txn_value(coordinator_epoch: int, version: int = 0) -> bytes:
    return version.to_bytes(2, "big", signed=True) + coordinator_epoch.to_bytes(4, "big", signed=True)


def parse_control_key(key: bytes | None) -> tuple[int, int]:
    """``(version, type)`` of a control record key; later key versions keep these two fields first."""
    if key is None or len(key) < 4:
        raise PeerProtocolError("control record key is shorter than 4 bytes")
    version = int.from_bytes(key[0:2], "big", signed=True)
    if version < 0:
        raise PeerProtocolError(f"control record key version {version} is negative")
    return version, int.from_bytes(key[2:4], "big", signed=True)


def parse_end_txn_marker(record: Record) -> EndTxnMarker | None:
    """The marker a control record carries, or None if it is not an ABORT/COMMIT record."""
    _, ctype = parse_control_key(record.key)
    if ctype not in (ControlType.ABORT, ControlType.COMMIT):
        return None
    v = record.value
    if v is None or len(v) < 6:
        raise PeerProtocolError("end transaction marker value is shorter than 6 bytes")
    version = int.from_bytes(v[0:2], "big", signed=True)
    if version < 0:
        raise PeerProtocolError(f"end transaction marker version {version} is negative")
    return EndTxnMarker(ControlType(ctype), int.from_bytes(v[2:6], "big", signed=True), version)
