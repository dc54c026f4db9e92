"""Open a partition directory and bring it to a consistent state before anything is served.

The contract (see the durability principle in the architecture notes): nothing past the last complete batch
is trusted, and recovery never deletes data that validates.

- After a clean shutdown (the ``clean-shutdown`` marker, written last by a clean close, and a readable
  recovery point) nothing below the recovery point is rescanned or truncated: each segment's state comes from
  its index files, checked cheaply, plus a header scan of the short tail after their last entry
  (`Segment.open_trusted`). Batches at or past the recovery point, which a clean close never leaves, get
  their CRCs checked.
- After an unclean one, recovery starts at the segment holding the recovery point: from there on every batch
  is CRC-checked (only data below the recovery point is known to have reached the disk). Segments below it
  are scanned header by header, for the idempotent-producer state.

Damage (a torn, corrupt or out-of-order batch) in the last segment is what a crash leaves: that segment is
truncated there. In an older segment it is never cut off and never costs a later segment: its bytes stay on
disk, the scan resynchronises on the next intact batch (`groupstream.storage.scan.find_next_batch`), the
offsets in between become a `Hole` that reads answer with `CorruptRangeError`, and after an unclean shutdown
every later segment is CRC-checked. Offsets missing between two segments are a hole too. Index files are
rederived from the log and rewritten whenever they differ from it.

Every repair is described in `RecoveryReport.events`, one line each, which `PartitionLog.open` logs at WARNING.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from dataclasses import dataclass, field
from pathlib import Path

from groupstream.storage.config import LogConfig
from groupstream.storage.holes import Hole
from groupstream.storage.segment import LOG_SUFFIX, OnBatch, RebuildResult, Segment, parse_file_name


@dataclass(slots=True)
class RecoveryReport:
    """What opening the log found and had to repair; tests and operators read it, nothing depends on it."""

    clean_shutdown: bool
    recovery_point: int
    validated_segments: list[int] = field(default_factory=list)  # CRC-checked
    trusted_segments: list[int] = field(default_factory=list)  # state from the index files (clean open)
    index_problems: list[tuple[int, str]] = field(default_factory=list)  # (segment, why it was scanned instead)
    # (segment base offset, bytes removed, why)
    truncations: list[tuple[int, int, str]] = field(default_factory=list)
    removed_segments: list[int] = field(default_factory=list)  # stays empty: recovery deletes no segment
    holes: list[tuple[int, Hole]] = field(default_factory=list)  # (segment base offset, hole)
    rebuilt_indexes: list[str] = field(default_factory=list)
    removed_files: list[str] = field(default_factory=list)
    producer_state: str = ""  # where the idempotent-producer state came from
    events: list[str] = field(default_factory=list)  # one line per repair, for the log

    @property
    def changed_directory(self) -> bool:
        return bool(self.removed_segments or self.removed_files or self.rebuilt_indexes)


def _unlink(directory: Path, name: str, report: RecoveryReport) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(directory / name)
        report.removed_files.append(name)


def describe_hole(segment: Segment, hole: Hole) -> str:
    if hole.loses_offsets:
        return (
            f"offsets {hole.first_offset}..{hole.last_offset} are unreadable: {hole.reason} "
            f"({segment.log_path.name}, bytes {hole.start}..{hole.end} kept on disk); "
            f"the next readable offset is {hole.next_offset}"
        )
    return (
        f"bytes {hole.start}..{hole.end} of {segment.log_path.name} after offset {hole.first_offset - 1} are "
        f"damaged but held no offsets (kept on disk): {hole.reason}"
    )


def _record(report: RecoveryReport, seg: Segment, result: RebuildResult) -> None:
    base = seg.base_offset
    if result.index_problem is not None:
        report.index_problems.append((base, result.index_problem))
    if result.truncated_bytes or (result.error is not None and not result.holes):
        report.truncations.append((base, result.truncated_bytes, result.error or ""))
        report.events.append(
            f"truncated {seg.log_path.name} at byte {seg.size}, removing {result.truncated_bytes} bytes "
            f"(offsets from {seg.next_offset} on): {result.error}"
        )
    for hole in result.holes:
        report.holes.append((base, hole))
        report.events.append(describe_hole(seg, hole))


def load_segments(
    directory: Path,
    config: LogConfig,
    *,
    clean: bool,
    recovery_point: int,
    empty_base: int,
    on_batch: OnBatch | None = None,
) -> tuple[list[Segment], RecoveryReport]:
    """Open, validate and repair the segments in ``directory``; returns them in offset order (never empty:
    a directory without segments gets one at ``empty_base``). ``on_batch`` sees every batch scanned, in
    order (an unclean open scans them all; a clean one only tails, so its caller restores producer state
    otherwise)."""
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
    # Recovery starts at the segment holding the recovery point.
    holder = max((b for b in bases if b <= recovery_point), default=bases[0] if bases else 0)
    segments: list[Segment] = []
    damaged_older = False  # after damage in an older segment (unclean open), CRC-check everything after it
    for i, base in enumerate(bases):
        upper = bases[i + 1] if i + 1 < len(bases) else None
        seg = Segment.open_existing(directory, base, config)
        if clean and base <= holder:
            result = seg.open_trusted(upper=upper, crc_from_offset=recovery_point)
            if result.trusted:
                report.trusted_segments.append(base)
        else:
            validate = damaged_older or base >= holder
            result = seg.rebuild(validate_crc=validate, min_offset=base, on_batch=on_batch, upper=upper)
            if validate:
                report.validated_segments.append(base)
                seg.write_gen += 1  # possibly only in the page cache: the first flush must fsync it
            damaged_older = damaged_older or (not clean and bool(result.holes))
        _record(report, seg, result)
        segments.append(seg)

    for seg, after in itertools.pairwise(segments):
        if seg.next_offset < after.base_offset:  # offsets nobody holds (a segment emptied or cut short)
            hole = Hole(
                seg.size,
                seg.size,
                seg.next_offset,
                after.base_offset,
                f"{seg.log_path.name} ends at offset {seg.next_offset - 1} but the next segment starts at "
                f"{after.base_offset}",
            )
            seg.holes.append(hole)
            seg.next_offset = after.base_offset
            report.holes.append((seg.base_offset, hole))
            report.events.append(describe_hole(seg, hole))
    if not segments:
        segments.append(Segment.create(directory, empty_base, config))

    reasons = dict(report.index_problems)
    repaired = {base for base, _, _ in report.truncations} | {base for base, _ in report.holes}
    for i, seg in enumerate(segments):
        sealed = i < len(segments) - 1
        missing = {p.name for p in (seg.offset_index.path, seg.time_index.path) if not p.exists()}
        for path in seg.finish_rebuild(seal=sealed):
            report.rebuilt_indexes.append(path.name)
            if path.name in missing:
                why = "it was missing"
            elif seg.base_offset in reasons:
                why = reasons[seg.base_offset]
            elif seg.base_offset in repaired:
                why = "the log was repaired"
            else:
                why = "it did not match the log"
            report.events.append(
                f"rebuilt {path.name} (segment of offsets {seg.base_offset}..{seg.next_offset - 1}, "
                f"{seg.size} log bytes): {why}"
            )
        if sealed and not seg.dirty:
            seg.close_index_files()
    return segments, report
