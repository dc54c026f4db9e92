"""Size-prefixed framing: every Kafka request and response is an int32 length followed by that many bytes."""

from __future__ import annotations

from groupstream.protocol.errors import PeerProtocolError
from groupstream.protocol.primitives import I32

DEFAULT_MAX_FRAME = 100 * 1024 * 1024


class FrameReader:
    """Accumulates received bytes and cuts them into frames; the buffer never holds more than one frame's worth
    of unconsumed data beyond what the peer already sent."""

    __slots__ = ("_buf", "_max_frame", "_pos")

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        if max_frame <= 0:
            raise ValueError("max_frame must be positive")
        self._buf = bytearray()
        self._pos = 0
        self._max_frame = max_frame

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        self._buf += data

    def next_frame(self) -> bytes | None:
        """The next complete frame's payload, or None until more bytes arrive.

        Raises PeerProtocolError for a negative or oversized length; the connection must then be closed.
        """
        buf = self._buf
        pos = self._pos
        if len(buf) - pos < 4:
            self._compact()
            return None
        (size,) = I32.unpack_from(buf, pos)
        if size < 0:
            raise PeerProtocolError(f"negative frame size {size}")
        if size > self._max_frame:
            raise PeerProtocolError(f"frame of {size} bytes exceeds the maximum of {self._max_frame}")
        end = pos + 4 + size
        if len(buf) < end:
            self._compact()
            return None
        frame = bytes(buf[pos + 4 : end])
        self._pos = end
        if end == len(buf):
            buf.clear()
            self._pos = 0
        return frame

    def _compact(self) -> None:
        if self._pos:
            del self._buf[: self._pos]
            self._pos = 0

    @property
    def buffered(self) -> int:
        return len(self._buf) - self._pos


def frame(payload_parts: list[bytes]) -> list[bytes]:
    """Prefix already encoded parts with their total size, without joining them."""
    size = 0
    for p in payload_parts:
        size += len(p)
    return [I32.pack(size), *payload_parts]
