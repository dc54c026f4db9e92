"""Coordinator scale: one group of 1,000 members over 10,000 partitions, on the pure coordinator shard driven
in-process (no network, manual clock), under the KIP-848 ``consumer`` protocol (server assignors ``uniform``
and ``range``) and under the classic protocol (client-side ``cooperative-sticky`` and ``range``, the leader's
assignment counted), side by side.

For each protocol and assignor a fresh shard is driven as the broker's coordinator runtime drives it:
``handle`` (or ``on_timer``), then every record of the result encoded for the log and replayed. *Coordinator
time* is exactly that, as CPU time of this process (the machine may be shared): what the broker's event loop
spends on a request. Decoding the request and encoding the response (the network layer) and the log append
itself are not counted. The clock is manual: timers fire only when the bench moves it, which it does when every
member is waiting (the classic initial rebalance delay) and, for the ``consumer`` protocol, by one heartbeat
interval before each round (members heartbeat once per interval; the group's assignment interval,
``group.consumer.assignment.interval.ms``, runs out on the way), so no session expires.

Members are well-behaved clients and react at once to every answer, one request at a time (run to
completion); otherwise each member acts once per *round* (its heartbeat), round-robin:

- ``consumer``: a member adopts every assignment it is sent (revoking what it lost at once) and, as the Java
  client does, acknowledges a changed assignment with an immediate heartbeat carrying what it now owns; its
  ordinary heartbeats carry no owned partitions (nothing changed).
- classic: a member rejoins when its heartbeat says REBALANCE_IN_PROGRESS (revoking everything first under
  ``range``, an eager assignor; reporting what it owns under ``cooperative-sticky``, and rejoining once more
  after a SyncGroup that took partitions away); JoinGroup starts with the MEMBER_ID_REQUIRED round trip. The
  leader computes the assignment from its JoinGroup answer as our client does: decode every subscription,
  run the assignor, encode every assignment. That *leader time* is client CPU, reported beside the
  coordinator's and added to the totals.

Steps, for each of the four:

1. Build: ``--members`` members join an empty group one after another, then heartbeat round-robin until the
   group is Stable with every partition owned exactly once (``consumer``: every join bumps the group epoch
   and computes a target assignment; classic: every member's JoinGroup parks, the initial rebalance delay
   runs out, the leader assigns, everyone syncs).
2. ``--repeat`` times: one more member joins the stable group, then it leaves again; each time until Stable.
   ``consumer``: the joining heartbeat is the request that computes the target assignment (timed alone, and
   beside it ``compute_target`` and the pure server assignor on the same input); for a leave, the leave and
   the next heartbeat, which computes the target. Classic: the leader's assignment, the JoinGroup that
   completes the join phase (it answers every parked JoinGroup) and the leader's SyncGroup (it writes the
   group's record).
3. Steady state: every member heartbeats ``--repeat`` times round-robin; median and p99 of one heartbeat.
4. Memory per member: the shard holding the group minus an empty shard, divided by the members. The live
   group is measured by walking the shard's objects (``sys.getsizeof`` over ``gc.get_referents``, each object
   once): tracemalloc slows a ``consumer`` build about 4x. A restarted shard that loads the compacted log is
   measured with tracemalloc (and walked too: the two agree, see the notes).
5. Replay: a restarted shard loading the log as written (every record of the build and of step 2) and the
   log compacted (the last record of each key, tombstones dropped); both must rebuild the live shard's
   durable state. Loading reads the log as the broker does, in chunks of 256 KB, and, as the broker does,
   does not decode a member's target or current-assignment record that a later one of the same chunk
   replaces.
6. Join storm: ``--storm`` members join an empty group at once (every join sent before any other request),
   then heartbeat round-robin until Stable with every partition owned exactly once; rounds, requests and
   coordinator time, ``--repeat`` times. The bench exits non-zero if any group does not converge.

    .venv/bin/python bench/coordinator_scale.py [--members 1000] [--partitions 10000] [--topics 1]
        [--storm 100] [--repeat 3] [--only consumer:uniform,...] [--write-results [--section NAME]]

The large shape (reported, no target): ``--members 10000 --partitions 100000 --repeat 1 --only
consumer:uniform,classic:cooperative-sticky --section coordinator_scale_large --write-results``.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from coordinator_scale_drivers import (
    Catalog,
    ClassicDriver,
    ClassicMember,
    ConsumerMember,
    Runtime,
    Settle,
    cgh,
    consumer_settle,
    consumer_storm,
    consumer_turn,
    member_name,
    memory_and_replay,
    pct,
    time_target,
    topics_of,
)
from results import RESULTS, machine, write_section

# --- the four runs -------------------------------------------------------------------------------------------


def steady_memory_replay(
    label: str, rt: Runtime, n: int, repeat: int, beats: list[float], out: dict[str, float]
) -> None:
    """Steps 3 to 5 of either protocol: the steady heartbeats' median and p99, then memory and replay, printed."""
    out |= {"hb_median": statistics.median(beats), "hb_p99": pct(beats, 0.99)}
    memory_and_replay(rt, n, repeat, out)
    print(f"{label}: heartbeat median {out['hb_median'] * 1e6:.0f} us, p99 {out['hb_p99'] * 1e6:.0f} us; "
          f"{out['mem_live'] / 1e3:.1f} KB/member live, {out['mem_loaded'] / 1e3:.1f} KB loaded; "
          f"replay {out['replay_full'] * 1e3:.0f} ms ({out['log_records']:.0f} records), compacted "
          f"{out['replay_compact'] * 1e3:.0f} ms ({out['compact_records']:.0f})", flush=True)  # fmt: skip


