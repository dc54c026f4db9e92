"""Walk the batch headers of a segment file, reading in chunks, and stop at the first bad byte.

Used by recovery (with CRC checks), by index rebuilds and by offset lookups (headers only). A scan never
raises on bad data: it records why it stopped, so the caller can truncate there.
"""

from __future__ import annotations

from collections.abc import Iterator

from groupstream.protocol.errors import PeerProtocolError
from groupstream.protocol.records.batch_header import HEADER_SIZE, BatchHeader, crc_ok, parse_header
from groupstream.storage.fileio import pread_upto

HEADER_CHUNK = 64 * 1024
CRC_CHUNK = 1024 * 1024


class BatchScan:
    """Iterate ``(position, header)`` over ``[start, end)`` of ``fd``; afterwards ``error`` says why it stopped.

    ``valid_end`` is the position just after the last batch yielded: everything before it was well framed
    (and CRC-valid when ``validate_crc``).
    """

    def __init__(self, fd: int, start: int, end: int, *, validate_crc: bool, chunk: int = 0) -> None:
        self._fd = fd
        self._start = start
        self._end = end
        self._crc = validate_crc
        self._chunk = chunk or (CRC_CHUNK if validate_crc else HEADER_CHUNK)
        self.valid_end = start
        self.error: str | None = None

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
            if self._crc:
                if off + size > len(buf):
                    buf = pread_upto(fd, max(size, min(chunk, end - pos)), pos)
                    buf_start, off = pos, 0
                if len(buf) < off + size or not crc_ok(buf, off, h):
                    self.error = f"batch at {pos} fails its CRC check"
                    return
            yield pos, h
            pos += size
            self.valid_end = pos
