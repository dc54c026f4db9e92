"""Coordinator scale, black box: the CPU our broker process spends while real members form one group, under
the KIP-848 ``consumer`` protocol (server assignor ``uniform``) and the classic protocol
(``cooperative-sticky``), side by side in one run.

Members are confluent-kafka consumers (threads of this process, each its own librdkafka instance) subscribed
to one topic; all start at once, and the group has formed when every partition is owned by exactly one
member (from the members' own rebalance callbacks) and the group is described Stable with every member
(polled every half second; the describes are counted in the broker's CPU). The broker's CPU is its process's
user + system time (``/proc/<pid>/stat``) from just before the first member starts to the moment the group
is seen formed; its idle CPU over the same wall time, measured before, is reported beside it. The broker
runs with its defaults (Kafka's: ``group.initial.rebalance.delay.ms`` 3 s, ``group.consumer.heartbeat.
interval.ms`` 5 s, ``group.consumer.assignment.interval.ms`` 1 s); classic members heartbeat every second
with 10 s sessions.

    .venv/bin/python bench/coordinator_scale_blackbox.py [--members 200] [--partitions 2000] [--repeat 1]
        [--write-results]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from groupstream.client.admin import Admin
from kit import Broker, environment, os_load, process_cpu, wait_for, write_section
from rebalance import BenchMember, new_topic, stable

STRATEGIES = ("consumer:uniform", "cooperative-sticky")

STEADY_S = 5.0


def form(bootstrap: str, pid: int, strategy: str, n: int, partitions: int) -> tuple[float, float, float]:
    """(broker CPU seconds, wall seconds) from the start of ``n`` members to the group formed, and the broker's
    CPU per second over the next ``STEADY_S`` seconds of the formed group (heartbeats and empty fetches)."""
    topic = new_topic(bootstrap, partitions)
    group = f"blackbox-{uuid.uuid4().hex[:8]}"
    members: list[BenchMember] = []
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        try:
            cpu0, t0 = process_cpu(pid), time.monotonic()
            members.extend(BenchMember(f"m{i:03}", bootstrap, group, topic, strategy).start() for i in range(n))
            wait_for(lambda: stable(members, partitions, admin, group) is not None, 600,
                     f"{n} members of {strategy} to form a group", interval=0.5)  # fmt: skip
            cpu1, t1 = process_cpu(pid), time.monotonic()
            time.sleep(STEADY_S)  # a measurement window, not a wait for a condition
            steady = (process_cpu(pid) - cpu1) / (time.monotonic() - t1)
            return cpu1 - cpu0, t1 - t0, steady
        finally:
            for m in members:
                m.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--members", type=int, default=200)
    ap.add_argument("--partitions", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args()
    env = environment()
    print(f"coordinator black box: {env}; load {os_load()}; {args.members} members, {args.partitions} partitions")
    rows = []
    with tempfile.TemporaryDirectory() as tmp, Broker("groupstream", Path(tmp)) as broker:
        pid = broker._proc.pid
        assert pid is not None
        idle0, w0 = process_cpu(pid), time.monotonic()
        time.sleep(5)  # the idle broker's own ticks, to subtract by eye: a measurement, not a wait for a condition
        idle_rate = (process_cpu(pid) - idle0) / (time.monotonic() - w0)
        print(f"idle broker {idle_rate * 1e3:.0f} ms/s", flush=True)
        for strategy in STRATEGIES:
            runs = [form(broker.bootstrap, pid, strategy, args.members, args.partitions) for _ in range(args.repeat)]
            cpu = statistics.median(r[0] for r in runs)
            wall = statistics.median(r[1] for r in runs)
            steady = statistics.median(r[2] for r in runs)
            rows.append((strategy, cpu, wall, steady))
            print(f"{strategy}: broker CPU {cpu:.2f} s over {wall:.1f} s; formed group {steady * 1e3:.0f} ms/s",
                  flush=True)  # fmt: skip
    table = ["| protocol | broker CPU to form the group | wall time | broker CPU per second, group formed |",
             "|---|---:|---:|---:|"]  # fmt: skip
    table += [f"| {s} | {c:.2f} s | {w:.1f} s | {r * 1e3:.0f} ms |" for s, c, w, r in rows]
    ratio = rows[0][1] / rows[1][1] if rows[1][1] else float("nan")
    text = "\n".join(table) + (
        f"\n\nconsumer ÷ classic broker CPU to form: {ratio:.2f}x. Idle broker: {idle_rate * 1e3:.0f} ms/s. The "
        "formed group's rate is mostly the members' empty fetches and heartbeats. A consumer-protocol group forms "
        "over more wall time (joins within the assignment interval get their share at their next heartbeat, 5 s "
        "by default), so its total holds more of that traffic; classic members wait in JoinGroup, not fetching."
    )
    print(text)
    if args.write_results:
        command = (f"python bench/coordinator_scale_blackbox.py --members {args.members} --partitions "
                   f"{args.partitions} --repeat {args.repeat} --write-results")  # fmt: skip
        write_section(
            "coordinator_scale_blackbox",
            "## Coordinator scale, black box (`bench/coordinator_scale_blackbox.py`)\n\n"
            f"{env}; load {os_load()}. Our broker's process CPU while {args.members} confluent-kafka members "
            f"(threads of the bench) form one group on a topic of {args.partitions} partitions, broker defaults."
            f"\n\nCommand: `{command}`\n\n{text}",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