def run_consumer(assignor: str, topics: dict[str, int], n: int, storm: int, repeat: int) -> dict[str, float]:
    out: dict[str, float] = {}
    names = tuple(topics)
    rt = Runtime(Catalog(topics))
    members = [ConsumerMember(member_name(i), names, assignor) for i in range(n)]
    gc0 = rt.gc_busy
    joins, build = consumer_storm(rt, members)
    out |= {"build": build.total, "build_gc": rt.gc_busy - gc0, "build_rounds": build.rounds,
            "join_median": statistics.median(joins), "join_max": max(joins)}  # fmt: skip
    print(f"consumer {assignor}: {n} members built in {build.total:.1f} s of coordinator CPU "
          f"(GC {rt.gc_busy - gc0:.1f} s), {build.rounds} rounds after the joins", flush=True)  # fmt: skip

    step, pure, join_hb, join_settle, leave_hb, leave_settle = [], [], [], [], [], []
    for r in range(repeat):
        joiner = ConsumerMember(f"joiner-{r}", names, assignor)
        s, p = time_target(rt, joiner)
        step.append(s)
        pure.append(p)
        join_hb.append(cgh(rt, joiner, joiner.join_request(rt)))
        join_settle.append(consumer_settle(rt, [*members, joiner]))
        start = rt.busy
        cgh(rt, joiner, joiner.beat_request(rt, epoch=-1))
        cgh(rt, members[0], members[0].beat_request(rt))  # the next heartbeat computes the new target
        leave_hb.append(rt.busy - start)
        leave_settle.append(consumer_settle(rt, members))
    out |= {
        "compute_target": statistics.median(step), "pure": statistics.median(pure),
        "assign_request": statistics.median(join_hb),
        "join_rounds": statistics.median(s.rounds for s in join_settle),
        "join_total": statistics.median(s.total + hb for s, hb in zip(join_settle, join_hb, strict=True)),
        "leave_request": statistics.median(leave_hb),
        "leave_rounds": statistics.median(s.rounds for s in leave_settle),
        "leave_total": statistics.median(s.total + hb for s, hb in zip(leave_settle, leave_hb, strict=True)),
    }  # fmt: skip
    print(f"consumer {assignor}: target for {n + 1} members: heartbeat {out['assign_request'] * 1e3:.1f} ms, "
          f"compute_target {out['compute_target'] * 1e3:.1f} ms, assignor {out['pure'] * 1e3:.1f} ms; "
          f"join to stable {out['join_total'] * 1e3:.0f} ms in {out['join_rounds']:g} rounds; "
          f"leave to stable {out['leave_total'] * 1e3:.0f} ms", flush=True)  # fmt: skip

    beats = [consumer_turn(rt, m) for _ in range(repeat) for m in members]
    steady_memory_replay(f"consumer {assignor}", rt, n, repeat, beats, out)
    del rt, members
    gc.collect()

    storms = []
    for r in range(repeat):
        srt = Runtime(Catalog(topics))
        smembers = [ConsumerMember(f"storm{r}-{i:04}", names, assignor) for i in range(storm)]
        _, settle = consumer_storm(srt, smembers)
        storms.append(settle)
        if r == 0:
            small = [consumer_turn(srt, m) for _ in range(3) for m in smembers]
            out["hb_small_median"] = statistics.median(small)
    out |= storm_figures(storms)
    print(f"consumer {assignor}: storm of {storm}: {out['storm_rounds']:g} rounds, {out['storm_requests']:g} "
          f"requests, {out['storm_total'] * 1e3:.0f} ms", flush=True)  # fmt: skip
    return out


