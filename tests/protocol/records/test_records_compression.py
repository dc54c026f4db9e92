"""The codecs: round trips, the exact framings peers expect, peers' framings we must read, bombs, corruption."""

from __future__ import annotations

import gzip
import os
import struct

import aiokafka.codec as aiokafka_codec
import cramjam
import kafka.codec as kafka_codec
import lz4.frame
import pytest
import snappy
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groupstream.protocol.errors import LocalProtocolError, PeerProtocolError
from groupstream.protocol.records.compression import Codec, codec_from_name, compress, decompress

# Text-like data, compressible but not trivially: spans several lz4 (64 KiB) and snappy (32 KiB) blocks.
DATA = b"".join(b"record-%06d:" % i + os.urandom(8).hex().encode() + b"|" for i in range(9000))
ALL = list(Codec)


@pytest.mark.parametrize("codec", ALL)
@pytest.mark.parametrize(
    "data", [b"", b"x", DATA, os.urandom(70_000)], ids=["empty", "one", "text", "random"]
)
def test_round_trip(codec: Codec, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data
    assert decompress(codec, memoryview(bytearray(compress(codec, data)))) == data


@settings(max_examples=150, deadline=None)
@given(codec=st.sampled_from(ALL), data=st.binary(max_size=3000), level=st.sampled_from([None, 1, 9]))
def test_round_trip_property(codec: Codec, data: bytes, level: int | None) -> None:
    assert decompress(codec, compress(codec, data, level)) == data


def test_codec_names() -> None:
    assert codec_from_name("zstd") is Codec.ZSTD
    assert codec_from_name(" LZ4 ") is Codec.LZ4
    with pytest.raises(LocalProtocolError):
        codec_from_name("brotli")
    with pytest.raises(LocalProtocolError):
        compress(5, b"x")
    with pytest.raises(PeerProtocolError):
        decompress(7, b"x")


# --- what we write is what Java writes ---------------------------------------------------------------


def test_lz4_frame_is_javas() -> None:
    """Magic, FLG 0x60 (v01, independent blocks, no checksums/size), BD 0x40 (64 KiB), HC 0x82, end mark."""
    out = compress(Codec.LZ4, DATA)
    assert out[:7] == bytes.fromhex("04224d18604082")
    assert out[-4:] == b"\x00\x00\x00\x00"
    # every block fits the 64 KiB maximum Java allocates for BD=0x40
    pos = 7
    blocks = 0
    while True:
        (n,) = struct.unpack_from("<I", out, pos)
        pos += 4
        if n == 0:
            break
        assert n & 0x7FFFFFFF <= 64 * 1024
        pos += n & 0x7FFFFFFF
        blocks += 1
    assert pos == len(out) and blocks == -(-len(DATA) // 65536)


def test_lz4_incompressible_blocks_are_stored_raw() -> None:
    data = os.urandom(100_000)
    out = compress(Codec.LZ4, data)
    (n,) = struct.unpack_from("<I", out, 7)
    assert n == 0x80000000 | 65536
    assert out[11 : 11 + 65536] == data[:65536]


def test_snappy_is_xerial_framed_in_32k_blocks() -> None:
    out = compress(Codec.SNAPPY, DATA)
    assert out[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    (first,) = struct.unpack_from(">i", out, 16)
    assert cramjam.snappy.decompress_raw_len(out[20 : 20 + first]) == 32 * 1024
    # librdkafka takes the xerial path only for streams longer than header + 4 bytes
    assert len(compress(Codec.SNAPPY, b"")) > 20


def test_gzip_is_a_plain_gzip_member() -> None:
    assert gzip.decompress(compress(Codec.GZIP, DATA)) == DATA


def test_zstd_is_a_standard_frame() -> None:
    out = compress(Codec.ZSTD, DATA)
    assert out[:4] == b"\x28\xb5\x2f\xfd"
    assert zstandard.ZstdDecompressor().decompress(out) == DATA


# --- what peers write, we read; what we write, peers read --------------------------------------------


@pytest.mark.parametrize(
    "codec,encode",
    [
        (Codec.GZIP, kafka_codec.gzip_encode),
        (Codec.GZIP, aiokafka_codec.gzip_encode),
        (Codec.SNAPPY, kafka_codec.snappy_encode),
        (Codec.SNAPPY, lambda d: kafka_codec.snappy_encode(d, xerial_compatible=False)),
        (Codec.SNAPPY, aiokafka_codec.snappy_encode),
        (Codec.SNAPPY, snappy.compress),  # raw snappy, what librdkafka writes
        (Codec.LZ4, kafka_codec.lz4_encode),  # FLG 0x68: content size present
        (Codec.LZ4, aiokafka_codec.lz4_encode),  # FLG 0x70: block checksums
        (Codec.LZ4, lambda d: lz4.frame.compress(d, block_linked=False, content_checksum=True)),
        (
            Codec.LZ4,
            lambda d: lz4.frame.compress(d, block_size=lz4.frame.BLOCKSIZE_MAX4MB, block_linked=False),
        ),
        (Codec.LZ4, lambda d: lz4.frame.compress(d, block_linked=True)),  # Java refuses these; we need not
        (Codec.ZSTD, kafka_codec.zstd_encode),
        (Codec.ZSTD, aiokafka_codec.zstd_encode),
        (Codec.ZSTD, lambda d: zstandard.ZstdCompressor(write_content_size=False).compress(d)),  # zstd-jni
        (Codec.ZSTD, lambda d: zstandard.ZstdCompressor(write_checksum=True).compress(d)),
    ],
)
@pytest.mark.parametrize("data", [b"", DATA], ids=["empty", "text"])
def test_we_read_peer_framings(codec: Codec, encode: object, data: bytes) -> None:
    assert decompress(codec, encode(data)) == data  # type: ignore[operator]


@pytest.mark.parametrize(
    "codec,decode",
    [
        (Codec.GZIP, kafka_codec.gzip_decode),
        (Codec.GZIP, aiokafka_codec.gzip_decode),
        (Codec.SNAPPY, kafka_codec.snappy_decode),
        (Codec.SNAPPY, aiokafka_codec.snappy_decode),
        (Codec.LZ4, kafka_codec.lz4_decode),
        (Codec.LZ4, aiokafka_codec.lz4_decode),
        (Codec.LZ4, lz4.frame.decompress),
        (Codec.ZSTD, kafka_codec.zstd_decode),
        (Codec.ZSTD, aiokafka_codec.zstd_decode),
    ],
)
@pytest.mark.parametrize("data", [b"", b"x", DATA], ids=["empty", "one", "text"])
def test_peers_read_what_we_write(codec: Codec, decode: object, data: bytes) -> None:
    assert bytes(decode(compress(codec, data))) == data  # type: ignore[operator]


def test_concatenated_frames_and_members() -> None:
    """Java's stream readers continue across gzip members and zstd frames; so do we (and across lz4 frames)."""
    a, b = DATA[:5000], DATA[5000:]
    assert decompress(Codec.GZIP, gzip.compress(a) + gzip.compress(b)) == DATA
    z = zstandard.ZstdCompressor()
    assert decompress(Codec.ZSTD, z.compress(a) + z.compress(b)) == DATA
    zs = zstandard.ZstdCompressor(write_content_size=False)
    assert decompress(Codec.ZSTD, zs.compress(a) + zs.compress(b)) == DATA
    assert decompress(Codec.LZ4, compress(Codec.LZ4, a) + compress(Codec.LZ4, b)) == DATA


# --- bombs --------------------------------------------------------------------------------------------

BOMB = 64 * 1024 * 1024  # zeros; each codec shrinks this by 20x (snappy) to 10000x


@pytest.mark.parametrize(
    "codec,make",
    [
        (Codec.GZIP, lambda d: compress(Codec.GZIP, d)),
        (Codec.SNAPPY, lambda d: compress(Codec.SNAPPY, d)),
        (Codec.SNAPPY, snappy.compress),
        (Codec.LZ4, lambda d: compress(Codec.LZ4, d)),
        (Codec.LZ4, lambda d: lz4.frame.compress(d, block_linked=True)),
        (Codec.LZ4, kafka_codec.lz4_encode),
        (Codec.ZSTD, lambda d: compress(Codec.ZSTD, d)),
        (Codec.ZSTD, lambda d: zstandard.ZstdCompressor(write_content_size=False).compress(d)),
    ],
)
def test_decompression_bomb_raises_peer_error(codec: Codec, make: object) -> None:
    bomb = make(bytes(BOMB))  # type: ignore[operator]
    assert len(bomb) < BOMB // 20
    with pytest.raises(PeerProtocolError, match="limit"):
        decompress(codec, bomb, max_size=1024 * 1024)
    assert len(decompress(codec, bomb, max_size=BOMB)) == BOMB


@pytest.mark.parametrize("codec", ALL)
def test_limit_is_inclusive(codec: Codec) -> None:
    data = DATA[:100_000]
    enc = compress(codec, data)
    assert decompress(codec, enc, max_size=len(data)) == data
    with pytest.raises(PeerProtocolError):
        decompress(codec, enc, max_size=len(data) - 1)


def test_lz4_content_size_over_limit_fails_before_decoding() -> None:
    frame = lz4.frame.compress(DATA, block_linked=False, store_size=True)
    with pytest.raises(PeerProtocolError, match="limit"):
        decompress(Codec.LZ4, frame, max_size=10)


# --- corruption: only PeerProtocolError, never a library exception ------------------------------------


@pytest.mark.parametrize("codec", [c for c in ALL if c != Codec.NONE])
@pytest.mark.parametrize("cut", [0, 1, 5, 9, 17, 30, -1, -4, -9])
def test_truncated_input(codec: Codec, cut: int) -> None:
    enc = compress(codec, DATA[:20_000])
    with pytest.raises(PeerProtocolError):
        decompress(codec, enc[:cut])


def test_lz4_bad_descriptor_checksum_and_flags() -> None:
    good = compress(Codec.LZ4, DATA[:1000])
    with pytest.raises(PeerProtocolError, match="checksum"):
        decompress(Codec.LZ4, good[:6] + bytes([good[6] ^ 1]) + good[7:])
    with pytest.raises(PeerProtocolError, match="not supported"):
        decompress(Codec.LZ4, good[:4] + b"\xa0" + good[5:])  # version 10
    with pytest.raises(PeerProtocolError, match="not supported"):
        decompress(Codec.LZ4, good[:5] + b"\x30" + good[6:])  # block size id 3
    with pytest.raises(PeerProtocolError, match="frame"):
        decompress(Codec.LZ4, b"\x00" * 20)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(codec=st.sampled_from(ALL[1:]), data=st.data())
def test_mutated_input_raises_only_peer_errors(codec: Codec, data: st.DataObject) -> None:
    enc = bytearray(compress(codec, DATA[: data.draw(st.integers(0, 5000))]))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(enc) - 1))
        enc[i] = data.draw(st.integers(0, 255))
    try:
        out = decompress(codec, bytes(enc), max_size=1 << 20)
    except PeerProtocolError:
        return
    assert isinstance(out, bytes) and len(out) <= 1 << 20


@settings(max_examples=300, deadline=None)
@given(
    codec=st.sampled_from(ALL[1:]),
    prefix=st.sampled_from(
        [b"", b"\x82SNAPPY\x00", b"\x04\x22\x4d\x18", b"\x28\xb5\x2f\xfd", b"\x1f\x8b\x08\x00"]
    ),
    tail=st.binary(max_size=200),
)
def test_random_input_raises_only_peer_errors(codec: Codec, prefix: bytes, tail: bytes) -> None:
    try:
        out = decompress(codec, prefix + tail, max_size=1 << 20)
    except PeerProtocolError:
        return
    assert isinstance(out, bytes) and len(out) <= 1 << 20
