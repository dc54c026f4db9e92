"""Consistent region timings against the number of members and partitions: checkpoint cycle time (the
controller's drain command to its resume command) and reset time (a reset command to the resume that ends it).

For each shape a fresh topic is filled with ``--records`` records, a controller (``--period-ms``) and the members
(``groupstream region member`` processes) start on our broker; once every member has checkpointed, cycles are
timed for ``--seconds``; then one more member joins, which rebalances the group and resets the region (every
member's partitions move with the range assignor), and the reset is timed from the controller's reset command to
the resume that ends it. Figures are medians (cycles) and the single reset, from the controller's own log.

    .venv/bin/python bench/region.py [--shapes 1x12,3x12,3x48] [--records 20000] [--seconds 15] [--write-results]
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from kit import command_line, machine, wait_for, write_section
from support.brokers import BrokerKind, BrokerProcess, groupstream_command


def events(log: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in log.read_text().splitlines() if x.startswith("{")]


def run_shape(bs: str, workdir: Path, members: int, partitions: int, records: int, seconds: float,
              period_ms: int) -> tuple[float, float, int]:  # fmt: skip
    from groupstream.client.admin import Admin, NewTopic
    from groupstream.client.producer import Producer

    topic, group, region = f"bench-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}", f"r{uuid.uuid4().hex[:6]}"
    with Admin({"bootstrap.servers": bs}) as admin:
        admin.create_topics([NewTopic(topic, partitions)])
    with Producer({"bootstrap.servers": bs}) as producer:
        producer.produce_batch(topic, [(None, b"x" * 100)] * records).result(60)
    common = ["--bootstrap-server", bs, "--region", region, "--group", group, "--reset-timeout-ms", "20000"]
    cmd = [*groupstream_command(), "region"]
    logs = workdir / region
    logs.mkdir()
    procs = []

    def start(name: str, args: list[str]) -> tuple[subprocess.Popen[bytes], Path]:
        log = logs / f"{name}.log"
        with log.open("w") as out:
            p = subprocess.Popen([*cmd, *args], cwd=logs, stdout=out, stderr=subprocess.STDOUT)
        procs.append(p)
        return p, log

    try:
        _, ctl_log = start("controller", ["controller", *common, "--period-ms", str(period_ms)])
        member_logs = [start(f"m{i}", ["member", *common, "--topic", topic, "--member", f"m{i}", "--output", "out",
                                       "--checkpoints", "ck"]) for i in range(members)]  # fmt: skip

        def checkpointed() -> bool:
            return all(any(str(e.get("event", "")).startswith("checkpoint ") for e in events(log))
                       for _, log in member_logs)  # fmt: skip

        wait_for(checkpointed, 120, "checkpoint of every member", interval=0.2)
        first = len(events(ctl_log))
        time.sleep(seconds)  # the measuring window: cycles run on the controller's period meanwhile
        window = events(ctl_log)[first:]
        cycles = []
        drain_at: int | None = None
        for e in window:
            if e.get("kind") == "drain":
                drain_at = int(e["at_ms"])  # type: ignore[call-overload]
            elif e.get("kind") == "resume" and drain_at is not None:
                cycles.append(int(e["at_ms"]) - drain_at)  # type: ignore[call-overload]
                drain_at = None
        mark = len(events(ctl_log))
        start("joiner", ["member", *common, "--topic", topic, "--member", "joiner", "--output", "out",
                         "--checkpoints", "ck"])  # fmt: skip

        def reset_done() -> bool:
            tail = events(ctl_log)[mark:]
            resets = [i for i, e in enumerate(tail) if e.get("kind") == "reset"]
            return bool(resets) and any(e.get("kind") == "resume" for e in tail[resets[-1]:])

        wait_for(reset_done, 120, "reset after a member joined", interval=0.2)
        tail = events(ctl_log)[mark:]
        first_reset = next(i for i, e in enumerate(tail) if e.get("kind") == "reset")
        resume = next(e for e in tail[first_reset:] if e.get("kind") == "resume")
        reset_ms = int(resume["at_ms"]) - int(tail[first_reset]["at_ms"])  # type: ignore[call-overload]
        return statistics.median(cycles) if cycles else float("nan"), float(reset_ms), len(cycles)
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="1x12,3x12,3x48", help="members x partitions, comma separated")
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--period-ms", type=int, default=1000)
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args()
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    env = machine()
    print(env, flush=True)
    rows = ["| members x partitions | checkpoint cycle (median) | cycles timed | reset after a member joins |",
            "|---|---:|---:|---:|"]  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-region-") as tmp, \
            BrokerProcess(BrokerKind.GROUPSTREAM, Path(tmp) / "broker", start_timeout=60,
                          settings={"group.initial.rebalance.delay.ms": "0"}) as broker:  # fmt: skip
        for members, partitions in shapes:
            cycle, reset, n = run_shape(broker.bootstrap, Path(tmp), members, partitions, args.records, args.seconds,
                                        args.period_ms)  # fmt: skip
            line = f"| {members} x {partitions} | {cycle:,.0f} ms | {n} | {reset:,.0f} ms |"
            print(line, flush=True)
            rows.append(line)
    text = "\n".join(rows)
    print(text)
    if args.write_results:
        write_section("region", f"## Consistent region timings (`bench/region.py`)\n\n{env}. Our broker; members "
                                f"and controller are `groupstream region` processes; checkpoint period "
                                f"{args.period_ms} ms; a reset is caused by one more member joining, which "
                                f"rebalances the group.\n\nCommand: `{command_line('region.py')}`\n\n{text}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
