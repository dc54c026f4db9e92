"""Sparse time index (Kafka's ``.timeindex``): 12-byte big-endian entries ``(timestamp int64, relative offset int32)``.

Entries are appended only when the segment's max timestamp grows, and record the offset where it first
reached that value; so every batch before an entry's offset has a smaller max timestamp, which is what
makes "start scanning at the greatest entry not above the target" correct.
"""

from __future__ import annotations

import operator
import struct
from array import array
from bisect import bisect_right

from groupstream.storage.index_file import IndexFile, swap_big_endian

_ENTRY = struct.Struct(">qi")
NO_TIMESTAMP = -1


class TimeIndex(IndexFile):
    ENTRY_SIZE = _ENTRY.size
    _ts: array[int]
    _rel: array[int]

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

    @property
    def last_entry(self) -> tuple[int, int] | None:
        """``(timestamp, absolute offset)`` of the last entry."""
        return (self._ts[-1], self.base_offset + self._rel[-1]) if self._ts else None

    def load_file(self) -> str | None:
        """Take the entries from the file (a clean open); returns why the file cannot be trusted (the entries
        are then left empty). Cheap checks only: whole entries, timestamps strictly increasing, offsets not
        decreasing and not below the base; the caller checks them against the log."""
        data = self._read_whole_entries(self.max_entries + 1)  # + the entry sealing adds
        if isinstance(data, str):
            return data
        ts, rel = _split(data)
        if rel and rel[0] < 0:
            return f"{self.path.name} has an entry below the segment's base offset"
        if not all(map(operator.lt, ts, ts[1:])) or not all(map(operator.le, rel, rel[1:])):
            return f"{self.path.name} has entries that do not increase"
        self._ts, self._rel = ts, rel
        return None

    def entries(self) -> list[tuple[int, int]]:
        """``(timestamp, absolute offset)`` pairs, for tests and tools."""
        return [(t, self.base_offset + r) for t, r in zip(self._ts, self._rel, strict=True)]

    def to_bytes(self) -> bytes:
        ts, rel = array("q", self._ts), array("i", self._rel)
        swap_big_endian(ts, rel)
        tsb, relb = ts.tobytes(), rel.tobytes()
        out = bytearray(_ENTRY.size * len(ts))
        for k in range(8):  # interleave in C: byte k of every timestamp, then of every offset
            out[k::12] = tsb[k::8]
        for k in range(4):
            out[8 + k :: 12] = relb[k::4]
        return bytes(out)


def _split(data: bytes) -> tuple[array[int], array[int]]:
    """The timestamps and relative offsets of whole 12-byte entries (the inverse of `TimeIndex.to_bytes`)."""
    n = len(data) // _ENTRY.size
    tsb, relb = bytearray(8 * n), bytearray(4 * n)
    for k in range(8):
        tsb[k::8] = data[k::12]
    for k in range(4):
        relb[k::4] = data[8 + k :: 12]
    ts, rel = array("q"), array("i")
    ts.frombytes(tsb)
    rel.frombytes(relb)
    swap_big_endian(ts, rel)
    return ts, rel
