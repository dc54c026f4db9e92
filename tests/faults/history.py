"""What a fault run leaves on disk, and the history the checker judges.

Every process of a run writes its own file, flushed to the OS after each line group (a ``kill -9`` then loses
nothing it wrote: the page cache survives a killed process). Times are ``time.monotonic()``: CLOCK_MONOTONIC
is system-wide on Linux, so the times of different processes compare.

Layout of a run directory:

- ``run.json``: the run's parameters (seed, topic, partitions, groups, schedule) and its outcome (which
  groups caught up with the log end);
- ``nemesis.jsonl``: one line per fault once healed (``kind``, ``target``, ``start``, ``end``, ``params``) and
  one per process event of the supervisor (``member-start``, ``member-kill``, ``member-exit`` with its exit
  code, ``producer-exit``, ``broker-exit``);
- ``producers/<name>.log``: tab-separated lines ``S first last`` (sequence numbers about to be produced),
  ``A partition offset value t`` (acknowledged), ``F value error`` (delivery failed), ``U value`` (still
  undelivered when the producer stopped), ``X error`` (fatal: the producer gave up);
- ``members/<name>.jsonl``: ``start``, ``owned`` (the whole assignment after each rebalance callback, with
  ``why``), ``recs`` (``[partition, offset, value]`` of records processed, logged before they are
  committed), ``commit`` (``sent``, ``t`` when answered, ``ok``, ``offsets`` as ``[partition, next offset]``),
  ``error``, ``closed``;
- ``final_log.tsv``: ``partition offset value`` of every record of the topic, read from offset 0 after the
  final heal and restart.

A record's value is ``<producer>/<sequence>``: unique across the run, so a value names one produce call.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Faults during which a member may be cut off from the coordinator long enough to be removed from the group
# without knowing it: a frozen member, a stall of its connections, a frozen broker (whose session timers all
# fire when it wakes). Each is an impairment of the members it targets (see checker.check_double_owners).
IMPAIRING_FAULTS = frozenset({"member-pause", "stall", "broker-pause"})


def record_value(producer: str, seq: int) -> str:
    return f"{producer}/{seq:09d}"


def parse_value(value: str) -> tuple[str, int] | None:
    """(producer, sequence) of a value this suite wrote, None for anything else."""
    producer, sep, seq = value.rpartition("/")
    if not sep or not producer or not seq.isdigit():
        return None
    return producer, int(seq)


@dataclass(frozen=True, slots=True)
class Ack:
    producer: str
    partition: int
    offset: int
    value: str
    t: float


@dataclass(frozen=True, slots=True)
class Processed:
    t: float
    partition: int
    offset: int
    value: str


@dataclass(frozen=True, slots=True)
class Commit:
    sent: float
    t: float  # when the answer arrived
    ok: bool
    offsets: tuple[tuple[int, int], ...]  # (partition, next offset to read)
    err: str | None = None


@dataclass(frozen=True, slots=True)
class Assignment:
    t: float
    parts: frozenset[int]
    why: str


@dataclass
class MemberHistory:
    """One member process (one incarnation of a member slot): its own account of what it owned and did.

    ``ended`` bounds its ownership: the nemesis' kill time for a killed process, its ``closed`` line for a
    closed one, its last line for a process that exited on its own (it processed nothing after that line);
    None while it still runs."""

    name: str
    group: str
    client: str = ""
    started: float = 0.0
    assignments: list[Assignment] = field(default_factory=list)
    processed: list[Processed] = field(default_factory=list)
    commits: list[Commit] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    ended: float | None = None
    end_reason: str = "running"


@dataclass(frozen=True, slots=True)
class Impairment:
    """A window in which the nemesis cut members off from the coordinator. ``target``: "" for every member, a
    slot (a name prefix ending in "-") for each of its incarnations, else one member's exact name."""

    kind: str
    start: float
    end: float
    target: str = ""

    def applies_to(self, member: str) -> bool:
        if not self.target or member == self.target:
            return True
        return self.target.endswith("-") and member.startswith(self.target)


@dataclass(frozen=True, slots=True)
class Failure:
    """A process that gave up or died on its own (a producer's fatal error, a member or broker exit)."""

    kind: str
    who: str
    t: float
    detail: str


