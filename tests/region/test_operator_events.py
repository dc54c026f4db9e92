"""The group consumer operator of seed 000, event by event with a manual clock: the seed's orders of events
(revocation during poll, reset after assignment, reset without assignment change, reset with a later
assignment), drain and checkpoint, the merge and its timeout fallback."""

from __future__ import annotations

import pytest

from groupstream.assignment.types import TopicPartition
from groupstream.region.merge import MergeKey
from groupstream.region.operator import (
    AwaitMerge,
    AwaitQueueEmpty,
    Commit,
    CommitCut,
    ContributeMerge,
    DropQueued,
    FetchCommitted,
    GroupConsumerOperator,
    OperatorCheckpoint,
    RefuseDrain,
    Restart,
    Seek,
    StartPolling,
    StopPolling,
    TriggerReset,
)
from groupstream.region.operator_state import OperatorState
from groupstream.state_table import InvalidTransition

S = OperatorState
P = [TopicPartition("t", i) for i in range(4)]
ALL = frozenset(P)
INITIAL = {tp: 0 for tp in P}


def polling(assigned: frozenset[TopicPartition], initial: dict[TopicPartition, int] | None = None) -> GroupConsumerOperator:
    op = GroupConsumerOperator("a")
    op.subscribe(initial or INITIAL)
    op.on_partitions_assigned(assigned, ALL)
    op.poll_returned()
    assert op.state is S.POLLING
    return op


def drained(op: GroupConsumerOperator, now: int, committed: dict[TopicPartition, int]) -> OperatorCheckpoint:
    op.drain(now)
    op.queue_empty()
    op.commit_done(None)
    op.committed_fetched(now + 5, committed)
    return op.checkpoint()


def test_subscribe_then_the_first_assignment_seeks_to_the_initial_offsets() -> None:
    op = GroupConsumerOperator("a")
    assert op.subscribe({P[0]: 10, P[1]: 20}) == []
    assert op.state is S.SUBSCRIBED
    assert op.on_partitions_revoked(frozenset()) == []  # the rebalance of subscribing: ignored
    effects = op.on_partitions_assigned(frozenset(P[:2]), ALL)
    assert effects == [Seek({P[0]: 10, P[1]: 20})]
    assert op.n_partitions_assigned == 2
    assert op.offsets.snapshot() == {P[0]: 10, P[1]: 20}
    op.poll_returned()
    assert op.state is S.POLLING


def test_a_partition_without_an_initial_offset_starts_at_its_start_position() -> None:
    op = GroupConsumerOperator("a")
    op.subscribe({P[0]: 10})
    with pytest.raises(KeyError, match="no seek or start offset"):
        op.on_partitions_assigned(frozenset(P[:2]), ALL)
    effects = op.on_partitions_assigned(frozenset(P[:2]), ALL, start_offsets={P[1]: 7})
    assert effects == [Seek({P[0]: 10, P[1]: 7})]


def test_revocation_during_poll_stops_polling_and_asks_for_a_reset() -> None:
    op = polling(frozenset(P[:2]))
    op.submitted(P[0], 4)
    assert op.on_partitions_revoked(frozenset(P[:2])) == [StopPolling(), TriggerReset("partitions [t-0, t-1] were revoked")]
    assert op.state is S.POLLING_CR_RESET_INITIATED
    # onPartitionsAssigned follows in the same poll: lost partitions leave the queue and the offset manager,
    # and nothing is sought while a reset is awaited
    effects = op.on_partitions_assigned(frozenset({P[1], P[2]}), ALL)
    assert effects == [DropQueued(frozenset({P[0]}))]
    assert op.offsets.partitions() == {P[1]}
    assert op.on_partitions_revoked(frozenset()) == []  # a reset is coming anyway
    assert op.drain(100) == [RefuseDrain("member a is waiting for a reset")]


