"""Variable-length primitives shared by the message compiler, request and response headers, and the group
record formats (the record codec has its own zig-zag varints, in records/record.py).

Readers take a buffer and a position and return ``(value, new_position)``; writers append bytes to a list.
Every reader checks bounds and raises `PeerProtocolError`, never IndexError.
"""

from __future__ import annotations

import struct
import uuid

from groupstream.protocol.errors import LocalProtocolError, PeerProtocolError

Buffer = bytes | bytearray | memoryview

I8 = struct.Struct(">b")
I16 = struct.Struct(">h")
U16 = struct.Struct(">H")
I32 = struct.Struct(">i")
U32 = struct.Struct(">I")
I64 = struct.Struct(">q")
F64 = struct.Struct(">d")

ZERO_UUID = uuid.UUID(int=0)

_MAX_UVARINT32 = (1 << 32) - 1


def write_uvarint(n: int) -> bytes:
    """Unsigned LEB128, as Kafka's ByteUtils.writeUnsignedVarint."""
    if n < 0x80:
        if n < 0:
            raise LocalProtocolError(f"unsigned varint cannot hold {n}")
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def read_uvarint(buf: Buffer, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise PeerProtocolError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            if result > _MAX_UVARINT32 and shift >= 28:
                raise PeerProtocolError("varint exceeds 32 bits")
            return result, pos
        shift += 7
        if shift > 28:
            raise PeerProtocolError("varint is too long")


def need(buf: Buffer, pos: int, n: int) -> int:
    """Return the end of an ``n``-byte field at ``pos`` or raise if the buffer is too short."""
    end = pos + n
    if n < 0 or end > len(buf):
        raise PeerProtocolError(f"field of {n} bytes at {pos} runs past the end of a {len(buf)}-byte buffer")
    return end


# --- strings -------------------------------------------------------------------------------------------


def read_string(buf: memoryview, pos: int) -> tuple[str, int]:
    (n,) = I16.unpack_from(buf, pos)
    pos += 2
    if n < 0:
        raise PeerProtocolError("null where a non-nullable string is required")
    end = need(buf, pos, n)
    return str(buf[pos:end], "utf-8"), end


def read_nullable_string(buf: memoryview, pos: int) -> tuple[str | None, int]:
    (n,) = I16.unpack_from(buf, pos)
    pos += 2
    if n < 0:
        if n != -1:
            raise PeerProtocolError(f"string length {n}")
        return None, pos
    end = need(buf, pos, n)
    return str(buf[pos:end], "utf-8"), end


def read_compact_string(buf: memoryview, pos: int) -> tuple[str, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        raise PeerProtocolError("null where a non-nullable compact string is required")
    end = need(buf, pos, n - 1)
    return str(buf[pos:end], "utf-8"), end


def read_compact_nullable_string(buf: memoryview, pos: int) -> tuple[str | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    end = need(buf, pos, n - 1)
    return str(buf[pos:end], "utf-8"), end


def write_string(v: str, out: list[bytes]) -> None:
    b = v.encode("utf-8")
    if len(b) > 0x7FFF:
        raise LocalProtocolError(f"string of {len(b)} bytes is longer than 32767")
    out.append(I16.pack(len(b)))
    out.append(b)


def write_nullable_string(v: str | None, out: list[bytes]) -> None:
    if v is None:
        out.append(b"\xff\xff")
    else:
        write_string(v, out)


def write_compact_string(v: str, out: list[bytes]) -> None:
    b = v.encode("utf-8")
    out.append(write_uvarint(len(b) + 1))
    out.append(b)


def write_compact_nullable_string(v: str | None, out: list[bytes]) -> None:
    if v is None:
        out.append(b"\x00")
    else:
        write_compact_string(v, out)


# --- bytes (and records, which are bytes on the wire) ----------------------------------------------------


def read_bytes(buf: memoryview, pos: int) -> tuple[bytes, int]:
    (n,) = I32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        raise PeerProtocolError("null where non-nullable bytes are required")
    end = need(buf, pos, n)
    return bytes(buf[pos:end]), end


def read_nullable_bytes(buf: memoryview, pos: int) -> tuple[bytes | None, int]:
    (n,) = I32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        return None, pos
    end = need(buf, pos, n)
    return bytes(buf[pos:end]), end


def read_compact_bytes(buf: memoryview, pos: int) -> tuple[bytes, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        raise PeerProtocolError("null where non-nullable compact bytes are required")
    end = need(buf, pos, n - 1)
    return bytes(buf[pos:end]), end


def read_compact_nullable_bytes(buf: memoryview, pos: int) -> tuple[bytes | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    end = need(buf, pos, n - 1)
    return bytes(buf[pos:end]), end


def read_records(buf: memoryview, pos: int) -> tuple[memoryview | None, int]:
    """Records stay a zero-copy view of the frame: the broker validates and appends them as they are."""
    (n,) = I32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        return None, pos
    end = need(buf, pos, n)
    return buf[pos:end], end


def read_compact_records(buf: memoryview, pos: int) -> tuple[memoryview | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    end = need(buf, pos, n - 1)
    return buf[pos:end], end


def write_bytes(v: Buffer, out: list[bytes]) -> None:
    out.append(I32.pack(len(memoryview(v))))
    out.append(v)  # type: ignore[arg-type]  # any bytes-like joins


def write_nullable_bytes(v: Buffer | None, out: list[bytes]) -> None:
    if v is None:
        out.append(b"\xff\xff\xff\xff")
    else:
        write_bytes(v, out)


def write_compact_bytes(v: Buffer, out: list[bytes]) -> None:
    out.append(write_uvarint(len(memoryview(v)) + 1))
    out.append(v)  # type: ignore[arg-type]


def write_compact_nullable_bytes(v: Buffer | None, out: list[bytes]) -> None:
    if v is None:
        out.append(b"\x00")
    else:
        write_compact_bytes(v, out)


# --- uuid ------------------------------------------------------------------------------------------------


_UUIDS: dict[bytes, uuid.UUID] = {}
"""Decoded UUIDs by their bytes: a broker reads the same few topic ids over and over (every fetch, every
heartbeat, every coordinator record), and ``uuid.UUID(bytes=...)`` is Python code; UUIDs are immutable, so one
object per value is shared (a memo, bounded; its loss only costs a rebuild)."""
_UUIDS_MAX = 4096


def read_uuid(buf: memoryview, pos: int) -> tuple[uuid.UUID, int]:
    end = need(buf, pos, 16)
    raw = bytes(buf[pos:end])
    found = _UUIDS.get(raw)
    if found is None:
        if len(_UUIDS) >= _UUIDS_MAX:
            _UUIDS.clear()
        found = _UUIDS[raw] = uuid.UUID(bytes=raw)
    return found, end


# --- tagged fields ---------------------------------------------------------------------------------------


def read_tagged_fields(buf: memoryview, pos: int) -> tuple[list[tuple[int, memoryview]], int]:
    """Read a tagged-field section as ``[(tag, raw value view)]`` in wire order."""
    count, pos = read_uvarint(buf, pos)
    if count == 0:
        return [], pos
    if count > len(buf) - pos:
        raise PeerProtocolError(f"{count} tagged fields cannot fit in {len(buf) - pos} bytes")
    fields: list[tuple[int, memoryview]] = []
    last = -1
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        if tag <= last:
            raise PeerProtocolError(f"tagged field {tag} out of order")
        last = tag
        size, pos = read_uvarint(buf, pos)
        end = need(buf, pos, size)
        fields.append((tag, buf[pos:end]))
        pos = end
    return fields, pos


def write_tagged_fields(fields: list[tuple[int, bytes]], out: list[bytes]) -> None:
    out.append(write_uvarint(len(fields)))
    for tag, raw in sorted(fields, key=lambda f: f[0]):
        out.append(write_uvarint(tag))
        out.append(write_uvarint(len(raw)))
        out.append(raw)
