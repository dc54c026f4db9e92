"""The checker: what went wrong in a fault run, from the history its processes left (see `history`).

Each anomaly kind below is a promise the broker and clients make. ``check`` returns a `Report` with a count
per kind, the first examples of each and the verdict (any anomaly fails the run).

Log (producers and the final read, after the final heal and restart):

- ``lost``: a record acknowledged at (partition, offset) that the final read from offset 0 does not hold
  there (the example says where the value is, if anywhere). Idempotent ``acks=all`` producers were told it is
  stored: losing it is the one failure a broker may never have.
- ``log-duplicate``: one value at two offsets of the final log: an idempotent producer's retry written twice.
- ``phantom``: a value in the log that no producer of the run produced (corruption, or another run's bytes).

Groups (each member's own log of what it owned, processed and committed):

- ``dirty-read``: a member processed (partition, offset, value) and the final log holds something else there
  (or nothing): it was served a record that was later lost or replaced.
- ``double-owner``: two members of one group held a partition at the same time, each by its own rebalance
  callbacks (`check_double_owners` defines the allowed handover).
- ``unowned``: a member processed a record of a partition it did not hold at that moment.
- ``duplicate``: a record processed again by the group outside the at-least-once window
  (`check_duplicates` defines the window).
- ``non-monotonic``: within one ownership (a member holding a partition from its assignment to its
  revocation), an offset processed that is not above the previous one.
- ``missed``: a record of the final log that no member of a group processed, for a group that caught up (its
  committed offsets reached the log end); ``stalled``: a group that did not catch up after the final heal.

Processes: ``producer-fatal`` (an idempotent producer gave up: it cannot against a broker that keeps its
promises), ``crashed`` (a member, producer or broker process exited on its own).
"""

from __future__ import annotations

import itertools
import math
from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .history import History, Impairment, MemberHistory, group_members, parse_value

KINDS = (
    "lost",
    "log-duplicate",
    "phantom",
    "dirty-read",
    "double-owner",
    "unowned",
    "duplicate",
    "non-monotonic",
    "missed",
    "stalled",
    "producer-fatal",
    "crashed",
)

# How long after an impairment ends a member cut off during it may go on holding partitions the coordinator
# gave to another member meanwhile: one heartbeat interval (0.5 s in this suite) to hear that it was removed,
# one poll (at most 0.5 s) to run its on_lost callback, a reconnect backoff (at most 1 s), with margin.
GRACE_S = 5.0
EXAMPLES = 5


@dataclass(frozen=True, slots=True)
class Interval:
    """A member holding a partition, by its own callbacks: from the assignment to the revocation, loss, kill
    or close (``end`` is inf for a member still running when the history ends)."""

    group: str
    member: str
    partition: int
    start: float
    end: float

    def __str__(self) -> str:
        return f"{self.member} held p{self.partition} [{self.start:.3f}, {self.end:.3f}]"


@dataclass
class Report:
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    examples: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    stats: dict[str, object] = field(default_factory=dict)
    info: Counter[str] = field(default_factory=Counter)  # what was allowed, for the summary (not anomalies)

    def add(self, kind: str, detail: str) -> None:
        self.counts[kind] += 1
        if len(self.examples[kind]) < EXAMPLES:
            self.examples[kind].append(detail)

    @property
    def anomalies(self) -> int:
        return sum(self.counts.values())

    @property
    def ok(self) -> bool:
        return self.anomalies == 0

    def render(self) -> str:
        lines = [f"checker verdict: {'OK' if self.ok else 'FAILED'} ({self.anomalies} anomalies)"]
        lines += [f"  {kind:<15} {self.counts[kind]}" for kind in KINDS]
        for kind in KINDS:
            if self.examples.get(kind):
                lines.append(f"first {kind} examples:")
                lines += [f"  - {ex}" for ex in self.examples[kind]]
        if self.stats:
            lines.append("checked: " + ", ".join(f"{k}={v}" for k, v in self.stats.items()))
        if self.info:
            lines.append("allowed: " + ", ".join(f"{k}={v}" for k, v in sorted(self.info.items())))
        return "\n".join(lines)


