"""Seed 000's consistent region as processes (issue 7): three group consumer operators (``groupstream region
member``) and a controller on our broker, one group, 12 partitions, a feed of unique records throughout.

While the feed runs, one operator is killed (``kill -9``) and started again, a fourth joins, one leaves (SIGTERM),
and a checkpoint fails (a directory stands where an operator's checkpoint file must go). Afterwards:

- the region's output table (``--format delta``) holds every record exactly once, in its published files and
  for a reader of its Delta log alike;
- the operators' logs show, after every reset, each partition resuming exactly where the published output of the
  checkpoint it reset to ends (the merged checkpoint offset; the initial offset for a reset to the initial state).
"""

from __future__ import annotations

import re
import signal
import subprocess
import uuid
from pathlib import Path
from typing import Any

import deltalake
import pytest

from groupstream.client.admin import Admin, NewTopic
from support.brokers import BrokerProcess
from support.feed import Feed
from support.region_process import RegionProcess
from support.waiting import wait_until

pytestmark = [pytest.mark.broker_ours, pytest.mark.slow]

PARTITIONS = 12
RESET_TIMEOUT_MS = 8_000
_SEEK = re.compile(r"([^\s{},]+)-(\d+): (\d+)")
_RESET = re.compile(r"reset to (?:checkpoint (\d+)|initial state), attempt (\d+)")


def test_three_operators_give_exactly_once_output_through_kills_joins_leaves_and_a_failed_checkpoint(
    groupstream_broker: BrokerProcess, tmp_path: Path
) -> None:
    bs = groupstream_broker.bootstrap
    topic, group, region = f"rg-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}", f"r{uuid.uuid4().hex[:6]}"
    with Admin({"bootstrap.servers": bs}) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS)])
    common = ["--bootstrap-server", bs, "--region", region, "--group", group, "--reset-timeout-ms", str(RESET_TIMEOUT_MS)]
    procs: list[RegionProcess] = []

    def member(name: str) -> RegionProcess:
        p = RegionProcess(name, ["member", *common, "--topic", topic, "--member", name, "--output", "out", "--format", "delta",
                        "--checkpoints", "ck"], tmp_path)  # fmt: skip
        procs.append(p)
        return p

    def logs() -> str:
        return "\n".join(f"--- {p.log.name} (exit {p.proc.poll()})\n{p.text()[-2500:]}" for p in procs)

    def wait(condition: Any, timeout_s: float, what: str) -> None:
        wait_until(condition, timeout_s, what, interval_s=0.3, explain=logs)

    def checkpoints_done() -> int:
        return sum(1 for e in controller.events() if e.get("kind") == "resume")

    def resets_issued() -> int:
        return sum(1 for e in controller.events() if e.get("kind") == "reset")

    def checkpointed(p: RegionProcess) -> int:
        return sum(1 for e in p.events() if str(e.get("event", "")).startswith("checkpoint "))

    controller = RegionProcess("controller", ["controller", *common, "--period-ms", "1500"], tmp_path)
    procs.append(controller)
    feed = Feed(bs, topic, batch=120)
    try:
        a, b, c = member("a"), member("b"), member("c")
        feed.start()
        wait(lambda: all(checkpointed(p) >= 2 for p in (a, b, c)), 120, "three operators to checkpoint twice")
        # kill -9 one operator, then start it again
        b.proc.kill()
        b.proc.wait()
        resets = resets_issued()
        wait(lambda: resets_issued() > resets, 60, "the region to reset after the killed operator")
        b = member("b")
        wait(lambda: checkpointed(b) >= 2, 120, "the restarted operator to checkpoint")
        # a fourth operator joins, the first leaves
        d = member("d")
        wait(lambda: checkpointed(d) >= 2, 120, "the new operator to checkpoint")
        a.proc.send_signal(signal.SIGTERM)
        assert a.proc.wait(60) == 0, a.text()[-2000:]
        done = checkpoints_done()
        wait(lambda: checkpoints_done() >= done + 2, 120, "two checkpoints without the operator that left")
        # a checkpoint fails: c's file for a coming checkpoint cannot be written
        latest = max((int(x.name) for x in (tmp_path / "ck").iterdir() if x.name.isdigit()), default=0)
        for cid in range(latest + 1, latest + 4):
            (tmp_path / "ck" / f"{cid:012d}" / "c.json").mkdir(parents=True)
        wait(lambda: "failed" in c.text(), 60, "the checkpoint to fail")
        done = checkpoints_done()
        wait(lambda: checkpoints_done() >= done + 2, 120, "checkpoints to complete again after the failure")
        feed.stop_event.set()
        feed.join(30)
        with Admin({"bootstrap.servers": bs}) as admin:
            ends = admin.log_end_offsets([(topic, p) for p in range(PARTITIONS)])
        wait(lambda: _published_ends(tmp_path / "out", topic) == ends, 120, "the region to publish every record")
    finally:
        feed.stop_event.set()
        for p in procs:
            if p.proc.poll() is None:
                p.proc.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.proc.wait(60)
            except subprocess.TimeoutExpired:
                p.proc.kill()

    values = _output(tmp_path / "out")
    assert len(values) == len(set(values)), (
        f"{len(values) - len(set(values))} records are in the output twice:\n{_duplicates(tmp_path / 'out')}"
    )
    assert sorted(values) == [b"r%07d" % i for i in range(feed.produced)]
    delta_values = deltalake.DeltaTable(str(tmp_path / "out")).to_pyarrow_table().column("value").to_pylist()
    assert sorted(delta_values) == sorted(values)  # what a reader of the Delta log sees: the same, once each
    resets = _check_resumption(procs, tmp_path / "out", topic)
    assert resets >= 3, f"only {resets} resets were logged: the scenario did not happen"
    assert re.search(r"checkpoint \d+ failed", c.text())
    # the seed's metrics, with every checkpoint
    metrics = [e["event"] for e in c.events() if str(e.get("event", "")).startswith("metrics ")]
    assert metrics and re.search(r'groupstream_region_partitions_assigned\{member="c",group="[^"]+"\} [1-9]', metrics[-1])
    assert re.search(r"groupstream_region_max_drain_ms\{[^}]+\} \d+", metrics[-1])


