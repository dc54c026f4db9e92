"""Replacing segments with a rewritten one so that a crash at any moment leaves a log recovery can finish.

The protocol follows Kafka's cleaner. A rewritten segment is written and fsynced as ``<base>.log.cleaned``
(an unfinished rewrite: recovery deletes it), then renamed to ``<base>.log.swap``: that rename is the commit
point. Afterwards the replaced segments other than the first are deleted and the swap file is renamed over
``<base>.log``. A swap file found on open means the commit happened and the rest did not: recovery deletes
every segment whose base offset lies strictly inside the swap file's offset range and installs the swap file.

That rule is only right if the rewritten segment ends exactly where the replaced ones ended, so the cleaner
always keeps the last batch of the segments it merges (as an empty batch when none of its records survive).
Index files are not part of the protocol: they are rederived from the log on open and after a swap.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from groupstream.storage.fileio import fsync_directory, open_rw
from groupstream.storage.scan import BatchScan
from groupstream.storage.segment import LOG_SUFFIX, SEGMENT_SUFFIXES, file_name, parse_file_name

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"


def cleaned_path(directory: Path, base_offset: int) -> Path:
    return directory / (file_name(base_offset, LOG_SUFFIX) + CLEANED_SUFFIX)


def is_swap_debris(name: str) -> bool:
    return name.endswith((CLEANED_SUFFIX, SWAP_SUFFIX))


def commit_cleaned(cleaned: Path) -> Path:
    """Rename a fully written and fsynced ``.cleaned`` file to ``.swap`` durably; returns the swap path."""
    swap = cleaned.with_name(cleaned.name[: -len(CLEANED_SUFFIX)] + SWAP_SUFFIX)
    os.replace(cleaned, swap)
    fsync_directory(cleaned.parent)
    return swap


def install_swap(swap: Path) -> Path:
    """Rename ``<base>.log.swap`` over ``<base>.log``; returns the log path."""
    target = swap.with_name(swap.name[: -len(SWAP_SUFFIX)])
    os.replace(swap, target)
    return target


def _next_offset(path: Path, base_offset: int) -> int:
    fd = open_rw(path)
    try:
        scan = BatchScan(fd, 0, os.fstat(fd).st_size, validate_crc=False)
        next_offset = base_offset
        for _, h in scan:
            next_offset = h.next_offset
        return next_offset
    finally:
        os.close(fd)


def finish_interrupted_swaps(directory: Path) -> list[str]:
    """Delete unfinished rewrites and complete committed ones; returns the names of the files removed or
    installed. Runs before the segments are opened."""
    done: list[str] = []
    names = sorted(os.listdir(directory))
    for name in names:
        if name.endswith(CLEANED_SUFFIX):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(directory / name)
                done.append(name)
    swaps: list[tuple[int, str]] = []
    for name in names:
        if name.endswith(SWAP_SUFFIX):
            parsed = parse_file_name(name[: -len(SWAP_SUFFIX)])
            if parsed is not None and parsed[1] == LOG_SUFFIX:
                swaps.append((parsed[0], name))
    for base, name in swaps:
        end = _next_offset(directory / name, base)
        for other in sorted(os.listdir(directory)):
            parsed = parse_file_name(other)
            if parsed is not None and base < parsed[0] < end and parsed[1] in SEGMENT_SUFFIXES:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(directory / other)
                    done.append(other)
        install_swap(directory / name)
        done.append(name)
    if done:
        fsync_directory(directory)
    return done
