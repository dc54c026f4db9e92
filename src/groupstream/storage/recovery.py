"""Open a partition directory and bring it to a consistent state before anything is served.

Every segment is scanned header by header (the idempotent-producer state needs all of them anyway); after
an unclean shutdown the segments from the one holding the recovery point onwards are also checked batch by
batch with their CRCs, since only data below the recovery point is known to have reached the disk. The
first torn, corrupt or out-of-order batch truncates its segment there, and every later segment is removed:
a log is a prefix, and nothing after a hole can be trusted. Index files are rederived from the log and
rewritten whenever they differ (missing, wrong size, non-monotonic, pointing past the end, stale).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from groupstream.protocol.records.batch_header import BatchHeader
from groupstream.storage.config import LogConfig
from groupstream.storage.segment import LOG_SUFFIX, SEGMENT_SUFFIXES, Segment, file_name, parse_file_name


@dataclass(slots=True)
class RecoveryReport:
    """What opening the log had to repair; tests and operators read it, nothing depends on it."""

    clean_shutdown: bool
    recovery_point: int
    validated_segments: list[int] = field(default_factory=list)
    # (segment base offset, bytes removed, why)
    truncations: list[tuple[int, int, str]] = field(default_factory=list)
    removed_segments: list[int] = field(default_factory=list)
    rebuilt_indexes: list[str] = field(default_factory=list)
    removed_files: list[str] = field(default_factory=list)

    @property
    def changed_directory(self) -> bool:
        return bool(self.removed_segments or self.removed_files or self.rebuilt_indexes)


def _unlink(directory: Path, name: str, report: RecoveryReport) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(directory / name)
        report.removed_files.append(name)


def load_segments(
    directory: Path,
    config: LogConfig,
    *,
    clean: bool,
    recovery_point: int,
    empty_base: int,
    on_batch: Callable[[BatchHeader], None] | None = None,
) -> tuple[list[Segment], RecoveryReport]:
    """Open, validate and repair the segments in ``directory``; returns them in offset order (never empty:
    a directory without segments gets one at ``empty_base``)."""
    report = RecoveryReport(clean_shutdown=clean, recovery_point=recovery_point)
    logs: set[int] = set()
    others: list[tuple[int, str]] = []
    for name in sorted(os.listdir(directory)):
        if name.endswith(".tmp"):
            _unlink(directory, name, report)
            continue
        parsed = parse_file_name(name)
        if parsed is None:
            continue
        base, suffix = parsed
        if suffix == LOG_SUFFIX:
            logs.add(base)
        else:
            others.append((base, name))
    for base, name in others:
        if base not in logs:
            _unlink(directory, name, report)

    bases = sorted(logs)
    validate_from: int | None = None
    if not clean and bases:
        validate_from = max((b for b in bases if b <= recovery_point), default=bases[0])

    segments: list[Segment] = []
    broken = False
    for base in bases:
        if broken or (segments and base < segments[-1].next_offset):
            broken = True
            for suffix in SEGMENT_SUFFIXES:
                _unlink(directory, file_name(base, suffix), report)
            report.removed_segments.append(base)
            continue
        seg = Segment.open_existing(directory, base, config)
        validate = validate_from is not None and base >= validate_from
        result = seg.rebuild(validate_crc=validate, min_offset=base, on_batch=on_batch)
        if validate:
            report.validated_segments.append(base)
            seg.write_gen += 1  # possibly only in the page cache: the first flush must fsync it
        if result.error is not None:
            report.truncations.append((base, result.truncated_bytes, result.error))
            broken = True
        segments.append(seg)

    kept: list[Segment] = []
    for i, seg in enumerate(segments):
        if seg.is_empty and i < len(segments) - 1:
            seg.delete_files()
            report.removed_segments.append(seg.base_offset)
        else:
            kept.append(seg)
    if not kept:
        kept.append(Segment.create(directory, empty_base, config))

    for i, seg in enumerate(kept):
        report.rebuilt_indexes.extend(p.name for p in seg.finish_rebuild(seal=i < len(kept) - 1))
        if i < len(kept) - 1 and not seg.dirty:
            seg.close_index_files()
    return kept, report
