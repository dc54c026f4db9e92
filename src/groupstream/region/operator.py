"""The group consumer operator of seed 000 as a pure core: events in, effects out.

The operator's event thread feeds this core what happens (the consumer's revocation and assignment callbacks,
a poll returning, the region's drain / checkpoint / reset, the answers to effects it asked for) and carries
out the effects it returns, in order: stop or start polling, drop queued messages, seek, commit, fetch the
committed offsets, contribute to the offset merge and wait for it, ask the region for a reset, restart. The
core does no I/O and reads no clock (``now_ms`` comes with the events that need it), so every sequence of the
seed's events runs in a test.

What the seed prescribes, and where it lands here:

- a revocation right after subscribing or after a reset is ignored; any other stops polling and asks for a
  region reset (POLLING_CR_RESET_INITIATED). An assignment that adds partitions while polling normally (a
  cooperative or KIP-848 rebalance that revokes nothing) does the same: the cut must be taken again;
- an assignment drops the queued messages of partitions no longer assigned and their offset manager entries,
  and seeks the assigned partitions to the seek offset map only when no reset is awaited;
- drain stops polling, waits for the message queue to empty unless the region is operator driven, then makes
  one synchronous commit of the offset manager; a failed commit restarts the operator (and so resets);
- a checkpoint holds the assignable partitions, the offset manager, and the committed offsets of all
  assignable partitions, as read at checkpoint time (after the whole region drained) when given, else at drain;
- a reset to a checkpoint contributes the checkpoint's offset manager to the merge keyed by [checkpoint id,
  reset attempt] and seeks to the merge, or, when it does not complete in time, to the checkpoint's
  committed offsets; a reset to the initial state seeks to the initial offsets. Partitions without an entry
  seek to the start position (the initial offset computed for them).

Beyond the seed, the fallback: the seed's operators are fixed, each has a checkpoint; ours join and leave. A
member that joined after the checkpoint has none, and the merge does not complete when a member that owned
partitions at the cut is gone (killed, or left): seeking to start positions would replay published output.
So the reset event carries the other members' files of the checkpoint from the region's shared store, and
the fallback is the cut they and the member's own file describe (`merge.fallback_offsets`: owners' offset
managers first, then the highest committed offset); the runtime reads the store, the core stays pure.

Beyond the seed: a reset ends with one synchronous commit of the cut it reset to (`CommitCut`), for every
partition the member knows the cut of, owned or not (the broker does not check ownership). A failed cycle's
drain committed offsets beyond the output the region published; left at the broker, a checkpoint taken while
nobody owns a partition (its owner left, the group has not reassigned it yet) would record them, and a
reset to that checkpoint, whose merge cannot complete, would seek to them and skip records. With the commit,
the group's committed offsets are the region's cut whenever a checkpoint reads them: owned partitions were
just committed at drain, the others hold the last complete cycle's commit or the last reset's. A member that
knows the whole cut (the merge, or any file of the checkpoint, its own or another's) commits it for every
partition it knows; one that knows nothing of it (no file at all) commits only the partitions it seeks. A
refused commit (the group is rebalancing) fails the reset (`ResetFailed`); the controller tries again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from groupstream.assignment.types import TopicPartition
from groupstream.region.merge import MergeKey, fallback_offsets, seek_map
from groupstream.region.offsets import OffsetManager
from groupstream.region.operator_state import OPERATOR_STATES, OperatorState
from groupstream.state_table import InvalidTransition

__all__ = [
    "AwaitMerge",
    "AwaitQueueEmpty",
    "Commit",
    "CommitCut",
    "ContributeMerge",
    "DropQueued",
    "Effect",
    "FetchCommitted",
    "GroupConsumerOperator",
    "OperatorCheckpoint",
    "RefuseDrain",
    "ResetFailed",
    "Restart",
    "Seek",
    "StartPolling",
    "StopPolling",
    "TriggerReset",
]

_S = OperatorState
Offsets = Mapping[TopicPartition, int]


# --- effects ----------------------------------------------------------------------------------------------


class Effect:
    __slots__ = ()


@dataclass(frozen=True, slots=True)
class StopPolling(Effect):
    pass


@dataclass(frozen=True, slots=True)
class StartPolling(Effect):
    pass


@dataclass(frozen=True, slots=True)
class DropQueued(Effect):
    """Remove queued messages of ``partitions`` from the message queue (all of them when None)."""

    partitions: frozenset[TopicPartition] | None


@dataclass(frozen=True, slots=True)
class Seek(Effect):
    offsets: Mapping[TopicPartition, int]


@dataclass(frozen=True, slots=True)
class AwaitQueueEmpty(Effect):
    """Tell the core (``queue_empty``) once the process thread has submitted every queued message."""


@dataclass(frozen=True, slots=True)
class Commit(Effect):
    """One synchronous commit; answer with ``commit_done``."""

    offsets: Mapping[TopicPartition, int]


@dataclass(frozen=True, slots=True)
class CommitCut(Effect):
    """The reset is done: one synchronous commit of the cut it reset to; answer with ``cut_committed``."""

    offsets: Mapping[TopicPartition, int]


@dataclass(frozen=True, slots=True)
class ResetFailed(Effect):
    """The reset did not complete (its commit of the cut was refused): report it to the controller."""

    reason: str


@dataclass(frozen=True, slots=True)
class FetchCommitted(Effect):
    """Read the group's committed offsets of ``partitions``; answer with ``committed_fetched``."""

    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class TriggerReset(Effect):
    reason: str


