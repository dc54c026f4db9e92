"""Rebalance benchmark: how long a classic consumer group takes to settle, and how long consumption of
partitions that do not move stops while it does; eager (range) against cooperative-sticky, on our broker
and on Tansu, with confluent-kafka consumers (threads of this process, each with its own librdkafka
instance), in one run.

1. Join to stable, N = 2, 10, 50: N-1 members form a stable group on a topic with 2N partitions; then the
   last member subscribes (t0) and the time until the group is stable again is measured (t1): every
   partition owned by exactly one member (from the members' own rebalance callbacks), the newcomer holding
   its share, and DescribeGroups saying Stable with N members. t1 is the last assignment change. Starting
   from a stable group keeps Kafka's ``group.initial.rebalance.delay.ms`` (an empty group only) out of it.
2. Pause of unaffected partitions: 4 members consume 12 partitions fed by a producer at a steady rate; a
   5th joins. For each partition whose owner is the same before and after, the pause is the longest gap
   between two consecutive records consumed from it from the join until a second after the group is stable
   again; the baseline is the longest gap in the 2 s before the join (the fetch cadence). Eager revokes
   everything, so its pause is the stop-the-world part of the rebalance; cooperative-sticky keeps
   unaffected partitions flowing.

The join-to-stable time of the classic protocol includes the members' discovery of the rebalance: members
already in the group learn of it from their next heartbeat (REBALANCE_IN_PROGRESS), so it is about one
heartbeat interval for eager and two for cooperative-sticky (two rounds), plus the broker's own waits.

Members use session.timeout.ms=10000, heartbeat.interval.ms=1000. Our broker runs with
``group.initial.rebalance.delay.ms=0``; Tansu with its defaults (memory storage).

    .venv/bin/python bench/rebalance.py [--brokers tansu,groupstream] [--members 2,10,50] [--repeat 3]
        [--write-results]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # for support.brokers

from confluent_kafka import Consumer, Producer  # noqa: E402

from groupstream.client.admin import Admin, NewTopic  # noqa: E402
from results import RESULTS, confluent_versions, machine, write_section  # noqa: E402
from support.brokers import BrokerKind, BrokerProcess  # noqa: E402

STRATEGIES = ("range", "cooperative-sticky")
SESSION_TIMEOUT_MS = 10_000
PAUSE_MEMBERS = 4
PAUSE_PARTITIONS = 12
PAUSE_RATE = 3000  # records/s over all partitions: one every 4 ms per partition
NOTE = (
    "Members already in a group learn of a rebalance from their next heartbeat, so join to stable is abou"
    "t one heartbeat interval (eager) or two (cooperative-sticky: two rounds) plus the broker's own waits; Tansu holds each join for about half the session timeout."
)
BASELINE_S = 2.0  # the quiet window before the join whose longest gap is the baseline

# --- one member ----------------------------------------------------------------------------------------

@dataclass
class BenchMember:
    """A confluent-kafka consumer polled by its own thread; records what it owns and when it read what."""

    name: str
    bootstrap: str
    group: str
    topic: str
    strategy: str
    owned: set[int] = field(default_factory=set)
    changes: list[tuple[float, frozenset[int]]] = field(default_factory=list)
    reads: dict[int, list[float]] = field(default_factory=dict)
    record_reads: bool = False
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> BenchMember:
        self.consumer = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": self.group, "client.id": self.name,
            "partition.assignment.strategy": self.strategy, "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": 1000, "enable.auto.commit": False, "auto.offset.reset": "latest",
            "fetch.wait.max.ms": 100,
        })  # fmt: skip
        cooperative = self.strategy == "cooperative-sticky"

        def change(parts: set[int]) -> None:
            with self._lock:
                self.owned = parts
                self.changes.append((time.monotonic(), frozenset(parts)))

        def on_assign(c: Any, tps: list[Any]) -> None:
            got = {tp.partition for tp in tps}
            change(self.owned | got if cooperative else got)

        def on_revoke(c: Any, tps: list[Any]) -> None:
            change(self.owned - {tp.partition for tp in tps})

        self.consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            msgs = self.consumer.consume(num_messages=500, timeout=0.05)
            if not self.record_reads:
                continue
            now = time.monotonic()
            with self._lock:
                for m in msgs:
                    if m.error() is None:
                        self.reads.setdefault(m.partition(), []).append(now)

    def snapshot(self) -> tuple[set[int], float]:
        with self._lock:
            return set(self.owned), (self.changes[-1][0] if self.changes else 0.0)

    def owner_at(self, t: float) -> frozenset[int]:
        with self._lock:
            before = [parts for ts, parts in self.changes if ts <= t]
        return before[-1] if before else frozenset()

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(30)
        self.consumer.close()

# --- measurements ----------------------------------------------------------------------------------------

def wait_for(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} within {timeout:g}s")
        time.sleep(0.02)  # poll interval of the wait above

def stable(members: list[BenchMember], partitions: int, admin: Admin, group: str) -> float | None:
    """The time of the last assignment change when the group is stable now, else None."""
    snaps = [m.snapshot() for m in members]
    owned = [s[0] for s in snaps]
    if sum(map(len, owned)) != partitions or set().union(*owned) != set(range(partitions)):
        return None
    if not owned[-1] and partitions >= len(members):
        return None
    desc = admin.describe_groups([group])[group]
    if desc.state != "Stable" or len(desc.members) != len(members):
        return None
    return max(s[1] for s in snaps)

def new_topic(bootstrap: str, partitions: int) -> str:
    topic = f"rebalance-{uuid.uuid4().hex[:8]}"
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions)])
        wait_for(lambda: topic in admin.list_topics(), 30, f"topic {topic}")
    return topic

def join_to_stable(bootstrap: str, strategy: str, n: int) -> float:
    partitions = 2 * n
    topic = new_topic(bootstrap, partitions)
    group = f"bench-{uuid.uuid4().hex[:8]}"
    members: list[BenchMember] = []
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        try:
            for i in range(n - 1):
                members.append(BenchMember(f"m{i}", bootstrap, group, topic, strategy).start())
            if members:
                wait_for(lambda: stable(members, partitions, admin, group) is not None, 180, "stable group of N-1")
            t0 = time.monotonic()
            members.append(BenchMember(f"m{n - 1}", bootstrap, group, topic, strategy).start())
            found: list[float] = []

            def settled() -> bool:
                t = stable(members, partitions, admin, group)
                if t is not None and t > t0:
                    found.append(t)
                return bool(found)

            wait_for(settled, 180, "stable group after the last join")
            return found[0] - t0
        finally:
            for m in members:
                m.stop()

@dataclass(frozen=True)
class Pause:
    rebalance_s: float
    unaffected: int
    median_s: float
    max_s: float
    baseline_s: float

def pause_of_unaffected(bootstrap: str, strategy: str) -> Pause:
    topic = new_topic(bootstrap, PAUSE_PARTITIONS)
    group = f"bench-{uuid.uuid4().hex[:8]}"
    stop = threading.Event()

    def feed() -> None:
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, "acks": "1"})
        i = 0
        step = 0.01
        per_step = max(1, int(PAUSE_RATE * step))
        nxt = time.monotonic()
        while not stop.is_set():
            for _ in range(per_step):
                p.produce(topic, value=b"x" * 64, partition=i % PAUSE_PARTITIONS)
                i += 1
            p.poll(0)
            nxt += step
            time.sleep(max(0.0, nxt - time.monotonic()))  # paces the producer at PAUSE_RATE
        p.flush(10)

    producer = threading.Thread(target=feed, daemon=True)
    producer.start()
    members = [BenchMember(f"m{i}", bootstrap, group, topic, strategy, record_reads=True)
               for i in range(PAUSE_MEMBERS)]  # fmt: skip
    try:
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            for m in members:
                m.start()
            wait_for(lambda: stable(members, PAUSE_PARTITIONS, admin, group) is not None, 120, "stable group")
            time.sleep(3.0)  # steady consumption before the join: the baseline window
            t0 = time.monotonic()
            members.append(BenchMember("joiner", bootstrap, group, topic, strategy, record_reads=True).start())
            found: list[float] = []

            def settled() -> bool:
                t = stable(members, PAUSE_PARTITIONS, admin, group)
                if t is not None and t > t0:
                    found.append(t)
                return bool(found)

            wait_for(settled, 120, "stable group after the join")
            t1 = found[0]
            time.sleep(1.0)  # consumption after the rebalance, to close the gaps it opened
    finally:
        stop.set()
        producer.join(30)
        for m in members:
            m.stop()
    gaps, baseline = [], []
    for m in members[:-1]:
        kept = m.owner_at(t0 - 0.01) & m.owner_at(t1 + 0.01)
        for p in kept:
            reads = m.reads.get(p, [])
            gaps.append(_max_gap(reads, t0 - 0.05, t1 + 1.0))
            baseline.append(_max_gap(reads, t0 - BASELINE_S, t0))
    if not gaps:
        return Pause(t1 - t0, 0, float("nan"), float("nan"), float("nan"))
    return Pause(t1 - t0, len(gaps), statistics.median(gaps), max(gaps), statistics.median(baseline))

def _max_gap(times: list[float], lo: float, hi: float) -> float:
    """The longest time between consecutive reads within [lo, hi], counting the window's edges."""
    inside = [t for t in times if lo <= t <= hi]
    points = [lo, *inside, hi]
    return max(b - a for a, b in itertools.pairwise(points))

