"""The nemesis: a schedule of faults drawn from a seeded RNG, and their application to a `Cluster`.

The schedule is a pure function of the seed, the time budget and the member slots, so ``--seed N`` replays the
same faults in the same order with the same parameters and targets (the timing of the processes around them
still varies from run to run, as it does in any system test). Every schedule starts with each kind of fault
once, in an order drawn from the seed, then draws kinds at random until the budget is spent. Faults come one
at a time: apply, hold for ``hold_s``, heal, then a quiet pause of ``quiet_s``; the holds and pauses are the
schedule, not waits for conditions.

Kinds, and what each does:

- ``broker-kill``: kill -9 the broker, leave it down ``hold_s``, start it again on the same data dir and port;
- ``broker-restart``: the same with SIGTERM (a clean shutdown);
- ``broker-pause``: SIGSTOP the broker for ``hold_s`` (sometimes past the 6 s session timeout), then SIGCONT;
- ``member-kill``: kill -9 a member, leave its slot empty ``hold_s``, start a new incarnation;
- ``member-pause``: SIGSTOP a member for ``hold_s`` (sometimes past its session timeout), then SIGCONT;
- ``disk-full``: fill the broker's tmpfs with a ballast file until ENOSPC (then, half the time, give back a
  few KiB so the broker's writes come out short rather than refused), hold, remove it;
- ``latency``: delay every chunk through the proxy by ``latency_ms`` + up to ``jitter_ms``, for every client
  or one member's connections;
- ``reset``: RST the proxied connections ``count`` times over ``hold_s`` (every client or one member's);
- ``stall``: hold every byte in the proxy for ``hold_s`` (every client or one member's), connections open.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from .cluster import Cluster, Slot

KINDS = ("broker-kill", "broker-restart", "broker-pause", "member-kill", "member-pause", "disk-full",
         "latency", "reset", "stall")  # fmt: skip
_RESTART_S = 3.0  # what a broker restart adds to a fault's length, for the time budget


@dataclass(frozen=True)
class Fault:
    kind: str
    hold_s: float
    quiet_s: float
    target: str = ""  # "": every client; else a member slot ("<group>.<client><n>-")
    latency_ms: int = 0
    jitter_ms: int = 0
    count: int = 1
    leave_kb: int = 0  # disk-full: KiB given back after the disk is full, so that writes are short ones

    def __str__(self) -> str:
        extra = ""
        if self.kind == "latency":
            extra = f" {self.latency_ms}+{self.jitter_ms}ms"
        elif self.kind == "reset":
            extra = f" x{self.count}"
        elif self.kind == "disk-full" and self.leave_kb:
            extra = f" leaving {self.leave_kb}KiB"
        who = f" {self.target}" if self.target else (" all" if self.kind in ("latency", "reset", "stall") else "")
        return f"{self.kind}{who}{extra} hold {self.hold_s:.1f}s quiet {self.quiet_s:.1f}s"

    @property
    def cost_s(self) -> float:
        return self.hold_s + self.quiet_s + (_RESTART_S if self.kind in ("broker-kill", "broker-restart") else 0.0)


def make_schedule(seed: int, budget_s: float, slots: Sequence[str], kinds: Sequence[str] = KINDS) -> list[Fault]:
    rng = random.Random(seed)
    order = list(kinds)
    rng.shuffle(order)
    faults = [_draw(rng, k, slots) for k in order]
    while sum(f.cost_s for f in faults) < budget_s:
        faults.append(_draw(rng, rng.choice(list(kinds)), slots))
    return faults


def _draw(rng: random.Random, kind: str, slots: Sequence[str]) -> Fault:
    quiet = round(rng.uniform(1.5, 4.0), 1)
    some = rng.choice(list(slots)) if rng.random() < 0.5 else ""  # a proxy fault on one member or all

    def hold(lo: float, hi: float) -> float:
        return round(rng.uniform(lo, hi), 1)

    if kind == "broker-kill":
        return Fault(kind, hold(0.2, 3.0), quiet)
    if kind == "broker-restart":
        return Fault(kind, hold(0.2, 2.0), quiet)
    if kind == "broker-pause":
        return Fault(kind, hold(1.0, 10.0), quiet)
    if kind == "member-kill":
        return Fault(kind, hold(0.5, 8.0), quiet, rng.choice(list(slots)))
    if kind == "member-pause":
        return Fault(kind, hold(1.0, 10.0), quiet, rng.choice(list(slots)))
    if kind == "disk-full":
        return Fault(kind, hold(2.0, 8.0), quiet, leave_kb=rng.choice([0, rng.randint(4, 256)]))
    if kind == "latency":
        return Fault(kind, hold(3.0, 10.0), quiet, some, latency_ms=rng.randint(20, 300), jitter_ms=rng.randint(0, 100))
    if kind == "reset":
        return Fault(kind, hold(0.5, 3.0), quiet, some, count=rng.randint(1, 3))
    if kind == "stall":
        return Fault(kind, hold(1.0, 9.0), quiet, some)
    raise ValueError(f"unknown fault kind {kind!r}")


def render_schedule(faults: Sequence[Fault]) -> str:
    return "\n".join(f"  {i + 1:3d}. {f}" for i, f in enumerate(faults))


class Nemesis:
    """Applies a schedule to a cluster, one fault at a time; ``done`` counts the faults applied by kind."""

    def __init__(self, cluster: Cluster, schedule: Sequence[Fault]) -> None:
        self.cluster = cluster
        self.schedule = schedule
        self.done: Counter[str] = Counter()
        self.interrupt = threading.Event()

    def run(self, deadline: float | None = None) -> None:
        for fault in self.schedule:
            if self.interrupt.is_set() or (deadline is not None and time.monotonic() >= deadline):
                return
            self.apply(fault)
            self.interrupt.wait(fault.quiet_s)  # the schedule's quiet pause between faults

    def apply(self, f: Fault) -> None:
        c = self.cluster
        params: dict[str, Any] = {k: v for k, v in asdict(f).items() if k not in ("kind", "target")}
        target = f.target
        with c.lock:
            start = time.monotonic()
            if f.kind in ("broker-kill", "broker-restart"):
                c.broker_down = True
                if f.kind == "broker-kill":
                    c.broker.kill9()
                else:
                    params["exit_code"] = c.broker.stop()
                self._hold(f)
                c.broker.start()
                c.broker_down = False
            elif f.kind == "broker-pause":
                pid = c.broker.pid
                assert pid is not None
                os.kill(pid, signal.SIGSTOP)
                self._hold(f)
                os.kill(pid, signal.SIGCONT)
            elif f.kind == "member-kill":
                slot = self._slot(f.target)
                target = slot.kill9()
                self._hold(f)
                params["restarted_as"] = slot.start()
            elif f.kind == "member-pause":
                slot = self._slot(f.target)
                target = slot.signal(signal.SIGSTOP)
                self._hold(f)
                slot.signal(signal.SIGCONT)
            elif f.kind == "disk-full":
                assert c.disk is not None, "disk-full needs the tmpfs"
                params["ballast_bytes"] = c.disk.fill(f.leave_kb * 1024)
                self._hold(f)
                c.disk.drain()
            elif f.kind == "latency":
                c.proxy.set_latency(f.latency_ms, f.jitter_ms, f.target)
                self._hold(f)
                c.proxy.heal()
            elif f.kind == "reset":
                resets = 0
                for _ in range(f.count):
                    resets += c.proxy.reset(f.target)
                    self.interrupt.wait(f.hold_s / f.count)  # the schedule's spacing of the resets
                params["connections_reset"] = resets
            elif f.kind == "stall":
                c.proxy.stall(f.target)
                self._hold(f)
                c.proxy.heal()
            else:
                raise ValueError(f"unknown fault kind {f.kind!r}")
            end = time.monotonic()
        self.done[f.kind] += 1
        c.event("fault", kind=f.kind, target=target, start=start, end=end, params=params)

    def _hold(self, f: Fault) -> None:
        self.interrupt.wait(f.hold_s)  # the schedule's hold: how long the fault lasts

    def _slot(self, slot: str) -> Slot:
        return next(s for s in self.cluster.members if s.slot == slot)
