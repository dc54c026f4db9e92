"""Rebalance benchmark: how long a consumer group takes to settle, and how long consumption of partitions that
do not move stops while it does; classic eager (range) and cooperative-sticky, and with ``--protocols
classic,consumer`` the KIP-848 consumer protocol (server assignors uniform and range, named
``consumer:<assignor>``), on our broker, Tansu (classic only) and a single Apache Kafka node, with
confluent-kafka consumers (threads of this process, each with its own librdkafka instance), in one run.

1. Join to stable, N = 2, 10, 50: N-1 members form a stable group on a topic with 2N partitions; then the
   last member subscribes (t0) and the time until the group is stable again is measured (t1): every
   partition owned by exactly one member (from the members' own rebalance callbacks), the newcomer holding
   its share, and DescribeGroups (ConsumerGroupDescribe for the consumer protocol) saying Stable with N
   members. t1 is the last assignment change. Starting
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

Classic members use session.timeout.ms=10000, heartbeat.interval.ms=1000. Our broker and Apache Kafka run with
the same group settings (``SAME_SETTINGS``: no initial rebalance delay; consumer-protocol members heartbeat
every second with 10 s sessions); Tansu with its defaults (memory storage); Kafka as its start scripts run it.

    .venv/bin/python bench/rebalance.py [--brokers tansu,groupstream,apache] [--members 2,10,50] [--repeat 3]
        [--protocols classic,consumer] [--pause-only] [--write-results]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer

from groupstream.client.admin import Admin, NewTopic
from kit import APACHE, RESULTS, Broker, broker_names, command_line, environment, wait_for, write_section
from support.brokers import BrokerKind
from support.kafka_jars import kafka_version

# Classic: the client-side assignors; consumer (KIP-848): the server-side assignors, named "consumer:<assignor>".
STRATEGIES_BY_PROTOCOL = {"classic": ("range", "cooperative-sticky"), "consumer": ("consumer:uniform", "consumer:range")}
# What both our broker and Apache Kafka are given (Tansu: its defaults): no initial rebalance delay, and
# consumer-protocol members heartbeating every second with 10 s sessions, as the classic members do here (Kafka
# needs its minimums lowered to allow that; ours has no such minimums).
SAME_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.heartbeat.interval.ms": "1000",
    "group.consumer.session.timeout.ms": "10000",
}
KAFKA_MINIMUMS = {"group.consumer.min.heartbeat.interval.ms": "1000", "group.consumer.min.session.timeout.ms": "10000"}
SESSION_TIMEOUT_MS = 10_000
PAUSE_MEMBERS = 4
PAUSE_PARTITIONS = 12
PAUSE_RATE = 3000  # records/s over all partitions: one every 4 ms per partition
NOTE = (
    "Members already in a group learn of a rebalance from their next heartbeat, so join to stable is abou"
    "t one heartbeat interval (eager) or two (cooperative-sticky: two rounds) plus the broker's own waits."
)
TANSU_NOTE = " Tansu holds each join for about half the session timeout."
BASELINE_S = 2.0  # the quiet window before the join whose longest gap is the baseline
POLL_S = 0.005  # each member's consume() timeout: the resolution of the measured gaps

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
        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap, "group.id": self.group, "client.id": self.name,
                                "enable.auto.commit": False, "auto.offset.reset": "latest", "fetch.wait.max.ms": 100}  # fmt: skip
        if self.strategy.startswith("consumer:"):  # the broker assigns, sessions and heartbeats are its settings
            conf.update({"group.protocol": "consumer", "group.remote.assignor": self.strategy.split(":", 1)[1]})
        else:
            conf.update({"partition.assignment.strategy": self.strategy, "session.timeout.ms": SESSION_TIMEOUT_MS,
                         "heartbeat.interval.ms": 1000})  # fmt: skip
        self.consumer = Consumer(conf)
        cooperative = self.strategy != "range"  # cooperative-sticky and the consumer protocol: incremental

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
            # consume() returns when its batch is full or its timeout is up, and a read is stamped when it
            # returns: the timeout is the resolution of every gap measured (it was 50 ms, which made pauses
            # come out as multiples of 50 ms on every broker and hid differences smaller than that)
            msgs = self.consumer.consume(num_messages=500, timeout=POLL_S)
            if not self.record_reads:
                continue
            now = time.monotonic()
            with self._lock:
                for m in msgs:
                    partition = m.partition()
                    if m.error() is None and partition is not None:
                        self.reads.setdefault(partition, []).append(now)

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

def stable(members: list[BenchMember], partitions: int, admin: Admin, group: str) -> float | None:
    """The time of the last assignment change when the group is stable now, else None."""
    snaps = [m.snapshot() for m in members]
    owned = [s[0] for s in snaps]
    if sum(map(len, owned)) != partitions or set().union(*owned) != set(range(partitions)):
        return None
    if not owned[-1] and partitions >= len(members):
        return None
    if members[0].strategy.startswith("consumer:"):
        described: Any = admin.describe_consumer_groups_or_errors([group])[group]
        if isinstance(described, Exception):  # not there yet
            return None
    else:
        described = admin.describe_groups([group])[group]
    if described.state != "Stable" or len(described.members) != len(members):
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

def run_broker(kind: str, strategies: list[str], sizes: list[int], repeat: int, tmp: Path) -> dict[str, Any]:
    settings = None if kind == BrokerKind.TANSU else SAME_SETTINGS | (KAFKA_MINIMUMS if kind == APACHE else {})
    out: dict[str, Any] = {"join": {}, "pause": {}}
    with Broker(kind, tmp, settings=settings) as broker:
        for strategy in strategies:
            if kind == BrokerKind.TANSU and strategy.startswith("consumer:"):
                continue  # Tansu has no consumer protocol
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


PEER_LABEL = {BrokerKind.TANSU.value: "Tansu", APACHE: "Kafka"}


def table(results: dict[str, dict[str, Any]], strategies: list[str], sizes: list[int]) -> str:
    kinds = list(results)
    peers = [k for k in kinds if k in PEER_LABEL] if BrokerKind.GROUPSTREAM in kinds else []
    lines = ["Join to stable (median of runs; the last of N members joins a stable group of N-1):", "",
             "| strategy | N | " + " | ".join(str(k) for k in kinds) + " |"
             + "".join(f" ours/{PEER_LABEL[p]} |" for p in peers),
             "|---|---:|" + "---:|" * (len(kinds) + len(peers))]  # fmt: skip
    for strategy in strategies:
        for n in sizes:
            meds = {k: statistics.median(results[k]["join"][(strategy, n)]) for k in kinds
                    if (strategy, n) in results[k]["join"]}  # fmt: skip
            row = f"| {strategy} | {n} | " + " | ".join(f"{meds[k] * 1000:,.0f} ms" if k in meds else "n/a" for k in kinds)
            ours = meds.get(BrokerKind.GROUPSTREAM)
            for p in peers:
                row += f" | {ours / meds[p]:.2f}x" if ours and meds.get(p) else " | "
            lines.append(row + " |")
    if not sizes:  # --pause-only
        lines = []
    lines += ["", f"Pause of unaffected partitions when a 5th member joins 4 ({PAUSE_PARTITIONS} partitions, "
              f"{PAUSE_RATE} records/s; medians over runs of each run's median and max over the partitions "
              f"that kept their owner; 'gap before' is the longest gap in the {BASELINE_S:g} s before the join; reads "
              f"stamped to {POLL_S * 1000:g} ms):",
              "",
              "| broker | strategy | join to stable | unaffected partitions | median pause | max pause | gap before |",
              "|---|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for k in kinds:
        for strategy in strategies:
            if strategy not in results[k]["pause"]:
                continue
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
    ap.add_argument("--brokers", default="tansu,groupstream", help="comma-separated: tansu, groupstream, apache")
    ap.add_argument("--members", default="2,10,50", help="group sizes N for join-to-stable")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement; medians are reported")
    ap.add_argument("--protocols", default="classic", help="comma-separated: classic, consumer (KIP-848)")
    ap.add_argument("--pause-only", action="store_true",
                    help="only the pause of unaffected partitions (no join-to-stable runs; --members is ignored)")
    ap.add_argument("--section", default="rebalance", help="the RESULTS.md section to write (a run's own)")
    ap.add_argument("--write-results", action="store_true", help=f"update the section in {RESULTS}")
    args = ap.parse_args()
    kinds = broker_names(args.brokers, ap)
    sizes = [] if args.pause_only else [int(x) for x in args.members.split(",") if x.strip()]
    protocols = [x.strip() for x in args.protocols.split(",") if x.strip()]
    if set(protocols) - STRATEGIES_BY_PROTOCOL.keys():
        ap.error("--protocols takes classic, consumer")
    strategies = [s for p in protocols for s in STRATEGIES_BY_PROTOCOL[p]]

    env = environment()
    print(f"rebalance: {env}")
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-rebalance-") as tmp:
        for kind in kinds:
            results[kind] = run_broker(kind, strategies, sizes, args.repeat, Path(tmp))
    text = table(results, strategies, sizes)
    print()
    print(text)
    if args.write_results:
        kafka = "" if APACHE not in kinds else (
            f" Apache Kafka {kafka_version()}: one combined KRaft "
            "node run as its start scripts run it (1 GB heap, G1, default thread counts).")  # fmt: skip
        consumer = "" if "consumer" not in protocols else (
            " Consumer protocol (KIP-848, `consumer:<server assignor>`): confluent-kafka members with "
            "group.protocol=consumer; both brokers give them group.consumer.heartbeat.interval.ms=1000 and "
            "group.consumer.session.timeout.ms=10000 (their minimums lowered to match), so members learn of a new "
            "target assignment from their next heartbeat, as classic members learn of a rebalance; stable is "
            "ConsumerGroupDescribe saying Stable with N members and every partition owned once by the members' "
            "own callbacks.")  # fmt: skip
        title = "" if args.section == "rebalance" else ": " + " against ".join(kinds) + ", " + " and ".join(protocols)
        write_section(
            args.section,
            f"## Rebalances{title} (`bench/rebalance.py`)\n\n"
            f"{env}. confluent-kafka consumers as threads of one process (each its own librdkafka instance), "
            f"session.timeout.ms={SESSION_TIMEOUT_MS}, heartbeat.interval.ms=1000. Our broker"
            + (" and Apache Kafka" if APACHE in kinds else "")
            + ": group.initial.rebalance.delay.ms=0 (a stable group never waits for it anyway)."
            + (" Tansu 0.6.0: defaults, memory storage." if BrokerKind.TANSU in kinds else "")
            + kafka + consumer + " " + NOTE + (TANSU_NOTE if BrokerKind.TANSU in kinds else "") + "\n\n"
            f"Command: `{command_line('rebalance.py')}`\n\n{text}"
        )
        print(f"\nwrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
