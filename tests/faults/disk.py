"""The broker's data dir on a small tmpfs of its own, and a ballast file that fills it.

``mount -t tmpfs`` needs root, or a user and mount namespace of our own (``unshare --user --map-root-user
--mount``, which `tests.faults.__main__` re-executes itself under when it is not root). ``fill()`` writes
the ballast until the filesystem answers ENOSPC, so the broker's next write finds no space whatever it wrote
before; ``drain()`` removes it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from pathlib import Path


def can_mount_tmpfs(probe_dir: Path) -> bool:
    """Whether this process may mount a tmpfs (root, or root of its own user namespace)."""
    probe_dir.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe_dir)], capture_output=True)
    if done.returncode != 0:
        return False
    subprocess.run(["umount", str(probe_dir)], check=True)
    return True


class TmpfsDisk:
    """A tmpfs of ``size_mb`` at ``mount_point``; the broker's data dir is ``mount_point/data``."""

    def __init__(self, mount_point: Path, size_mb: int) -> None:
        self.mount_point = mount_point
        self.size_mb = size_mb
        self.ballast = mount_point / "ballast"
        self.mounted = False

    @property
    def data_dir(self) -> Path:
        return self.mount_point / "data"

    def mount(self) -> TmpfsDisk:
        self.mount_point.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.size_mb}m,mode=0755", "tmpfs", str(self.mount_point)],
                       check=True, capture_output=True)  # fmt: skip
        self.mounted = True
        self.data_dir.mkdir()
        return self

    def fill(self, leave_bytes: int = 0) -> int:
        """Write the ballast until ENOSPC (1 MiB writes, then smaller ones for the last pages), then give
        ``leave_bytes`` back: with a few pages free the broker's next writes are short ones, not refused
        outright. Returns the ballast's size."""
        written = 0
        with open(self.ballast, "ab", buffering=0) as f:
            for chunk in (b"\0" * (1 << 20), b"\0" * 4096, b"\0" * 512):
                while True:
                    try:
                        n = f.write(chunk)
                    except OSError as e:
                        if e.errno != errno.ENOSPC:
                            raise
                        break
                    written += n or 0
                    if not n or n < len(chunk):
                        break
            if leave_bytes:
                written = max(0, written - leave_bytes)
                f.truncate(written)
        return written

    def drain(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.ballast.unlink()

    def free_bytes(self) -> int:
        return shutil.disk_usage(self.mount_point).free

    def used_bytes(self) -> int:
        return shutil.disk_usage(self.mount_point).used

    def unmount(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.mount_point)], check=False, capture_output=True)
            self.mounted = False
            with contextlib.suppress(OSError):
                os.rmdir(self.mount_point)
