"""The group's committed offsets follow the region's consistent cut, with two operator cores, the group's
committed offsets at the broker (a dict) and the merges of the control plane; a manual clock.

A failed cycle leaves the drain's commits at the broker, beyond the output the region published; the reset
goes back to the last complete checkpoint. If the committed offsets stayed ahead, a checkpoint taken while
nobody owns a partition (the member that owned it left; the group has not reassigned it yet) would record
them, and a reset to that checkpoint, whose merge cannot complete (nobody contributes that partition), would
fall back to them and skip records. So every member commits the cut it reset to: the merged offsets (or,
when the merge did not complete, the checkpoint's committed offsets), or the initial offsets."""

from __future__ import annotations

from groupstream.assignment.types import TopicPartition
from groupstream.region.merge import MergeKey, OffsetMerges
from groupstream.region.operator import (
    AwaitMerge,
    AwaitQueueEmpty,
    Commit,
    CommitCut,
    ContributeMerge,
    DropQueued,
    Effect,
    FetchCommitted,
    GroupConsumerOperator,
    OperatorCheckpoint,
    ResetFailed,
    Seek,
    StartPolling,
    StopPolling,
    TriggerReset,
)
from groupstream.region.operator_state import OperatorState

P0, P1 = TopicPartition("t", 0), TopicPartition("t", 1)
ALL = frozenset({P0, P1})
INITIAL = {P0: 0, P1: 0}
MERGE_TIMEOUT_MS = 1000