def check(history: History, grace_s: float = GRACE_S) -> Report:
    report = Report()
    log_at = {(p, o): v for p, o, v in history.final_log}
    check_log(history, log_at, report)
    by_group = group_members(history)
    processed = 0
    for group in history.groups:
        members = by_group.get(group, [])
        intervals = ownership_intervals(group, members)
        report.info["ownership intervals"] += len(intervals)
        check_double_owners(intervals, history.impairments, report, grace_s)
        placed = place_records(members, intervals, report)
        check_reads(group, members, log_at, report)
        check_monotonic(placed, report)
        check_duplicates(group, members, placed, report)
        caught_up = history.caught_up.get(group, False)
        if caught_up:
            check_missed(group, members, history.final_log, report)
        else:
            report.add("stalled", f"group {group} did not commit the log end after the final heal")
        processed += sum(len(m.processed) for m in members)
    for f in history.failures:
        report.add("producer-fatal" if f.kind == "producer-fatal" else "crashed", f"{f.kind} {f.who}: {f.detail}")
    report.stats.update(
        acked=len(history.acks),
        log_records=len(history.final_log),
        records_processed=processed,
        member_processes=len(history.members),
        commits_acked=sum(c.ok for m in history.members for c in m.commits),
    )
    return report


# -- the log ----------------------------------------------------------------------------------------------------


def check_log(history: History, log_at: dict[tuple[int, int], str], report: Report) -> None:
    where: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for p, o, v in history.final_log:
        where[v].append((p, o))
    for a in sorted(history.acks, key=lambda a: a.t):
        got = log_at.get((a.partition, a.offset))
        if got != a.value:
            found = where.get(a.value)
            report.add("lost", f"{a.value} acknowledged at p{a.partition}@{a.offset} (t={a.t:.3f}); the log holds "
                               f"{got!r} there; the value is {'at ' + str(found) if found else 'nowhere'}")  # fmt: skip
    for v, places in where.items():
        if len(places) > 1:
            report.add("log-duplicate", f"{v} is at {sorted(places)}")
        parsed = parse_value(v)
        if parsed is None or parsed[1] > history.sent.get(parsed[0], -1):
            report.add("phantom", f"{v!r} at {places[0]}: no producer of this run produced it")


# -- ownership --------------------------------------------------------------------------------------------------


def ownership_intervals(group: str, members: Iterable[MemberHistory]) -> list[Interval]:
    out = []
    for m in members:
        end_of_process = math.inf if m.ended is None else m.ended
        start: dict[int, float] = {}
        for a in m.assignments:
            if a.t > end_of_process:
                break
            for p in [p for p in start if p not in a.parts]:
                out.append(Interval(group, m.name, p, start.pop(p), a.t))
            for p in a.parts:
                start.setdefault(p, a.t)
        out += [Interval(group, m.name, p, s, end_of_process) for p, s in start.items()]
    out.sort(key=lambda iv: (iv.partition, iv.start, iv.member))
    return out


def check_double_owners(
    intervals: Sequence[Interval], impairments: Sequence[Impairment], report: Report, grace_s: float = GRACE_S
) -> None:
    """No two members hold one partition at the same moment, beyond the allowed handover.

    The allowed handover: classic eager and cooperative rebalances and the KIP-848 protocol all revoke a
    partition from its owner before they assign it to another member, so two intervals of a partition never
    overlap, with one exception. A member the nemesis cut off from the coordinator (frozen by SIGSTOP, its
    connections stalled by the proxy, or the broker itself frozen, whose session timers all fire as it wakes)
    may be removed from the group without hearing of it, and its partitions given to others: Kafka's answer is
    fencing (its commits are refused), not a callback it cannot run. So an overlap of an earlier holder A with a
    later holder B is allowed exactly while A is inside an impairment that applies to it, or within ``grace_s``
    after that impairment ends (the time to hear of its removal and run on_lost). Any other moment of overlap is
    a double owner. Kill -9, broker restarts, latency, resets and a full disk excuse nothing.
    """
    by_part: dict[int, list[Interval]] = defaultdict(list)
    for iv in intervals:
        by_part[iv.partition].append(iv)
    for ivs in by_part.values():
        for a, b in itertools.combinations(ivs, 2):  # sorted by start: a began no later than b
            if a.member == b.member:
                continue
            lo, hi = max(a.start, b.start), min(a.end, b.end)
            if hi <= lo:
                continue
            excused = [(i.start, i.end + grace_s) for i in impairments if i.applies_to(a.member)]
            left = _uncovered(lo, hi, excused)
            if left < hi - lo:
                report.info["overlaps excused by an impairment"] += 1
            if left > 0:
                report.add("double-owner", f"group {a.group} p{a.partition}: {b.member} was assigned it at {b.start:.3f} "
                                           f"while {a} ({left:.3f} s of overlap not excused by an impairment)")  # fmt: skip


def _uncovered(lo: float, hi: float, covers: Iterable[tuple[float, float]]) -> float:
    """Length of [lo, hi] not covered by the union of ``covers``."""
    left, at = 0.0, lo
    for s, e in sorted(covers):
        if e <= at:
            continue
        if s >= hi:
            break
        if s > at:
            left += s - at
        at = max(at, e)
        if at >= hi:
            return left
    return left + max(0.0, hi - at)