def storm_figures(storms: Sequence[Settle]) -> dict[str, float]:
    return {
        "storm_rounds": statistics.median(s.rounds for s in storms),
        "storm_requests": statistics.median(s.requests for s in storms),
        "storm_total": statistics.median(s.total for s in storms),
        "storm_leader": statistics.median(s.leader for s in storms),
    }


def run_classic(strategy: str, topics: dict[str, int], n: int, storm: int, repeat: int) -> dict[str, float]:
    out: dict[str, float] = {}
    names = tuple(topics)
    rt = Runtime(Catalog(topics))
    d = ClassicDriver(rt, strategy)
    gc0 = rt.gc_busy
    build = d.storm([ClassicMember(member_name(i), names, strategy) for i in range(n)])
    out |= {"build": build.total, "build_gc": rt.gc_busy - gc0, "build_rounds": build.rounds,
            "build_leader": build.leader, "join_median": statistics.median(d.join_times),
            "join_max": max(d.join_times)}  # fmt: skip
    print(f"classic {strategy}: {n} members built in {build.total:.1f} s (leader {build.leader:.2f} s, "
          f"GC {rt.gc_busy - gc0:.1f} s), {build.rounds} rounds", flush=True)  # fmt: skip

    pure, completing, leader_sync, join_settle, leave_settle = [], [], [], [], []
    for r in range(repeat):
        joiner = ClassicMember(f"joiner-{r}", names, strategy)
        marks = len(d.join_times), len(d.leader_sync_times), len(d.leader_assign_times)
        d.members.append(joiner)
        d.join(joiner)
        join_settle.append(d.settle())
        completing.append(max(d.join_times[marks[0] :]))
        leader_sync.append(statistics.median(d.leader_sync_times[marks[1] :]))
        pure.append(statistics.median(d.leader_assign_times[marks[2] :]))
        d.leave(joiner)
        leave_settle.append(d.settle())
    out |= {
        "pure": statistics.median(pure), "completing_join": statistics.median(completing),
        "leader_sync": statistics.median(leader_sync),
        "join_rounds": statistics.median(s.rounds for s in join_settle),
        "join_total": statistics.median(s.total for s in join_settle),
        "join_leader": statistics.median(s.leader for s in join_settle),
        "leave_rounds": statistics.median(s.rounds for s in leave_settle),
        "leave_total": statistics.median(s.total for s in leave_settle),
    }  # fmt: skip
    print(f"classic {strategy}: {n + 1} members: leader assignment {out['pure'] * 1e3:.1f} ms, completing "
          f"JoinGroup {out['completing_join'] * 1e3:.1f} ms, leader SyncGroup {out['leader_sync'] * 1e3:.1f} ms; "
          f"join to stable {out['join_total'] * 1e3:.0f} ms in {out['join_rounds']:g} rounds; leave to stable "
          f"{out['leave_total'] * 1e3:.0f} ms", flush=True)  # fmt: skip

    d.heartbeat_times.clear()
    for _ in range(repeat):
        for m in d.members:
            d.heartbeat(m)
            d._pump()
    beats = list(d.heartbeat_times)
    if not d.converged():
        raise RuntimeError("the classic group left Stable during steady heartbeats")
    steady_memory_replay(f"classic {strategy}", rt, n, repeat, beats, out)
    del rt, d
    gc.collect()

    storms, clock = [], []
    for r in range(repeat):
        sd = ClassicDriver(Runtime(Catalog(topics)), strategy)
        started = sd.rt.now
        storms.append(sd.storm([ClassicMember(f"storm{r}-{i:04}", names, strategy) for i in range(storm)]))
        clock.append(sd.rt.now - started)
        if r == 0:
            sd.heartbeat_times.clear()
            for _ in range(3):
                for m in sd.members:
                    sd.heartbeat(m)
                    sd._pump()
            out["hb_small_median"] = statistics.median(sd.heartbeat_times)
    out |= storm_figures(storms)
    out["storm_clock"] = statistics.median(clock)
    print(f"classic {strategy}: storm of {storm}: {out['storm_rounds']:g} rounds, {out['storm_requests']:g} "
          f"requests, {out['storm_total'] * 1e3:.0f} ms (leader {out['storm_leader'] * 1e3:.0f} ms)", flush=True)  # fmt: skip
    return out


# --- the table -------------------------------------------------------------------------------------------------