@dataclass(frozen=True, slots=True)
class RefuseDrain(Effect):
    """A drain arrived while this operator waits for a reset it asked for: the checkpoint must not be taken."""

    reason: str


@dataclass(frozen=True, slots=True)
class ContributeMerge(Effect):
    key: MergeKey
    assignable: frozenset[TopicPartition]
    offsets: Mapping[TopicPartition, int]


@dataclass(frozen=True, slots=True)
class AwaitMerge(Effect):
    """Answer with ``merge_done(key, merged)`` when the merge completes, or with None after ``timeout_ms``."""

    key: MergeKey
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class Restart(Effect):
    reason: str


# --- checkpoint ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OperatorCheckpoint:
    """What one operator checkpoints: assignable partitions, its offset manager, committed offsets at drain."""

    assignable: frozenset[TopicPartition]
    offset_manager: Mapping[TopicPartition, int]
    committed: Mapping[TopicPartition, int]

    def to_json(self) -> str:
        def enc(m: Offsets) -> list[list[Any]]:
            return [[tp.topic, tp.partition, o] for tp, o in sorted(m.items())]

        return json.dumps(
            {
                "assignable": [[tp.topic, tp.partition] for tp in sorted(self.assignable)],
                "offset_manager": enc(self.offset_manager),
                "committed": enc(self.committed),
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> OperatorCheckpoint:
        raw = json.loads(text)

        def dec(rows: list[list[Any]]) -> dict[TopicPartition, int]:
            return {TopicPartition(t, int(p)): int(o) for t, p, o in rows}

        return cls(
            assignable=frozenset(TopicPartition(t, int(p)) for t, p in raw["assignable"]),
            offset_manager=dec(raw["offset_manager"]),
            committed=dec(raw["committed"]),
        )


# --- the core -----------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Reset:
    checkpoint: OperatorCheckpoint
    key: MergeKey
    others: tuple[OperatorCheckpoint, ...] = ()


@dataclass(slots=True)
class _Metrics:
    last_drain_ms: int = 0
    max_drain_ms: int = 0


@dataclass
class GroupConsumerOperator:
    """One member of a group inside a consistent region."""

    member_id: str
    state: OperatorState = OperatorState.INITIALIZED
    assigned: frozenset[TopicPartition] = frozenset()
    assignable: frozenset[TopicPartition] = frozenset()
    initial_offsets: dict[TopicPartition, int] = field(default_factory=dict)
    seek_offsets: dict[TopicPartition, int] = field(default_factory=dict)
    offsets: OffsetManager = field(default_factory=OffsetManager)
    committed_at_drain: dict[TopicPartition, int] = field(default_factory=dict)
    metrics: _Metrics = field(default_factory=_Metrics)
    _drain_started_ms: int = 0
    _operator_driven: bool = False
    _pending_reset: _Reset | None = None
    _cut_pending: bool = False  # a `CommitCut` awaits its answer

    @property
    def n_partitions_assigned(self) -> int:
        """The seed's metric nPartitionsAssigned."""
        return len(self.assigned)

    def transition_to(self, new: OperatorState) -> None:
        self.state = OPERATOR_STATES.check(self.state, new)

    # --- initialisation ---------------------------------------------------------------------------------

    def subscribe(self, initial_offsets: Offsets) -> list[Effect]:
        """The initial offsets of every partition (by startPosition, decided once for the whole group) fill the
        seek offset map; the consumer subscribes and has nothing assigned yet."""
        self.transition_to(_S.SUBSCRIBED)
        self.initial_offsets = dict(initial_offsets)
        self.seek_offsets = dict(initial_offsets)
        return []

    # --- the consumer's callbacks (inside poll) ---------------------------------------------------------

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> list[Effect]:
        if self.state in (_S.SUBSCRIBED, _S.RESET_COMPLETE, _S.POLLING_CR_RESET_INITIATED, _S.RESETTING):
            return []  # expected after subscribing or a reset, or a reset is coming anyway
        return self._ask_for_reset(f"partitions {sorted(partitions)} were revoked")

    def on_partitions_assigned(
        self,
        assigned: frozenset[TopicPartition],
        assignable: frozenset[TopicPartition],
        start_offsets: Offsets | None = None,
    ) -> list[Effect]:
        """``start_offsets``: the startPosition offset of every assignable partition the operator has no
        initial offset for yet (partitions added to a topic since it started)."""
        effects: list[Effect] = []
        for tp, offset in (start_offsets or {}).items():
            self.initial_offsets.setdefault(tp, offset)
        self.assignable = assignable
        lost = self.assigned - assigned
        added = assigned - self.assigned
        if lost:
            effects.append(DropQueued(frozenset(lost)))
            self.offsets.remove(lost)
        self.assigned = assigned
        if self.state in (_S.SUBSCRIBED, _S.RESET_COMPLETE):
            effects.extend(self._seek(assigned))
        elif self.state in (_S.POLLING, _S.DRAINING, _S.DRAINED) and added:
            effects.extend(self._ask_for_reset(f"partitions {sorted(added)} were assigned while polling"))
        return effects

    def poll_returned(self) -> list[Effect]:
        """A poll call has returned: callbacks after this one are no longer the rebalance of subscribe/reset."""
        if self.state in (_S.SUBSCRIBED, _S.RESET_COMPLETE):
            self.transition_to(_S.POLLING)
        return []

    def submitted(self, tp: TopicPartition, offset: int) -> None:
        """The process thread submitted the message at ``offset``."""
        self.offsets.submitted(tp, offset)

    # --- drain and checkpoint ---------------------------------------------------------------------------

    def drain(self, now_ms: int, operator_driven: bool = False) -> list[Effect]:
        if self.state in (_S.POLLING_CR_RESET_INITIATED, _S.RESETTING):
            return [RefuseDrain(f"member {self.member_id} is waiting for a reset")]
        self.transition_to(_S.DRAINING)
        self._drain_started_ms = now_ms
        self._operator_driven = operator_driven
        if operator_driven:  # the operator decides what is in the checkpoint: queued messages stay queued
            return [StopPolling(), Commit(self.offsets.snapshot())]
        return [StopPolling(), AwaitQueueEmpty()]

    def queue_empty(self) -> list[Effect]:
        if self.state is not _S.DRAINING or self._operator_driven:
            return []
        return [Commit(self.offsets.snapshot())]

    def commit_done(self, error: str | None) -> list[Effect]:
        if self.state is not _S.DRAINING:
            return []
        if error is not None:
            return [Restart(f"the commit at drain failed: {error}")]
        return [FetchCommitted(self.assignable | self.assigned)]

    def committed_fetched(self, now_ms: int, committed: Offsets) -> list[Effect]:
        if self.state is not _S.DRAINING:
            return []
        # what this member owns is what it just committed, whatever the read returned
        self.committed_at_drain = {**committed, **self.offsets.snapshot()}
        self.transition_to(_S.DRAINED)
        took = max(now_ms - self._drain_started_ms, 0)
        self.metrics.last_drain_ms = took
        self.metrics.max_drain_ms = max(self.metrics.max_drain_ms, took)
        return []

    def checkpoint(self, committed_now: Offsets | None = None) -> OperatorCheckpoint:
        """``committed_now``: the committed offsets of `checkpoint_partitions` read at checkpoint time. The region
        checkpoints only once every member has drained, so by then every owner has committed its share of the
        cut; what this member read at its own drain may predate another member's commit (the seed's note), and
        a reset whose merge is incomplete (a member that owned partitions at the cut has left) seeks to these
        offsets: stale ones would replay output that is already published."""
        if self.state is not _S.DRAINED:
            raise InvalidTransition(f"the group consumer operator checkpoints only when drained, not {self.state.value}")
        committed = {**self.committed_at_drain, **(committed_now or {}), **self.offsets.snapshot()}
        return OperatorCheckpoint(
            assignable=self.checkpoint_partitions,
            offset_manager=self.offsets.snapshot(),
            committed=dict(sorted(committed.items())),
        )

    @property
    def checkpoint_partitions(self) -> frozenset[TopicPartition]:
        """The partitions a checkpoint covers: every assignable partition and every assigned one."""
        return self.assignable | self.assigned

    def resume(self) -> list[Effect]:
        """The checkpoint is taken: poll again."""
        if self.state is not _S.DRAINED:
            return []
        self.transition_to(_S.POLLING)
        return [StartPolling()]

    # --- reset ------------------------------------------------------------------------------------------

    def reset(
        self,
        checkpoint: OperatorCheckpoint,
        key: MergeKey,
        merge_timeout_ms: int,
        others: Mapping[str, OperatorCheckpoint] | None = None,
    ) -> list[Effect]:
        """Reset to ``checkpoint`` (this member's own, of checkpoint ``key.checkpoint_id``; empty when it has
        none). ``others``: the other members' checkpoints of that id found in the region's checkpoint store, by
        member id (an entry under this member's own id is ignored: ``checkpoint`` is its own). Only the own one
        is contributed to the merge; all of them make the fallback when the merge does not complete in time."""
        self.transition_to(_S.RESETTING)
        theirs = tuple(c for m, c in sorted((others or {}).items()) if m != self.member_id)
        self._pending_reset = _Reset(checkpoint, key, theirs)
        self._cut_pending = False
        return [
            StopPolling(),
            DropQueued(None),
            ContributeMerge(key, checkpoint.assignable, dict(checkpoint.offset_manager)),
            AwaitMerge(key, merge_timeout_ms),
        ]

    def merge_done(self, key: MergeKey, merged: Offsets | None) -> list[Effect]:
        """The merge for ``key`` completed (``merged``) or timed out (None)."""
        pending = self._pending_reset
        if self.state is not _S.RESETTING or pending is None or pending.key != key:
            return []  # an answer for an older attempt
        self._pending_reset = None
        files = (pending.checkpoint, *pending.others)
        fallback = fallback_offsets((f.offset_manager, f.committed) for f in files)
        self.seek_offsets = seek_map(merged, fallback)
        # Without the merge and without any file of the checkpoint (the store is not shared, or lost) a member
        # knows the cut of no partition but those it seeks: it must not commit start offsets over others' cut.
        knows_cut = merged is not None or any(f.assignable for f in files)
        return self._finish_reset(whole_cut=knows_cut)

    def reset_to_initial(self) -> list[Effect]:
        self.transition_to(_S.RESETTING)
        self._pending_reset = None
        self.seek_offsets = dict(self.initial_offsets)
        return [StopPolling(), DropQueued(None), *self._finish_reset(whole_cut=True)]

    def cut_committed(self, error: str | None) -> list[Effect]:
        """The answer to `CommitCut`."""
        if not self._cut_pending:
            return []
        self._cut_pending = False
        return [] if error is None else [ResetFailed(f"the commit of the cut failed: {error}")]

    def _finish_reset(self, whole_cut: bool) -> list[Effect]:
        self.offsets.clear()
        effects = self._seek(self.assigned)
        self.transition_to(_S.RESET_COMPLETE)
        cut = self._cut(whole_cut)
        self._cut_pending = bool(cut)
        if cut:
            effects.append(CommitCut(cut))
        return [*effects, StartPolling()]

    def _cut(self, whole: bool) -> dict[TopicPartition, int]:
        """Where the reset puts each partition this member knows of: the seek offset map, and the start position
        of partitions without an entry (added since the checkpoint). ``whole``: also the assignable partitions
        it does not own; else only the seek offset map and the partitions it seeks."""
        partitions = set(self.seek_offsets) | self.assigned | (self.assignable if whole else frozenset())
        cut: dict[TopicPartition, int] = {}
        for tp in sorted(partitions):
            offset = self.seek_offsets.get(tp, self.initial_offsets.get(tp))
            if offset is not None:
                cut[tp] = offset
        return cut

    def close(self) -> list[Effect]:
        self.transition_to(_S.CLOSED)
        return [StopPolling()]

    # --- helpers ----------------------------------------------------------------------------------------

    def _ask_for_reset(self, reason: str) -> list[Effect]:
        self.transition_to(_S.POLLING_CR_RESET_INITIATED)
        return [StopPolling(), TriggerReset(reason)]

    def _seek(self, partitions: frozenset[TopicPartition]) -> list[Effect]:
        """Seek ``partitions`` to the seek offset map, or to their start position when it has none."""
        if not partitions:
            return []
        target: dict[TopicPartition, int] = {}
        for tp in sorted(partitions):
            offset = self.seek_offsets.get(tp, self.initial_offsets.get(tp))
            if offset is None:
                raise KeyError(f"no seek or start offset for {tp}: pass it in start_offsets on assignment")
            target[tp] = offset
        self.offsets.update(target)
        return [Seek(target)]
