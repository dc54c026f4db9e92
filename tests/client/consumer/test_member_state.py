"""Every row of the KIP-848 member state table: each valid move succeeds, each other move raises."""

from __future__ import annotations

import itertools

import pytest

from groupstream.client.consumer.member_state import (
    MEMBER_STATES,
    MemberState,
    MemberStateMachine,
)
from groupstream.state_table import InvalidTransition

S = MemberState

# Written out by hand from Kafka's MemberState (STALE named UNJOINED, plus UNJOINED -> UNSUBSCRIBED), so a
# change to the table in the module has to be made here too, on purpose.
EXPECTED: set[tuple[MemberState, MemberState]] = {
    (S.PREPARE_LEAVING, S.UNSUBSCRIBED),
    (S.LEAVING, S.UNSUBSCRIBED),
    (S.FENCED, S.UNSUBSCRIBED),
    (S.UNJOINED, S.UNSUBSCRIBED),
    (S.FENCED, S.JOINING),
    (S.UNSUBSCRIBED, S.JOINING),
    (S.UNJOINED, S.JOINING),
    (S.STABLE, S.RECONCILING),
    (S.JOINING, S.RECONCILING),
    (S.ACKNOWLEDGING, S.RECONCILING),
    (S.RECONCILING, S.RECONCILING),
    (S.RECONCILING, S.ACKNOWLEDGING),
    (S.JOINING, S.STABLE),
    (S.ACKNOWLEDGING, S.STABLE),
    (S.RECONCILING, S.STABLE),
    *(
        (s, S.FENCED)
        for s in (S.JOINING, S.STABLE, S.RECONCILING, S.ACKNOWLEDGING, S.PREPARE_LEAVING, S.LEAVING)
    ),
    *((s, S.PREPARE_LEAVING) for s in (S.JOINING, S.STABLE, S.RECONCILING, S.ACKNOWLEDGING, S.UNSUBSCRIBED)),
    (S.PREPARE_LEAVING, S.LEAVING),
    (S.LEAVING, S.UNJOINED),
    *(
        (s, S.FATAL)
        for s in (
            S.JOINING,
            S.STABLE,
            S.RECONCILING,
            S.ACKNOWLEDGING,
            S.PREPARE_LEAVING,
            S.LEAVING,
            S.UNSUBSCRIBED,
        )
    ),
}

ALL_PAIRS = list(itertools.product(MemberState, MemberState))


def test_table_is_exactly_the_expected_one() -> None:
    assert MEMBER_STATES.pairs() == EXPECTED


def test_initial_state_is_unsubscribed() -> None:
    assert MemberStateMachine().state is S.UNSUBSCRIBED


@pytest.mark.parametrize(("current", "target"), sorted(EXPECTED, key=lambda p: (p[0].name, p[1].name)))
def test_valid_transition(current: MemberState, target: MemberState) -> None:
    m = MemberStateMachine(current)
    assert m.can_transition_to(target)
    assert m.transition_to(target) is current
    assert m.state is target


@pytest.mark.parametrize(
    ("current", "target"),
    sorted((p for p in ALL_PAIRS if p not in EXPECTED), key=lambda p: (p[0].name, p[1].name)),
)
def test_invalid_transition(current: MemberState, target: MemberState) -> None:
    m = MemberStateMachine(current)
    assert not m.can_transition_to(target)
    with pytest.raises(InvalidTransition) as info:
        m.transition_to(target)
    assert m.state is current
    assert info.value.current is current and info.value.target is target
    assert f"from {current.value} to {target.value}" in str(info.value)


def test_fatal_and_unjoined_are_sticky_except_for_their_exits() -> None:
    # FATAL has no way out; UNJOINED leaves only to rejoin or unsubscribe
    assert not any(S.FATAL in MEMBER_STATES.previous(s) for s in S)
    assert {nxt for nxt in S if S.UNJOINED in MEMBER_STATES.previous(nxt)} == {
        S.JOINING,
        S.UNSUBSCRIBED,
    }
