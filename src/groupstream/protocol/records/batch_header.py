"""The fixed 61-byte RecordBatch v2 header: parse, validate and patch it without touching the records.

Layout (big-endian): baseOffset int64 @0, batchLength int32 @8 (bytes after this field), partitionLeaderEpoch
int32 @12, magic int8 @16, crc uint32 @17 (CRC32C of everything from attributes to the end), attributes int16
@21, lastOffsetDelta int32 @23, baseTimestamp int64 @27, maxTimestamp int64 @35, producerId int64 @43,
producerEpoch int16 @51, baseSequence int32 @53, recordsCount int32 @57, records @61.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

import crc32c as _crc32c

from groupstream.protocol.errors import PeerProtocolError

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes not counted by batchLength
MAGIC_V2 = 2
CRC_START = 21

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_BASE_OFFSET = struct.Struct(">q")
_CRC = struct.Struct(">I")
_PREFIX = struct.Struct(">qi")
_MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return 1 if self.attributes & TIMESTAMP_TYPE_BIT else 0

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the header at ``pos``; raises PeerProtocolError if it is truncated or not magic 2."""
    if len(buf) - pos < HEADER_SIZE:
        raise PeerProtocolError(f"record batch header truncated: {len(buf) - pos} of {HEADER_SIZE} bytes")
    h = BatchHeader._make(_HEADER.unpack_from(buf, pos))
    if h.magic != MAGIC_V2:
        raise PeerProtocolError(f"record batch magic {h.magic} is not supported (only v2)")
    if h.batch_length < _MIN_BATCH_LENGTH:
        raise PeerProtocolError(f"record batch length {h.batch_length} is shorter than its header")
    if h.last_offset_delta < 0 or h.records_count < 0:
        raise PeerProtocolError("record batch has a negative record count or offset delta")
    return h


def encode_header(h: BatchHeader) -> bytes:
    """The 61 header bytes of ``h`` as given (the caller computes the CRC; see ``compute_crc``)."""
    return _HEADER.pack(*h)


def patch_crc(buf: bytearray | memoryview, pos: int, size: int) -> int:
    """Compute the CRC of the batch at ``pos`` and write it into the header; returns it."""
    crc = compute_crc(buf, pos, size)
    _CRC.pack_into(buf, pos + 17, crc)
    return crc


def peek_size(buf: bytes | bytearray | memoryview, pos: int) -> int | None:
    """Total size of the batch starting at ``pos`` from its first 12 bytes, or None if fewer are present."""
    if len(buf) - pos < LOG_OVERHEAD:
        return None
    _, length = _PREFIX.unpack_from(buf, pos)
    return int(length) + LOG_OVERHEAD


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    return int(_crc32c.crc32c(memoryview(buf)[pos + CRC_START : pos + size]))


def crc_ok(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bool:
    return compute_crc(buf, pos, header.size) == header.crc


def iter_batches(buf: bytes | bytearray | memoryview, validate_crc: bool = True) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` for each complete batch; raise PeerProtocolError on a truncated or corrupt one.

    This is what the broker runs over a produce request once: framing, magic and CRC, never the records.
    """
    pos = 0
    end = len(buf)
    while pos < end:
        h = parse_header(buf, pos)
        if pos + h.size > end:
            raise PeerProtocolError(f"record batch at {pos} claims {h.size} bytes but only {end - pos} remain")
        if validate_crc and not crc_ok(buf, pos, h):
            raise PeerProtocolError(f"record batch at {pos} fails its CRC check")
        yield pos, h
        pos += h.size


def patch_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Assign offsets in place: baseOffset is outside the CRC, so nothing else changes."""
    _BASE_OFFSET.pack_into(buf, pos, base_offset)