# --- the run ---------------------------------------------------------------------------------------------

def run_broker(kind: BrokerKind, sizes: list[int], repeat: int, tmp: Path) -> dict[str, Any]:
    settings = {"group.initial.rebalance.delay.ms": "0"} if kind is BrokerKind.GROUPSTREAM else None
    out: dict[str, Any] = {"join": {}, "pause": {}}
    with BrokerProcess(kind, tmp / str(kind), settings=settings) as broker:
        for strategy in STRATEGIES:
            for n in sizes:
                runs = [join_to_stable(broker.bootstrap, strategy, n) for _ in range(repeat)]
                out["join"][(strategy, n)] = runs
                print(f"{kind:12} {strategy:18} N={n:<3} join to stable: "
                      + ", ".join(f"{r * 1000:.0f} ms" for r in runs), flush=True)  # fmt: skip
            pauses = [pause_of_unaffected(broker.bootstrap, strategy) for _ in range(repeat)]
            out["pause"][strategy] = pauses
            for p in pauses:
                print(f"{kind:12} {strategy:18} pause: rebalance {p.rebalance_s * 1000:.0f} ms, "
                      f"{p.unaffected} unaffected partitions, median pause {p.median_s * 1000:.0f} ms, "
                      f"max {p.max_s * 1000:.0f} ms (baseline {p.baseline_s * 1000:.0f} ms)", flush=True)  # fmt: skip
    return out

