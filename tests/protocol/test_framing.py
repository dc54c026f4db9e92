import pytest

from groupstream.protocol.errors import PeerProtocolError
from groupstream.protocol.framing import DIRECT_FRAME_MIN, FrameReader, frame
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


def _pull(reader: FrameReader, wire: bytes, step: int) -> list[bytes]:
    """Feed ``wire`` as a socket reading into ``recv_buffer()`` would, at most ``step`` bytes a read."""
    got: list[bytes] = []
    i = 0
    while i < len(wire):
        view = reader.recv_buffer()
        n = min(len(view), step, len(wire) - i)
        view[:n] = wire[i : i + n]
        del view
        reader.advance(n)
        i += n
        while (f := reader.next_frame()) is not None:
            got.append(bytes(f))
    return got


@pytest.mark.parametrize("step", [1, 7, 4096, 100_000, 10_000_000])
def test_pulled_frames_small_and_large_come_out_whole(step: int) -> None:
    payloads = [b"a" * 10, b"", bytes(range(256)) * 1000, b"q" * 3, b"z" * DIRECT_FRAME_MIN, b"tail"]
    wire = b"".join(b"".join(frame([p])) for p in payloads)
    reader = FrameReader()
    assert _pull(reader, wire, step if step > 1 else 997) == payloads
    assert reader.buffered == 0


def test_a_large_pulled_frame_is_read_into_its_own_buffer_and_that_is_reused_once_free() -> None:
    reader = FrameReader()
    big = b"x" * (600 * 1024)  # more than one read into the scratch area
    wire = b"".join(frame([big]))
    _pull(reader, wire[:100], 100)  # the size is known: the rest goes straight into the frame's buffer
    view = reader.recv_buffer()
    assert len(view) == len(big) - 96
    del view
    got = _pull(reader, wire[100:], 1 << 20)
    assert got == [big]

    def one() -> memoryview:
        frames: list[memoryview] = []
        i = 0
        while not frames:
            view = reader.recv_buffer()
            n = min(len(view), len(wire) - i)
            view[:n] = wire[i : i + n]
            del view
            reader.advance(n)
            i += n
            if (f := reader.next_frame()) is not None:
                assert isinstance(f, memoryview)
                frames.append(f)
        return frames[0]

    a = one()
    b = one()
    assert a.obj is not b.obj  # a is still in use
    assert bytes(a) == bytes(b) == big
    held = id(a.obj)  # (an id: a reference would keep the buffer in use)
    del a
    c = one()
    assert id(c.obj) == held  # nothing reads a's frame any more: its buffer is used again
    assert bytes(b) == bytes(c) == big


def test_oversized_pulled_frame_is_rejected() -> None:
    reader = FrameReader(max_frame=1024)
    view = reader.recv_buffer()
    view[:4] = I32.pack(1025)
    del view
    reader.advance(4)
    with pytest.raises(PeerProtocolError, match="exceeds the maximum of 1024"):
        reader.next_frame()


@pytest.mark.parametrize(
    ("head", "named"),
    [(b"HTTP/1.1 400 Bad Request\r\n", "an HTTP server"), (b"GET / HTTP/1.1\r\n", "an HTTP client"),
     (b"\x16\x03\x01\x02\x00\x01\x00", "TLS"), (b"SSH-2.0-OpenSSH\r\n", "an SSH server")],
)
def test_another_protocol_is_named_instead_of_an_absurd_frame_length(head: bytes, named: str) -> None:
    r = FrameReader(max_frame=100 * 1024 * 1024)
    r.receive_data(head)
    with pytest.raises(PeerProtocolError, match=f"speaks another protocol: it looks like {named}"):
        r.next_frame()
