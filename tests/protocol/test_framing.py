import pytest

from groupstream.protocol.errors import PeerProtocolError
from groupstream.protocol.framing import FrameReader, frame
from groupstream.protocol.primitives import I32


def test_frames_split_across_reads_come_out_whole():
    reader = FrameReader()
    payloads = [b"a" * 10, b"", b"xyz" * 1000]
    wire = b"".join(b"".join(frame([p])) for p in payloads)
    got = []
    for i in range(0, len(wire), 7):
        reader.receive_data(wire[i : i + 7])
        while (f := reader.next_frame()) is not None:
            got.append(f)
    assert got == payloads
    assert reader.buffered == 0


def test_negative_size_is_rejected():
    reader = FrameReader()
    reader.receive_data(I32.pack(-5) + b"abc")
    with pytest.raises(PeerProtocolError, match="negative frame size"):
        reader.next_frame()


def test_oversized_frame_is_rejected_before_it_arrives():
    reader = FrameReader(max_frame=1024)
    reader.receive_data(I32.pack(1025))
    with pytest.raises(PeerProtocolError, match="exceeds the maximum of 1024"):
        reader.next_frame()


def test_frame_at_the_limit_is_accepted():
    reader = FrameReader(max_frame=16)
    reader.receive_data(I32.pack(16) + b"q" * 16)
    assert reader.next_frame() == b"q" * 16


def test_incomplete_frame_waits():
    reader = FrameReader()
    reader.receive_data(I32.pack(5) + b"ab")
    assert reader.next_frame() is None
    reader.receive_data(b"cde")
    assert reader.next_frame() == b"abcde"