def test_reset_after_assignment_seeks_new_partitions_to_the_merged_checkpoint_offsets() -> None:
    op = polling(frozenset(P[:2]))
    op.submitted(P[0], 41)
    op.submitted(P[1], 9)
    ckpt = drained(op, 1000, {tp: 0 for tp in P})
    assert ckpt.offset_manager == {P[0]: 42, P[1]: 10}
    op.resume()
    op.on_partitions_revoked(frozenset(P[:2]))
    op.on_partitions_assigned(frozenset({P[1], P[2]}), ALL)  # P[2] belonged to another member at the cut
    key = MergeKey(1, 1)
    effects = op.reset(ckpt, key, merge_timeout_ms=5000)
    assert effects == [StopPolling(), DropQueued(None), ContributeMerge(key, ALL, {P[0]: 42, P[1]: 10}),
                       AwaitMerge(key, 5000)]  # fmt: skip
    assert op.state is S.RESETTING
    merged = {P[0]: 42, P[1]: 10, P[2]: 77, P[3]: 5}  # with the other member's contribution
    assert op.merge_done(key, merged) == [Seek({P[1]: 10, P[2]: 77}), CommitCut(merged), StartPolling()]
    assert op.state is S.RESET_COMPLETE
    assert op.offsets.snapshot() == {P[1]: 10, P[2]: 77}
    assert op.on_partitions_revoked(frozenset(P)) == []  # right after a reset: ignored


def test_reset_without_an_assignment_change_seeks_the_current_partitions() -> None:
    op = polling(frozenset(P[:2]))
    op.submitted(P[0], 5)
    ckpt = drained(op, 0, {})
    op.resume()
    op.submitted(P[0], 50)  # processed after the checkpoint: to be replayed
    op.on_partitions_assigned(frozenset(P[:2]), ALL)  # same assignment: nothing to do
    key = MergeKey(1, 3)
    op.reset(ckpt, key, 1000)
    merged = {P[0]: 6, P[1]: 0, P[2]: 0, P[3]: 0}
    assert op.merge_done(key, merged) == [Seek({P[0]: 6, P[1]: 0}), CommitCut(merged), StartPolling()]


def test_reset_with_a_later_assignment_seeks_when_the_partitions_arrive() -> None:
    """A restarted member resets before the group gave it any partition."""
    op = GroupConsumerOperator("a")
    op.subscribe(INITIAL)
    ckpt = OperatorCheckpoint(ALL, {P[2]: 30}, {tp: 3 for tp in P})
    key = MergeKey(4, 1)
    op.reset(ckpt, key, 1000)
    merged = {P[0]: 10, P[1]: 20, P[2]: 30, P[3]: 40}
    assert op.merge_done(key, merged) == [CommitCut(merged), StartPolling()]  # nothing assigned: no seek
    assert op.on_partitions_assigned(frozenset({P[2], P[3]}), ALL) == [Seek({P[2]: 30, P[3]: 40})]


def test_a_merge_that_times_out_falls_back_to_the_committed_offsets_of_the_checkpoint() -> None:
    op = polling(frozenset(P[:2]))
    ckpt = OperatorCheckpoint(ALL, {P[0]: 12, P[1]: 13}, {P[0]: 12, P[1]: 13, P[2]: 2, P[3]: 3})
    key = MergeKey(2, 1)
    op.reset(ckpt, key, 1000)
    assert op.merge_done(MergeKey(2, 0), {P[0]: 99}) == []  # an older attempt's merge: not ours
    assert op.merge_done(key, None) == [Seek({P[0]: 12, P[1]: 13}), CommitCut(ckpt.committed), StartPolling()]


def test_a_new_reset_attempt_replaces_the_pending_one() -> None:
    op = polling(frozenset(P[:1]))
    ckpt = OperatorCheckpoint(ALL, {P[0]: 5}, {P[0]: 5})
    op.reset(ckpt, MergeKey(1, 1), 1000)
    op.reset(ckpt, MergeKey(1, 2), 1000)
    assert op.merge_done(MergeKey(1, 1), {P[0]: 1}) == []
    assert op.merge_done(MergeKey(1, 2), {tp: 5 for tp in P}) == [Seek({P[0]: 5}), CommitCut({tp: 5 for tp in P}),
                                                                  StartPolling()]  # fmt: skip


