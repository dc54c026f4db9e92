"""Every row of the group consumer operator's transition table, valid and invalid."""

from __future__ import annotations

import pytest

from groupstream.region.operator import GroupConsumerOperator
from groupstream.region.operator_state import VALID_PREVIOUS_STATES, InvalidOperatorTransition, OperatorState

PAIRS = [(old, new) for new in OperatorState for old in OperatorState]


@pytest.mark.parametrize(("old", "new"), PAIRS, ids=[f"{o.value}->{n.value}" for o, n in PAIRS])
def test_transition(old: OperatorState, new: OperatorState) -> None:
    op = GroupConsumerOperator("m", state=old)
    if old in VALID_PREVIOUS_STATES[new]:
        op.transition_to(new)
        assert op.state is new
    else:
        with pytest.raises(InvalidOperatorTransition, match=f"from {old.value} to {new.value}"):
            op.transition_to(new)
        assert op.state is old


def test_the_table_is_what_the_seed_needs() -> None:
    s = OperatorState
    assert VALID_PREVIOUS_STATES[s.POLLING_CR_RESET_INITIATED] == {s.POLLING, s.DRAINING, s.DRAINED}
    assert VALID_PREVIOUS_STATES[s.RESET_COMPLETE] == {s.RESETTING}
    assert s.INITIALIZED not in VALID_PREVIOUS_STATES[s.RESETTING]  # reset needs a subscribed operator
    assert all(s.CLOSED not in prev for prev in VALID_PREVIOUS_STATES.values())  # closed is final
