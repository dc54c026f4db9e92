"""TLS over a connection we drive ourselves: OpenSSL through ``ssl.SSLObject`` and two memory BIOs (sans-IO).

The broker reads and writes its sockets directly from the event loop (one descriptor per connection, scatter-
gather sends), so TLS must not take the socket over as ``SSLSocket`` does. Here ciphertext goes in
(`receive`, which also advances the handshake) and plaintext comes out; plaintext goes in (`encrypt`) and the
ciphertext to send comes out (`data_to_send`). Whatever OpenSSL wants to send on its own (handshake messages,
session tickets, alerts) comes out of `data_to_send` in order with the rest, so the caller only has to send what
it finds there after each call.

Errors are `TlsError` with a reason a person can act on; a TLS close from the peer is `TlsClosed`.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Iterable
from typing import Any

__all__ = ["TlsClosed", "TlsError", "TlsSession"]

_READ = 256 * 1024
_RECORD = 16 * 1024  # TLS's largest record: smaller parts are gathered up to this size before encryption
_MAX_RECORD = _RECORD + 2048  # a record's plaintext and expansion, an upper bound
_EMPTY = memoryview(b"")


class TlsError(Exception):
    """The TLS layer failed (handshake refused, a bad record): the connection must close."""


class TlsClosed(Exception):
    """The peer ended the TLS session (close_notify); our answering close_notify is in `data_to_send`.

    ``plaintext``: what the peer sent before its close_notify in the same call (a broker answers a failed
    authentication and closes at once: the client must still read the answer)."""

    def __init__(self, message: str, plaintext: bytes = b"") -> None:
        super().__init__(message)
        self.plaintext = plaintext


def _describe(e: ssl.SSLError) -> str:
    reason = getattr(e, "reason", None)
    text = str(reason).replace("_", " ").lower() if reason else (e.strerror or str(e))
    verify = getattr(e, "verify_message", None)
    if verify:
        text = f"{text}: {verify}"
    return text


class TlsSession:
    def __init__(self, context: ssl.SSLContext, server_side: bool = True, server_hostname: str | None = None) -> None:
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self._obj = context.wrap_bio(self._in, self._out, server_side=server_side, server_hostname=server_hostname)
        # The C object behind ssl.SSLObject: its read() without ssl.py's wrapper. librdkafka sends a TLS record per
        # buffer it writes (about 2 KB each in a produce), so the receive loop runs once per record; one Python
        # call less per record is a tenth of the broker's TLS cost.
        self._read: Any = getattr(self._obj, "_sslobj", self._obj).read
        self._plain = bytearray(_READ)
        self.established = False
        self.first_bytes = b""
        """The first bytes the peer sent (up to 8), to name what a peer that fails the handshake spoke."""

    def receive(self, data: bytes | memoryview) -> memoryview:
        """Ciphertext from the peer; returns the plaintext it completes (often empty). TlsError, TlsClosed.

        The plaintext is a view of a buffer this session reuses: the caller copies what it keeps before the next
        call (a client's frame reader appends it to its own buffer at once). Decrypting into one buffer
        instead of a new bytes object per TLS record makes the receive path several times faster.
        """
        if not self.feed(data):
            return _EMPTY
        return self.plaintext()

    def feed(self, data: bytes | memoryview) -> bool:
        """Ciphertext from the peer into the session, advancing the handshake; True once the handshake is over
        and plaintext may be taken (`read_into`, `plaintext`). TlsError, TlsClosed.

        Feeding and reading apart lets the broker decrypt straight into its request reader's buffer."""
        if len(self.first_bytes) < 8:
            self.first_bytes += bytes(data[: 8 - len(self.first_bytes)])
        self._in.write(data)
        if self.established:
            return True
        try:
            self._obj.do_handshake()
        except ssl.SSLWantReadError:
            return False
        except ssl.SSLZeroReturnError:
            self._closed_by_peer()
        except ssl.SSLError as e:
            raise TlsError(_describe(e)) from None
        self.established = True
        return True

    def read_into(self, view: memoryview) -> int:
        """Decrypt what has arrived into ``view``, as much as fits, one TLS record per OpenSSL call; returns the
        count, which is under ``len(view)`` only once everything fed so far is read. TlsError, TlsClosed."""
        size = len(view)
        pos = 0
        read = self._read
        try:
            while pos < size:
                try:
                    n: int = read(size - pos, view[pos:])  # with a buffer, read() returns a count
                except ssl.SSLWantReadError:
                    break
                if not n:  # CPython's way of reporting the peer's close_notify
                    self._closed_by_peer(bytes(view[:pos]))
                pos += n
        except ssl.SSLZeroReturnError:
            self._closed_by_peer(bytes(view[:pos]))
        except ssl.SSLError as e:
            raise TlsError(_describe(e)) from None
        return pos

    def plaintext(self) -> memoryview:
        """All the plaintext that what was fed completes, in a buffer this session reuses (see `receive`)."""
        # TLS records only add bytes, but OpenSSL may already hold part of a record taken from the BIO earlier:
        # what is pending plus one record is enough, and the buffer grows if it ever is not
        need = self._in.pending + _MAX_RECORD
        if len(self._plain) < need:
            self._plain = bytearray(max(need, _READ))
        view = memoryview(self._plain)
        pos = 0
        while True:
            try:
                n = self.read_into(view[pos:])
            except TlsClosed as e:
                raise TlsClosed(str(e), bytes(view[:pos]) + e.plaintext) from None
            pos += n
            if pos < len(view):
                return view[:pos]
            bigger = bytearray(2 * len(view))
            bigger[:pos] = view
            self._plain, view = bigger, memoryview(bigger)

    def close_notify(self) -> None:
        """Queue our close_notify in `data_to_send` (best effort): some clients (kafka-python) drop a response that
        arrives with a bare TCP close, but read it when the TLS session is closed properly after it."""
        if self.established:
            with contextlib.suppress(ssl.SSLError, ValueError):
                self._obj.unwrap()

    def _closed_by_peer(self, plaintext: bytes = b"") -> None:
        # Answer with our own close_notify (in `data_to_send`): asyncio's TLS clients (aiokafka) wait 30 s for it
        # before they consider the connection closed.
        with contextlib.suppress(ssl.SSLError):
            self._obj.unwrap()
        raise TlsClosed("the peer closed the TLS session", plaintext)

    def encrypt(self, parts: Iterable[bytes | bytearray | memoryview]) -> None:
        """Plaintext to send, encrypted at once into `data_to_send`; small parts share TLS records."""
        obj = self._obj
        small = bytearray()
        try:
            for p in parts:
                n = len(p)
                if n < _RECORD:
                    small += p
                    if len(small) >= _RECORD:
                        obj.write(small)
                        small.clear()
                    continue
                if small:
                    obj.write(small)
                    small.clear()
                obj.write(p)
            if small:
                obj.write(small)
        except ssl.SSLError as e:
            raise TlsError(_describe(e)) from None

    def data_to_send(self) -> bytes:
        """The ciphertext waiting to go to the peer (empties the buffer)."""
        return self._out.read() if self._out.pending else b""

    @property
    def pending_out(self) -> int:
        return self._out.pending

    def peer_certificate(self) -> dict[str, Any] | None:
        """The verified client certificate's fields, when the client presented one (see ``getpeercert``)."""
        cert = self._obj.getpeercert()
        return cert or None

    def describe(self) -> str:
        """Protocol and cipher, for log lines."""
        cipher = self._obj.cipher()
        return f"{self._obj.version()} {cipher[0] if cipher else '?'}"
