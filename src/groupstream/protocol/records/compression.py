"""The four record-batch codecs, in the framings that Java, librdkafka, kafka-python and aiokafka all read.

Facts this module relies on (checked against apache/kafka's ``Lz4BlockInputStream``/``Lz4BlockOutputStream``,
librdkafka's ``rdkafka_lz4.c`` and the xerial snappy stream format):

* gzip (1): an RFC 1952 gzip stream (Java wraps the records in GZIPOutputStream/GZIPInputStream).
* snappy (2): Java writes the xerial block framing: the 16-byte header ``\\x82SNAPPY\\x00`` + int32 version 1 +
  int32 min-compatible version 1, then blocks of big-endian int32 length + raw snappy (32 KiB of input per
  block). librdkafka writes one raw snappy block with no framing. Every peer reads both (xerial's reader falls
  back to raw when the magic is absent), so we decode both and write the xerial framing, as Java does.
* lz4 (3): the standard LZ4 frame (magic 0x184D2204). Java's reader insists on version 01 and independent
  blocks, accepts block sizes 64 KiB..4 MiB, skips the optional content size and checks block/content
  checksums when flagged. Java and librdkafka both write FLG=0x60 (independent blocks, no checksums, no
  content size) and BD=0x40 (64 KiB blocks); kafka-python adds the content size. We write exactly Java's
  frame and read any frame with independent blocks (other flags go through the lz4 frame library).
* zstd (4): a zstd frame; Java's zstd-jni output stream omits the content size, so decoding must not need it.

Decompression is capped (``max_size``, 256 MiB by default): a decompression bomb raises PeerProtocolError
instead of exhausting memory. The cap is exact for gzip and snappy (bounded output calls; block headers that
announce sizes) and for zstd frames that state their size; lz4 may pass it by one block (at most 4 MiB), and
a zstd frame without a size is fed 1 KiB at a time, so it may pass it by at most 32 MiB before we raise.
Every library failure is turned into PeerProtocolError; nothing else escapes ``decompress``.
"""

from __future__ import annotations

import struct
import zlib
from enum import IntEnum
from functools import lru_cache

import cramjam
import lz4.block as _lz4_block
import lz4.frame as _lz4_frame
import zstandard as _zstd

from groupstream.protocol.errors import LocalProtocolError, PeerProtocolError

Buffer = bytes | bytearray | memoryview

DEFAULT_MAX_DECOMPRESSED_SIZE = 256 * 1024 * 1024


class Codec(IntEnum):
    """Compression type ids carried in bits 0-2 of the batch attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


CODEC_NAMES: dict[str, Codec] = {c.name.lower(): c for c in Codec}


def codec_from_name(name: str) -> Codec:
    """Map a ``compression.type`` config value (``none``, ``gzip``, ...) to its id."""
    try:
        return CODEC_NAMES[name.strip().lower()]
    except KeyError:
        raise LocalProtocolError(f"unknown compression type {name!r}") from None


def compress(codec: int, data: Buffer, level: int | None = None) -> bytes:
    """Compress a batch's records section; ``level`` None means the codec's Kafka default."""
    if codec == Codec.NONE:
        return bytes(data)
    if codec == Codec.GZIP:
        return _gzip_compress(data, level)
    if codec == Codec.SNAPPY:
        return _snappy_compress(data)
    if codec == Codec.LZ4:
        return _lz4_compress(data, level)
    if codec == Codec.ZSTD:
        return _zstd_compress(data, level)
    raise LocalProtocolError(f"unknown compression codec id {codec}")


def decompress(codec: int, data: Buffer, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> bytes:
    """Decompress a batch's records section; raises PeerProtocolError on corrupt input or above ``max_size``."""
    if codec == Codec.NONE:
        if len(data) > max_size:
            raise PeerProtocolError(f"records section of {len(data)} bytes exceeds the {max_size}-byte limit")
        return bytes(data)
    if codec == Codec.GZIP:
        return _gzip_decompress(data, max_size)
    if codec == Codec.SNAPPY:
        return _snappy_decompress(data, max_size)
    if codec == Codec.LZ4:
        return _lz4_decompress(data, max_size)
    if codec == Codec.ZSTD:
        return _zstd_decompress(data, max_size)
    raise PeerProtocolError(f"unknown compression codec id {codec}")


