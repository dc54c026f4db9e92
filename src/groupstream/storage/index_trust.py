"""Whether a clean open may take a segment's state from its index files instead of scanning the log.

Cheap checks only, so that opening a sealed segment costs two small file reads and a few batch headers
whatever its size (`Segment.open_trusted` then scans the short tail after the last offset-index entry): the
files' own shape (`OffsetIndex.load_file`, `TimeIndex.load_file`), the last offset entry against the batch
header it points at, and, once the tail is scanned, the last time entry against the batch it names. Any
failure is returned as a sentence saying why, and the segment is scanned whole instead.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from groupstream.protocol.errors import PeerProtocolError
from groupstream.protocol.records.batch_header import HEADER_SIZE, parse_header
from groupstream.storage.fileio import pread_upto
from groupstream.storage.offset_index import OffsetIndex
from groupstream.storage.scan import BatchScan
from groupstream.storage.time_index import NO_TIMESTAMP, TimeIndex


@dataclass(frozen=True, slots=True)
class IndexedState:
    """A segment's state as its index files give it: as it stands before the batch that the last offset entry
    names (at ``size``, starting with offset ``next_offset``), whose extent the tail scan confirms."""

    size: int
    next_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int


def load_indexes(
    log_fd: int, offset_index: OffsetIndex, time_index: TimeIndex, base_offset: int, upper: int | None
) -> IndexedState | str:
    """Load both index files of the segment at ``base_offset`` (``upper``: the next segment's base, None for
    the last segment) and check them against the log; returns the state they give, or why they cannot be
    trusted."""
    file_size = os.fstat(log_fd).st_size
    problem = offset_index.load_file(file_size) or time_index.load_file()
    if problem is not None:
        return problem
    entry = offset_index.last_entry
    timed = time_index.last_entry
    size, next_offset = 0, base_offset
    if entry is not None:
        offset, position = entry
        head = pread_upto(log_fd, HEADER_SIZE, position)
        try:
            h = parse_header(head)
        except PeerProtocolError as exc:
            return f"the last entry of {offset_index.path.name} points at byte {position}: {exc}"
        if h.last_offset != offset or position + h.size > file_size:
            return (f"the last entry of {offset_index.path.name} names offset {offset} at byte {position}, "
                    f"where a batch of offsets {h.base_offset}..{h.last_offset} ({h.size} bytes) starts")  # fmt: skip
        if upper is not None and h.last_offset >= upper:
            return f"{offset_index.path.name} names offset {offset}, past the next segment's base {upper}"
        if h.max_timestamp > (NO_TIMESTAMP if timed is None else timed[0]):
            return f"{time_index.path.name} misses the timestamp {h.max_timestamp} of offset {offset}"
        size, next_offset = position, h.base_offset
    if timed is None:
        return IndexedState(size, next_offset, NO_TIMESTAMP, -1)
    return IndexedState(size, next_offset, *timed)


def time_index_problem(
    log_fd: int,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    *,
    max_timestamp: int,
    next_offset: int,
    size: int,
    sealed: bool,
) -> str | None:
    """Once the tail is scanned (the segment's state is ``max_timestamp``, ``next_offset`` and ``size``): the
    time index's last entry must name a batch of this segment holding that timestamp, and in a sealed segment
    it must be the largest (sealing writes it)."""
    name = time_index.path.name
    timed = time_index.last_entry
    largest = NO_TIMESTAMP if timed is None else timed[0]
    if sealed and max_timestamp != largest:
        return f"{name} lacks the segment's largest timestamp {max_timestamp}, which sealing records"
    if timed is None:
        return None
    timestamp, offset = timed
    if offset >= next_offset:
        return f"the last entry of {name} names offset {offset}, past the segment's last offset {next_offset - 1}"
    for _, h in BatchScan(log_fd, offset_index.lookup(offset), size, validate_crc=False):
        if h.last_offset >= offset:
            if h.last_offset == offset and h.max_timestamp == timestamp:
                return None
            break
    return f"the last entry of {name} ({timestamp}, {offset}) does not match the batch holding offset {offset}"
