"""Walk the batch headers of a segment file, reading in chunks, and stop at the first bad byte.

Used by recovery (with CRC checks), by index rebuilds and by offset lookups (headers only). A scan never
raises on bad data: it records why it stopped, so the caller can decide what the damage means (a torn tail
to truncate, or a hole in an older segment to step over).

Three layers:

- `BatchScan` follows the length fields from header to header (optionally checking CRCs);
- `VerifiedScan` yields a batch only once its extent is confirmed, because a header scan alone believes a
  corrupt length field and only notices at the next header, after the damaged batch was accepted;
- `find_next_batch` searches forward from damage for the next intact batch, so the batches after a corrupt
  one stay readable.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator

from groupstream.protocol.errors import PeerProtocolError
from groupstream.protocol.records.batch_header import HEADER_SIZE, BatchHeader, crc_ok, parse_header
from groupstream.storage.fileio import pread_upto

HEADER_CHUNK = 64 * 1024
CRC_CHUNK = 1024 * 1024
RESYNC_CHUNK = 1024 * 1024
_OFFSET = struct.Struct(">q")

# (position of the first bad byte, the offset that should have started there, why)
Damage = tuple[int, int, str]


class BatchScan:
    """Iterate ``(position, header)`` over ``[start, end)`` of ``fd``; afterwards ``error`` says why it stopped.

    ``valid_end`` is the position just after the last batch yielded: everything before it was well framed
    (and CRC-valid when ``validate_crc``). ``crc_from_offset`` checks the CRC of the batches ending at or past
    that offset only: a clean open trusts what lies below its recovery point and checks what does not.
    """

    def __init__(
        self,
        fd: int,
        start: int,
        end: int,
        *,
        validate_crc: bool,
        chunk: int = 0,
        crc_from_offset: int | None = None,
    ) -> None:
        self._fd = fd
        self._start = start
        self._end = end
        self._crc = validate_crc
        self._crc_from = crc_from_offset
        self._chunk = chunk or (CRC_CHUNK if validate_crc else HEADER_CHUNK)
        self.valid_end = start
        self.error: str | None = None

    def checks_crc(self, h: BatchHeader) -> bool:
        """Whether this scan verified (or would verify) the CRC of the batch ``h``."""
        return self._crc or (self._crc_from is not None and h.last_offset >= self._crc_from)

    def __iter__(self) -> Iterator[tuple[int, BatchHeader]]:
        fd, end, chunk = self._fd, self._end, self._chunk
        pos = self._start
        buf = b""
        buf_start = pos
        while pos < end:
            off = pos - buf_start
            if len(buf) - off < HEADER_SIZE:
                buf = pread_upto(fd, min(max(chunk, HEADER_SIZE), end - pos), pos)
                buf_start, off = pos, 0
                if len(buf) < HEADER_SIZE:
                    self.error = f"{end - pos} trailing bytes at {pos} are shorter than a batch header"
                    return
            try:
                h = parse_header(buf, off)
            except PeerProtocolError as exc:
                self.error = f"bad batch header at {pos}: {exc}"
                return
            size = h.size
            if pos + size > end:
                self.error = f"batch at {pos} claims {size} bytes but only {end - pos} remain"
                return
            if self.checks_crc(h):
                if off + size > len(buf):
                    buf = pread_upto(fd, max(size, min(chunk, end - pos)), pos)
                    buf_start, off = pos, 0
                if len(buf) < off + size or not crc_ok(buf, off, h):
                    self.error = f"batch at {pos} fails its CRC check"
                    return
            yield pos, h
            pos += size
            self.valid_end = pos


def offset_problem(position: int, h: BatchHeader, expected: int, upper: int) -> str | None:
    """Why a well-framed batch cannot be where it is: offsets must rise, and stay below ``upper``."""
    if h.base_offset < expected:
        return f"batch at {position} starts at offset {h.base_offset}, below the expected {expected}"
    if h.last_offset >= upper:
        return f"batch at {position} ends at offset {h.last_offset}, past {upper - 1}, the last this segment may hold"
    return None


def batch_crc_ok(fd: int, position: int, h: BatchHeader) -> bool:
    """Whether the batch ``h`` at ``position`` matches its CRC over the extent its length field claims."""
    data = pread_upto(fd, h.size, position)
    return len(data) == h.size and crc_ok(data, 0, h)


class VerifiedScan:
    """Batches of ``[start, end)`` whose extent is confirmed, for bytes that may be damaged.

    A batch is yielded once the header after it parses with offsets that follow it, or it ends exactly at
    ``end``, or its CRC matches (checked always when ``validate_crc``, and for a batch whose successor does
    not check out). Offsets must rise: each batch starts at or after ``expected`` (then the previous batch's
    next offset) and ends below ``upper``.

    Batches starting at or past ``confirmed_from`` were confirmed before (written by this process, or scanned
    when the segment was opened) and are yielded at once.

    Afterwards ``damage`` is None when the scan reached ``end``, else ``(position, expected offset, why)``: the
    first byte that is not part of a confirmed batch and the offset that should have started there. When the
    damage lies at ``start`` the offset is the ``expected`` given, which the caller may know only as a lower
    bound. ``next_offset`` is the offset after the last batch yielded (``expected`` if none).
    """

    def __init__(
        self,
        fd: int,
        start: int,
        end: int,
        *,
        expected: int,
        upper: int,
        validate_crc: bool = False,
        crc_from_offset: int | None = None,
        chunk: int = 0,
        confirmed_from: int | None = None,
    ) -> None:
        self._fd = fd
        self._scan = BatchScan(fd, start, end, validate_crc=validate_crc, chunk=chunk, crc_from_offset=crc_from_offset)
        self._confirmed_from = end if confirmed_from is None else confirmed_from
        self._expected = expected
        self._upper = upper
        self.damage: Damage | None = None
        self.next_offset = expected

    def __iter__(self) -> Iterator[tuple[int, BatchHeader]]:
        scan = self._scan
        upper = self._upper
        expected = self._expected
        confirmed_from = self._confirmed_from
        pending: tuple[int, BatchHeader, int] | None = None  # not confirmed yet: (position, header, expected)
        broken: tuple[int, str] | None = None
        for pos, h in scan:
            why = offset_problem(pos, h, expected, upper)
            if why is not None:
                broken = (pos, why)
                break
            if pending is not None:
                self.next_offset = pending[1].next_offset
                yield pending[0], pending[1]
                pending = None
            if pos >= confirmed_from or scan.checks_crc(h):
                self.next_offset = h.next_offset
                yield pos, h
            else:
                pending = (pos, h, expected)
            expected = h.next_offset
        else:
            if scan.error is None:
                if pending is not None:  # it ends exactly at ``end``
                    self.next_offset = pending[1].next_offset
                    yield pending[0], pending[1]
                return
            broken = (scan.valid_end, scan.error)
        at, why = broken
        if pending is None:
            self.damage = (at, expected, why)
            return
        p, ph, p_expected = pending
        if batch_crc_ok(self._fd, p, ph):
            self.next_offset = ph.next_offset
            yield p, ph
            self.damage = (at, ph.next_offset, why)
        else:
            self.damage = (p, p_expected, f"batch at {p} fails its CRC check over the {ph.size} bytes its length "
                                          f"field claims, and what follows it is no batch ({why})")


def find_next_batch(fd: int, start: int, end: int, expected: int, upper: int) -> tuple[int, BatchHeader] | None:
    """Where intact data resumes after damage at ``start``: the first position in ``(start, end)`` where a
    complete batch with a valid CRC begins whose offsets lie in ``[expected, upper)``.

    Candidates are found by a regular expression on what every such batch starts with (the leading bytes its
    base offset shares with every offset in range, magic 2 at byte 16), so only real batches, or very rarely
    batch-shaped record bytes, get a CRC check. Each byte is read once: the work is bounded by ``end - start``
    (one segment), and in the usual case (one damaged batch) by that batch's size.
    """
    if expected >= upper:
        return None
    lo, hi = _OFFSET.pack(expected), _OFFSET.pack(upper - 1)
    shared = 0
    while shared < 8 and lo[shared] == hi[shared]:
        shared += 1
    pattern = re.compile(b"(?=" + re.escape(lo[:shared]) + b"(?s:.){%d}\x02)" % (16 - shared))
    pos = start + 1
    while end - pos >= HEADER_SIZE:
        buf = pread_upto(fd, min(RESYNC_CHUNK, end - pos), pos)
        last = len(buf) - HEADER_SIZE  # the last candidate whose whole header is in ``buf``
        if last < 0:
            return None
        for m in pattern.finditer(buf):
            c = m.start()
            if c > last:
                break
            try:
                h = parse_header(buf, c)
            except PeerProtocolError:
                continue
            at = pos + c
            if h.base_offset < expected or h.last_offset >= upper or at + h.size > end:
                continue
            data = buf[c : c + h.size] if c + h.size <= len(buf) else pread_upto(fd, h.size, at)
            if len(data) == h.size and crc_ok(data, 0, h):
                return at, h
        pos += last + 1
    return None
