"""Writing responses through TLS on a socket the connection drives itself: the `SocketWriter` of TLS listeners.

Plaintext responses are queued as they are (record bytes read from a segment stay uncopied until encrypted)
and encrypted a slice at a time, as the socket takes the ciphertext: a 50 MB fetch response never exists as
50 MB of ciphertext in memory, and a slow reader holds at most one slice of it. Whatever the TLS layer emits on
its own (handshake messages, session tickets, alerts) goes out through `flush`, in order with the rest.

Only the encryption is here: queueing, sending, watching for writability and closing are `SocketWriter`'s,
which sends the ciphertext this class feeds it. Like it, this class never closes the socket, which stays its
connection's.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections import deque
from collections.abc import Callable

from groupstream.broker.socket_writer import SocketWriter
from groupstream.security.tls_session import TlsError, TlsSession

_SLICE = 256 * 1024  # plaintext encrypted per round: big enough to amortise the calls, small enough to stay cache-warm


class TlsSocketWriter(SocketWriter):
    def __init__(
        self, loop: asyncio.AbstractEventLoop, sock: socket.socket, tls: TlsSession, on_drained: Callable[[], None]
    ) -> None:
        super().__init__(loop, sock, on_drained)
        self.tls = tls
        self._plain: deque[memoryview] = deque()
        self._intake = self._plain  # written plaintext waits here; the send queue holds ciphertext

    _sends_files = False  # file ranges are read into memory: the plaintext has to pass through the TLS layer

    def flush(self) -> None:
        """Send what the TLS layer produced by itself (after the connection fed it received bytes)."""
        if not self._closed and self._take_cipher():
            self._kick()

    def flush_now(self) -> None:
        """Best effort before a close: one send of the pending ciphertext (a TLS alert telling the peer why)."""
        if self._closed:
            return
        self._take_cipher()
        data = b"".join(p for p in self._queue if isinstance(p, memoryview))  # ciphertext: never file ranges
        if data:
            with contextlib.suppress(OSError):
                self._sock.send(data)

    def _take_cipher(self) -> bool:
        data = self.tls.data_to_send()
        if data:
            self._enqueue(data)
        return bool(data)

    def _refill(self) -> bool:
        """Encrypt the next slice of plaintext into the (empty) send queue."""
        plain = self._plain
        if not plain:
            return False
        take: list[memoryview] = []
        size = 0
        while plain and size < _SLICE:
            head = plain[0]
            room = _SLICE - size
            if head.nbytes <= room:
                take.append(plain.popleft())
                size += head.nbytes
            else:
                take.append(head[:room])
                plain[0] = head[room:]
                size += room
        self._buffered -= size
        try:
            self.tls.encrypt(take)
        except TlsError as e:
            self._fail(OSError(f"TLS: {e}"))
            return False
        return self._take_cipher()