def _too_big(codec: str, max_size: int) -> PeerProtocolError:
    return PeerProtocolError(f"{codec} records decompress to more than the {max_size}-byte limit")


# --- gzip ---------------------------------------------------------------------------------------------

_GZIP_WBITS = 16 + zlib.MAX_WBITS
_GZIP_DEFAULT_LEVEL = 6  # Deflater.DEFAULT_COMPRESSION, what Java and librdkafka use


def _gzip_compress(data: Buffer, level: int | None) -> bytes:
    c = zlib.compressobj(_GZIP_DEFAULT_LEVEL if level is None else level, zlib.DEFLATED, _GZIP_WBITS)
    return c.compress(data) + c.flush()


def _gzip_decompress(data: Buffer, max_size: int) -> bytes:
    # Java's GZIPInputStream reads concatenated members, so we do too. ``max_length`` bounds each call's
    # output, so the cap is exact here.
    out: list[bytes] = []
    total = 0
    rest: Buffer = data
    try:
        while True:
            d = zlib.decompressobj(_GZIP_WBITS)
            chunk = d.decompress(rest, max_size - total + 1)
            total += len(chunk)
            if total > max_size:
                raise _too_big("gzip", max_size)
            out.append(chunk)
            if not d.eof:
                if d.unconsumed_tail:
                    raise _too_big("gzip", max_size)
                raise PeerProtocolError("gzip records end inside a gzip member")
            rest = d.unused_data
            if not rest:
                break
    except zlib.error as e:
        raise PeerProtocolError(f"corrupt gzip records: {e}") from None
    return out[0] if len(out) == 1 else b"".join(out)


# --- snappy -------------------------------------------------------------------------------------------

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
_I32 = struct.Struct(">i")


