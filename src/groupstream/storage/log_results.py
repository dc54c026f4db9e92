"""What a partition log's appends and reads return, and the one change an append makes to a batch it stores:
the broker's LogAppendTime stamped into the header of a topic that uses it."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from groupstream.protocol.records.batch_header import TIMESTAMP_TYPE_BIT, compute_crc
from groupstream.storage.file_range import FileRange

_ATTRIBUTES = struct.Struct(">h")
_TIMESTAMP = struct.Struct(">q")
_CRC = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class AppendInfo:
    base_offset: int
    last_offset: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    # Bytes written (what a fetch purgatory counts toward min_bytes); not part of the append's identity.
    size_bytes: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class ReadResult:
    records: bytes  # whole batches, as stored
    next_offset: int  # offset after the last batch returned; the fetch offset when nothing was returned
    high_watermark: int
    log_start_offset: int


@dataclass(frozen=True, slots=True)
class SendRead:
    """What `PartitionLog.read_for_send` returns: whole batches as bytes, or as a range of the segment file for
    the connection to send without copying them (see `groupstream.storage.file_range`)."""

    records: bytes | FileRange
    next_offset: int  # offset after the last batch returned; the fetch offset when nothing was returned


def stamp_log_append_time(buf: bytearray, pos: int, size: int, attributes: int, now_ms: int) -> None:
    """LogAppendTime: set the timestamp-type bit and maxTimestamp, then the CRC they are covered by.
    The records are untouched (consumers take every record's timestamp from maxTimestamp)."""
    _ATTRIBUTES.pack_into(buf, pos + 21, attributes | TIMESTAMP_TYPE_BIT)
    _TIMESTAMP.pack_into(buf, pos + 35, now_ms)
    _CRC.pack_into(buf, pos + 17, compute_crc(buf, pos, size))