@dataclass
class History:
    partitions: int
    acks: list[Ack] = field(default_factory=list)
    sent: dict[str, int] = field(default_factory=dict)  # producer -> highest sequence it tried to produce
    final_log: list[tuple[int, int, str]] = field(default_factory=list)  # (partition, offset, value)
    members: list[MemberHistory] = field(default_factory=list)
    impairments: list[Impairment] = field(default_factory=list)
    caught_up: dict[str, bool] = field(default_factory=dict)  # group -> committed offsets reached the log end
    failures: list[Failure] = field(default_factory=list)
    faults: list[dict[str, Any]] = field(default_factory=list)  # the nemesis' fault lines, for the summary

    @property
    def groups(self) -> list[str]:
        return sorted({m.group for m in self.members} | set(self.caught_up))


# -- writing --------------------------------------------------------------------------------------------------


class JsonLines:
    """Appends JSON lines to a file, flushed to the OS after each ``write`` (kill -9 loses nothing written)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def write(self, ev: str, **fields: Any) -> None:
        self._f.write(json.dumps({"ev": ev, **fields}, separators=(",", ":")) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()


# -- reading --------------------------------------------------------------------------------------------------


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The complete lines of a JSON-lines file (a torn last line of a killed writer is skipped)."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.endswith("\n"):
                break
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def load_producer(path: Path, history: History) -> None:
    name = path.stem
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.endswith("\n"):
                break
            parts = line.rstrip("\n").split("\t")
            tag = parts[0]
            if tag == "S":
                history.sent[name] = max(history.sent.get(name, -1), int(parts[2]))
            elif tag == "A":
                history.acks.append(Ack(name, int(parts[1]), int(parts[2]), parts[3], float(parts[4])))
            elif tag == "X":
                history.failures.append(Failure("producer-fatal", name, math.nan, parts[1] if len(parts) > 1 else ""))


def load_member(path: Path, group: str) -> MemberHistory:
    m = MemberHistory(path.stem, group)
    last_t = 0.0
    for e in read_jsonl(path):
        t = float(e.get("t", last_t))
        last_t = max(last_t, t)
        kind = e["ev"]
        if kind == "start":
            m.started, m.client = t, str(e.get("client", ""))
        elif kind == "owned":
            m.assignments.append(Assignment(t, frozenset(int(p) for p in e["parts"]), str(e.get("why", ""))))
        elif kind == "recs":
            m.processed.extend(Processed(t, int(p), int(o), str(v)) for p, o, v in e["recs"])
        elif kind == "commit":
            offsets = tuple((int(p), int(o)) for p, o in e["offsets"])
            m.commits.append(Commit(float(e["sent"]), t, bool(e["ok"]), offsets, e.get("err")))
        elif kind == "error":
            m.errors.append(str(e.get("err", "")))
        elif kind == "closed":
            m.ended, m.end_reason = t, "closed"
    if m.ended is None:
        m.ended, m.end_reason = last_t, "exited"  # corrected below by the nemesis' kill time, if it was killed
    return m


def load_run(run_dir: Path) -> History:
    """The history of a finished run, from the files its processes wrote."""
    meta = json.loads((run_dir / "run.json").read_text())
    history = History(int(meta["partitions"]), caught_up={g: bool(v) for g, v in meta.get("caught_up", {}).items()})
    for path in sorted((run_dir / "producers").glob("*.log")):
        load_producer(path, history)
    group_of: dict[str, str] = meta["member_groups"]
    members = {}
    for path in sorted((run_dir / "members").glob("*.jsonl")):
        members[path.stem] = load_member(path, group_of[path.stem])
    for e in read_jsonl(run_dir / "nemesis.jsonl"):
        kind = e["ev"]
        if kind == "fault":
            history.faults.append(e)
            if e["kind"] in IMPAIRING_FAULTS:
                history.impairments.append(Impairment(e["kind"], float(e["start"]), float(e["end"]), e.get("target") or ""))
        elif kind == "member-kill" and e["member"] in members:
            m = members[e["member"]]
            m.ended, m.end_reason = float(e["t"]), "killed"
        elif kind in ("member-exit", "producer-exit", "broker-exit"):
            history.failures.append(Failure(kind, str(e.get("who", e.get("member", ""))), float(e["t"]),
                                            f"exit code {e.get('code')}"))  # fmt: skip
    history.members = list(members.values())
    log_path = run_dir / "final_log.tsv"
    if log_path.exists():
        with open(log_path, encoding="utf-8") as f:
            for line in f:
                p, o, v = line.rstrip("\n").split("\t")
                history.final_log.append((int(p), int(o), v))
    return history


def group_members(history: History) -> dict[str, list[MemberHistory]]:
    out: dict[str, list[MemberHistory]] = defaultdict(list)
    for m in history.members:
        out[m.group].append(m)
    return dict(out)
