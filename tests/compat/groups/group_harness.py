"""Group members as subprocesses, and the checks that turn their reports into verdicts about a group.

A `Member` runs ``group_member.py`` with a real client and collects its JSON events; the test kills it
(``kill9``), freezes it (``sigstop``/``sigcont``) or asks it to leave (``close``). From the events of all
members the checks establish, without trusting any one client's view:

- ownership: each member's assignment over time becomes intervals per partition (from its own rebalance
  callbacks; a killed member's end at the kill); intervals of one partition never overlap across members;
- commits: a successful commit of a partition was sent by the partition's latest owner at that moment;
- resumption: whenever a member starts owning a partition, the first record it processes there is the last
  successfully committed offset (0 when none), and within its ownership it processes offsets with no gap;
- delivery: the union of processed records is exactly what was produced.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, Message, Producer

from groupstream.client.admin import Admin, NewTopic
from support.waiting import wait_until as wait_for  # the group tests' name for it

MEMBER_SCRIPT = Path(__file__).resolve().parent / "group_member.py"
TopicPart = tuple[str, int]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions)])

        def visible() -> bool:
            t = admin.list_topics().get(topic)
            return t is not None and t.partition_count == partitions

        wait_for(visible, 30, f"topic {topic} with {partitions} partitions in metadata")


def produce(bootstrap: str, topic: str, n: int, partitions: int, tag: str = "r") -> set[tuple[str, int, int]]:
    """``n`` records round-robin over the partitions; returns the acknowledged (topic, partition, offset)."""
    acked: set[tuple[str, int, int]] = set()
    errors: list[str] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            p, o = msg.partition(), msg.offset()
            assert p is not None and o is not None
            acked.add((topic, p, o))

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    for i in range(n):
        producer.produce(topic, value=f"{tag}-{i}".encode(), partition=i % partitions, on_delivery=on_delivery)
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0, "records still in flight after 30 s"
    assert not errors, errors[:3]
    assert len(acked) == n
    return acked


@dataclass
class Member:
    """One member subprocess and everything it reported."""

    name: str
    config: dict[str, Any]
    log_dir: Path
    events: list[dict[str, Any]] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None
    killed_at: float | None = None
    stopped: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> Member:
        cfg = {"name": self.name, **self.config}
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._stderr = open(self.log_dir / f"{self.name}.stderr", "ab")  # noqa: SIM115 - closed in wait()
        self.proc = subprocess.Popen(
            [sys.executable, str(MEMBER_SCRIPT), json.dumps(cfg)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )
        threading.Thread(target=self._read, daemon=True).start()
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            with self._lock:
                self.events.append(ev)

    # -- what it reported ------------------------------------------------------------------------------

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.events)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.snapshot() if e["ev"] == kind]

    @property
    def owned(self) -> set[TopicPart]:
        owned = self.of("owned")
        return {(t, p) for t, p in owned[-1]["parts"]} if owned else set()

    @property
    def processed(self) -> list[tuple[str, int, int]]:
        return [(t, p, o) for e in self.of("recs") for t, p, o in e["recs"]]

    @property
    def alive(self) -> bool:
        """Running, not killed and not frozen (a SIGSTOPped member is not a live member)."""
        return self.proc is not None and self.proc.poll() is None and self.killed_at is None and not self.stopped

    def revocations_after(self, t: float) -> int:
        """Owned-set changes that took partitions away, after monotonic time ``t``."""
        out = 0
        prev: set[TopicPart] | None = None
        for e in self.of("owned"):
            cur = {(x, p) for x, p in e["parts"]}
            if prev is not None and e["t"] > t and prev - cur:
                out += 1
            prev = cur
        return out

    # -- driving it ------------------------------------------------------------------------------------

    def send(self, command: str) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(command.encode() + b"\n")
        self.proc.stdin.flush()

    def close(self, timeout: float = 30) -> None:
        """Leave gracefully (consumer.close()) and wait for the process to exit."""
        self.send("close")
        self.wait(timeout)

    def wait(self, timeout: float = 30) -> int:
        assert self.proc is not None
        code = self.proc.wait(timeout=timeout)
        self._stderr.close()
        return code

    def kill9(self) -> None:
        assert self.proc is not None
        self.killed_at = time.monotonic()
        self.proc.kill()
        self.proc.wait(timeout=10)
        self._stderr.close()

    def sigstop(self) -> float:
        assert self.proc is not None
        t = time.monotonic()
        os.kill(self.proc.pid, signal.SIGSTOP)
        self.stopped = True
        return t

    def sigcont(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)
        self.stopped = False

    def ensure_gone(self) -> None:
        """Teardown: kill the process if a failed test left it running (only this member's own child)."""
        if self.proc is not None and self.proc.poll() is None:
            if self.stopped:
                self.sigcont()
            self.proc.kill()
            self.proc.wait(timeout=10)
        if hasattr(self, "_stderr") and not self._stderr.closed:
            self._stderr.close()

    def stderr_tail(self, n: int = 30) -> str:
        try:
            lines = (self.log_dir / f"{self.name}.stderr").read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return ""
        return "\n".join(lines[-n:])


class Members:
    """A test's members: started with shared settings, all stopped at teardown."""

    def __init__(self, log_dir: Path, **common: Any) -> None:
        self.log_dir = log_dir
        self.common = common
        self.all: list[Member] = []

    def start(self, name: str, **overrides: Any) -> Member:
        m = Member(name, {**self.common, **overrides}, self.log_dir).start()
        self.all.append(m)
        return m

    def live(self) -> list[Member]:
        return [m for m in self.all if m.alive]

    def teardown(self) -> None:
        for m in self.all:
            m.ensure_gone()

    def describe(self) -> str:
        """What each member owns and its last events, for assertion messages."""
        lines = []
        for m in self.all:
            evs = m.snapshot()
            tail = [e for e in evs if e["ev"] not in ("recs",)][-4:]
            lines.append(f"{m.name} alive={m.alive} owned={sorted(m.owned)} processed={len(m.processed)} last={tail}")
            if not m.alive:
                continue
            err = m.stderr_tail(5)
            if err:
                lines.append("  stderr: " + err.replace("\n", "\n  stderr: "))
        return "\n".join(lines)

    def wait_split(self, members: Sequence[Member], partitions: Iterable[TopicPart], timeout: float = 30) -> None:
        """Wait until ``members`` together own every partition exactly once, each of them at least one."""
        want = set(partitions)

        def split() -> bool:
            sets = [m.owned for m in members]
            union: set[TopicPart] = set().union(*sets)
            return union == want and sum(map(len, sets)) == len(want) and all(sets[: len(want)])

        try:
            wait_for(split, timeout, f"{[m.name for m in members]} to split {len(want)} partitions")
        except AssertionError as e:
            raise AssertionError(f"{e}\n{self.describe()}") from None
        others = [m for m in self.live() if m not in members]
        for m in others:
            assert not m.owned, f"{m.name} still owns {sorted(m.owned)} after the split\n{self.describe()}"


# --- the checks -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Interval:
    member: str
    tp: TopicPart
    start: float
    end: float


def ownership_intervals(members: Sequence[Member]) -> dict[TopicPart, list[Interval]]:
    out: dict[TopicPart, list[Interval]] = defaultdict(list)
    for m in members:
        start: dict[TopicPart, float] = {}
        evs = m.snapshot()
        for e in evs:
            if e["ev"] != "owned":
                continue
            cur = {(t, p) for t, p in e["parts"]}
            for tp in list(start):
                if tp not in cur:
                    out[tp].append(Interval(m.name, tp, start.pop(tp), e["t"]))
            for tp in cur:
                start.setdefault(tp, e["t"])
        closed = [e["t"] for e in evs if e["ev"] == "closed"]
        end = m.killed_at if m.killed_at is not None else (closed[-1] if closed else math.inf)
        for tp, s in start.items():
            out[tp].append(Interval(m.name, tp, s, end))
    for ivs in out.values():
        ivs.sort(key=lambda iv: iv.start)
    return dict(out)


def check_exclusive_ownership(members: Sequence[Member]) -> dict[TopicPart, list[Interval]]:
    """No two members own one partition at the same moment (by their own callbacks and kill times)."""
    intervals = ownership_intervals(members)
    for tp, ivs in intervals.items():
        for a, b in itertools.pairwise(ivs):
            assert a.end <= b.start, (
                f"{tp}: {b.member} was assigned it at {b.start:.3f} while {a.member} owned it until {a.end:.3f}"
            )
    return intervals


def successful_commits(members: Sequence[Member]) -> dict[TopicPart, list[tuple[float, int, str]]]:
    """(sent time, offset, member) of every acknowledged commit, per partition, in sending order."""
    out: dict[TopicPart, list[tuple[float, int, str]]] = defaultdict(list)
    for m in members:
        for e in m.of("commit"):
            if e["ok"]:
                for t, p, o in e["offsets"]:
                    out[(t, p)].append((e["sent"], o, m.name))
    for rows in out.values():
        rows.sort()
    return dict(out)


def in_doubt_commits(members: Sequence[Member]) -> dict[TopicPart, list[tuple[float, int]]]:
    """Commits a killed member started and never saw answered: the broker may have stored them or not."""
    out: dict[TopicPart, list[tuple[float, int]]] = defaultdict(list)
    for m in members:
        if m.killed_at is None:
            continue
        answered = {e["sent"] for e in m.of("commit")}
        for e in m.of("committing"):
            if e["t"] not in answered:
                for t, p, o in e["offsets"]:
                    out[(t, p)].append((e["t"], o))
    return dict(out)


def check_commits_by_owner(members: Sequence[Member], intervals: dict[TopicPart, list[Interval]]) -> None:
    """An acknowledged commit was sent by the member that was the partition's latest owner at that time."""
    for tp, rows in successful_commits(members).items():
        ivs = intervals.get(tp, [])
        for sent, offset, name in rows:
            before = [iv for iv in ivs if iv.start <= sent]
            assert before and before[-1].member == name, (
                f"{tp}: {name} committed {offset} at {sent:.3f}, but the latest owner then was "
                f"{before[-1].member if before else 'nobody'}"
            )


def check_resumption(members: Sequence[Member], intervals: dict[TopicPart, list[Interval]]) -> None:
    """Each ownership starts at the last acknowledged commit and processes offsets with no gap."""
    commits = successful_commits(members)
    doubtful = in_doubt_commits(members)
    by_name = {m.name: m for m in members}
    recs_by: dict[tuple[str, TopicPart], list[tuple[float, int]]] = defaultdict(list)
    for m in members:
        for e in m.of("recs"):
            for t, p, o in e["recs"]:
                recs_by[(m.name, (t, p))].append((e["t"], o))
    for tp, ivs in intervals.items():
        for iv in ivs:
            assert iv.member in by_name
            mine = [o for t, o in recs_by.get((iv.member, tp), []) if iv.start <= t <= iv.end]
            if not mine:
                continue
            committed = [(sent, o) for sent, o, _ in commits.get(tp, []) if sent < iv.start]
            last_sent, expected_first = committed[-1] if committed else (-math.inf, 0)
            allowed = {expected_first} | {
                o for sent, o in doubtful.get(tp, []) if last_sent < sent < iv.start
            }
            assert mine[0] in allowed, (
                f"{tp}: {iv.member} started at offset {mine[0]} when it took the partition over at "
                f"{iv.start:.3f}, but the last acknowledged commit before then was {expected_first}"
                + (f" (or one in doubt: {sorted(allowed - {expected_first})})" if len(allowed) > 1 else "")
            )
            gaps = [(a, b) for a, b in itertools.pairwise(mine) if b != a + 1]
            assert not gaps, f"{tp}: {iv.member} skipped or repeated offsets within one ownership: {gaps[:3]}"


def check_delivery(members: Sequence[Member], produced: set[tuple[str, int, int]]) -> None:
    got = {r for m in members for r in m.processed}
    missing = produced - got
    extra = got - produced
    assert not missing and not extra, (
        f"{len(missing)} produced records never processed (e.g. {sorted(missing)[:5]}), "
        f"{len(extra)} processed that were not produced (e.g. {sorted(extra)[:5]})"
    )


def check_group(members: Sequence[Member], produced: set[tuple[str, int, int]]) -> None:
    intervals = check_exclusive_ownership(members)
    check_commits_by_owner(members, intervals)
    check_resumption(members, intervals)
    check_delivery(members, produced)


def end_offsets(produced: Iterable[tuple[str, int, int]]) -> dict[TopicPart, int]:
    out: dict[TopicPart, int] = {}
    for t, p, o in produced:
        out[(t, p)] = max(out.get((t, p), 0), o + 1)
    return out
