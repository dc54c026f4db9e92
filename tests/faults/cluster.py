"""The processes of a fault run: our broker (data dir on a tmpfs), the fault proxy in front of it, producer
and member processes, and a supervisor that restarts whatever dies on its own.

Every process is started here and only those are ever signalled. A member or producer *slot* runs one process
at a time; each new process is a new incarnation with its own name (``<slot><n>``, e.g. ``coop.groupstream1-2``),
its own client id (which the proxy targets by prefix) and its own history file. The nemesis and the supervisor
take ``lock`` before they touch a process, so a restart by one never races a kill by the other.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from groupstream.client.admin import Admin, NewTopic
from support.brokers import KIP848_TEST_SETTINGS, BrokerKind, BrokerProcess
from support.waiting import wait_until

from .disk import TmpfsDisk
from .history import JsonLines, read_jsonl
from .proxy import FaultProxy

TESTS_DIR = Path(__file__).resolve().parents[1]

# Our broker as the suite runs it: the KIP-848 test timings (heartbeat 0.5 s, session 6 s: the classic members
# use the same), no initial rebalance delay, and small segments so that recovery has many of them to check.
BROKER_SETTINGS = {
    **KIP848_TEST_SETTINGS,
    "group.initial.rebalance.delay.ms": "0",
    "log.segment.bytes": str(256 * 1024),
}


@dataclass(frozen=True)
class GroupSpec:
    """A consumer group: one member slot per entry of ``clients`` (groupstream or confluent)."""

    name: str
    protocol: str  # classic | consumer
    strategy: str  # classic: range | cooperative-sticky; consumer: the broker's assignor (uniform | range)
    clients: tuple[str, ...]


class Slot:
    """One member or producer at a time; see the module docstring."""

    def __init__(self, cluster: Cluster, slot: str, config: dict[str, Any], group: str | None) -> None:
        self.cluster = cluster
        self.slot = slot  # ends with "-"
        self.config = config
        self.group = group
        self.incarnation = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.down = False  # the nemesis took it down on purpose: the supervisor leaves it alone
        self._stderr: IO[bytes] | None = None

    @property
    def role(self) -> str:
        return str(self.config["role"])

    @property
    def name(self) -> str:
        return f"{self.slot}{self.incarnation}"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_path(self, name: str) -> Path:
        if self.role == "producer":
            return self.cluster.run_dir / "producers" / f"{name}.log"
        return self.cluster.run_dir / "members" / f"{name}.jsonl"

    def start(self) -> str:
        self.incarnation += 1
        name = self.name
        cfg = {**self.config, "name": name, "log": str(self.log_path(name)), "bootstrap": self.cluster.bootstrap}
        if self.group is not None:
            self.cluster.member_groups[name] = self.group
        self._close_stderr()
        self._stderr = open(self.cluster.run_dir / "stderr" / f"{name}.txt", "ab")  # noqa: SIM115 - closed on the next start
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS_DIR), os.environ.get("PYTHONPATH", "")]))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "faults.worker", json.dumps(cfg)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=self._stderr,
            cwd=self.cluster.run_dir, env=env, start_new_session=True,
        )  # fmt: skip
        self.down = False
        self.cluster.event(f"{self.role}-start", who=name, pid=self.proc.pid)
        return name

    def kill9(self) -> str:
        assert self.proc is not None
        self.down = True
        t = time.monotonic()
        self.proc.kill()
        self.proc.wait(30)
        self.cluster.event(f"{self.role}-kill", who=self.name, member=self.name, t=t)
        return self.name

    def signal(self, sig: signal.Signals) -> str:
        assert self.proc is not None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
        return self.name

    def stop(self, timeout: float) -> int | None:
        """Ask it to finish (``stop`` on stdin) and wait; kill -9 it after ``timeout`` (recorded as a kill)."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return None if proc is None else proc.returncode
        self.down = True
        os.kill(proc.pid, signal.SIGCONT)  # in case a failed run left it frozen
        try:
            assert proc.stdin is not None
            proc.stdin.write(b"stop\n")
            proc.stdin.flush()
        except OSError:
            pass
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill9()
            self.cluster.event("stop-timeout", who=self.name, timeout=timeout)
            return None

    def _close_stderr(self) -> None:
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def teardown(self) -> None:
        """Kill the process if it still runs (only this slot's own child)."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(30)
        self._close_stderr()


class Cluster:
    def __init__(self, run_dir: Path, *, topic: str, partitions: int, groups: tuple[GroupSpec, ...],
                 producers: tuple[str, ...], rate: float, tmpfs_mb: int | None) -> None:  # fmt: skip
        self.run_dir = run_dir
        self.topic = topic
        self.partitions = partitions
        self.groups = groups
        for sub in ("producers", "members", "stderr", "broker"):
            (run_dir / sub).mkdir(parents=True, exist_ok=True)
        self.lock = threading.RLock()
        self._events = JsonLines(run_dir / "nemesis.jsonl")
        self._events_lock = threading.Lock()
        self.member_groups: dict[str, str] = {}
        self.disk = TmpfsDisk(run_dir / "disk", tmpfs_mb) if tmpfs_mb else None
        data_dir = self.disk.data_dir if self.disk is not None else run_dir / "disk" / "data"
        self.proxy = FaultProxy()
        self.broker = BrokerProcess(BrokerKind.GROUPSTREAM, run_dir / "broker", advertised_port=self.proxy.port,
                                    data_dir=data_dir, settings=BROKER_SETTINGS, start_timeout=60)  # fmt: skip
        self.broker_down = False  # the nemesis stopped it on purpose
        self.producers = [Slot(self, f"prod.{client}-", {"role": "producer", "client": client, "topic": topic,
                                                          "rate": rate}, None) for client in producers]  # fmt: skip
        self.members = [
            Slot(self, f"{g.name}.{client}{i + 1}-", {"role": "member", "client": client, "protocol": g.protocol,
                                                      "strategy": g.strategy, "group": g.name, "topic": topic}, g.name)
            for g in groups
            for i, client in enumerate(g.clients)
        ]  # fmt: skip
        self._stop_supervisor = threading.Event()
        self._supervisor: threading.Thread | None = None

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap  # the proxy's address, which the broker advertises

    def event(self, ev: str, **fields: Any) -> None:
        fields.setdefault("t", time.monotonic())
        with self._events_lock:
            self._events.write(ev, **fields)

    # -- start and stop -------------------------------------------------------------------------------------------

    def start(self) -> None:
        if self.disk is not None:
            self.disk.mount()
        self.broker.start()
        self.proxy.start(self.broker.host, self.broker.port)
        with Admin({"bootstrap.servers": self.bootstrap}) as admin:
            admin.create_topics([NewTopic(self.topic, self.partitions)])
            wait_until(lambda: (t := admin.list_topics().get(self.topic)) is not None and t.partition_count == self.partitions,
                       30, f"topic {self.topic} in metadata")  # fmt: skip
        for slot in self.producers + self.members:
            slot.start()
        self._supervisor = threading.Thread(target=self._supervise, name="fault-supervisor", daemon=True)
        self._supervisor.start()

    def wait_groups_formed(self, timeout: float) -> None:
        """Every group's members together hold every partition (by their own logs)."""
        def formed() -> bool:
            return all(self.owned_by_group(g.name) == set(range(self.partitions)) for g in self.groups)

        wait_until(formed, timeout, "every group to assign every partition", interval_s=0.2,
                   explain=lambda: json.dumps({g.name: sorted(self.owned_by_group(g.name)) for g in self.groups}))  # fmt: skip

    def owned_by_group(self, group: str) -> set[int]:
        out: set[int] = set()
        for slot in self.members:
            if slot.group == group and slot.alive:
                out |= self.last_owned(slot.name)
        return out

    def last_owned(self, member: str) -> set[int]:
        path = self.run_dir / "members" / f"{member}.jsonl"
        if not path.exists():
            return set()
        owned = [e for e in read_jsonl(path) if e["ev"] == "owned"]
        return set(owned[-1]["parts"]) if owned else set()

    def stop_supervising(self) -> None:
        self._stop_supervisor.set()
        if self._supervisor is not None:
            self._supervisor.join(30)

    def teardown(self) -> None:
        self.stop_supervising()
        for slot in self.producers + self.members:
            slot.teardown()
        if self.broker.running and self.broker.pid is not None:
            os.kill(self.broker.pid, signal.SIGCONT)
        self.broker.stop()
        self.proxy.close()
        self._events.close()

    def release_disk(self, *, keep: bool) -> None:
        """Unmount the tmpfs; with ``keep``, first copy the broker's data dir to ``broker-data/`` in the run
        directory, for the post-mortem of a failed run."""
        if self.disk is None or not self.disk.mounted:
            return
        self.disk.drain()
        if keep:
            shutil.copytree(self.disk.data_dir, self.run_dir / "broker-data", dirs_exist_ok=True)
        self.disk.unmount()

    # -- the supervisor ---------------------------------------------------------------------------------------------

    def _supervise(self) -> None:
        """Restart what died on its own (a crash is recorded: the checker counts it)."""
        while not self._stop_supervisor.wait(0.5):  # the supervisor's poll interval
            if not self.lock.acquire(blocking=False):
                continue  # the nemesis is at work; look again next round
            try:
                self.supervise_once()
            finally:
                self.lock.release()

    def supervise_once(self) -> None:
        if not self.broker_down and not self.broker.running:
            code = self.broker.stop()
            self.event("broker-exit", who="broker", code=code)
            self.broker.start()
        for slot in self.producers + self.members:
            if slot.down or slot.proc is None or slot.proc.poll() is None:
                continue
            code = slot.proc.returncode
            if slot.role == "producer" and code == 4:
                self.event("producer-restart", who=slot.name, code=code)  # its log holds the fatal error (X)
            else:
                self.event(f"{slot.role}-exit", who=slot.name, member=slot.name, code=code)
            slot.start()
