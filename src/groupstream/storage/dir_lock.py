"""One process owns a data dir: an exclusive ``flock`` on ``<data dir>/.lock``, as Kafka locks each log dir.

Two brokers on one directory would both append at what each believes is the log end and overwrite each
other's acknowledged records. The lock is taken before anything in the directory is created or opened, and
the kernel releases it when the process dies however it dies (kill -9 included), so a crashed broker never
leaves a stale lock behind. The holder's pid is written into the file only to name it in the refusal.
``flock`` (not ``fcntl``'s POSIX record locks) because its lock belongs to the open file: a second broker
in the same process (tests, the embedded broker) is refused too.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from groupstream.storage.errors import StorageError

LOCK_FILE = ".lock"


class DataDirLockedError(StorageError):
    """Another process (or another broker in this one) holds the data dir."""


class DataDirLock:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> DataDirLock:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise DataDirLockedError(
                f"data dir {self.path.parent} is in use by another broker{holder}: one broker per data dir"
            ) from None
        except OSError:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        """Unlock by closing; the file stays (removing it would let a third process lock a new inode while a
        second still waits on the old one)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    @property
    def held(self) -> bool:
        return self._fd is not None


def _read_holder(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return ""
    return f" (pid {text})" if text.isdigit() else ""
