"""Every row of the classic member's transition table, valid and invalid."""

from __future__ import annotations

import itertools

import pytest

from groupstream.client.consumer.classic_member_state import (
    VALID_PREVIOUS,
    ClassicMemberState,
    InvalidClassicTransition,
    check_transition,
)

PAIRS = list(itertools.product(ClassicMemberState, repeat=2))


@pytest.mark.parametrize(("current", "new"), PAIRS, ids=[f"{a.value}->{b.value}" for a, b in PAIRS])
def test_every_transition(current: ClassicMemberState, new: ClassicMemberState) -> None:
    if current in VALID_PREVIOUS[new]:
        check_transition(current, new)
    else:
        with pytest.raises(InvalidClassicTransition, match=f"from {current.value} to {new.value}"):
            check_transition(current, new)


def test_the_table_covers_every_state_and_fatal_is_final() -> None:
    assert set(VALID_PREVIOUS) == set(ClassicMemberState)
    assert all(ClassicMemberState.FATAL not in prev for prev in VALID_PREVIOUS.values())