COLUMNS = (
    ("consumer", "uniform"), ("consumer", "range"), ("classic", "cooperative-sticky"), ("classic", "range"),
)  # fmt: skip
PAIRS = (
    (("consumer", "uniform"), ("classic", "cooperative-sticky")),
    (("consumer", "range"), ("classic", "range")),
)


def _t(v: float) -> str:
    """A duration in the unit that keeps it readable."""
    if v < 1e-3:
        return f"{v * 1e6:,.0f} µs"
    if v < 10e-3:
        return f"{v * 1e3:,.2f} ms"
    if v < 10:
        return f"{v * 1e3:,.0f} ms"
    return f"{v:,.1f} s"


def _kb(v: float) -> str:
    return f"{v / 1e3:,.1f} KB"


def _mb(v: float) -> str:
    return f"{v:,.2f} MB"


def _n(v: float) -> str:
    return f"{v:,.0f}" if v == int(v) else f"{v:,.1f}"


Getter = Callable[[dict[str, float]], float | None]


def _assign_request(r: dict[str, float]) -> float:
    return r["assign_request"] if "assign_request" in r else r["completing_join"] + r["leader_sync"]


def table(results: dict[tuple[str, str], dict[str, float]], n: int, storm: int) -> str:
    """One row per figure: the consumer protocol's columns, the classic ones, and consumer ÷ classic."""
    rows: list[tuple[str, Getter, Callable[[float], str], bool]] = [
        (f"build: {n:,} members join one by one, to Stable (CPU)", lambda r: r["build"], _t, True),
        ("… of which garbage collection", lambda r: r["build_gc"], _t, False),
        ("… one join request during the build: median", lambda r: r["join_median"], _t, True),
        ("… one join request during the build: max", lambda r: r["join_max"], _t, True),
        (f"assignment for {n + 1:,} members: the assignor alone (classic: the leader's decode + assign + encode)",
         lambda r: r["pure"], _t, True),
        ("… `compute_target`: the assignor and the conversions around it", lambda r: r.get("compute_target"), _t, False),
        ("… the request that computes it (consumer: the joining heartbeat; classic: the JoinGroup completing "
         "the join phase + the leader's SyncGroup)", _assign_request, _t, True),
        ("one member joins the stable group: rounds to Stable", lambda r: r["join_rounds"], _n, False),
        ("… CPU to Stable", lambda r: r["join_total"], _t, True),
        ("one member leaves: the leave + the next heartbeat (it computes the target)",
         lambda r: r.get("leave_request"), _t, False),
        ("… rounds to Stable", lambda r: r["leave_rounds"], _n, False),
        ("… CPU to Stable", lambda r: r["leave_total"], _t, True),
        (f"steady heartbeat, {n:,} members: median", lambda r: r["hb_median"], _t, True),
        (f"steady heartbeat, {n:,} members: p99", lambda r: r["hb_p99"], _t, True),
        (f"steady heartbeat, {storm:,} members: median", lambda r: r["hb_small_median"], _t, True),
        ("memory per member, live group (object walk)", lambda r: r["mem_live"], _kb, True),
        ("memory per member, loaded from the compacted log (tracemalloc)", lambda r: r["mem_loaded"], _kb, True),
        ("log as written: records", lambda r: r["log_records"], _n, False),
        ("… size", lambda r: r["log_mb"], _mb, True),
        ("… a restarted coordinator loads it", lambda r: r["replay_full"], _t, True),
        ("log compacted: records", lambda r: r["compact_records"], _n, False),
        ("… size", lambda r: r["compact_mb"], _mb, True),
        ("… a restarted coordinator loads it", lambda r: r["replay_compact"], _t, True),
        (f"join storm of {storm}: heartbeat rounds to Stable", lambda r: r["storm_rounds"], _n, False),
        ("… requests", lambda r: r["storm_requests"], _n, False),
        ("… CPU to Stable", lambda r: r["storm_total"], _t, True),
    ]  # fmt: skip
    cols = [c for c in COLUMNS if c in results]
    pairs = [p for p in PAIRS if p[0] in results and p[1] in results]
    lines = [
        "| figure | " + " | ".join(f"{proto} {a}" for proto, a in cols)
        + "".join(f" | {a[1]} ÷ {b[1]}" for a, b in pairs) + " |",
        "|---|" + "---:|" * (len(cols) + len(pairs)),
    ]  # fmt: skip
    for label, get, fmt, ratio in rows:
        values = [get(results[c]) for c in cols]
        cells = ["n/a" if v is None else fmt(v) for v in values]
        for a, b in pairs:
            va, vb = get(results[a]), get(results[b])
            cells.append(f"{va / vb:,.1f}x" if ratio and va is not None and vb else "")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def notes(results: dict[tuple[str, str], dict[str, float]]) -> str:
    walk = ", ".join(
        f"{proto} {name} {r['mem_loaded_walk'] / r['mem_loaded']:.2f}"
        for (proto, name), r in results.items()
        if r["mem_loaded"]
    )
    clock = ", ".join(
        f"{name} {r['storm_clock'] / 1e3:g} s" for (proto, name), r in results.items() if proto == "classic"
    )
    leader = ", ".join(
        f"{name} {_t(r['build_leader'])} of the build, {_t(r['join_leader'])} of a join"
        for (proto, name), r in results.items()
        if proto == "classic"
    )
    out = [f"Object walk ÷ tracemalloc on the loaded shard: {walk}."]
    if clock:
        out.append(
            "Classic storms need no heartbeat round: every member's JoinGroup parks until the initial rebalance "
            f"delay runs out on the clock ({clock}); a consumer-protocol round is one heartbeat interval "
            "(5 s by default)."
        )
    if leader:
        out.append(f"Leader (client) share of the classic totals: {leader}.")
    return " ".join(out)


