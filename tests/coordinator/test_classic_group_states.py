"""The classic group state table: every (from, to) pair, valid and invalid, and each state reached by requests."""

from __future__ import annotations

import itertools

import pytest
from coordinator_harness import GROUP, Harness

from groupstream.coordinator.classic_group import GROUP_STATES, ClassicGroup, GroupState
from groupstream.state_table import InvalidTransition

S = GroupState

# Kafka's table, written out pair by pair so that a change to the code's table shows up here.
VALID = {
    (S.PREPARING_REBALANCE, S.EMPTY),
    (S.STABLE, S.PREPARING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE),
    (S.EMPTY, S.PREPARING_REBALANCE),
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.STABLE),
    (S.STABLE, S.DEAD),
    (S.PREPARING_REBALANCE, S.DEAD),
    (S.COMPLETING_REBALANCE, S.DEAD),
    (S.EMPTY, S.DEAD),
    (S.DEAD, S.DEAD),
}


def _group_in(state: GroupState) -> ClassicGroup:
    group = ClassicGroup("g", 0)
    group.state = state
    return group


@pytest.mark.parametrize(("source", "target"), list(itertools.product(S, S)), ids=lambda s: s.value)
def test_every_pair_of_the_transition_table(source: GroupState, target: GroupState) -> None:
    group = _group_in(source)
    if (source, target) in VALID:
        group.transition_to(target, 5)
        assert group.state is target and group.previous_state is source and group.state_timestamp == 5
    else:
        with pytest.raises(InvalidTransition):
            group.transition_to(target, 5)
        assert group.state is source and group.state_timestamp == 0


def test_the_table_is_the_documented_one() -> None:
    assert GROUP_STATES.pairs() == VALID


def test_names_are_the_ones_kafka_prints() -> None:
    assert [s.value for s in S] == ["Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"]


def test_requests_walk_a_group_through_every_state() -> None:
    h = Harness()
    seen = []

    def state() -> GroupState:
        group = h.shard.group(GROUP)
        assert group is not None
        return group.state

    member = h.join_new()
    join = h.join(member)
    seen.append(state())  # a new group's first join: PreparingRebalance (from Empty)
    h.advance(h.config.initial_rebalance_delay_ms)
    generation = h.answer(join).generation_id
    seen.append(state())
    h.sync(member, generation, {member: b"a"})
    seen.append(state())
    h.leave((member, None))
    seen.append(state())  # the last member left: the join phase completes at once with nobody in it
    assert seen == [S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.STABLE, S.EMPTY]
    group = h.shard.group(GROUP)
    assert group is not None and group.previous_state is S.PREPARING_REBALANCE
    assert h.delete_groups(GROUP) == {GROUP: 0}
    assert h.shard.group(GROUP) is None
    assert group.state is S.DEAD  # the deleted group object was retired, not merely dropped
