"""One fault run from start to verdict: start the cluster, run the nemesis' schedule under the workload, heal,
restart the broker, read the whole log back, let every group catch up, and check the history.

The final phase, in order: every fault is healed (each heals itself as it ends; the proxy is cleared and the
ballast removed again in case the run was interrupted); the producers stop (each flushes, so every record is
acknowledged, failed or recorded as undelivered); the broker is killed with SIGKILL and started again (the
final read then also tests recovery from an unclean shutdown); an assign-mode confluent-kafka consumer reads
every partition from offset 0 to its high watermark (the final log); every group must then commit the log end
within ``catch_up_s`` (else it is ``stalled``); the members close, and the checker judges the history.
"""

from __future__ import annotations

import json
import platform
import shlex
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from groupstream.client.admin import Admin
from support.waiting import wait_until

from .checker import Report, check
from .cluster import Cluster, GroupSpec
from .disk import can_mount_tmpfs
from .history import load_run
from .nemesis import KINDS, Fault, Nemesis, make_schedule, render_schedule

GROUPS = (
    GroupSpec("coop", "classic", "cooperative-sticky", ("groupstream", "confluent")),
    GroupSpec("range", "classic", "range", ("confluent", "groupstream")),
    GroupSpec("kip848", "consumer", "uniform", ("groupstream", "confluent")),
)


@dataclass(frozen=True)
class RunConfig:
    seed: int
    budget_s: float  # the schedule's length (the sum of its faults' holds, quiet pauses and restarts)
    run_dir: Path
    partitions: int = 6
    groups: tuple[GroupSpec, ...] = GROUPS
    producers: tuple[str, ...] = ("groupstream", "confluent")
    rate: float = 50.0  # records per second per producer
    tmpfs_mb: int = 64
    kinds: tuple[str, ...] = KINDS
    catch_up_s: float = 120.0
    producer_flush_s: float = 150.0
    replay: str = ""  # the command that replays this run, printed with a failure
    deadline_s: float | None = None  # stop the nemesis after this long, wherever it is in its schedule

    @property
    def slots(self) -> list[str]:
        return [f"{g.name}.{client}{i + 1}-" for g in self.groups for i, client in enumerate(g.clients)]


@dataclass
class RunResult:
    config: RunConfig
    schedule: list[Fault]
    report: Report | None = None
    faults: Counter[str] = field(default_factory=Counter)
    aborted: str | None = None
    notes: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    ended: float = 0.0
    acked: int = 0

    @property
    def ok(self) -> bool:
        return self.aborted is None and self.report is not None and self.report.ok

    @property
    def duration_s(self) -> float:
        return (self.ended or time.monotonic()) - self.started

    def summary(self) -> str:
        r = self.report
        lines = [
            f"fault run seed={self.config.seed}: {'PASSED' if self.ok else 'FAILED'} in {self.duration_s / 60:.1f} min "
            f"({self.duration_s / 3600:.3f} h) on {platform.node()}",
            f"faults injected: {sum(self.faults.values())} ("
            + ", ".join(f"{k} {self.faults[k]}" for k in KINDS if self.faults[k]) + ")",
        ]
        if r is not None:
            lines.append(f"records checked: {r.stats.get('acked')} acknowledged, {r.stats.get('log_records')} in the final "
                         f"log, {r.stats.get('records_processed')} processed by {len(self.config.groups)} groups "
                         f"({r.stats.get('member_processes')} member processes, {r.stats.get('commits_acked')} commits)")  # fmt: skip
            lines.append(f"anomalies: {r.anomalies} (" + ", ".join(f"{k} {v}" for k, v in r.counts.items() if v) + ")")
            if r.info:
                lines.append("allowed by the checker: " + ", ".join(f"{k} {v}" for k, v in sorted(r.info.items())))
        lines += self.notes
        if self.aborted:
            lines.append(f"ABORTED: {self.aborted}")
        return "\n".join(lines)

    def failure_text(self) -> str:
        applied = sum(self.faults.values()) + (1 if self.aborted else 0)  # an abort names the fault it was in
        parts = [self.summary(), f"replay: {self.config.replay or '--seed ' + str(self.config.seed)}",
                 f"schedule (seed {self.config.seed}; the first {applied} of {len(self.schedule)} were applied):",
                 render_schedule(self.schedule[: min(applied, len(self.schedule))])]  # fmt: skip
        if self.report is not None:
            parts.append(self.report.render())
        parts.append(f"run directory (process logs, histories, broker log): {self.config.run_dir}")
        return "\n".join(parts)


