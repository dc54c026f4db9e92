"""Size-prefixed framing: every Kafka request and response is an int32 length followed by that many bytes."""

from __future__ import annotations

import sys

from groupstream.protocol.errors import PeerProtocolError
from groupstream.protocol.primitives import I32

DEFAULT_MAX_FRAME = 100 * 1024 * 1024


_SCRATCH_SIZE = 256 * 1024
DIRECT_FRAME_MIN = 64 * 1024
"""In pull mode, a frame at least this big is received straight into a buffer of its own."""
_POOL_SIZE = 4
_POOL_MAX_BYTES = 64 * 1024 * 1024
_POOL_ROUND = 1 << 20


def _unused_refcount() -> int | None:
    """What ``sys.getrefcount(pool[i])`` reads for a pooled buffer nothing else refers to, checked to go up with
    a view of it; None (no pooling) where reference counts do not tell (not CPython)."""
    getrefcount = getattr(sys, "getrefcount", None)
    if getrefcount is None:
        return None
    pool = [bytearray(1)]
    free = int(getrefcount(pool[0]))
    view = memoryview(pool[0])
    used = int(getrefcount(pool[0]))
    view.release()
    return free if used > free else None


_UNUSED = _unused_refcount()


class FrameReader:
    """Accumulates received bytes and cuts them into frames; the buffer never holds more than one frame's worth
    of unconsumed data beyond what the peer already sent.

    Bytes come in one of two ways, not mixed: pushed (``receive_data``, frames are ``bytes``), or pulled by a
    socket reading straight into ``recv_buffer()`` and reporting ``advance(n)``. Pulled, a large frame (a fetch
    response) is read into a ``bytearray`` of its own once its size is known, so its bytes are copied once
    (socket to frame) instead of being appended, joined and sliced. Such a frame is a memoryview of a buffer
    that is used again once no view of it is left (a few are kept), since fresh memory costs a page fault per
    4 KiB on first touch, more than the copy it saves.
    """

    __slots__ = ("_buf", "_direct_share", "_filled", "_frame", "_max_frame", "_pool", "_pool_size", "_pos",
                 "_scratch")  # fmt: skip

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME, pool_size: int = _POOL_SIZE, direct_share: int = 0) -> None:
        """For a server, whose many connections must not each keep megabytes nor be made to allocate them by a
        four-byte frame size: ``pool_size`` large-frame buffers are kept for reuse (0: a fresh buffer each
        time), and ``direct_share`` (if not 0) lets a frame have its own buffer only once that share of it
        (1/direct_share) has arrived."""
        if max_frame <= 0:
            raise ValueError("max_frame must be positive")
        self._pool_size = pool_size
        self._direct_share = direct_share
        self._buf = bytearray()
        self._pos = 0
        self._max_frame = max_frame
        self._frame: memoryview | None = None  # a large frame being received in place (pull mode)
        self._filled = 0
        self._scratch: memoryview | None = None
        self._pool: list[bytearray] = []

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        self._buf += data

    def recv_buffer(self) -> memoryview:
        """Where the next socket read should put its bytes (pull mode): the rest of the large frame being
        received, else a scratch area. Report what was written with ``advance``."""
        if self._frame is not None:
            return self._frame[self._filled :]
        if self._scratch is None:
            self._scratch = memoryview(bytearray(_SCRATCH_SIZE))
        return self._scratch

    def advance(self, n: int) -> None:
        """``n`` bytes were written at the start of the last ``recv_buffer()``."""
        if self._frame is not None:
            self._filled += n
        else:
            assert self._scratch is not None, "advance() without recv_buffer()"
            self._buf += self._scratch[:n]

    def next_frame(self) -> bytes | memoryview | None:
        """The next complete frame's payload, or None until more bytes arrive.

        Raises PeerProtocolError for a negative or oversized length; the connection must then be closed.
        """
        big = self._frame
        if big is not None:
            if self._filled < len(big):
                return None
            self._frame = None
            return big
        buf = self._buf
        pos = self._pos
        if len(buf) - pos < 4:
            self._compact()
            return None
        (size,) = I32.unpack_from(buf, pos)
        if size < 0:
            raise PeerProtocolError(f"negative frame size {size}")
        if size > self._max_frame:
            raise PeerProtocolError(_oversized(bytes(buf[pos : pos + 4]), size, self._max_frame))
        end = pos + 4 + size
        if len(buf) < end:
            have = len(buf) - pos - 4
            if (self._scratch is not None and size >= DIRECT_FRAME_MIN
                    and (not self._direct_share or have * self._direct_share >= size)):
                # pull mode: the rest of this frame goes straight into its own buffer
                big = self._frame_buffer(size)
                with memoryview(buf) as view:
                    big[:have] = view[pos + 4 :]
                self._frame = big
                self._filled = have
                buf.clear()
                self._pos = 0
                return None
            self._compact()
            return None
        with memoryview(buf) as view:
            frame = bytes(view[pos + 4 : end])
        self._pos = end
        if end == len(buf):
            buf.clear()
            self._pos = 0
        return frame

    def _frame_buffer(self, size: int) -> memoryview:
        """``size`` bytes for a large frame: a pooled buffer that no view uses any more, else a new one."""
        pool = self._pool
        unused = _UNUSED
        if unused is None or size > _POOL_MAX_BYTES or not self._pool_size:
            return memoryview(bytearray(size))
        for i in range(len(pool)):
            # every view of a buffer holds a reference to it: at the pool's count alone, nothing can still
            # read the frame it held
            if len(pool[i]) >= size and sys.getrefcount(pool[i]) == unused:
                return memoryview(pool[i])[:size]
        buf = bytearray(-(-size // _POOL_ROUND) * _POOL_ROUND)
        for i in range(len(pool)):
            if sys.getrefcount(pool[i]) == unused:  # free but too small: replace it
                pool[i] = buf
                break
        else:
            if len(pool) < self._pool_size:
                pool.append(buf)
        return memoryview(buf)[:size]

    def _compact(self) -> None:
        if self._pos:
            del self._buf[: self._pos]
            self._pos = 0

    @property
    def buffered(self) -> int:
        if self._frame is not None:
            return 4 + self._filled  # its size came first
        return len(self._buf) - self._pos


def frame(payload_parts: list[bytes]) -> list[bytes]:
    """Prefix already encoded parts with their total size, without joining them."""
    size = 0
    for p in payload_parts:
        size += len(p)
    return [I32.pack(size), *payload_parts]


# What the first four bytes of a peer that is not speaking Kafka look like, read as a frame length.
_FOREIGN_PROTOCOLS = {b"HTTP": "an HTTP server", b"GET ": "an HTTP client", b"POST": "an HTTP client",
                      b"PUT ": "an HTTP client", b"SSH-": "an SSH server"}


def _oversized(head: bytes, size: int, maximum: int) -> str:
    """Name the likely cause: an absurd length is usually another protocol (an HTTP proxy, a TLS listener
    spoken to in plaintext), not a huge Kafka frame."""
    foreign = _FOREIGN_PROTOCOLS.get(head)
    if foreign is None and head[:1] == b"\x16" and head[1:2] == b"\x03":
        foreign = "TLS (one side uses SSL, the other PLAINTEXT)"
    if foreign is not None:
        return f"the peer speaks another protocol: it looks like {foreign}, not Kafka (first bytes {head!r})"
    return f"frame of {size} bytes exceeds the maximum of {maximum}"