def table(results: dict[BrokerKind, dict[str, Any]], sizes: list[int]) -> str:
    kinds = list(results)
    lines = ["Join to stable (median of runs; the last of N members joins a stable group of N-1):", "",
             "| strategy | N | " + " | ".join(str(k) for k in kinds) + (" | ours/Tansu |" if len(kinds) == 2 else " |"),
             "|---|---:|" + "---:|" * len(kinds) + ("---:|" if len(kinds) == 2 else "")]  # fmt: skip
    for strategy in STRATEGIES:
        for n in sizes:
            meds = [statistics.median(results[k]["join"][(strategy, n)]) for k in kinds]
            row = f"| {strategy} | {n} | " + " | ".join(f"{m * 1000:,.0f} ms" for m in meds)
            if len(kinds) == 2:
                ours = meds[kinds.index(BrokerKind.GROUPSTREAM)] if BrokerKind.GROUPSTREAM in kinds else None
                tansu = meds[kinds.index(BrokerKind.TANSU)] if BrokerKind.TANSU in kinds else None
                row += f" | {ours / tansu:.2f}x" if ours and tansu else " | "
            lines.append(row + " |")
    lines += ["", f"Pause of unaffected partitions when a 5th member joins 4 ({PAUSE_PARTITIONS} partitions, "
              f"{PAUSE_RATE} records/s; medians over runs of each run's median and max over the partitions "
              f"that kept their owner; 'gap before' is the longest gap in the {BASELINE_S:g} s before the join):",
              "",
              "| broker | strategy | join to stable | unaffected partitions | median pause | max pause | gap before |",
              "|---|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for k in kinds:
        for strategy in STRATEGIES:
            ps: list[Pause] = results[k]["pause"][strategy]

            def med(f: Callable[[Pause], float], ps: list[Pause] = ps) -> float:
                return statistics.median(f(p) for p in ps)

            lines.append(
                f"| {k} | {strategy} | {med(lambda p: p.rebalance_s) * 1000:,.0f} ms | "
                f"{med(lambda p: p.unaffected):.0f} | {med(lambda p: p.median_s) * 1000:,.0f} ms | "
                f"{med(lambda p: p.max_s) * 1000:,.0f} ms | {med(lambda p: p.baseline_s) * 1000:,.0f} ms |"
            )
    return "\n".join(lines)

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brokers", default="tansu,groupstream", help="comma-separated: tansu, groupstream")
    ap.add_argument("--members", default="2,10,50", help="group sizes N for join-to-stable")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement; medians are reported")
    ap.add_argument("--write-results", action="store_true", help=f"update the section in {RESULTS}")
    args = ap.parse_args()
    kinds = [BrokerKind(k.strip()) for k in args.brokers.split(",") if k.strip()]
    sizes = [int(x) for x in args.members.split(",") if x.strip()]

    env = environment()
    print(f"rebalance: {env}")
    results: dict[BrokerKind, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-rebalance-") as tmp:
        for kind in kinds:
            results[kind] = run_broker(kind, sizes, args.repeat, Path(tmp))
    text = table(results, sizes)
    print()
    print(text)
    if args.write_results:
        write_results(
            "## Rebalances (`bench/rebalance.py`)\n\n"
            f"{env}. confluent-kafka consumers as threads of one process (each its own librdkafka instance), "
            f"session.timeout.ms={SESSION_TIMEOUT_MS}, heartbeat.interval.ms=1000. Our broker: "
            "group.initial.rebalance.delay.ms=0 (a stable group never waits for it anyway). Tansu 0.6.0: "
            "defaults, memory storage. " + NOTE + "\n\n"
            f"Command: `python bench/rebalance.py --brokers {args.brokers} --members {args.members} "
            f"--repeat {args.repeat} --write-results`\n\n{text}"
        )
        print(f"\nwrote {RESULTS}")
    return 0

def environment() -> str:
    return f"{machine()}; {confluent_versions()}"

def write_results(text: str) -> None:
    write_section("rebalance", text)

if __name__ == "__main__":
    raise SystemExit(main())