def run(cfg: RunConfig, out: Callable[[str], None] = print) -> RunResult:
    kinds = cfg.kinds
    notes = []
    if "disk-full" in kinds and not can_mount_tmpfs(cfg.run_dir / "probe"):
        kinds = tuple(k for k in kinds if k != "disk-full")
        notes.append("disk-full skipped: this process cannot mount a tmpfs (not root, no user namespace)")
        cfg = replace(cfg, tmpfs_mb=0, kinds=kinds)
    schedule = make_schedule(cfg.seed, cfg.budget_s, cfg.slots, kinds)
    result = RunResult(cfg, schedule, notes=notes)
    out(f"fault run seed={cfg.seed} in {cfg.run_dir}; schedule:\n{render_schedule(schedule)}")
    topic = f"faults-{cfg.seed}"
    cluster = Cluster(cfg.run_dir, topic=topic, partitions=cfg.partitions, groups=cfg.groups,
                      producers=cfg.producers, rate=cfg.rate, tmpfs_mb=cfg.tmpfs_mb or None)  # fmt: skip
    nemesis = Nemesis(cluster, schedule)
    caught_up: dict[str, bool] = {}
    try:
        cluster.start()
        cluster.wait_groups_formed(90)
        out(f"cluster up: broker {cluster.broker.port} behind proxy {cluster.proxy.port}; nemesis starts")
        nemesis.run(None if cfg.deadline_s is None else time.monotonic() + cfg.deadline_s)
        result.faults = nemesis.done
        out(f"nemesis done: {sum(nemesis.done.values())} faults; final heal")
        caught_up = final_phase(cluster, cfg, out)
    except Exception as e:
        result.faults = nemesis.done
        result.aborted = f"{type(e).__name__}: {e}\n{traceback.format_exc()}\n{cluster.broker.log_tail(80)}"
    finally:
        result.notes.append(f"proxy: {cluster.proxy.connections_total} connections, {cluster.proxy.resets_total} reset")
        write_meta(cluster, cfg, schedule, caught_up)
        cluster.teardown()
        try:
            if result.aborted is None:
                result.report = check(load_run(cfg.run_dir))
        finally:
            cluster.release_disk(keep=not result.ok)  # a failed run keeps a copy of the broker's data dir
    result.ended = time.monotonic()
    out(result.summary())
    return result


def final_phase(cluster: Cluster, cfg: RunConfig, out: Callable[[str], None]) -> dict[str, bool]:
    with cluster.lock:
        cluster.proxy.heal()
        if cluster.disk is not None:
            cluster.disk.drain()
        for slot in cluster.producers:
            slot.stop(cfg.producer_flush_s + 30)
        cluster.broker_down = True
        cluster.broker.kill9()
        cluster.broker.start()
        cluster.broker_down = False
    log, ends = read_log(cluster.bootstrap, cluster.topic, cluster.partitions)
    with open(cfg.run_dir / "final_log.tsv", "w", encoding="utf-8") as f:
        f.writelines(f"{p}\t{o}\t{v}\n" for p, o, v in log)
    out(f"final log: {len(log)} records, ends {ends}; waiting for the groups to catch up")
    caught_up = wait_caught_up(cluster, ends, cfg.catch_up_s)
    cluster.stop_supervising()
    for slot in cluster.members:
        slot.stop(30)
    return caught_up