def _snappy_compress(data: Buffer) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    # At least one block even for empty input: librdkafka only takes the xerial path for streams longer
    # than header + 4 bytes.
    for start in range(0, max(len(view), 1), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
        parts.append(_I32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_block(block: Buffer, budget: int, max_size: int) -> bytes:
    # A raw snappy block starts with its uncompressed length: check it before allocating anything.
    try:
        n = cramjam.snappy.decompress_raw_len(block)
    except Exception as e:  # cramjam raises its own DecompressionError / ValueError
        raise PeerProtocolError(f"corrupt snappy records: {e}") from None
    if n > budget:
        raise _too_big("snappy", max_size)
    try:
        return bytes(cramjam.snappy.decompress_raw(block))
    except Exception as e:
        raise PeerProtocolError(f"corrupt snappy records: {e}") from None


def _snappy_decompress(data: Buffer, max_size: int) -> bytes:
    view = memoryview(data)
    if view[:8] != _XERIAL_MAGIC:
        return _snappy_block(view, max_size, max_size)
    if len(view) < 16:
        raise PeerProtocolError("snappy xerial header truncated")
    out: list[bytes] = []
    total = 0
    pos = 16
    end = len(view)
    while pos < end:
        if end - pos < 4:
            raise PeerProtocolError("snappy xerial block length truncated")
        (n,) = _I32.unpack_from(view, pos)
        pos += 4
        if n < 0 or pos + n > end:
            raise PeerProtocolError(f"snappy xerial block of {n} bytes runs past the records")
        chunk = _snappy_block(view[pos : pos + n], max_size - total, max_size)
        total += len(chunk)
        out.append(chunk)
        pos += n
    return out[0] if len(out) == 1 else b"".join(out)


# --- lz4 ----------------------------------------------------------------------------------------------

_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_BLOCK = 64 * 1024
_LZ4_UNCOMPRESSED = 0x80000000
_U32LE = struct.Struct("<I")
# Java/librdkafka's frame descriptor: version 01 + independent blocks, 64 KiB blocks, then its checksum byte.
_LZ4_JAVA_HEADER = _LZ4_MAGIC + b"\x60\x40"


def _lz4_compress(data: Buffer, level: int | None) -> bytes:
    view = memoryview(data)
    parts = [_LZ4_JAVA_HEADER, bytes((_lz4_header_checksum(b"\x60\x40"),))]
    for start in range(0, len(view), _LZ4_BLOCK):
        chunk = view[start : start + _LZ4_BLOCK]
        if level is None:
            block = _lz4_block.compress(chunk, store_size=False)
        else:
            block = _lz4_block.compress(chunk, mode="high_compression", compression=level, store_size=False)
        if len(block) >= len(chunk):  # incompressible: store it raw, as Java does
            parts.append(_U32LE.pack(len(chunk) | _LZ4_UNCOMPRESSED))
            parts.append(bytes(chunk))
        else:
            parts.append(_U32LE.pack(len(block)))
            parts.append(block)
    parts.append(b"\x00\x00\x00\x00")
    return b"".join(parts)


def _xxh32_short(data: bytes, seed: int = 0) -> int:
    """xxHash32 of fewer than 16 bytes (all a frame descriptor can be), per the xxHash specification."""
    p1, p2, p3, p4, p5 = 0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D, 0x27D4EB2F, 0x165667B1
    mask = 0xFFFFFFFF
    n = len(data)
    if n >= 16:
        raise ValueError("xxh32_short only handles inputs shorter than 16 bytes")
    h = (seed + p5 + n) & mask
    pos = 0
    while pos + 4 <= n:
        (w,) = _U32LE.unpack_from(data, pos)
        h = (h + w * p3) & mask
        h = (((h << 17) | (h >> 15)) & mask) * p4 & mask
        pos += 4
    while pos < n:
        h = (h + data[pos] * p5) & mask
        h = (((h << 11) | (h >> 21)) & mask) * p1 & mask
        pos += 1
    h ^= h >> 15
    h = h * p2 & mask
    h ^= h >> 13
    h = h * p3 & mask
    h ^= h >> 16
    return h


@lru_cache(maxsize=64)
def _lz4_header_checksum(descriptor: bytes) -> int:
    return (_xxh32_short(descriptor) >> 8) & 0xFF


def _lz4_decompress(data: Buffer, max_size: int) -> bytes:
    view = memoryview(data)
    out: list[bytes] = []
    total = 0
    pos = 0
    end = len(view)
    while True:
        pos, total = _lz4_frame_into(view, pos, out, total, max_size)
        if pos >= end:
            break
    return out[0] if len(out) == 1 else b"".join(out)


def _lz4_frame_into(
    view: memoryview, pos: int, out: list[bytes], total: int, max_size: int
) -> tuple[int, int]:
    """Decode the frame at ``pos`` into ``out``; return the position after it and the new output total.

    Frames of independent blocks without checksums (what every Kafka client writes) are walked here and
    their blocks decoded by lz4's block API, which is several times cheaper per batch than a frame context.
    Anything else (linked blocks, checksums to verify) goes to the lz4 frame library.
    """
    end = len(view)
    if end - pos < 7 or view[pos : pos + 4] != _LZ4_MAGIC:
        raise PeerProtocolError("lz4 records do not start with an lz4 frame")
    flg = view[pos + 4]
    bd = view[pos + 5]
    if flg >> 6 != 1 or flg & 0x02 or bd & 0x8F or not 4 <= (bd >> 4) <= 7:
        raise PeerProtocolError(f"lz4 frame descriptor FLG={flg:#x} BD={bd:#x} is not supported")
    if flg & 0x01:
        raise PeerProtocolError("lz4 frames with a dictionary id are not supported")
    desc_end = pos + 6 + (8 if flg & 0x08 else 0)
    if desc_end >= end:
        raise PeerProtocolError("lz4 frame descriptor truncated")
    if view[desc_end] != _lz4_header_checksum(bytes(view[pos + 4 : desc_end])):
        raise PeerProtocolError("lz4 frame descriptor checksum mismatch")
    if flg & 0x08:
        (size,) = struct.unpack_from("<Q", view, pos + 6)
        if size > max_size - total:
            raise _too_big("lz4", max_size)
    if flg & 0x34 != 0x20:  # linked blocks or checksums: let the frame library do (and verify) it
        return _lz4_frame_library(view, pos, out, total, max_size)
    block_max = 1 << (2 * (bd >> 4) + 8)
    pos = desc_end + 1
    try:
        while True:
            if end - pos < 4:
                raise PeerProtocolError("lz4 frame truncated before its end mark")
            (n,) = _U32LE.unpack_from(view, pos)
            pos += 4
            if n == 0:
                return pos, total
            raw = n & _LZ4_UNCOMPRESSED
            n &= 0x7FFFFFFF
            if n > block_max or pos + n > end:
                raise PeerProtocolError(f"lz4 block of {n} bytes is larger than its frame allows")
            if raw:
                chunk = bytes(view[pos : pos + n])
            else:
                chunk = _lz4_block.decompress(view[pos : pos + n], uncompressed_size=block_max)
            pos += n
            total += len(chunk)
            if total > max_size:
                raise _too_big("lz4", max_size)
            out.append(chunk)
    except _lz4_block.LZ4BlockError as e:
        raise PeerProtocolError(f"corrupt lz4 block: {e}") from None


def _lz4_frame_library(
    view: memoryview, pos: int, out: list[bytes], total: int, max_size: int
) -> tuple[int, int]:
    d = _lz4_frame.LZ4FrameDecompressor()
    try:
        chunk = d.decompress(view[pos:], max_length=max_size - total + 1)
    except RuntimeError as e:  # lz4.frame reports corrupt input as RuntimeError
        raise PeerProtocolError(f"corrupt lz4 frame: {e}") from None
    total += len(chunk)
    if total > max_size:
        raise _too_big("lz4", max_size)
    if not d.eof:
        raise PeerProtocolError("lz4 frame truncated")
    out.append(chunk)
    return len(view) - len(d.unused_data or b""), total


# --- zstd ---------------------------------------------------------------------------------------------

_ZSTD_DEFAULT_LEVEL = 3  # Kafka's (KIP-390) and librdkafka's default
_ZSTD_FEED = 1024  # input fed per call when the size is unknown; bounds the overshoot past the cap


def _zstd_compress(data: Buffer, level: int | None) -> bytes:
    return bytes(cramjam.zstd.compress(data, level=_ZSTD_DEFAULT_LEVEL if level is None else level))


def _zstd_decompress(data: Buffer, max_size: int) -> bytes:
    view = memoryview(data)
    try:
        known = _zstd.frame_content_size(view)
    except _zstd.ZstdError as e:
        raise PeerProtocolError(f"corrupt zstd records: {e}") from None
    if known > max_size:
        raise _too_big("zstd", max_size)
    if known >= 0:
        try:  # one frame that states its size: one C call, output allocated once
            return _zstd.ZstdDecompressor().decompress(view, allow_extra_data=False)
        except _zstd.ZstdError:
            pass  # several frames, or corrupt: the streaming path tells which
    return _zstd_stream(view, max_size)


def _zstd_stream(view: memoryview, max_size: int) -> bytes:
    # No content size (Java's zstd-jni stream) or several frames: feed the input a little at a time so the
    # output is checked against the cap as it grows. One zstd block (>= 3 bytes) yields at most 128 KiB, so
    # one feed (256 four-byte RLE blocks at most) overshoots the cap by at most 32 MiB before we notice.
    out: list[bytes] = []
    total = 0
    pos = 0
    end = len(view)
    try:
        while pos < end:
            d = _zstd.ZstdDecompressor().decompressobj()
            while True:
                if pos >= end:
                    raise PeerProtocolError("zstd records end inside a frame")
                feed = view[pos : pos + _ZSTD_FEED]
                chunk = d.decompress(feed)
                total += len(chunk)
                if total > max_size:
                    raise _too_big("zstd", max_size)
                out.append(chunk)
                if d.eof:
                    pos += len(feed) - len(d.unused_data)
                    break
                pos += len(feed)
    except _zstd.ZstdError as e:
        raise PeerProtocolError(f"corrupt zstd records: {e}") from None
    return b"".join(out)
