"""Scatter-gather writes straight from the response parts, without joining them or shuffling a buffer.

asyncio's selector transport (Python 3.11) joins ``writelines`` into one bytes object and keeps unsent data in a
bytearray it trims from the front after every partial send: for a 50 MB fetch response that is one copy to join
plus a memmove of the remaining tail on every send. Here the parts stay as they are (records are the bytes read
from the segment), ``sendmsg`` sends up to ``_IOV_MAX`` of them at once, and a partial send only advances a
memoryview.

The connection owns the socket (one descriptor per connection) and does the reading and the closing; this class
only writes to it, watching the same descriptor for writability while a send is pending. It never closes the
socket: ``close`` stops watching and drops what was not sent, and the connection closes the socket after.

The queueing, sending, watching and closing are the same for every listener; a transport that turns what the
connection writes into other bytes (TLS: `groupstream.broker.tls_writer`) takes the written parts into a queue
of its own (``_intake``) and moves them to the send queue as the socket drains it (``_refill``).

A part that is a `FileRange` (records of a Fetch response on a plain connection) is sent with ``os.sendfile``
from the segment file: the kernel moves the bytes from the page cache to the socket, as Kafka's
``FileRecords.writeTo`` does, and Python never holds them. The parts before it go with one ``sendmsg``
flagged MSG_MORE, so that the header and the records share TCP segments. A writer that transforms the bytes
(TLS) reads the range into memory instead (`_sends_files` False).
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from groupstream.storage.file_range import FileRange

_IOV_MAX = 512
_MSG_MORE = getattr(socket, "MSG_MORE", 0)


class _Span:
    """What is left to send of a `FileRange` (which it keeps alive: the range owns the descriptor)."""

    __slots__ = ("fd", "left", "position", "range")

    def __init__(self, rng: FileRange) -> None:
        self.range = rng
        self.fd = rng.fd
        self.position = rng.position
        self.left = rng.length


class SocketWriter:
    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, on_drained: Callable[[], None]) -> None:
        """``sock`` is non-blocking and stays the caller's to close; ``on_drained`` runs when a backlog that had
        to wait for writability has all been sent, or when sending it failed (``error`` is then set)."""
        self._loop = loop
        self._sock = sock
        self._fd = sock.fileno()
        self._queue: deque[memoryview | _Span] = deque()
        """The bytes to send, as they go to the socket."""
        self._intake: deque[Any] = self._queue
        """Where ``write`` puts the parts: the send queue itself, or a transport's queue of bytes to transform."""
        self._buffered = 0  # bytes in both queues
        self._watching = False
        self._closed = False
        self._on_drained = on_drained
        self.error: OSError | None = None
        self.progress_at = loop.time()
        """When a backlog waiting for writability last moved (loop time): the peer is reading, if slowly."""

    _sends_files = True
    """File ranges go to the socket with sendfile (False: they are read into memory and written as bytes)."""

    @property
    def buffered(self) -> int:
        return self._buffered

    def write(self, parts: Iterable[bytes | bytearray | memoryview]) -> None:
        if self._closed:
            return
        intake = self._intake
        for p in parts:
            if isinstance(p, FileRange):
                if self._sends_files:
                    intake.append(_Span(p))
                    self._buffered += p.length
                    continue
                try:
                    p = p.read_bytes()
                except OSError as e:
                    self._fail(e)
                    return
            if len(p):
                mv = memoryview(p)
                intake.append(mv)
                self._buffered += mv.nbytes
        self._kick()

    def _enqueue(self, data: bytes) -> None:
        """Bytes a transport produced, to send after what is queued."""
        self._queue.append(memoryview(data))
        self._buffered += len(data)

    def _kick(self) -> None:
        """Send what can go now, and watch for writability while the rest waits."""
        if not self._watching:
            self._send()
            if self._buffered and not self._closed:
                self._loop.add_writer(self._fd, self._on_writable)
                self._watching = True

    def _on_writable(self) -> None:
        before = self._buffered
        self._send()
        if self._buffered != before:
            self.progress_at = self._loop.time()
        if self.error is not None:
            self._on_drained()  # the owner finds ``error`` set and closes the connection
            return
        if not self._buffered and self._watching:
            self._loop.remove_writer(self._fd)
            self._watching = False
            self._on_drained()

    def _refill(self) -> bool:
        """The send queue is empty: fill it from ``_intake``; False when there is nothing to send (or sending
        failed: ``error`` set and the writer closed). Written parts go straight to the send queue here."""
        return False

    def _send(self) -> None:
        queue = self._queue
        while not self._closed:
            if not queue and not self._refill():
                return
            first = queue[0]
            if isinstance(first, _Span):
                if not self._send_file(first):
                    return
                queue.popleft()
                continue
            batch: list[memoryview] = []
            flags = 0
            for i in range(min(len(queue), _IOV_MAX)):
                item = queue[i]
                if isinstance(item, _Span):
                    flags = _MSG_MORE  # the records follow at once
                    break
                batch.append(item)
            try:
                sent = self._sock.sendmsg(batch, (), flags)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                self._fail(e)
                return
            self._buffered -= sent
            while sent:
                head = queue[0]
                assert not isinstance(head, _Span)
                if sent >= head.nbytes:
                    sent -= head.nbytes
                    queue.popleft()
                else:
                    queue[0] = head[sent:]
                    return  # the kernel buffer is full

    def _send_file(self, span: _Span) -> bool:
        """Send what the socket takes of ``span``; True when all of it is sent."""
        while span.left:
            try:
                sent = os.sendfile(self._fd, span.fd, span.position, span.left)
            except (BlockingIOError, InterruptedError):
                return False
            except OSError as e:
                self._fail(e)
                return False
            if sent == 0:  # the file is shorter than the range: the response's framing cannot be kept
                self._fail(OSError(f"segment file ended {span.left} bytes before the end of a fetched range"))
                return False
            span.position += sent
            span.left -= sent
            self._buffered -= sent
        return True

    def _fail(self, e: OSError) -> None:
        self.error = e
        self.close()

    def close(self) -> None:
        """Stop writing: unsent data is dropped; the socket is left open for its owner to close."""
        if self._closed:
            return
        self._closed = True
        if self._watching:
            self._loop.remove_writer(self._fd)
            self._watching = False
        self._queue.clear()
        self._intake.clear()
        self._buffered = 0
