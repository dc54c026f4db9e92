"""A small real filesystem that fills up: a tmpfs mounted for one test, with a ballast file to fill it.

A full disk is a fault tests must produce for real (ENOSPC from the kernel, short writes and all), not by
patching ``os.pwrite``. tmpfs needs no device and is mounted and unmounted in milliseconds; the tests run as
root here (``make test`` on the project's machines), which is what ``mount`` needs.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path


class SmallDisk:
    def __init__(self, mountpoint: Path, size_bytes: int) -> None:
        self.path = mountpoint
        self.size_bytes = size_bytes
        self.ballast = mountpoint / "ballast"

    def free_bytes(self) -> int:
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    def add_ballast(self, nbytes: int) -> None:
        """Take ``nbytes`` of the disk (or as much as is left) with one file."""
        chunk = b"\0" * (1 << 20)
        with open(self.ballast, "ab") as f:
            left = nbytes
            while left > 0:
                try:
                    f.write(chunk[: min(left, len(chunk))])
                    f.flush()
                except OSError:
                    break
                left -= len(chunk)

    def fill(self) -> None:
        """Take every byte that is left."""
        self.add_ballast(self.size_bytes)

    def remove_ballast(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.ballast.unlink()


@contextlib.contextmanager
def small_disk(root: Path, size_bytes: int) -> Iterator[SmallDisk]:
    """Mount a tmpfs of ``size_bytes`` under ``root``; unmounted (lazily, so open files do not block it) after."""
    if os.geteuid() != 0:
        raise RuntimeError("mounting a small tmpfs to fill needs root; run the durability tests as root")
    mountpoint = root / "small-disk"
    mountpoint.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(mountpoint)], check=True)
    try:
        yield SmallDisk(mountpoint, size_bytes)
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=False)
