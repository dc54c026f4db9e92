"""Sparse offset index (Kafka's ``.index``): 8-byte big-endian entries ``(relative offset int32, position int32)``.

An entry maps the last offset of a batch to the file position where that batch starts; a lookup returns the
position of the greatest entry at or below the target, from which a short header scan finds the batch.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_right
from pathlib import Path

from groupstream.storage.index_file import IndexFile

_ENTRY = struct.Struct(">ii")


class OffsetIndex(IndexFile):
    ENTRY_SIZE = _ENTRY.size

    def __init__(self, path: Path, base_offset: int, max_bytes: int) -> None:
        super().__init__(path, base_offset, max_bytes)
        self._rel = array("i")
        self._pos = array("i")

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

    def entries(self) -> list[tuple[int, int]]:
        """``(absolute offset, position)`` pairs, for tests and tools."""
        return [(self.base_offset + r, p) for r, p in zip(self._rel, self._pos, strict=True)]

    def to_bytes(self) -> bytes:
        pack = _ENTRY.pack
        return b"".join(pack(r, p) for r, p in zip(self._rel, self._pos, strict=True))
