"""Damaged ranges inside a segment: what they are (`Hole`) and where intact batches resume after damage.

Damage inside a segment that is not the last one is never cut off: its bytes stay on disk, its offsets raise
`CorruptRangeError` when read, and the intact batches around it stay readable. Holes are found by recovery
(`Segment.rebuild`), or later by a read that runs into bad framing a clean open did not scan
(`record_damage`).
"""

from __future__ import annotations

from dataclasses import dataclass

from groupstream.storage.scan import find_next_batch


@dataclass(frozen=True, slots=True)
class Hole:
    """Damaged bytes inside a segment and the offsets they held: kept on disk, unreadable, never skipped.

    ``[start, end)`` are file positions: ``start`` is the first byte that is not an intact batch, ``end`` where
    intact batches resume (the file size when none do). ``[first_offset, next_offset)`` are the offsets lost;
    the range is empty when the damaged bytes lie past the segment's last offset.
    """

    start: int
    end: int
    first_offset: int
    next_offset: int
    reason: str

    @property
    def last_offset(self) -> int:
        return self.next_offset - 1

    @property
    def loses_offsets(self) -> bool:
        return self.next_offset > self.first_offset


def resync(fd: int, at: int, end: int, expected: int, upper: int, why: str) -> Hole:
    """The hole that damage at ``at`` makes: up to the next intact batch with offsets in ``[expected, upper)``
    before ``end``, or up to ``end`` (and offset ``upper``) when there is none."""
    found = find_next_batch(fd, at, end, expected, upper)
    if found is None:
        return Hole(at, end, expected, max(upper, expected), why)
    return Hole(at, found[0], expected, found[1].base_offset, why)


def record_damage(holes: list[Hole], fd: int, at: int, expected: int, why: str, *, size: int, next_offset: int) -> Hole:
    """Add to ``holes`` (in file order) the damage found at ``at`` after the segment (``size`` bytes, offsets
    below ``next_offset``) was opened: it reaches the next intact batch before the next hole, or merges with
    that hole. Returns the hole added."""
    following = next((h for h in holes if h.start > at), None)
    end = size if following is None else following.start
    upper = next_offset if following is None else following.first_offset
    hole = resync(fd, at, end, expected, upper, why)
    if following is not None and hole.end == following.start:
        holes.remove(following)
        hole = Hole(at, following.end, expected, following.next_offset, f"{why}; then {following.reason}")
    holes.append(hole)
    holes.sort(key=lambda h: h.start)
    return hole


# Where a scan starts and ends: (start position, offset expected there, whether that offset is exact rather than
# a lower bound, end position).
ScanWindow = tuple[int, int, bool, int]


def scan_window(holes: list[Hole], offset: int, indexed: int, base_offset: int, size: int) -> ScanWindow | Hole:
    """Where a scan for ``offset`` starts and ends in a segment (``size`` bytes from ``base_offset`` on) with
    ``holes``: from ``indexed`` (the offset index's position for it), or the end of a hole past that, up to
    the next hole or the end. The hole holding ``offset`` instead, when it lies in one."""
    start, expected, exact, end = indexed, base_offset, indexed == 0, size
    for hole in holes:
        if offset >= hole.next_offset:
            if hole.end >= start:
                start, expected, exact = hole.end, hole.next_offset, True
        elif offset >= hole.first_offset:
            return hole
        else:
            end = min(end, hole.start)
            break
    return start, expected, exact, end


def anchor_before(holes: list[Hole], position: int, indexed: int | None, base_offset: int) -> tuple[int, int, bool]:
    """The nearest place before ``position`` a scan can start from: ``indexed`` (the greatest offset-index
    position below it; its first offset known only as at least ``base_offset``), or, exactly, the segment
    start or the end of a hole. ``(position, offset expected there, whether that offset is exact)``."""
    best = (0, base_offset, True)
    for hole in holes:
        if best[0] <= hole.end < position:
            best = (hole.end, hole.next_offset, True)
    if indexed is not None and indexed > best[0]:
        best = (indexed, base_offset, False)
    return best
