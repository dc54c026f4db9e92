"""Sparse offset index (Kafka's ``.index``): 8-byte big-endian entries ``(relative offset int32, position int32)``.

An entry maps the last offset of a batch to the file position where that batch starts; a lookup returns the
position of the greatest entry at or below the target, from which a short header scan finds the batch.
"""

from __future__ import annotations

import operator
import struct
from array import array
from bisect import bisect_left, bisect_right

from groupstream.storage.index_file import IndexFile, swap_big_endian

_ENTRY = struct.Struct(">ii")


class OffsetIndex(IndexFile):
    ENTRY_SIZE = _ENTRY.size
    _rel: array[int]
    _pos: array[int]

    def __len__(self) -> int:
        return len(self._rel)

    def _reset_entries(self) -> None:
        self._rel = array("i")
        self._pos = array("i")

    def append(self, offset: int, position: int) -> None:
        """Add an entry (written through unless rebuilding). Entries must grow in offset and position."""
        rel = offset - self.base_offset
        if self._rel and (rel <= self._rel[-1] or position <= self._pos[-1]):
            raise ValueError(f"offset index entry ({offset}, {position}) does not follow the last one")
        slot = len(self._rel)
        self._rel.append(rel)
        self._pos.append(position)
        self._write_entry(slot, _ENTRY.pack(rel, position))

    def lookup(self, offset: int) -> int:
        """Position to start scanning from for ``offset``: the greatest entry at or below it, else 0."""
        i = bisect_right(self._rel, offset - self.base_offset) - 1
        return self._pos[i] if i >= 0 else 0

    def position_before(self, position: int) -> int | None:
        """The greatest entry position strictly below ``position``: where a scan can restart from."""
        i = bisect_left(self._pos, position) - 1
        return self._pos[i] if i >= 0 else None

    @property
    def last_entry(self) -> tuple[int, int] | None:
        """``(absolute offset, position)`` of the last entry."""
        return (self.base_offset + self._rel[-1], self._pos[-1]) if self._rel else None

    def load_file(self, file_size: int) -> str | None:
        """Take the entries from the file, as a clean open does instead of rescanning the log; returns why the
        file cannot be trusted (the entries are then left empty). Cheap checks only: whole entries, no more
        than ``segment.index.bytes`` allows, offsets and positions strictly increasing, positions inside the
        log file. The caller checks that the last entry points at a batch header."""
        data = self._read_whole_entries(self.max_entries)
        if isinstance(data, str):
            return data
        both = array("i")
        both.frombytes(data)
        swap_big_endian(both)
        rel, pos = both[0::2], both[1::2]
        if rel and (rel[0] < 0 or pos[0] < 0 or pos[-1] >= file_size):
            return f"{self.path.name} has entries outside the segment (log file of {file_size} bytes)"
        if not all(map(operator.lt, rel, rel[1:])) or not all(map(operator.lt, pos, pos[1:])):
            return f"{self.path.name} has entries that do not increase"
        self._rel, self._pos = rel, pos
        return None

    def entries(self) -> list[tuple[int, int]]:
        """``(absolute offset, position)`` pairs, for tests and tools."""
        return [(self.base_offset + r, p) for r, p in zip(self._rel, self._pos, strict=True)]

    def to_bytes(self) -> bytes:
        both = array("i", bytes(_ENTRY.size * len(self._rel)))
        both[0::2] = self._rel
        both[1::2] = self._pos
        swap_big_endian(both)
        return both.tobytes()
