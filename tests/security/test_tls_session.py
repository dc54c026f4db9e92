"""The sans-IO TLS session against Python's own TLS client, in memory: bytes split anywhere (records cut across
receives, one byte at a time) come out whole and in order, both ways; the peer's close_notify is seen and
answered; a plaintext peer is refused with OpenSSL's reason. Random splits print their seed."""

from __future__ import annotations

import contextlib
import os
import random
import ssl

import pytest
from tls_pki import Pki

from groupstream.security.tls import TlsSettings, server_context
from groupstream.security.tls_session import TlsClosed, TlsError, TlsSession

SEED = int(os.environ.get("TLS_SPLIT_SEED", random.randrange(2**32)))


class Pair:
    """Our server session and Python's client SSLObject, wired through memory."""

    def __init__(self, pki: Pki) -> None:
        self.server = TlsSession(server_context(TlsSettings(keystore_location=str(pki.broker.pem_keystore))))
        self.cin, self.cout = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.client = ssl.create_default_context(cafile=str(pki.ca)).wrap_bio(self.cin, self.cout,
                                                                              server_hostname="localhost")  # fmt: skip
        for _ in range(10):
            with contextlib.suppress(ssl.SSLWantReadError):
                self.client.do_handshake()
            self.to_server(self.cout.read())
            self.cin.write(self.server.data_to_send())
        assert self.server.established and self.client.version() == "TLSv1.3"

    def to_server(self, data: bytes, chunks: list[int] | None = None) -> bytes:
        out = bytearray()
        pos = 0
        for size in chunks or [len(data)]:
            out += self.server.receive(data[pos : pos + size])
            pos += size
        out += self.server.receive(data[pos:])
        return bytes(out)


@pytest.fixture
def pair(pki: Pki) -> Pair:
    return Pair(pki)


def test_client_bytes_split_anywhere_arrive_whole(pair: Pair) -> None:
    rng = random.Random(SEED)
    payload = rng.randbytes(3 * 1024 * 1024)
    pair.client.write(payload)
    cipher = pair.cout.read()
    chunks = []
    total = 0
    while total < len(cipher):
        size = rng.choice([1, 5, 17, 1000, 16 * 1024 + 3, 64 * 1024, 256 * 1024, 700 * 1024])
        chunks.append(size)
        total += size
    got = pair.to_server(cipher, chunks)
    assert got == payload, f"plaintext differs (TLS_SPLIT_SEED={SEED})"


def test_one_byte_at_a_time(pair: Pair) -> None:
    pair.client.write(b"kafka" * 5000)
    cipher = pair.cout.read()
    assert pair.to_server(cipher, [1] * len(cipher)) == b"kafka" * 5000


def test_server_to_client_with_small_and_large_parts(pair: Pair) -> None:
    parts = [b"\x00\x00\x00\x10", b"header", memoryview(b"r" * 200_000), b"tail"]
    pair.server.encrypt(parts)
    pair.cin.write(pair.server.data_to_send())
    received = bytearray()
    while True:
        try:
            received += pair.client.read(1 << 20)
        except ssl.SSLWantReadError:
            break
    assert bytes(received) == b"".join(bytes(p) for p in parts)


def test_close_notify_is_seen_and_answered(pair: Pair) -> None:
    with pytest.raises(ssl.SSLWantReadError):
        pair.client.unwrap()
    with pytest.raises(TlsClosed):
        pair.to_server(pair.cout.read())
    pair.cin.write(pair.server.data_to_send())  # our close_notify
    pair.client.unwrap()  # completes: the client got it


def test_plaintext_peer_is_refused_with_the_reason(pki: Pki) -> None:
    server = TlsSession(server_context(TlsSettings(keystore_location=str(pki.broker.pem_keystore))))
    with pytest.raises(TlsError, match="wrong version number"):
        server.receive(b"\x00\x00\x00\x1f\x00\x12\x00\x03" + b"\x00" * 27)
    assert server.first_bytes == b"\x00\x00\x00\x1f\x00\x12\x00\x03"


def test_read_into_fills_a_view_then_reports_the_rest(pair: Pair) -> None:
    """The broker decrypts straight into its request reader's buffer, whatever room it has: a full view means
    there may be more, a short count that everything fed is read; bytes come out whole and in order."""
    rng = random.Random(SEED)
    payload = rng.randbytes(200_000)
    pair.client.write(payload)
    assert pair.server.feed(pair.cout.read())
    got = bytearray()
    while True:
        view = memoryview(bytearray(rng.choice([1, 100, 4096, 16 * 1024 + 7, 70_000])))
        n = pair.server.read_into(view)
        got += view[:n]
        if n < len(view):
            break
    assert bytes(got) == payload, f"plaintext differs (TLS_SPLIT_SEED={SEED})"
    assert pair.server.read_into(memoryview(bytearray(10))) == 0


def test_feed_is_false_until_the_handshake_ends(pki: Pki) -> None:
    server = TlsSession(server_context(TlsSettings(keystore_location=str(pki.broker.pem_keystore))))
    cin, cout = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = ssl.create_default_context(cafile=str(pki.ca)).wrap_bio(cin, cout, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        client.do_handshake()
    assert not server.feed(cout.read())  # the ClientHello alone
    cin.write(server.data_to_send())
    client.do_handshake()
    client.write(b"request")
    assert server.feed(cout.read())  # the client's Finished, then data
    assert bytes(server.plaintext()) == b"request"
