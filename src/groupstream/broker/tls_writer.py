"""Writing responses through TLS on a socket the connection drives itself: the `SocketWriter` of TLS listeners.

Plaintext responses are queued as they are (record bytes read from a segment stay uncopied until encrypted)
and encrypted a slice at a time, as the socket takes the ciphertext: a 50 MB fetch response never exists as
50 MB of ciphertext in memory, and a slow reader holds at most one slice of it. Whatever the TLS layer emits on
its own (handshake messages, session tickets, alerts) goes out through `flush`, in order with the rest.

Same interface as `SocketWriter` (``write``, ``buffered``, ``progress_at``, ``error``, ``close``); like it, this
class never closes the socket, which stays its connection's.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections import deque
from collections.abc import Callable, Iterable

from groupstream.security.tls_session import TlsError, TlsSession

_SLICE = 256 * 1024  # plaintext encrypted per round: big enough to amortise the calls, small enough to stay cache-warm


class TlsSocketWriter:
    def __init__(
        self, loop: asyncio.AbstractEventLoop, sock: socket.socket, tls: TlsSession, on_drained: Callable[[], None]
    ) -> None:
        self._loop = loop
        self._sock = sock
        self._fd = sock.fileno()
        self._tls = tls
        self._plain: deque[memoryview] = deque()
        self._plain_bytes = 0
        self._cipher: deque[memoryview] = deque()
        self._cipher_bytes = 0
        self._watching = False
        self._closed = False
        self._on_drained = on_drained
        self.error: OSError | None = None
        self.progress_at = loop.time()

    @property
    def buffered(self) -> int:
        return self._plain_bytes + self._cipher_bytes

    def write(self, parts: Iterable[bytes | bytearray | memoryview]) -> None:
        if self._closed:
            return
        for p in parts:
            if len(p):
                mv = memoryview(p)
                self._plain.append(mv)
                self._plain_bytes += mv.nbytes
        self._kick()

    def flush(self) -> None:
        """Send what the TLS layer produced by itself (after the connection fed it received bytes)."""
        if self._closed:
            return
        self._take_cipher()
        self._kick()

    def flush_now(self) -> None:
        """Best effort before a close: one send of the pending ciphertext (a TLS alert telling the peer why)."""
        if self._closed:
            return
        self._take_cipher()
        data = b"".join(bytes(c) for c in self._cipher)
        if data:
            with contextlib.suppress(OSError):
                self._sock.send(data)

    def _kick(self) -> None:
        if self._watching:
            return
        self._send()
        if (self._cipher or self._plain) and not self._closed:
            self._loop.add_writer(self._fd, self._on_writable)
            self._watching = True

    def _on_writable(self) -> None:
        before = self.buffered
        self._send()
        if self.buffered != before:
            self.progress_at = self._loop.time()
        if self.error is not None:
            self._on_drained()
            return
        if not self._cipher and not self._plain and self._watching:
            self._loop.remove_writer(self._fd)
            self._watching = False
            self._on_drained()

    def _take_cipher(self) -> None:
        data = self._tls.data_to_send()
        if data:
            self._cipher.append(memoryview(data))
            self._cipher_bytes += len(data)

    def _encrypt_slice(self) -> None:
        plain = self._plain
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
        self._plain_bytes -= size
        self._tls.encrypt(take)
        self._take_cipher()

    def _send(self) -> None:
        cipher = self._cipher
        while not self._closed:
            if not cipher:
                if not self._plain:
                    return
                try:
                    self._encrypt_slice()
                except TlsError as e:
                    self.error = OSError(f"TLS: {e}")
                    self.close()
                    return
                if not cipher:
                    return
            head = cipher[0]
            try:
                sent = self._sock.send(head)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                self.error = e
                self.close()
                return
            self._cipher_bytes -= sent
            if sent == head.nbytes:
                cipher.popleft()
            else:
                cipher[0] = head[sent:]
                return  # the kernel buffer is full

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._watching:
            self._loop.remove_writer(self._fd)
            self._watching = False
        self._plain.clear()
        self._cipher.clear()
        self._plain_bytes = self._cipher_bytes = 0
