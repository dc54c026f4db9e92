"""A byte range of a segment file that a Fetch response sends with ``sendfile`` instead of copying it.

Kafka hands file ranges of its segments to the kernel; reading them into Python bytes and sending those copied
every fetched byte twice on the broker's one thread. A `FileRange` stands in the response body where the
records go: the protocol encoder needs a bytes-like value of the right length (it writes the length prefix and
appends the value as one part without looking into it), so the object is an anonymous, never-touched memory
map of that length (virtual memory only) carrying the file descriptor and position the bytes come from. The
connection's `SocketWriter` recognises it among the parts and calls ``os.sendfile`` for it.

The descriptor is a duplicate of the segment's, owned by this object and closed when it is garbage: a segment
deleted by retention or replaced by compaction while the response waits keeps its bytes readable, and a
descriptor number is never reused under a pending send. Its content as a buffer is zeros: only a writer that
sends it with sendfile may be given one (TLS connections never are: the handler asks for ranges only on plain
connections).
"""

from __future__ import annotations

import mmap
import os
import resource
import weakref

MAX_LIVE = 512
"""File ranges (each a duplicated descriptor) alive at once across the process, at most: past it (or past a
32nd of the descriptor limit, see `FileRange.available`) a fetch copies the bytes instead, so that slow
consumers with deep pipelines cannot use up the descriptors the logs and the connections need (a range lives
until the socket has taken it). The broker keeps an eighth of the limit from connections for the logs; ranges
take at most a quarter of that."""


def _release(fd: int) -> None:
    FileRange.live -= 1
    os.close(fd)


class FileRange(mmap.mmap):
    """``size`` bytes at ``position`` of the file open as ``fd`` (duplicated here; the caller keeps its own)."""

    live = 0
    """How many ranges hold a descriptor now (see `MAX_LIVE`)."""
    fd: int
    position: int
    length: int

    @staticmethod
    def available() -> bool:
        """Whether another range may be made now (`MAX_LIVE`, and a 32nd of the descriptor limit)."""
        live = FileRange.live
        if live >= MAX_LIVE:
            return False
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        return soft == resource.RLIM_INFINITY or live < soft // 32

    def __new__(cls, fd: int, position: int, size: int) -> FileRange:
        if size <= 0:
            raise ValueError("a file range holds at least one byte")
        self = super().__new__(cls, -1, size)
        self.fd = os.dup(fd)
        self.position = position
        self.length = size
        FileRange.live += 1
        weakref.finalize(self, _release, self.fd)
        return self

    def __init__(self, fd: int, position: int, size: int) -> None:  # mmap takes its arguments in __new__
        pass

    def read_bytes(self) -> bytes:
        """The range's bytes, read from the file (tests, and a writer that cannot send files)."""
        out = bytearray()
        while len(out) < self.length:
            chunk = os.pread(self.fd, self.length - len(out), self.position + len(out))
            if not chunk:
                raise OSError(f"file range of {self.length} bytes at {self.position}: the file ends after {len(out)}")
            out += chunk
        return bytes(out)