# --- main ----------------------------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--members", type=int, default=1000, help="members of the big group")
    ap.add_argument("--partitions", type=int, default=10_000, help="partitions over all topics")
    ap.add_argument(
        "--topics", type=int, default=1, help="topics the partitions are spread over (all subscribed)"
    )
    ap.add_argument("--storm", type=int, default=100, help="members of the join storm")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each measurement after the build; medians")
    ap.add_argument("--only", default="", help="comma-separated subset, e.g. consumer:uniform,classic:range")
    ap.add_argument("--write-results", action="store_true", help=f"update the section in {RESULTS}")
    ap.add_argument("--section", default="coordinator_scale",
                    help="the RESULTS.md section to write (another shape gets its own, e.g. coordinator_scale_large)")  # fmt: skip
    args = ap.parse_args()
    topics = topics_of(args.partitions, args.topics)
    wanted = {tuple(x.split(":", 1)) for x in args.only.split(",") if x.strip()}
    env = f"{machine()}; load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} at the start"
    print(f"coordinator scale: {env}; {args.members} members, {args.partitions} partitions in {args.topics} "
          f"topic(s), storm {args.storm}, repeat {args.repeat}", flush=True)  # fmt: skip
    started = time.monotonic()
    results: dict[tuple[str, str], dict[str, float]] = {}
    for proto, name in COLUMNS:
        if wanted and (proto, name) not in wanted:
            continue
        run = run_consumer if proto == "consumer" else run_classic
        try:
            results[proto, name] = run(name, topics, args.members, args.storm, args.repeat)
        except RuntimeError as e:
            print(f"FAILED: {proto} {name}: {e}", file=sys.stderr)
            return 1
    text = table(results, args.members, args.storm)
    print()
    print(text)
    print()
    print(notes(results))
    print(f"\nwall time {time.monotonic() - started:.0f} s")
    if args.write_results:
        command = (
            f"python bench/coordinator_scale.py --members {args.members} --partitions {args.partitions} "
            f"--topics {args.topics} --storm {args.storm} --repeat {args.repeat}"
            + ("" if args.only == "" else f" --only {args.only}")
            + ("" if args.section == "coordinator_scale" else f" --section {args.section}")
            + " --write-results"
        )
        heading = "## Coordinator scale (`bench/coordinator_scale.py`)"
        if args.section != "coordinator_scale":
            heading = f"## Coordinator scale, {args.members:,} members x {args.partitions:,} partitions (`bench/coordinator_scale.py`)"
        write_section(
            args.section,
            f"{heading}\n\n"
            f"{env}. One coordinator shard driven in-process (no network, manual clock), {args.members:,} members "
            f"subscribed to {args.partitions:,} partitions in {args.topics} topic(s); medians of {args.repeat} runs "
            "after the build. Times are CPU time of the coordinator (handle + encoding the records + replaying "
            "them); classic totals add the leader's assignment (client CPU). Members react to every answer at "
            "once and otherwise heartbeat once per round; consumer-protocol members acknowledge a new assignment "
            "with an immediate heartbeat, as the Java client does. A restarted coordinator loads the log as the "
            "broker does: in 256 KB reads, a member's target or current-assignment record replaced later in the "
            "same read left undecoded.\n\n"
            f"Command: `{command}`\n\n{text}\n\n{notes(results)}",
        )
        print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
