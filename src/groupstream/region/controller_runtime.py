"""The region controller at work: it turns the pure `RegionController`'s effects into commands on the control
plane and the members' answers on it back into controller events.

Members are the processes registered for the group in the control plane; one that registers or leaves is
reported to the controller. Every command gets the next sequence number, and a member answers each command
it sees with an `Ack` of that sequence number; a member asking for a reset writes an ack of kind
``reset-request``. The loop waits on the control plane for something new or for the controller's next
deadline, never on a fixed sleep.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from groupstream.region.control_plane import ControlPlane
from groupstream.region.control_records import Ack, Command, RegionState
from groupstream.region.control_view import ControlView
from groupstream.region.controller import (
    ControlEffect,
    RegionController,
    Resume,
    Retire,
    StartDrain,
    StartReset,
    TakeCheckpoint,
)

__all__ = ["RESET_REQUEST", "ControllerRuntime"]

RESET_REQUEST = "reset-request"
log = logging.getLogger("groupstream.region")


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class ControllerRuntime:
    def __init__(self, plane: ControlPlane, group: str, *, period_ms: int | None, reset_timeout_ms: int,
                 clock: Callable[[], int] = monotonic_ms) -> None:  # fmt: skip
        self.plane = plane
        self.group = group
        self.clock = clock
        now = clock()
        members, state = plane.read(lambda v: (set(v.members(group)), v.state))
        if state is None:
            self.controller = RegionController(members, period_ms, reset_timeout_ms, now)
        else:  # a controller before us: go on from its last complete checkpoint, never reusing its ids
            self.controller = RegionController(members, period_ms, reset_timeout_ms, now,
                                               last_complete=state.last_complete,
                                               checkpoint_id=state.checkpoint_id, attempt=state.attempt)  # fmt: skip
        last = plane.read(lambda v: v.command)
        self.seq = 0 if last is None else last.seq
        self._acks_read = plane.read(lambda v: v.acks_seen)  # answers to earlier controllers are not ours
        self.history: list[Command] = []  # commands this runtime issued, for logs and tests
        # a controller before us may have stopped mid-cycle or mid-reset: start from a consistent cut again
        self._resume_with_reset = state is not None

    def step(self, timeout_s: float) -> list[Command]:
        """Wait up to ``timeout_s`` (less if the controller has a deadline) for news, handle it, publish the
        resulting commands and return them."""
        deadline = self.controller.next_deadline()
        wait_s = timeout_s
        if deadline is not None:
            wait_s = max(min(wait_s, (deadline - self.clock()) / 1000), 0)
        self.plane.wait_for(self._news, wait_s)
        now = self.clock()
        effects: list[ControlEffect] = []
        members, acks, seen = self.plane.read(
            lambda v: (set(v.members(self.group)), v.acks_after(self._acks_read), v.acks_seen)
        )
        self._acks_read = seen
        for m in sorted(members - self.controller.members):
            effects += self.controller.member_joined(m, now)
        for m in sorted(self.controller.members - members):
            effects += self.controller.member_left(m, now)
        for ack in acks:
            effects += self._on_ack(ack, now)
        if self._resume_with_reset:
            self._resume_with_reset = False
            effects += self.controller.request_reset("controller", "the region controller restarted", now)
        effects += self.controller.tick(now)
        return self._issue(effects)

    def request_checkpoint(self) -> list[Command]:
        """An operator-driven region asks for a cycle now."""
        return self._issue(self.controller.request_checkpoint(self.clock()))

    def _issue(self, effects: list[ControlEffect]) -> list[Command]:
        if effects:
            c = self.controller
            self.plane.publish(RegionState(self.plane.region, c.last_complete, c.checkpoint_id, c.attempt))
        return [self._publish(e) for e in effects]

    def _news(self, view: ControlView) -> bool | None:
        if view.acks_seen > self._acks_read or set(view.members(self.group)) != self.controller.members:
            return True
        return None

    def _on_ack(self, ack: Ack, now: int) -> list[ControlEffect]:
        c = self.controller
        if ack.kind == RESET_REQUEST:
            return c.request_reset(ack.member, ack.error or "asked for a reset", now)
        command = next((cmd for cmd in reversed(self.history) if cmd.seq == ack.seq), None)
        if command is None:
            return []  # an answer to a command of an earlier controller
        if command.kind == "drain":
            assert command.checkpoint_id is not None
            if ack.error is not None:
                return c.drain_refused(ack.member, command.checkpoint_id, ack.error, now)
            return c.drained(ack.member, command.checkpoint_id, now)
        if command.kind == "checkpoint":
            assert command.checkpoint_id is not None
            return c.checkpointed(ack.member, command.checkpoint_id, ack.error, now)
        if command.kind == "reset":
            if ack.error is not None:
                return c.reset_failed(ack.member, command.attempt, ack.error, now)
            return c.reset_done(ack.member, command.attempt, now)
        return []

    def _publish(self, effect: ControlEffect) -> Command:
        self.seq += 1
        region = self.plane.region
        if isinstance(effect, StartDrain):
            command = Command(region, self.seq, "drain", effect.checkpoint_id)
        elif isinstance(effect, TakeCheckpoint):
            command = Command(region, self.seq, "checkpoint", effect.checkpoint_id)
        elif isinstance(effect, Resume):
            command = Command(region, self.seq, "resume")
        elif isinstance(effect, Retire):
            command = Command(region, self.seq, "retire", effect.checkpoint_id)
        else:
            assert isinstance(effect, StartReset)
            command = Command(region, self.seq, "reset", effect.checkpoint_id, effect.attempt)
            log.info("region %s: reset to %s, attempt %d (%s)", region,
                     "the initial state" if effect.checkpoint_id is None else f"checkpoint {effect.checkpoint_id}",
                     effect.attempt, effect.reason)  # fmt: skip
        self.plane.publish(command)
        self.history.append(command)
        del self.history[:-1000]  # answers only ever come to recent commands
        return command
