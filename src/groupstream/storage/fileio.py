"""Unbuffered file primitives: every byte goes straight to the kernel, so a killed process loses nothing.

Python's buffered files would keep acknowledged data in user space; ``os.pwrite``/``os.pread`` on raw fds
do not, and positional I/O keeps reads independent of any shared file pointer.
"""

from __future__ import annotations

import os
from pathlib import Path

_datasync = getattr(os, "fdatasync", os.fsync)


def open_rw(path: Path, *, truncate: bool = False) -> int:
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
    if truncate:
        flags |= os.O_TRUNC
    return os.open(path, flags, 0o644)


def pwrite_all(fd: int, data: bytes | bytearray | memoryview, position: int) -> None:
    """Write all of ``data``; regular files rarely short-write, but a signal or a full disk can."""
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, position)
        if n <= 0:
            raise OSError(f"pwrite wrote {n} bytes at {position}")
        view = view[n:]
        position += n


def pread_upto(fd: int, size: int, position: int) -> bytes:
    """Read ``size`` bytes, or fewer only at end of file."""
    data = os.pread(fd, size, position)
    if len(data) == size or not data:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        more = os.pread(fd, size - got, position + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def datasync(fd: int) -> None:
    _datasync(fd)


def fsync_directory(path: Path) -> None:
    """Make creations, renames and unlinks in ``path`` durable (file fsync does not cover the entry)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` so that a crash leaves either the old or the new content, never a mix."""
    tmp = path.with_name(path.name + ".tmp")
    fd = open_rw(tmp, truncate=True)
    try:
        pwrite_all(fd, data, 0)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_directory(path.parent)
