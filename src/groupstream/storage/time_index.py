"""Sparse time index (Kafka's ``.timeindex``): 12-byte big-endian entries ``(timestamp int64, relative offset int32)``.

Entries are appended only when the segment's max timestamp grows, and record the offset where it first
reached that value; so every batch before an entry's offset has a smaller max timestamp, which is what
makes "start scanning at the greatest entry not above the target" correct.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_right
from pathlib import Path

from groupstream.storage.index_file import IndexFile

_ENTRY = struct.Struct(">qi")
NO_TIMESTAMP = -1


class TimeIndex(IndexFile):
    ENTRY_SIZE = _ENTRY.size

    def __init__(self, path: Path, base_offset: int, max_bytes: int) -> None:
        super().__init__(path, base_offset, max_bytes)
        self._ts = array("q")
        self._rel = array("i")

    def __len__(self) -> int:
        return len(self._ts)

    def _reset_entries(self) -> None:
        self._ts = array("q")
        self._rel = array("i")

    @property
    def last_timestamp(self) -> int:
        return self._ts[-1] if self._ts else NO_TIMESTAMP

    def maybe_append(self, timestamp: int, offset: int) -> bool:
        """Add ``(timestamp, offset)`` if the timestamp grows; returns whether it did."""
        if timestamp <= self.last_timestamp:
            return False
        rel = offset - self.base_offset
        if self._rel and rel < self._rel[-1]:
            raise ValueError(f"time index entry ({timestamp}, {offset}) goes back in offsets")
        slot = len(self._ts)
        self._ts.append(timestamp)
        self._rel.append(rel)
        self._write_entry(slot, _ENTRY.pack(timestamp, rel))
        return True

    def lookup(self, timestamp: int) -> int | None:
        """Offset of the greatest entry whose timestamp is at or below ``timestamp``, or None."""
        i = bisect_right(self._ts, timestamp) - 1
        return self.base_offset + self._rel[i] if i >= 0 else None

    def entries(self) -> list[tuple[int, int]]:
        """``(timestamp, absolute offset)`` pairs, for tests and tools."""
        return [(t, self.base_offset + r) for t, r in zip(self._ts, self._rel, strict=True)]

    def to_bytes(self) -> bytes:
        pack = _ENTRY.pack
        return b"".join(pack(t, r) for t, r in zip(self._ts, self._rel, strict=True))
