"""Producer ids unique across restarts: blocks reserved on disk before any id of the block is handed out."""

from __future__ import annotations

import os
from pathlib import Path

BLOCK = 1000


class ProducerIdAllocator:
    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / "producer-id-block"
        self._next = 0
        self._end = 0
        if self._path.exists():
            text = self._path.read_text().strip()
            self._next = self._end = int(text) if text else 0

    def allocate(self) -> int:
        if self._next >= self._end:
            self._reserve(self._end + BLOCK)
        pid = self._next
        self._next += 1
        return pid

    def _reserve(self, end: int) -> None:
        tmp = self._path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            f.write(str(end))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)
        self._end = end
