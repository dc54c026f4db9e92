"""File descriptors: the process limit, how many are in use, and how many of them connections may take.

Every client connection holds one descriptor, and so does every log segment (storage keeps each segment's log
file open). A broker whose connections take the last descriptors can no longer roll a segment, create a
partition or load a coordinator, so by default connections get only part of what is free when the broker starts.
"""

from __future__ import annotations

import os
import resource

UNLIMITED_CONNECTIONS = 2**31 - 1
"""Kafka's default max.connections (Int.MaxValue), used when the descriptor limit itself is unlimited."""

RESERVE_MIN = 64
"""Descriptors always kept from connections for the logs, however low the limit."""


def raise_nofile_limit() -> str:
    """Raise the soft RLIMIT_NOFILE to the hard limit; returns the line to log once (at INFO) saying what the
    limit now is. The caller logs it once the broker is up, so a broker that refuses to start prints only why.

    Distributions start processes with a soft limit of 1,024 even where the hard limit is a million; a broker
    holding one descriptor per connection and per segment needs the larger one, and any process may raise its
    own soft limit up to the hard one.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft == hard:
        return f"descriptor limit (RLIMIT_NOFILE): {soft} (soft and hard)"
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as e:  # macOS refuses RLIM_INFINITY for descriptors
        return (f"descriptor limit (RLIMIT_NOFILE): {_show(soft)} (could not raise it to the hard limit "
                f"{_show(hard)}: {e})")  # fmt: skip
    return f"descriptor limit (RLIMIT_NOFILE): {_show(hard)} (soft limit raised from {_show(soft)})"


def nofile_limit() -> int | None:
    """The soft RLIMIT_NOFILE in force, None when unlimited."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else soft


def open_descriptors() -> int | None:
    """How many descriptors this process has open (None where the OS does not list them)."""
    for path in ("/proc/self/fd", "/dev/fd"):
        try:
            return max(0, len(os.listdir(path)) - 1)  # less the one listdir itself opened
        except OSError:
            continue
    return None


def descriptor_reserve(limit: int) -> int:
    """Descriptors connections may never take: an eighth of the limit, at least ``RESERVE_MIN``. They are for
    what the logs open after start (new segments and partitions, index files, the flusher's duplicates of a
    segment's descriptors, snapshots), which otherwise fails once connections hold every descriptor."""
    return max(RESERVE_MIN, limit // 8)


def default_max_connections(limit: int | None, in_use: int | None) -> int:
    """The max.connections used when none is set: the descriptors free once the logs are open, less the reserve
    (``limit - in_use - descriptor_reserve(limit)``), at least 1; Kafka's Int.MaxValue when the limit is
    unlimited."""
    if limit is None:
        return UNLIMITED_CONNECTIONS
    return max(1, limit - (in_use or 0) - descriptor_reserve(limit))


def _show(n: int) -> str:
    return "unlimited" if n == resource.RLIM_INFINITY else str(n)
