"""``groupstream pipeline run FILE --instances N``: start N instances of a region pipeline as child processes
and keep them running.

Each instance is ``pipeline run FILE --member iK`` in a session of its own, so that Ctrl-C in a terminal reaches
only the supervisor, which asks every instance to stop at a batch boundary (SIGINT) and waits for them: nothing
is interrupted in the middle of a call into Spark. An instance that dies (killed, or its query failed) is started
again after a backoff (1 s, doubling up to 30 s), at most ``--max-restarts`` times; meanwhile the others take over
its partitions, and the restarted instance resumes from its Spark checkpoint and the table's ledger. What
happens to instances is printed as JSON lines (``instance-started``, ``instance-exited``, ``instance-restart``,
``instance-gave-up``); the instances' own lines are shown prefixed with their name.

On a standalone cluster (``--master spark://...``) each instance asks for its share of the cluster's cores
(``spark.cores.max``, the cores of the alive workers, from the master's web UI, divided by N) unless the run's
settings name ``spark.cores.max``: without it, the first instance's application takes every core and the others
never get an executor.

Ctrl-C (or SIGTERM) stops every instance at a batch boundary, waiting at most 30 s for a running micro-batch; a
second Ctrl-C stops them at once. The run exits 0 when every instance stopped cleanly: caught up (``--until-caught-up``) or stopped by SIGINT or
SIGTERM, also after restarts; 2 when an instance was given up on (its last error is named) or failed to stop.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from groupstream.cli.common import stdout
from groupstream.cli.errors import UserError
from groupstream.cli.pipeline_stop import SUPERVISOR_PID_ENV, StopRequest
from groupstream.spark.pipeline import PipelineSpec

__all__ = ["DEFAULT_MAX_RESTARTS", "backoff_s", "run_region"]

DEFAULT_MAX_RESTARTS = 5
_FIRST_BACKOFF_S = 1.0
_MAX_BACKOFF_S = 30.0
_PACE_S = 0.2
_STOP_TIMEOUT_S = 120.0
_ERROR_MARK = "error: "


def backoff_s(restart: int) -> float:
    """The wait before restart number ``restart`` (1, 2, ...) of an instance."""
    return float(min(_FIRST_BACKOFF_S * 2 ** (restart - 1), _MAX_BACKOFF_S))


def _say(event: str, member: str | None, **fields: Any) -> None:
    named = {} if member is None else {"member": member}
    stdout.print(json.dumps({"event": event, **named, **fields}, sort_keys=True), highlight=False, markup=False,
                 soft_wrap=True)  # fmt: skip


def _exit_text(code: int) -> str:
    if code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit {code}"


@dataclass
class Instance:
    name: str
    command: list[str]
    proc: subprocess.Popen[str] | None = None
    restarts: int = 0
    restart_at: float | None = None  # when the next start is due (backoff)
    done: bool = False
    gave_up: bool = False
    last_error: str | None = None
    pumps: list[threading.Thread] = field(default_factory=list)

    def start(self) -> None:
        env = dict(os.environ, **{SUPERVISOR_PID_ENV: str(os.getpid())})
        self.proc = subprocess.Popen(self.command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env=env, start_new_session=True)  # fmt: skip
        self.restart_at = None
        pump = threading.Thread(target=self._pump, args=(self.proc,), name=f"pump-{self.name}", daemon=True)
        pump.start()
        self.pumps.append(pump)
        _say("instance-started", self.name, pid=self.proc.pid, restarts=self.restarts)

    def _pump(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            text = line.rstrip()
            if _ERROR_MARK in text and text.startswith("groupstream "):
                self.last_error = text.split(_ERROR_MARK, 1)[1]
            stdout.print(f"[{self.name}] {text}", highlight=False, markup=False, soft_wrap=True)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def run_region(args: argparse.Namespace, spec: PipelineSpec, instances: int) -> int:
    """Start ``instances`` members as child processes, restart those that die, and wait for all of them."""
    max_restarts = getattr(args, "max_restarts", None)
    max_restarts = DEFAULT_MAX_RESTARTS if max_restarts is None else max_restarts
    if max_restarts < 0:
        raise UserError(f"--max-restarts must be 0 or more, got {max_restarts}")
    names = [f"i{k}" for k in range(instances)]
    base = [sys.executable, "-m", "groupstream", "pipeline", "run", str(args.file),
            "--bootstrap-server", args.bootstrap_server, "--master", args.master]  # fmt: skip
    if args.until_caught_up:
        base.append("--until-caught-up")
    for conf in getattr(args, "conf", None) or []:
        base += ["--conf", conf]
    stdout.print(f"pipeline {args.file.name}: a region of {instances} instances ({', '.join(names)}) sharing group "
                 f"{spec.group_id!r} and table {spec.sink_path}")  # fmt: skip
    share = _cores_share(args, spec, instances)
    if share is not None:
        base += ["--conf", f"spark.cores.max={share}"]
    members = [Instance(name, [*base, "--member", name]) for name in names]
    with StopRequest() as stop:
        for m in members:
            m.start()
        stopping = False
        forwarded = 0  # signals passed on: the first stops each instance at a batch boundary, a second at once
        deadline: float | None = None
        while not all(m.done for m in members):
            now = time.monotonic()
            if stop and not stopping:
                stopping, deadline = True, now + _STOP_TIMEOUT_S
                _say("stopping", None, signal=signal.Signals(stop.signal).name if stop.signal else None)
            if stopping and forwarded < max(stop.count, 1):
                forwarded += 1
                for m in members:
                    if m.running():
                        assert m.proc is not None
                        m.proc.send_signal(signal.SIGINT)
            for m in members:
                _check(m, now, stopping, max_restarts)
            if deadline is not None and now > deadline:
                for m in members:
                    if m.running():
                        assert m.proc is not None
                        m.proc.kill()
                        m.last_error = f"did not stop within {_STOP_TIMEOUT_S:.0f} s and was killed"
                        m.gave_up = True
            stop.wait(_PACE_S)  # the supervisor's pace; a signal cuts it short
    for m in members:
        for pump in m.pumps:
            pump.join(timeout=5)
    failed = [m for m in members if m.gave_up]
    if failed:
        raise UserError("instances failed: " + "; ".join(
            f"{m.name} ({m.last_error or 'no error reported'})" for m in failed))  # fmt: skip
    restarted = sum(m.restarts for m in members)
    stdout.print(f"pipeline {args.file.name}: all {instances} instances stopped"
                 + (f" ({restarted} restarts)" if restarted else ""))  # fmt: skip
    return 0


def _cores_share(args: argparse.Namespace, spec: PipelineSpec, instances: int) -> int | None:
    """``spark.cores.max`` for each instance on a standalone cluster, when the run does not set it."""
    from groupstream.cli.pipeline_cmd import spark_conf
    from groupstream.spark.session import cores_share, standalone_cores

    conf = spark_conf(args, spec)
    if not args.master.startswith("spark://") or "spark.cores.max" in conf:
        return None
    ui_port = conf.get("spark.master.ui.port", "8080")
    cores = standalone_cores(args.master, int(ui_port) if ui_port.isdigit() else 8080)
    head = f"pipeline {args.file.name}:"
    if cores is None:
        stdout.print(f"{head} the master's web UI (port {ui_port}, spark.master.ui.port) does not answer, so the "
                     f"{instances} instances' share of the cores is unknown: give each one with --conf "
                     "spark.cores.max=K, or the first may take every core", highlight=False, markup=False)  # fmt: skip
        return None
    share = cores_share(cores, instances)
    if cores < instances:
        stdout.print(f"{head} the cluster has {cores} cores for {instances} instances: each asks for 1, and some "
                     "wait for a core until another instance stops", highlight=False, markup=False)  # fmt: skip
    else:
        stdout.print(f"{head} the cluster has {cores} cores: each instance asks for {share} (spark.cores.max)",
                     highlight=False, markup=False)  # fmt: skip
    return share


def _check(m: Instance, now: float, stopping: bool, max_restarts: int) -> None:
    """Follow one instance: notice its exit, and start it again when its backoff is over."""
    if m.done:
        return
    if m.restart_at is not None:
        if stopping:
            m.done = True
        elif now >= m.restart_at:
            m.start()
        return
    assert m.proc is not None
    code = m.proc.poll()
    if code is None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(m.proc.pid, signal.SIGKILL)  # what it leaves behind (its Spark JVM, Python workers) goes with it
    _say("instance-exited", m.name, code=code, status=_exit_text(code), **({"error": m.last_error} if code else {}))
    if code == 0:
        m.done = True
    elif stopping:
        m.done = m.gave_up = True  # it failed while stopping: say so
    elif m.restarts >= max_restarts:
        m.done = m.gave_up = True
        m.last_error = f"{_exit_text(code)}, {m.restarts} restarts: {m.last_error or 'no error reported'}"
        _say("instance-gave-up", m.name, restarts=m.restarts, error=m.last_error)
    else:
        m.restarts += 1
        delay = backoff_s(m.restarts)
        m.restart_at = now + delay
        _say("instance-restart", m.name, restart=m.restarts, max_restarts=max_restarts, in_s=delay)