@dataclass(frozen=True, slots=True)
class Placed:
    """A processed record and the ownership it happened in."""

    interval: Interval
    t: float
    offset: int
    value: str


def place_records(members: Iterable[MemberHistory], intervals: Sequence[Interval], report: Report) -> list[Placed]:
    """Each processed record with the interval its member held the partition in; ``unowned`` for the rest."""
    mine: dict[tuple[str, int], list[Interval]] = defaultdict(list)
    for iv in intervals:
        mine[(iv.member, iv.partition)].append(iv)
    out = []
    for m in members:
        for r in m.processed:
            ivs = mine.get((m.name, r.partition), [])
            starts = [iv.start for iv in ivs]
            i = bisect_right(starts, r.t) - 1  # the last interval that began at or before the record
            if i < 0 or not ivs[i].start <= r.t <= ivs[i].end:
                report.add("unowned", f"{m.name} processed p{r.partition}@{r.offset} at {r.t:.3f} without holding it")
                continue
            out.append(Placed(ivs[i], r.t, r.offset, r.value))
    out.sort(key=lambda x: x.t)
    return out


# -- what the groups read ------------------------------------------------------------------------------------------


def check_reads(group: str, members: Iterable[MemberHistory], log_at: dict[tuple[int, int], str], report: Report) -> None:
    for m in members:
        for r in m.processed:
            got = log_at.get((r.partition, r.offset))
            if got != r.value:
                report.add("dirty-read", f"group {group}: {m.name} processed {r.value} at p{r.partition}@{r.offset} "
                                         f"(t={r.t:.3f}); the final log holds {got!r} there")  # fmt: skip


def check_monotonic(placed: Sequence[Placed], report: Report) -> None:
    """Within one ownership a member reads forward: each offset above the previous one."""
    last: dict[Interval, int] = {}
    for x in placed:
        prev = last.get(x.interval)
        if prev is not None and x.offset <= prev:
            report.add("non-monotonic", f"{x.interval}: processed offset {x.offset} at {x.t:.3f} after {prev}")
        last[x.interval] = x.offset


def check_duplicates(group: str, members: Iterable[MemberHistory], placed: Sequence[Placed], report: Report) -> None:
    """A record is processed again only inside the at-least-once window.

    The window: a group re-delivers what was processed and not yet covered by a commit. Precisely, when an
    ownership of partition p starting at time s (the new holder's assignment callback) processes offset o of
    p, and o was processed before in another ownership, that is allowed iff no commit of p to an offset above o
    (a commit names the next offset to read) had been acknowledged to its member before s. Such a commit was
    stored before the new holder was assigned p, so its position starts above o. Commits left in doubt (a
    killed member's unanswered commit) and commits answered after s do not narrow the window; zombie commits
    are refused by the coordinator and so are never acknowledged. Re-reading within one ownership is reported
    by `check_monotonic` instead.
    """
    acked: dict[int, list[tuple[float, int]]] = defaultdict(list)
    for m in members:
        for c in m.commits:
            if c.ok:
                for p, o in c.offsets:
                    acked[p].append((c.t, o))
    best: dict[int, tuple[list[float], list[int]]] = {}
    for p, rows in acked.items():
        rows.sort()
        times = [t for t, _ in rows]
        running = list(itertools.accumulate((o for _, o in rows), max))
        best[p] = (times, running)

    def committed_before(p: int, t: float) -> int:
        times, running = best.get(p, ([], []))
        i = bisect_left(times, t)
        return running[i - 1] if i > 0 else 0

    seen: dict[tuple[int, int], Interval] = {}
    for x in placed:
        key = (x.interval.partition, x.offset)
        first = seen.setdefault(key, x.interval)
        if first == x.interval:
            continue
        floor = committed_before(x.interval.partition, x.interval.start)
        report.info["redeliveries inside the window"] += x.offset >= floor
        if x.offset < floor:
            report.add("duplicate", f"group {group}: p{x.interval.partition}@{x.offset} processed by {first.member} "
                                    f"and again by {x.interval.member} at {x.t:.3f}, though offset {floor} was "
                                    f"committed before {x.interval.member} took the partition at {x.interval.start:.3f}")  # fmt: skip


def check_missed(group: str, members: Iterable[MemberHistory], final_log: Sequence[tuple[int, int, str]], report: Report) -> None:
    done = {(r.partition, r.offset) for m in members for r in m.processed}
    missing = [(p, o) for p, o, _ in final_log if (p, o) not in done]
    for p, o in sorted(missing):
        report.add("missed", f"group {group} never processed p{p}@{o}")


def faults_by_kind(history: History) -> Counter[str]:
    return Counter(str(f["kind"]) for f in history.faults)
