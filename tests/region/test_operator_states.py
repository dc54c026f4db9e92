"""The group consumer operator's transition table, walked through the operator itself: every row, valid and
invalid, leaves the operator in the state the table says."""

from __future__ import annotations

import pytest

from groupstream.region.operator import GroupConsumerOperator
from groupstream.region.operator_state import OPERATOR_STATES, OperatorState
from groupstream.state_table import InvalidTransition

PAIRS = [(old, new) for new in OperatorState for old in OperatorState]


@pytest.mark.parametrize(("old", "new"), PAIRS, ids=[f"{o.value}->{n.value}" for o, n in PAIRS])
def test_transition(old: OperatorState, new: OperatorState) -> None:
    op = GroupConsumerOperator("m", state=old)
    if OPERATOR_STATES.allows(old, new):
        op.transition_to(new)
        assert op.state is new
    else:
        with pytest.raises(InvalidTransition, match=f"from {old.value} to {new.value}"):
            op.transition_to(new)
        assert op.state is old


def test_the_table_is_what_the_seed_needs() -> None:
    s = OperatorState
    assert OPERATOR_STATES.previous(s.POLLING_CR_RESET_INITIATED) == {s.POLLING, s.DRAINING, s.DRAINED}
    assert OPERATOR_STATES.previous(s.RESET_COMPLETE) == {s.RESETTING}
    assert not OPERATOR_STATES.allows(s.INITIALIZED, s.RESETTING)  # reset needs a subscribed operator
    assert all(s.CLOSED not in OPERATOR_STATES.previous(t) for t in s)  # closed is final
