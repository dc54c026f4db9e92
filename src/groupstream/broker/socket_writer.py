"""Scatter-gather writes straight from the response parts, without joining them or shuffling a buffer.

asyncio's selector transport (Python 3.11) joins ``writelines`` into one bytes object and keeps unsent data in a
bytearray it trims from the front after every partial send: for a 50 MB fetch response that is one copy to join
plus a memmove of the remaining tail on every send. Here the parts stay as they are (records are the bytes read
from the segment), ``sendmsg`` sends up to ``_IOV_MAX`` of them at once, and a partial send only advances a
memoryview. The transport keeps reading and closing; only writing goes through this class.
"""

from __future__ import annotations

import asyncio
import socket
from collections import deque
from collections.abc import Callable, Iterable

_IOV_MAX = 512


class SocketWriter:
    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int, on_drained: Callable[[], None]) -> None:
        self._loop = loop
        # A duplicate descriptor of the same socket: asyncio hides the transport's socket methods and does not
        # let anyone else watch the transport's own descriptor.
        self._sock = socket.socket(fileno=socket.dup(fd))
        self._sock.setblocking(False)
        self._fd = self._sock.fileno()
        self._queue: deque[memoryview] = deque()
        self._buffered = 0
        self._watching = False
        self._closed = False
        self._on_drained = on_drained
        self.error: OSError | None = None

    @property
    def buffered(self) -> int:
        return self._buffered

    def write(self, parts: Iterable[bytes | bytearray | memoryview]) -> None:
        if self._closed:
            return
        for p in parts:
            if len(p):
                mv = memoryview(p)
                self._queue.append(mv)
                self._buffered += mv.nbytes
        if not self._watching:
            self._send()
            if self._queue and not self._closed:
                self._loop.add_writer(self._fd, self._on_writable)
                self._watching = True

    def _on_writable(self) -> None:
        self._send()
        if not self._queue and self._watching:
            self._loop.remove_writer(self._fd)
            self._watching = False
            self._on_drained()

    def _send(self) -> None:
        queue = self._queue
        while queue and not self._closed:
            batch = [queue[i] for i in range(min(len(queue), _IOV_MAX))]
            try:
                sent = self._sock.sendmsg(batch)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                self.error = e
                self.close()
                return
            self._buffered -= sent
            while sent:
                head = queue[0]
                if sent >= head.nbytes:
                    sent -= head.nbytes
                    queue.popleft()
                else:
                    queue[0] = head[sent:]
                    sent = 0
                    return  # the kernel buffer is full

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._watching:
            self._loop.remove_writer(self._fd)
            self._watching = False
        self._queue.clear()
        self._buffered = 0
        self._sock.close()
