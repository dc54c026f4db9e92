"""Every row of every state machine's table, through the one shared check, and the shared check itself.

`TABLES` must name every `TransitionTable` in the source: the last test counts them, so a new state machine
without its row test fails here.
"""

from __future__ import annotations

import itertools
import re
from enum import Enum
from pathlib import Path

import pytest

from groupstream.client.consumer.classic_member_state import CLASSIC_MEMBER_STATES
from groupstream.client.consumer.member_state import MEMBER_STATES
from groupstream.client.net.node_connection import CONNECTION_STATES
from groupstream.client.producer.txn_rules import TRANSITIONS as PRODUCER_TXN_STATES
from groupstream.coordinator.classic_group import GROUP_STATES
from groupstream.coordinator.consumer_group import CONSUMER_GROUP_STATES
from groupstream.region.operator_state import OPERATOR_STATES
from groupstream.state_table import InvalidTransition, TransitionTable
from groupstream.transaction.state import TXN_STATES

TABLES: list[TransitionTable] = [  # type: ignore[type-arg]
    GROUP_STATES,
    CONSUMER_GROUP_STATES,
    MEMBER_STATES,
    CLASSIC_MEMBER_STATES,
    CONNECTION_STATES,
    OPERATOR_STATES,
    PRODUCER_TXN_STATES,
    TXN_STATES,
]
def _label(state: Enum) -> str:
    return state.value if isinstance(state.value, str) else state.name


ROWS = [(t, a, b) for t in TABLES for a, b in itertools.product(t.states, repeat=2)]


@pytest.mark.parametrize(
    ("table", "current", "target"), ROWS, ids=[f"{t.machine}:{_label(a)}->{_label(b)}" for t, a, b in ROWS]
)
def test_every_row(table: TransitionTable, current: Enum, target: Enum) -> None:  # type: ignore[type-arg]
    if (current, target) in table.pairs():
        assert table.allows(current, target)
        assert table.check(current, target) is target
    else:
        assert not table.allows(current, target)
        with pytest.raises(InvalidTransition, match=f"from {_label(current)} to {_label(target)}") as info:
            table.check(current, target)
        assert info.value.current is current and info.value.target is target
        assert table.machine in str(info.value)


class _Light(Enum):
    RED = "red"
    GREEN = "green"
    AMBER = "amber"


def test_a_table_needs_a_row_for_every_state() -> None:
    with pytest.raises(ValueError, match="no row for AMBER"):
        TransitionTable("a light", _Light, {_Light.RED: frozenset(), _Light.GREEN: frozenset()})


def test_forward_and_backward_tables_agree_and_errors_name_who_and_what_was_allowed() -> None:
    forward = {_Light.RED: frozenset({_Light.GREEN}), _Light.GREEN: frozenset({_Light.AMBER}),
               _Light.AMBER: frozenset({_Light.RED})}  # fmt: skip
    backward = {_Light.GREEN: frozenset({_Light.RED}), _Light.AMBER: frozenset({_Light.GREEN}),
                _Light.RED: frozenset({_Light.AMBER})}  # fmt: skip
    table = TransitionTable.from_next("a light", _Light, forward)
    assert table.pairs() == TransitionTable("a light", _Light, backward).pairs()
    with pytest.raises(InvalidTransition, match=r"^light 7 cannot go from red to amber \(amber may only follow green\)$"):
        table.check(_Light.RED, _Light.AMBER, who="light 7")


def test_every_table_in_the_source_is_walked_here() -> None:
    src = Path(__file__).resolve().parents[1] / "src" / "groupstream"
    made = sum(
        len(re.findall(r"\bTransitionTable(?:\.from_next)?\(", p.read_text()))
        for p in src.rglob("*.py")
        if p.name != "state_table.py"
    )
    assert made == len(TABLES), "a TransitionTable is missing from TABLES"