def test_reset_to_initial_state_seeks_to_the_initial_offsets() -> None:
    op = polling(frozenset(P[:2]), {tp: 100 + tp.partition for tp in P})
    op.submitted(P[0], 500)
    assert op.reset_to_initial() == [StopPolling(), DropQueued(None), Seek({P[0]: 100, P[1]: 101}),
                                     CommitCut({tp: 100 + tp.partition for tp in P}), StartPolling()]  # fmt: skip
    assert op.state is S.RESET_COMPLETE


def test_drain_waits_for_the_queue_commits_once_and_records_its_time() -> None:
    op = polling(frozenset(P[:2]))
    op.submitted(P[0], 7)
    assert op.drain(1000) == [StopPolling(), AwaitQueueEmpty()]
    op.submitted(P[1], 3)  # the process thread empties the queue meanwhile
    assert op.queue_empty() == [Commit({P[0]: 8, P[1]: 4})]
    assert op.commit_done(None) == [FetchCommitted(ALL)]
    op.committed_fetched(1250, {P[0]: 1, P[1]: 1, P[2]: 60, P[3]: 70})
    assert op.state is S.DRAINED
    assert (op.metrics.last_drain_ms, op.metrics.max_drain_ms) == (250, 250)
    ckpt = op.checkpoint()
    assert ckpt == OperatorCheckpoint(ALL, {P[0]: 8, P[1]: 4}, {P[0]: 8, P[1]: 4, P[2]: 60, P[3]: 70})
    assert op.resume() == [StartPolling()]
    drained(op, 2000, {})
    assert (op.metrics.last_drain_ms, op.metrics.max_drain_ms) == (5, 250)


def test_the_checkpoint_takes_the_committed_offsets_read_once_the_whole_region_drained() -> None:
    """At its own drain, a member may read another member's partitions before that member committed this drain
    (the seed's note); what it reads at checkpoint time, after every member drained, replaces that."""
    op = polling(frozenset(P[:2]))
    op.submitted(P[0], 7)
    op.drain(0)
    op.queue_empty()
    op.commit_done(None)
    op.committed_fetched(5, {P[0]: 8, P[1]: 0, P[2]: 40, P[3]: 50})  # P2, P3: their owner had not committed yet
    assert op.checkpoint_partitions == ALL
    ckpt = op.checkpoint({P[0]: 3, P[2]: 60, P[3]: 70})  # its own partitions: what it committed wins
    assert ckpt.committed == {P[0]: 8, P[1]: 0, P[2]: 60, P[3]: 70}
    assert ckpt.offset_manager == {P[0]: 8, P[1]: 0}


def test_an_operator_driven_drain_commits_at_once() -> None:
    op = polling(frozenset(P[:1]))
    op.submitted(P[0], 1)
    assert op.drain(0, operator_driven=True) == [StopPolling(), Commit({P[0]: 2})]
    assert op.queue_empty() == []


def test_a_failed_commit_at_drain_restarts_the_operator() -> None:
    op = polling(frozenset(P[:1]))
    op.drain(0)
    op.queue_empty()
    assert op.commit_done("ILLEGAL_GENERATION") == [Restart("the commit at drain failed: ILLEGAL_GENERATION")]


def test_partitions_assigned_while_polling_ask_for_a_reset() -> None:
    """A cooperative or KIP-848 rebalance that only adds partitions still moves the consistent cut."""
    op = polling(frozenset(P[:1]))
    assert op.on_partitions_assigned(frozenset(P[:2]), ALL) == [
        StopPolling(), TriggerReset("partitions [t-1] were assigned while polling")]  # fmt: skip


def test_checkpoint_needs_a_drain_and_survives_json() -> None:
    op = polling(frozenset(P[:1]))
    with pytest.raises(InvalidTransition):
        op.checkpoint()
    ckpt = drained(op, 0, {P[3]: 9})
    assert OperatorCheckpoint.from_json(ckpt.to_json()) == ckpt


def test_close() -> None:
    op = polling(frozenset(P[:1]))
    assert op.close() == [StopPolling()]
    with pytest.raises(InvalidTransition):
        op.reset_to_initial()
