"""Producer ids unique across restarts: blocks reserved on disk before any id of the block is handed out."""

from __future__ import annotations

from pathlib import Path

from groupstream.storage.errors import LogWriteError
from groupstream.storage.fileio import atomic_write

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
        """Durably, directory entry included: a block handed out and then forgotten by a crash would give
        two producers the same id. A disk that refuses raises `LogWriteError` and hands out nothing."""
        try:
            atomic_write(self._path, str(end).encode("ascii"))
        except OSError as exc:
            raise LogWriteError(f"cannot reserve producer ids: {exc.strerror or exc}") from exc
        self._end = end
