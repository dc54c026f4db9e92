"""Test helpers: hand-built v2 batches with opaque record bytes and a correct CRC, and small log utilities."""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c

from groupstream.protocol.records.batch_header import parse_header
from groupstream.storage import LogConfig, PartitionLog

_HEADER = struct.Struct(">qiibIhiqqqhii")


def make_batch(
    *,
    payload: bytes = b"",
    last_offset_delta: int = 0,
    base_timestamp: int = 0,
    max_timestamp: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    attributes: int = 0,
    base_offset: int = 0,
) -> bytearray:
    """A batch whose records section is ``payload`` as-is (think: compressed bytes the broker never reads).

    ``attributes=1`` marks it gzip-compressed, which changes nothing for the storage layer and is the point.
    """
    body = bytearray(
        _HEADER.pack(
            base_offset,
            49 + len(payload),
            -1,
            2,
            0,
            attributes,
            last_offset_delta,
            base_timestamp,
            base_timestamp if max_timestamp is None else max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            last_offset_delta + 1,
        )
    )
    body += payload
    struct.pack_into(">I", body, 17, crc32c.crc32c(bytes(body[21:])))
    return body


def sized_batch(size: int, *, last_offset_delta: int = 0, timestamp: int = 0, fill: int = 0x61) -> bytearray:
    """A batch of exactly ``size`` bytes (at least 61)."""
    return make_batch(
        payload=bytes([fill]) * (size - 61), last_offset_delta=last_offset_delta, base_timestamp=timestamp
    )


def split_batches(data: bytes) -> list[tuple[int, int, bytes]]:
    """``(base offset, last offset, bytes)`` of each batch in ``data``."""
    out = []
    pos = 0
    while pos < len(data):
        h = parse_header(data, pos)
        out.append((h.base_offset, h.last_offset, bytes(data[pos : pos + h.size])))
        pos += h.size
    return out


def read_all(log: PartitionLog, start: int | None = None) -> list[tuple[int, int, bytes]]:
    """Every batch from ``start`` (default: log start) to the log end, following segments."""
    offset = log.log_start_offset if start is None else start
    out: list[tuple[int, int, bytes]] = []
    while offset < log.log_end_offset:
        result = log.read(offset, 1 << 20)
        assert result.records, f"no progress at {offset}"
        out.extend(split_batches(result.records))
        offset = result.next_offset
    return out


def small_config(**overrides: object) -> LogConfig:
    base: dict[str, object] = {"segment_bytes": 1024, "index_interval_bytes": 100}
    base.update(overrides)
    return LogConfig(**base)  # type: ignore[arg-type]


def segment_files(directory: Path, suffix: str = ".log") -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.name.endswith(suffix))
