"""The region controller as a pure core: the drain -> checkpoint cycle and the reset, over all members.

A cycle: every member drains (stops polling, empties its queue, commits); once all have drained, every member
checkpoints; once all have, the checkpoint is complete, members resume and older checkpoints are retired.
Checkpoint ids only grow; an id whose cycle failed is never used again. Cycles start every ``period_ms`` (or
when the operator asks, ``request_checkpoint``).

A reset goes to the last complete checkpoint, or to the initial state when there is none. Each reset try has
its own attempt number (never reused, so a merge keyed by [checkpoint id, attempt] belongs to one try); a try
that does not finish within ``reset_timeout_ms`` is replaced by a new attempt, and so is one a member reports
failed (its commit of the cut was refused: the group is rebalancing), ``reset_retry_ms`` later. A member asking
for a reset, a member refusing to drain, a failed checkpoint, a cycle that does not complete within
``reset_timeout_ms`` (a member died) and a reset timeout all lead here.

Members that join or leave change whom the controller waits for; the group rebalance their arrival or
departure causes reaches the controller as reset requests from the members whose partitions moved.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

__all__ = [
    "RESET_RETRY_MS",
    "ControlEffect",
    "RegionController",
    "RegionPhase",
    "Resume",
    "Retire",
    "StartDrain",
    "StartReset",
    "TakeCheckpoint",
]


RESET_RETRY_MS = 250


class RegionPhase(Enum):
    IDLE = "IDLE"
    DRAINING = "DRAINING"
    CHECKPOINTING = "CHECKPOINTING"
    RESETTING = "RESETTING"


class ControlEffect:
    __slots__ = ()


@dataclass(frozen=True, slots=True)
class StartDrain(ControlEffect):
    checkpoint_id: int


@dataclass(frozen=True, slots=True)
class TakeCheckpoint(ControlEffect):
    checkpoint_id: int


@dataclass(frozen=True, slots=True)
class Resume(ControlEffect):
    """The cycle or reset is over: members poll again."""


@dataclass(frozen=True, slots=True)
class Retire(ControlEffect):
    """Checkpoints (and their merges) up to and including ``checkpoint_id`` are no longer needed."""

    checkpoint_id: int


@dataclass(frozen=True, slots=True)
class StartReset(ControlEffect):
    """Reset every member to ``checkpoint_id`` (None: the initial state), try number ``attempt``."""

    checkpoint_id: int | None
    attempt: int
    reason: str


class RegionController:
    def __init__(self, members: Iterable[str], period_ms: int | None, reset_timeout_ms: int, now_ms: int, *,
                 last_complete: int | None = None, checkpoint_id: int = 0, attempt: int = 0,
                 reset_retry_ms: int = RESET_RETRY_MS) -> None:  # fmt: skip
        """``last_complete``, ``checkpoint_id`` and ``attempt`` restore what a previous controller of the region
        left (its durable state)."""
        self.members: set[str] = set(members)
        self.period_ms = period_ms
        self.reset_timeout_ms = reset_timeout_ms
        self.reset_retry_ms = reset_retry_ms
        self._retry_reason: str | None = None  # a member reported the running reset attempt failed
        self.phase = RegionPhase.IDLE
        self.last_complete = last_complete
        self.checkpoint_id = checkpoint_id  # the id of the running (or last started) cycle
        self.attempt = attempt  # the last reset attempt started
        self.reset_target: int | None = None
        self._pending: set[str] = set()
        self._next_cycle_ms = None if period_ms is None else now_ms + period_ms
        self._reset_deadline_ms: int | None = None
        self.resets = 0  # completed resets, for the operator's logs and tests

    # --- time -------------------------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        """When ``tick`` must be called next (None: only when something happens)."""
        if self.phase is RegionPhase.IDLE:
            return self._next_cycle_ms
        return self._reset_deadline_ms

    def tick(self, now_ms: int) -> list[ControlEffect]:
        late = self._reset_deadline_ms is not None and now_ms >= self._reset_deadline_ms
        if self.phase is RegionPhase.RESETTING:
            if not late:
                return []
            return self._start_reset(now_ms, self._retry_reason or f"reset attempt {self.attempt} timed out")
        if self.phase in (RegionPhase.DRAINING, RegionPhase.CHECKPOINTING) and late:
            # a member that never answers (it died) fails the cycle: the region resets, as seed 000's does
            waiting = ", ".join(sorted(self._pending))
            return self._start_reset(now_ms, f"checkpoint {self.checkpoint_id} timed out waiting for {waiting}")
        if self.phase is RegionPhase.IDLE and self._next_cycle_ms is not None and now_ms >= self._next_cycle_ms:
            return self._start_cycle(now_ms)
        return []

    def request_checkpoint(self, now_ms: int) -> list[ControlEffect]:
        """An operator-driven region asks for a cycle now (ignored while one runs or a reset is under way)."""
        return self._start_cycle(now_ms) if self.phase is RegionPhase.IDLE else []

    # --- membership -------------------------------------------------------------------------------------

    def member_joined(self, member: str, now_ms: int) -> list[ControlEffect]:
        self.members.add(member)
        if self.phase is not RegionPhase.IDLE:
            # it cannot take part in a cycle or reset it did not see start: do that one again with everyone
            return self._start_reset(now_ms, f"member {member} joined during {self.phase.value.lower()}")
        return []

    def member_left(self, member: str, now_ms: int) -> list[ControlEffect]:
        self.members.discard(member)
        self._pending.discard(member)
        return self._maybe_advance(now_ms)

    # --- cycle ------------------------------------------------------------------------------------------

    def _start_cycle(self, now_ms: int) -> list[ControlEffect]:
        self.checkpoint_id += 1
        self.phase = RegionPhase.DRAINING
        self._pending = set(self.members)
        self._reset_deadline_ms = now_ms + self.reset_timeout_ms  # the cycle's deadline too
        if not self._pending:  # nobody to wait for: the cycle is trivially done
            return [StartDrain(self.checkpoint_id), *self._advance_from_draining()]
        return [StartDrain(self.checkpoint_id)]

    def drained(self, member: str, checkpoint_id: int, now_ms: int) -> list[ControlEffect]:
        if self.phase is not RegionPhase.DRAINING or checkpoint_id != self.checkpoint_id:
            return []
        self._pending.discard(member)
        return self._maybe_advance(now_ms)

    def drain_refused(self, member: str, checkpoint_id: int, reason: str, now_ms: int) -> list[ControlEffect]:
        if self.phase is not RegionPhase.DRAINING or checkpoint_id != self.checkpoint_id:
            return []
        return self._start_reset(now_ms, f"member {member} refused to drain: {reason}")

    def checkpointed(self, member: str, checkpoint_id: int, error: str | None, now_ms: int) -> list[ControlEffect]:
        if self.phase is not RegionPhase.CHECKPOINTING or checkpoint_id != self.checkpoint_id:
            return []
        if error is not None:
            return self._start_reset(now_ms, f"checkpoint {checkpoint_id} of member {member} failed: {error}")
        self._pending.discard(member)
        return self._maybe_advance(now_ms)

    def _maybe_advance(self, now_ms: int) -> list[ControlEffect]:
        if self._pending:
            return []
        if self.phase is RegionPhase.DRAINING:
            return self._advance_from_draining()
        if self.phase is RegionPhase.CHECKPOINTING:
            done = self.checkpoint_id
            retired = self.last_complete
            self.last_complete = done
            self._idle(now_ms)
            effects: list[ControlEffect] = [Resume()]
            if retired is not None:
                effects.append(Retire(retired))
            return effects
        if self.phase is RegionPhase.RESETTING:
            self.resets += 1
            self._idle(now_ms)
            return [Resume()]
        return []

    def _advance_from_draining(self) -> list[ControlEffect]:
        self.phase = RegionPhase.CHECKPOINTING
        self._pending = set(self.members)
        if not self._pending:
            self.last_complete = self.checkpoint_id
            self.phase = RegionPhase.IDLE
            return [TakeCheckpoint(self.checkpoint_id), Resume()]
        return [TakeCheckpoint(self.checkpoint_id)]

    # --- reset ------------------------------------------------------------------------------------------

    def request_reset(self, member: str, reason: str, now_ms: int) -> list[ControlEffect]:
        """A member asks for a reset (its partitions were revoked). One already under way covers it."""
        if self.phase is RegionPhase.RESETTING:
            return []
        return self._start_reset(now_ms, f"member {member}: {reason}")

    def reset_done(self, member: str, attempt: int, now_ms: int) -> list[ControlEffect]:
        if self.phase is not RegionPhase.RESETTING or attempt != self.attempt:
            return []  # an older attempt's answer
        self._pending.discard(member)
        return self._maybe_advance(now_ms)

    def reset_failed(self, member: str, attempt: int, reason: str, now_ms: int) -> list[ControlEffect]:
        """``member`` could not complete reset try ``attempt``: a new attempt starts ``reset_retry_ms`` from now
        (soon, rather than when the attempt times out; not at once, since a rebalance under way is the usual
        cause and takes a moment to settle)."""
        if self.phase is not RegionPhase.RESETTING or attempt != self.attempt:
            return []  # an older attempt's answer
        self._retry_reason = f"member {member}: reset attempt {attempt} failed: {reason}"
        retry_at = now_ms + self.reset_retry_ms
        if self._reset_deadline_ms is None or retry_at < self._reset_deadline_ms:
            self._reset_deadline_ms = retry_at
        return []

    def _start_reset(self, now_ms: int, reason: str) -> list[ControlEffect]:
        self._retry_reason = None
        self.attempt += 1
        self.phase = RegionPhase.RESETTING
        self.reset_target = self.last_complete
        self._pending = set(self.members)
        self._reset_deadline_ms = now_ms + self.reset_timeout_ms
        effects: list[ControlEffect] = [StartReset(self.last_complete, self.attempt, reason)]
        if not self._pending:
            self.resets += 1
            self._idle(now_ms)
            effects.append(Resume())
        return effects

    def _idle(self, now_ms: int) -> None:
        self.phase = RegionPhase.IDLE
        self._pending = set()
        self._reset_deadline_ms = None
        if self.period_ms is not None:
            self._next_cycle_ms = now_ms + self.period_ms