class Region:
    """Operator cores of one group, run event by event; effects are carried out against ``committed``."""

    def __init__(self, assignment: dict[str, frozenset[TopicPartition]]) -> None:
        self.committed: dict[TopicPartition, int] = {}  # the group's committed offsets at the broker
        self.merges = OffsetMerges()
        self.checkpoints: dict[tuple[int, str], OperatorCheckpoint] = {}
        self.seeks: dict[str, dict[TopicPartition, int]] = {}
        self.refuse_commits = False
        self.reset_errors: dict[str, str] = {}
        self.ops: dict[str, GroupConsumerOperator] = {}
        for name, parts in assignment.items():
            op = GroupConsumerOperator(name)
            op.subscribe(INITIAL)
            self.ops[name] = op
            self.run(op, op.on_partitions_assigned(parts, ALL))
            op.poll_returned()

    def run(self, op: GroupConsumerOperator, effects: list[Effect]) -> None:
        queue = list(effects)
        while queue:
            e = queue.pop(0)
            more: list[Effect] = []
            if isinstance(e, AwaitQueueEmpty):
                more = op.queue_empty()
            elif isinstance(e, Commit):
                self.committed.update(e.offsets)
                more = op.commit_done(None)
            elif isinstance(e, CommitCut):
                if self.refuse_commits:
                    more = op.cut_committed("REBALANCE_IN_PROGRESS")
                else:
                    self.committed.update(e.offsets)
                    more = op.cut_committed(None)
            elif isinstance(e, FetchCommitted):
                more = op.committed_fetched(0, self.read(e.partitions))
            elif isinstance(e, ContributeMerge):
                self.merges.contribute(e.key, op.member_id, e.assignable, e.offsets)
            elif isinstance(e, Seek):
                self.seeks[op.member_id] = dict(e.offsets)
            elif isinstance(e, ResetFailed):
                self.reset_errors[op.member_id] = e.reason
            else:
                assert isinstance(e, (AwaitMerge, DropQueued, StartPolling, StopPolling, TriggerReset)), e
            queue[:0] = more

    def read(self, partitions: frozenset[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: o for tp, o in self.committed.items() if tp in partitions}

    def process(self, name: str, tp: TopicPartition, upto: int) -> None:
        """The member's process thread submits ``tp`` up to (not including) offset ``upto``."""
        op = self.ops[name]
        for offset in range(op.offsets.snapshot()[tp], upto):
            op.submitted(tp, offset)

    def cycle(self, checkpoint_id: int, *, checkpoint_fails: bool = False) -> None:
        """Drain every member, then (unless the checkpoint fails) checkpoint each, reading the committed offsets
        once the whole region drained, and resume."""
        for op in self.ops.values():
            self.run(op, op.drain(0))
            assert op.state is OperatorState.DRAINED
        if checkpoint_fails:
            return
        for name, op in self.ops.items():
            self.checkpoints[(checkpoint_id, name)] = op.checkpoint(self.read(op.checkpoint_partitions))
        for op in self.ops.values():
            self.run(op, op.resume())

    def reset(self, checkpoint_id: int | None, attempt: int) -> None:
        """Reset every member (to the initial state when ``checkpoint_id`` is None). A merge that every member
        has contributed to and that is still incomplete is one that does not complete in time."""
        if checkpoint_id is None:
            for op in self.ops.values():
                self.run(op, op.reset_to_initial())
            return
        key = MergeKey(checkpoint_id, attempt)
        # the shared store: every file of the checkpoint, also those of members that are gone
        files = {m: c for (cid, m), c in self.checkpoints.items() if cid == checkpoint_id}
        for name, op in self.ops.items():
            ckpt = self.checkpoints.get((checkpoint_id, name), OperatorCheckpoint(frozenset(), {}, {}))
            self.run(op, op.reset(ckpt, key, MERGE_TIMEOUT_MS, files))
        for op in self.ops.values():
            self.run(op, op.merge_done(key, self.merges.merged(key)))

    def leave(self, name: str) -> None:
        self.ops.pop(name).close()

    def join(self, name: str, assigned: frozenset[TopicPartition]) -> None:
        """A new member subscribes and gets ``assigned`` in the rebalance its arrival causes."""
        op = GroupConsumerOperator(name)
        op.subscribe(INITIAL)
        self.ops[name] = op
        self.run(op, op.on_partitions_assigned(assigned, ALL))
        op.poll_returned()

    def rebalance(self, name: str, assigned: frozenset[TopicPartition]) -> None:
        """The group reassigns: the member's revocation asks for a reset, and the assignment follows."""
        op = self.ops[name]
        self.run(op, op.on_partitions_revoked(op.assigned))
        self.run(op, op.on_partitions_assigned(assigned, ALL))
        assert op.state is OperatorState.POLLING_CR_RESET_INITIATED


def test_a_reset_after_a_failed_cycle_brings_the_committed_offsets_back_to_the_cut() -> None:
    """The seen gap: b leaves after a failed cycle; the next checkpoint, taken before the group gave b's
    partition to a, must record where b's published output ends, not b's commit of the failed cycle."""
    region = Region({"a": frozenset({P0}), "b": frozenset({P1})})
    region.process("a", P0, 10)
    region.process("b", P1, 10)
    region.cycle(1)  # complete: the output of both partitions up to offset 10 is published
    region.process("a", P0, 20)
    region.process("b", P1, 20)
    region.cycle(2, checkpoint_fails=True)
    assert region.committed == {P0: 20, P1: 20}  # the failed cycle's drain committed beyond the output
    region.reset(1, attempt=1)
    assert region.seeks == {"a": {P0: 10}, "b": {P1: 10}}
    assert region.committed == {P0: 10, P1: 10}, "the committed offsets must be back at the cut reset to"

    region.leave("b")  # before the group reassigns t-1: nobody owns it at the next checkpoint
    region.ops["a"].poll_returned()
    region.process("a", P0, 15)
    region.cycle(3)
    assert region.checkpoints[(3, "a")].committed == {P0: 15, P1: 10}

    region.rebalance("a", ALL)
    region.reset(3, attempt=2)  # b is gone: nobody contributes t-1 and the merge cannot complete
    assert region.merges.merged(MergeKey(3, 2)) is None
    assert region.seeks["a"] == {P0: 15, P1: 10}, "t-1 must resume where its published output ends"


def test_a_reset_to_the_initial_state_commits_the_initial_offsets() -> None:
    """The first cycle fails: there is no complete checkpoint, the region resets to its initial state."""
    region = Region({"a": frozenset({P0}), "b": frozenset({P1})})
    region.process("a", P0, 10)
    region.process("b", P1, 10)
    region.cycle(1, checkpoint_fails=True)
    assert region.committed == {P0: 10, P1: 10}
    region.reset(None, attempt=1)
    assert region.seeks == {"a": {P0: 0}, "b": {P1: 0}}
    assert region.committed == INITIAL

    region.leave("b")
    region.ops["a"].poll_returned()
    region.process("a", P0, 5)
    region.cycle(2)
    region.rebalance("a", ALL)
    region.reset(2, attempt=2)
    assert region.seeks["a"] == {P0: 5, P1: 0}, "nothing of t-1 was published: it must start at its beginning"


def test_an_incomplete_merge_commits_the_committed_offsets_of_the_checkpoint() -> None:
    """A member that falls back to its checkpoint's committed offsets commits those: under this rule they are
    the cut for every partition (read once the region drained, after the previous reset's commit)."""
    op = GroupConsumerOperator("a")
    op.subscribe(INITIAL)
    op.on_partitions_assigned(frozenset({P0}), ALL)
    op.poll_returned()
    ckpt = OperatorCheckpoint(ALL, {P0: 12}, {P0: 12, P1: 7})
    key = MergeKey(2, 1)
    op.reset(ckpt, key, MERGE_TIMEOUT_MS)
    assert op.merge_done(key, None) == [Seek({P0: 12}), CommitCut({P0: 12, P1: 7}), StartPolling()]


def test_a_member_without_any_checkpoint_file_commits_only_what_it_seeks_when_the_merge_is_incomplete() -> None:
    """It joined after the checkpoint and the store holds no file of it at all (not shared, or lost): it knows
    nothing of the cut, seeks its partitions to their start positions (the seed's rule for partitions without
    an entry: replay, never skip), and must not commit start offsets over the cut others commit."""
    op = GroupConsumerOperator("d")
    op.subscribe(INITIAL)
    op.on_partitions_assigned(frozenset({P1}), ALL)
    key = MergeKey(2, 1)
    op.reset(OperatorCheckpoint(frozenset(), {}, {}), key, MERGE_TIMEOUT_MS)
    assert op.merge_done(key, None) == [Seek({P1: 0}), CommitCut({P1: 0}), StartPolling()]


def test_a_complete_merge_commits_every_partition_the_member_knows() -> None:
    op = GroupConsumerOperator("a")
    op.subscribe(INITIAL)
    p2 = TopicPartition("t", 2)  # added to the topic after checkpoint 4: its cut is its start offset
    op.on_partitions_assigned(frozenset({P0}), ALL | {p2}, start_offsets={p2: 3})
    key = MergeKey(4, 1)
    op.reset(OperatorCheckpoint(ALL, {P0: 8}, {P0: 8, P1: 1}), key, MERGE_TIMEOUT_MS)
    assert op.merge_done(key, {P0: 8, P1: 9}) == [Seek({P0: 8}), CommitCut({P0: 8, P1: 9, p2: 3}), StartPolling()]


def test_a_refused_commit_of_the_cut_fails_the_reset() -> None:
    """Mid-rebalance the group refuses the commit: the member reports the reset failed (the controller tries
    again), and polls, so that its consumer can rejoin the group."""
    region = Region({"a": frozenset({P0}), "b": frozenset({P1})})
    region.process("a", P0, 4)
    region.cycle(1)
    region.refuse_commits = True
    region.reset(1, attempt=1)
    assert region.reset_errors == {
        "a": "the commit of the cut failed: REBALANCE_IN_PROGRESS",
        "b": "the commit of the cut failed: REBALANCE_IN_PROGRESS",
    }
    assert all(op.state is OperatorState.RESET_COMPLETE for op in region.ops.values())
    region.refuse_commits = False
    region.reset(1, attempt=2)
    assert region.committed == {P0: 4, P1: 0}
    assert region.ops["a"].cut_committed("a second answer") == []


def test_a_member_that_joined_after_the_checkpoint_resumes_a_gone_members_partition_at_the_cut() -> None:
    """The gap: b is killed, d joins and gets b's partition; the reset to checkpoint 1 cannot complete its merge
    (nobody contributes t-1: b is gone, d has no checkpoint 1). d sought t-1 to its initial offset 0, replaying
    the published records 0..9, and committed 0 over the cut a committed. b's file of checkpoint 1 in the shared
    store says where t-1's published output ends."""
    region = Region({"a": frozenset({P0}), "b": frozenset({P1})})
    region.process("a", P0, 10)
    region.process("b", P1, 10)
    region.cycle(1)
    region.leave("b")  # kill -9
    region.join("d", frozenset({P1}))
    region.rebalance("a", frozenset({P0}))
    region.reset(1, attempt=1)
    assert region.merges.merged(MergeKey(1, 1)) is None
    assert region.seeks["d"] == {P1: 10}, "t-1 must resume where checkpoint 1's published output ends"
    assert region.seeks["a"] == {P0: 10}
    assert region.committed == {P0: 10, P1: 10}, "d knows the whole cut: it commits it, not start offsets"


def test_the_fallback_prefers_the_owners_offset_managers_then_the_highest_committed_offset() -> None:
    """The files disagree: c read t-0 before a's drain commit landed (a stale, lower offset, the seed's note);
    t-1's owner b is exact for t-1 even where a committed map lags it; t-2 had no owner at the cut (its owner
    had left): the committed maps agree on it; t-3 was added to the topic after the checkpoint: no file has it,
    it starts at its start position."""
    p2, p3 = TopicPartition("t", 2), TopicPartition("t", 3)
    files = {
        "a": OperatorCheckpoint(ALL | {p2}, {P0: 10}, {P0: 10, P1: 6, p2: 4}),
        "b": OperatorCheckpoint(ALL | {p2}, {P1: 8}, {P0: 10, P1: 8, p2: 4}),
        "c": OperatorCheckpoint(ALL | {p2}, {}, {P0: 3, P1: 8, p2: 4}),
    }
    d = GroupConsumerOperator("d")
    d.subscribe(INITIAL)
    d.on_partitions_assigned(ALL | {p2, p3}, ALL | {p2, p3}, start_offsets={p2: 0, p3: 5})
    key = MergeKey(7, 1)
    assert d.reset(OperatorCheckpoint(frozenset(), {}, {}), key, MERGE_TIMEOUT_MS, files)[2] == ContributeMerge(
        key, frozenset(), {}
    ), "a member without a file contributes nothing: the others' files are no contribution of its own"
    cut = {P0: 10, P1: 8, p2: 4, p3: 5}
    assert d.merge_done(key, None) == [Seek(cut), CommitCut(cut), StartPolling()]


def test_a_member_with_its_own_file_also_takes_what_the_others_know_better() -> None:
    """a's own committed map lags b's partition (read before b's commit); b's offset manager is exact."""
    op = GroupConsumerOperator("a")
    op.subscribe(INITIAL)
    op.on_partitions_assigned(ALL, ALL)
    own = OperatorCheckpoint(ALL, {P0: 12}, {P0: 12, P1: 3})
    others = {"a": OperatorCheckpoint(ALL, {P0: 99}, {}), "b": OperatorCheckpoint(ALL, {P1: 9}, {P0: 12, P1: 9})}
    key = MergeKey(2, 1)
    op.reset(own, key, MERGE_TIMEOUT_MS, others)  # an entry under its own id is not read: ``own`` is its file
    assert op.merge_done(key, None) == [Seek({P0: 12, P1: 9}), CommitCut({P0: 12, P1: 9}), StartPolling()]


def test_a_complete_merge_wins_over_the_files() -> None:
    op = GroupConsumerOperator("d")
    op.subscribe(INITIAL)
    op.on_partitions_assigned(frozenset({P1}), ALL)
    key = MergeKey(3, 1)
    op.reset(OperatorCheckpoint(frozenset(), {}, {}), key, MERGE_TIMEOUT_MS, {"b": OperatorCheckpoint(ALL, {}, {P1: 2})})
    assert op.merge_done(key, {P0: 5, P1: 6}) == [Seek({P1: 6}), CommitCut({P0: 5, P1: 6}), StartPolling()]
