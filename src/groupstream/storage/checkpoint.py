"""Small per-partition files that let an open skip work: how far the log is known durable, where it
starts, whether the last close was clean (and, in producer_state.py, the producer state it left).

Checkpoint files hold ``0\\n<offset>\\n`` (a version line, then the value), written atomically. A missing or
unreadable checkpoint is never fatal: it only makes recovery do more work (validate from the start).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from groupstream.storage.fileio import atomic_write, fsync_directory

RECOVERY_POINT_FILE = "recovery-point"
LOG_START_OFFSET_FILE = "log-start-offset"
CLEAN_SHUTDOWN_FILE = "clean-shutdown"
CLEANER_OFFSET_FILE = "cleaner-offset"  # compaction: where the part not yet cleaned begins
PRODUCER_SNAPSHOT_FILE = "producer-snapshot"  # idempotent-producer state at a clean close (producer_state.py)
CHECKPOINT_FILES = frozenset(
    {RECOVERY_POINT_FILE, LOG_START_OFFSET_FILE, CLEAN_SHUTDOWN_FILE, CLEANER_OFFSET_FILE, PRODUCER_SNAPSHOT_FILE}
)
_VERSION = "0"


def read_offset(directory: Path, name: str) -> int | None:
    try:
        text = (directory / name).read_text("ascii")
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    lines = text.split("\n")
    if len(lines) < 2 or lines[0] != _VERSION:
        return None
    try:
        value = int(lines[1])
    except ValueError:
        return None
    return value if value >= 0 else None


def write_offset(directory: Path, name: str, offset: int) -> None:
    atomic_write(directory / name, f"{_VERSION}\n{offset}\n".encode("ascii"))


def has_clean_marker(directory: Path) -> bool:
    return (directory / CLEAN_SHUTDOWN_FILE).exists()


def write_clean_marker(directory: Path) -> None:
    atomic_write(directory / CLEAN_SHUTDOWN_FILE, b"")


def remove_clean_marker(directory: Path) -> None:
    """Durably, so a crash after open is seen as unclean next time."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(directory / CLEAN_SHUTDOWN_FILE)
        fsync_directory(directory)