def _output(table: Path) -> list[bytes]:
    import pyarrow.parquet as pq

    return [v for f in sorted(table.glob("part-*.parquet")) for v in pq.read_table(f).column("value").to_pylist()]


def _duplicates(table: Path) -> str:
    """Which records are published more than once: per partition, the offset ranges and the files holding them."""
    import pyarrow.parquet as pq

    files: dict[tuple[int, int], list[str]] = {}
    for f in sorted(table.glob("part-*.parquet")):
        t = pq.read_table(f, columns=["partition", "offset"]).to_pydict()
        for p, o in zip(t["partition"], t["offset"], strict=True):
            files.setdefault((p, o), []).append(f.name)
    ranges: list[tuple[int, int, int, list[str]]] = []  # partition, first, last, files
    for (p, o), names in sorted(files.items()):
        if len(names) < 2:
            continue
        if ranges and ranges[-1][0] == p and ranges[-1][2] == o - 1 and ranges[-1][3] == names:
            ranges[-1] = (p, ranges[-1][1], o, names)
        else:
            ranges.append((p, o, o, names))
    return "\n".join(f"  partition {p} offsets {first}..{last} ({last - first + 1}) in {', '.join(names)}"
                     for p, first, last, names in ranges)  # fmt: skip


def _published_ends(table: Path, topic: str, upto: int | None = None) -> dict[tuple[str, int], int]:
    """Per partition, the offset after the last record published by checkpoints up to ``upto`` (all: None)."""
    import pyarrow.parquet as pq

    ends = {(topic, p): 0 for p in range(PARTITIONS)}
    for f in sorted(table.glob("part-*.parquet")):
        cid = int(f.name.split("-")[1])
        if upto is not None and cid > upto:
            continue
        t = pq.read_table(f, columns=["partition", "offset"]).to_pydict()
        for p, o in zip(t["partition"], t["offset"], strict=True):
            ends[(topic, p)] = max(ends[(topic, p)], o + 1)
    return ends


def _check_resumption(procs: list[RegionProcess], table: Path, topic: str) -> int:
    """After every reset an operator logs, its next seek puts each partition where the output published by the
    checkpoint it reset to ends. Returns how many resets were checked."""
    checked = 0
    for p in procs:
        if p.name == "controller":
            continue
        target: int | None = None
        pending = False
        for e in p.events():
            text = str(e.get("event", ""))
            m = _RESET.match(text)
            if m:
                target, pending = (int(m.group(1)) if m.group(1) else -1), True
                continue
            if pending and text.startswith("seek "):
                pending = False
                ends = _published_ends(table, topic, upto=target)
                for t, part, offset in _SEEK.findall(text):
                    assert t == topic
                    assert int(offset) == ends[(topic, int(part))], (
                        f"{p.log.name}: after a reset to checkpoint {target}, {t}-{part} resumed at {offset}, "
                        f"but that checkpoint's output ends at {ends[(topic, int(part))]}"
                    )
                checked += 1
    return checked
