"""Confirming, as reads reach them, the batch framing that a clean open trusted without a scan.

A clean open takes a segment's state from its index files (`groupstream.storage.index_trust`) and never reads
the batches below the last offset-index entry, so a corrupt length field there shows only when a read returns
those bytes. `check_frames` confirms each batch's end by the header that follows it, one struct unpack per
batch; `ConfirmedRuns` remembers what was confirmed, so reading the same bytes again costs nothing.
"""

from __future__ import annotations

import struct
from bisect import bisect_right

from groupstream.protocol.records.batch_header import (
    HEADER_SIZE,
    MAGIC_V2,
    BatchHeader,
    crc_ok,
    parse_header,
    peek_size,
)
from groupstream.storage.config import INT64_MAX
from groupstream.storage.fileio import pread_upto
from groupstream.storage.scan import Damage

# The start of a v2 batch, as a read checks the framing of each batch it returns: base offset, batch length,
# partition leader epoch, magic, CRC, attributes, last offset delta.
_FRAME = struct.Struct(">qiibIhi")
_MIN_BATCH_LENGTH = HEADER_SIZE - 12


def whole_batches(data: bytes, p: int, next_offset: int) -> tuple[int, int]:
    """End of the whole batches in ``data`` from ``p`` (framing already confirmed), and the offset after them."""
    n = len(data)
    last = -1
    while True:
        size = peek_size(data, p)
        if size is None or p + size > n:
            break
        last = p
        p += size
    return p, next_offset if last < 0 else parse_header(data, last).next_offset


class ConfirmedRuns:
    """File positions whose framing a read confirmed: disjoint ``[start, end)`` runs, sorted."""

    __slots__ = ("_runs",)

    def __init__(self) -> None:
        self._runs: list[tuple[int, int]] = []

    def covers(self, start: int, end: int) -> bool:
        i = bisect_right(self._runs, (start, INT64_MAX)) - 1
        return i >= 0 and self._runs[i][1] >= end

    def add(self, start: int, end: int) -> None:
        runs = self._runs
        i = bisect_right(runs, (start, INT64_MAX))
        if i > 0 and runs[i - 1][1] >= start:  # touches the run before it
            i -= 1
            start = runs[i][0]
        j = i
        while j < len(runs) and runs[j][0] <= end:
            end = max(end, runs[j][1])
            j += 1
        runs[i:j] = [(start, end)]


def check_frames(
    fd: int,
    data: bytes,
    position: int,
    want: int,
    limit: int,
    first: BatchHeader,
    unverified: int,
    next_offset: int,
) -> tuple[int, int, Damage | None]:
    """How many leading bytes of ``data`` (read from ``fd`` at ``position``; its first batch is ``first``, whose
    extent is confirmed) are whole batches with confirmed framing, at most ``want``; the offset after them; and
    the damage that stopped the check, if any (the caller makes it a hole).

    Only the first ``unverified`` bytes of ``data`` need confirming (the segment's framing from there on was
    written or scanned by this process). Each batch's end is confirmed by the header that follows it (magic 2,
    a possible length, offsets rising and below ``next_offset``, inside ``limit``; read separately when
    ``data`` ends first) or by reaching ``limit``; when that header does not check out, by the batch's own
    CRC."""
    region = limit - position
    n = len(data)
    frame = _FRAME.unpack_from
    last_offset = next_offset - 1
    # Below ``easy`` the header after a batch lies in ``data``, inside the region and the unverified part.
    easy = min(want, n, region, unverified) - HEADER_SIZE
    done, done_next = 0, first.base_offset
    p, size, expected_here, next_here, confirmed = 0, first.size, first.base_offset, first.next_offset, True
    while True:
        e = p + size
        if e <= easy:  # the common case, kept short: one unpack and one test per batch
            base, length, _, magic, _, _, delta = frame(data, e)
            if (
                magic == MAGIC_V2
                and length >= _MIN_BATCH_LENGTH
                and next_here <= base <= base + delta <= last_offset
                and e + 12 + length <= region
            ):
                done, done_next, expected_here = e, next_here, next_here
                p, size, next_here, confirmed = e, 12 + length, base + delta + 1, False
                continue
        if e > want:
            return done, done_next, None
        if e == region:
            return e, next_here, None
        if e == unverified:  # the part the open scanned, or this process wrote, starts here
            return (*whole_batches(data, e, next_here), None)
        bad: str | None = None
        buf, at = (data, e) if e + HEADER_SIZE <= n else (pread_upto(fd, HEADER_SIZE, position + e), 0)
        if e > unverified:
            bad = f"batch at {position + p} claims {size} bytes, across the batch at {position + unverified}"
        elif e + HEADER_SIZE > region or len(buf) - at < HEADER_SIZE:
            bad = f"{region - e} bytes at {position + e} are shorter than a batch header"
        else:
            base, length, _, magic, _, _, delta = frame(buf, at)
            if magic != MAGIC_V2 or length < _MIN_BATCH_LENGTH or delta < 0:
                bad = f"no batch header at {position + e} (magic {magic}, length {length})"
            elif base < next_here or base + delta >= next_offset:
                bad = f"batch at {position + e} holds offsets {base}..{base + delta}, expected from {next_here}"
            elif e + 12 + length > region:
                bad = f"batch at {position + e} claims {12 + length} bytes but only {region - e} remain"
        if bad is None:
            done, done_next = e, next_here
            p, size, expected_here, next_here, confirmed = e, 12 + length, next_here, base + delta + 1, False
            continue
        if confirmed or crc_ok(data, p, parse_header(data, p)):
            return e, next_here, (position + e, next_here, bad)
        why = (
            f"batch at {position + p} fails its CRC check over the {size} bytes its length field claims, and what "
            f"follows it is no batch ({bad})"
        )
        return done, done_next, (position + p, expected_here, why)
