"""The aborted-transaction index: which transactions were aborted, so a read_committed fetch can name them.

A read_committed consumer receives the aborted transactions that overlap what it fetched as ``(producer id,
first offset)`` pairs and drops those producers' records from each first offset up to their ABORT marker
(KIP-98). Kafka keeps them per segment in ``<base>.txnindex``, one entry per aborted transaction, appended in
the segment that holds the transaction's ABORT marker, in marker order. Each entry is 34 bytes, big-endian:
version int16 (0), producer id int64, first offset int64, last offset (the marker's) int64, last stable offset
int64 (the LSO just after the abort: the first offset of the oldest transaction still open, or the marker's
offset + 1). The same files are written here, so Kafka's tools read them.

`AbortedTxnIndex` is the pure in-memory index of a whole partition (no I/O, no clock); the functions at the end
read and write one segment's file. The files are only trusted after a clean shutdown whose snapshot recorded
how many entries they hold (see `PartitionLog.open`); otherwise the index is rebuilt from the log's markers.
"""

from __future__ import annotations

import contextlib
import os
import struct
from bisect import bisect_left
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
ENTRY_VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class AbortedTxnIndex:
    """Every aborted transaction whose marker is still in the log, in marker (last offset) order."""

    def __init__(self, entries: list[AbortedTxn] | None = None) -> None:
        self._entries: list[AbortedTxn] = entries or []
        self._lasts: list[int] = [e.last_offset for e in self._entries]

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[AbortedTxn]:
        return iter(self._entries)

    def add(self, entry: AbortedTxn) -> None:
        """Markers are appended in offset order, so this is always the last entry."""
        if self._lasts and entry.last_offset <= self._lasts[-1]:
            raise ValueError(f"aborted transaction at {entry.last_offset} is not after the last one at {self._lasts[-1]}")
        self._entries.append(entry)
        self._lasts.append(entry.last_offset)

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping ``[fetch_offset, upper_bound_offset)``, as Kafka's
        collectAbortedTxns answers: last offset at or after the fetch offset, first offset below the bound.
        The scan stops at the first entry whose last stable offset reaches the bound: every transaction
        indexed after it began at or after that LSO (it was not open then), so none can overlap."""
        found: list[AbortedTxn] = []
        entries = self._entries
        for i in range(bisect_left(self._lasts, fetch_offset), len(entries)):
            e = entries[i]
            if e.first_offset < upper_bound_offset:
                found.append(e)
            if e.last_stable_offset >= upper_bound_offset:
                break
        return found

    def in_range(self, first: int, end: int | None) -> list[AbortedTxn]:
        """Entries whose marker lies in ``[first, end)`` (one segment's share; ``end`` None: no bound)."""
        lo = bisect_left(self._lasts, first)
        hi = len(self._lasts) if end is None else bisect_left(self._lasts, end)
        return self._entries[lo:hi]

    def truncate_from(self, offset: int) -> None:
        """Forget entries whose marker is at or after ``offset`` (the log was truncated there)."""
        cut = bisect_left(self._lasts, offset)
        del self._entries[cut:]
        del self._lasts[cut:]

    def drop_before(self, offset: int) -> None:
        """Forget entries whose marker is below ``offset`` (their segments were deleted)."""
        cut = bisect_left(self._lasts, offset)
        del self._entries[:cut]
        del self._lasts[:cut]

    def clear(self) -> None:
        self._entries.clear()
        self._lasts.clear()


def encode_entry(entry: AbortedTxn) -> bytes:
    return _ENTRY.pack(ENTRY_VERSION, *entry)


def decode_entries(data: bytes, first: int, end: int | None) -> list[AbortedTxn] | str:
    """The entries of one segment's file (markers must lie in ``[first, end)``, in increasing order), or why
    they cannot be trusted."""
    if len(data) % ENTRY_SIZE:
        return f"{len(data)} bytes are not a whole number of {ENTRY_SIZE}-byte entries"
    out: list[AbortedTxn] = []
    previous = first - 1
    for pos in range(0, len(data), ENTRY_SIZE):
        version, pid, first_offset, last_offset, lso = _ENTRY.unpack_from(data, pos)
        if version != ENTRY_VERSION:
            return f"entry {pos // ENTRY_SIZE} has version {version}"
        if not (previous < last_offset and (end is None or last_offset < end) and first_offset <= last_offset):
            return f"entry {pos // ENTRY_SIZE} (offsets {first_offset}..{last_offset}) is out of order or outside the segment"
        out.append(AbortedTxn(pid, first_offset, last_offset, lso))
        previous = last_offset
    return out


def read_entries(path: Path, first: int, end: int | None) -> list[AbortedTxn] | str:
    """A segment's entries; a missing file holds none (Kafka creates them only for an abort)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as exc:
        return f"cannot read {path.name}: {exc.strerror or exc}"
    return decode_entries(data, first, end)


def append_entry(path: Path, entry: AbortedTxn) -> None:
    """Append one entry (not fsynced: a clean close syncs the files, and any other open rebuilds them)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, encode_entry(entry))
    finally:
        os.close(fd)


def write_entries(path: Path, entries: list[AbortedTxn], *, sync: bool = False) -> None:
    """Replace a segment's file with ``entries`` (removed when there are none)."""
    if not entries:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, b"".join(encode_entry(e) for e in entries))
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