def read_log(bootstrap: str, topic: str, partitions: int, timeout_s: float = 120) -> tuple[list[tuple[int, int, str]], dict[int, int]]:
    """Every record of ``topic`` from offset 0 to each partition's high watermark, with a confluent-kafka
    consumer in assign mode (no group): the final log."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-final-read", "enable.auto.commit": False})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        reached = dict.fromkeys(range(partitions), 0)
        out: list[tuple[int, int, str]] = []
        deadline = time.monotonic() + timeout_s
        while any(reached[p] < ends[p] for p in range(partitions)):
            if time.monotonic() > deadline:
                raise AssertionError(f"the final read stalled at {reached}; high watermarks {ends}")
            for m in consumer.consume(num_messages=10_000, timeout=0.5):
                err = m.error()
                if err is not None:
                    raise AssertionError(f"the final read failed: {err}")
                p, o = m.partition(), m.offset()
                assert p is not None and o is not None
                out.append((p, o, (m.value() or b"").decode("utf-8", "replace")))
                reached[p] = o + 1
        return out, ends
    finally:
        consumer.close()


def wait_caught_up(cluster: Cluster, ends: dict[int, int], timeout_s: float) -> dict[str, bool]:
    """Whether each group committed every partition's log end within ``timeout_s`` (all groups wait together)."""
    want = {(cluster.topic, p): o for p, o in ends.items() if o > 0}
    done: dict[str, bool] = {g.name: False for g in cluster.groups}
    last: dict[str, dict[str, int]] = {}
    with Admin({"bootstrap.servers": cluster.bootstrap}) as admin:

        def all_done() -> bool:
            for g in done:
                if done[g]:
                    continue
                try:
                    got = {tp: om.offset for tp, om in admin.list_group_offsets(g).items()}
                except Exception:  # the coordinator is loading or moving: ask again
                    continue
                last[g] = {f"p{p}": got.get((t, p), -1) for t, p in want}
                done[g] = all(got.get(tp) == o for tp, o in want.items())
            return all(done.values())

        try:
            wait_until(all_done, timeout_s, "every group to commit the log end", interval_s=0.5)
        except AssertionError:
            (cluster.run_dir / "stalled.json").write_text(json.dumps({"ends": ends, "committed": last,
                "owned": {s.name: sorted(cluster.last_owned(s.name)) for s in cluster.members}}, indent=1))  # fmt: skip
    return done


def write_meta(cluster: Cluster, cfg: RunConfig, schedule: list[Fault], caught_up: dict[str, bool]) -> None:
    meta = {
        "seed": cfg.seed,
        "topic": cluster.topic,
        "partitions": cfg.partitions,
        "groups": [g.__dict__ for g in cfg.groups],
        "member_groups": cluster.member_groups,
        "caught_up": caught_up,
        "replay": cfg.replay,
        "schedule": [str(f) for f in schedule],
    }
    (cfg.run_dir / "run.json").write_text(json.dumps(meta, indent=1, default=list))


SHORT_BUDGET_S = 140.0  # the nemesis' part of the short schedule in `make test` (about 2.5 minutes in all)


def short_config(seed: int, run_dir: Path) -> RunConfig:
    """The short schedule: every kind of fault at least once, over ``SHORT_BUDGET_S``."""
    return RunConfig(seed, SHORT_BUDGET_S, run_dir, replay=replay_command(seed, short=True))


def long_config(seed: int, run_dir: Path, minutes: float) -> RunConfig:
    """A long schedule: the same workload under faults for ``minutes`` (the schedule is drawn longer and cut
    at that time, since restarts take less than the schedule's estimate), the tmpfs sized for its records."""
    return RunConfig(seed, minutes * 90, run_dir, tmpfs_mb=64 + int(minutes * 4), replay=replay_command(seed, minutes),
                     deadline_s=minutes * 60)  # fmt: skip


def replay_command(seed: int, minutes: float = 0, *, short: bool = False) -> str:
    length = ["--short"] if short else ["--minutes", f"{minutes:g}"]
    return shlex.join([".venv/bin/python", "-m", "tests.faults", *length, "--seed", str(seed)])
