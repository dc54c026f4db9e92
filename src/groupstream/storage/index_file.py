"""What the offset and time indexes share: an append-only file of fixed-size entries mirrored in memory.

Lookups use the in-memory arrays only; the file exists so the layout matches Kafka's on disk and so tools
that read Kafka log directories can read ours. An index is rebuilt in memory from the log on open and the
file rewritten only when it differs (missing, torn, wrong size, stale entries), which is why appends can
run in two modes: write-through (normal) or memory-only (while rebuilding).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from array import array
from pathlib import Path

from groupstream.storage.fileio import open_rw, pwrite_all

log = logging.getLogger("groupstream.storage")


class IndexFile:
    ENTRY_SIZE = 0

    def __init__(self, path: Path, base_offset: int, max_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(max_bytes // self.ENTRY_SIZE, 1)
        self._fd: int | None = None
        self._write_through = False
        self._reset_entries()

    def __len__(self) -> int:
        raise NotImplementedError

    @property
    def is_full(self) -> bool:
        return len(self) >= self.max_entries

    def to_bytes(self) -> bytes:
        raise NotImplementedError

    def _reset_entries(self) -> None:
        raise NotImplementedError

    def _read_whole_entries(self, max_entries: int) -> bytes | str:
        """Forget the entries and read the file for ``load_file``: its bytes, or why they cannot be taken (the
        file is missing, ends in a torn entry, or holds more than ``max_entries``)."""
        self._reset_entries()
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return f"{self.path.name} is missing"
        size = self.ENTRY_SIZE
        if len(data) % size:
            return f"{self.path.name} holds {len(data)} bytes, not a whole number of {size}-byte entries"
        if len(data) // size > max_entries:
            return f"{self.path.name} holds more entries than segment.index.bytes allows"
        return data

    def start_rebuild(self) -> None:
        """Forget all entries and stop writing to the file until ``sync_file``."""
        self._reset_entries()
        self._write_through = False

    def sync_file(self) -> bool:
        """Make the file hold exactly the in-memory entries; returns whether it had to be rewritten."""
        expected = self.to_bytes()
        try:
            with open(self.path, "rb") as f:
                current: bytes | None = f.read()
        except FileNotFoundError:
            current = None
        self._write_through = True
        if current == expected:
            return False
        self.close()
        self._fd = open_rw(self.path, truncate=True)
        pwrite_all(self._fd, expected, 0)
        return True

    def _write_entry(self, slot: int, entry: bytes) -> None:
        """Best-effort: the entries in memory are the truth and every open rederives and rewrites a file
        that differs from them, so a disk that refuses an index entry only stops writing through (the
        batch it describes is already in the log and must not be failed for it)."""
        if not self._write_through:
            return
        try:
            if self._fd is None:
                self._fd = open_rw(self.path)
            pwrite_all(self._fd, entry, slot * self.ENTRY_SIZE)
        except OSError as exc:
            self._write_through = False
            log.warning("index %s stops being written (%s); the next open rebuilds it from the log", self.path,
                        exc.strerror or exc)

    def dup_fd(self) -> int | None:
        """A duplicate of the open fd for an fsync on another thread, which may outlive ``close``."""
        return None if self._fd is None else os.dup(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    def delete_file(self) -> None:
        self.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


def swap_big_endian(*arrays: array[int]) -> None:
    """Index files are big-endian and the arrays native: swap in place on a little-endian machine. A swap is
    its own inverse, so it serves reading a file and writing one."""
    if sys.byteorder == "little":
        for a in arrays:
            a.byteswap()
