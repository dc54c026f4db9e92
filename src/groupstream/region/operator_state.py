"""The client states of the group consumer operator (seed 000) as a table of valid transitions.

SUBSCRIBED and RESET_COMPLETE are the states in which a revocation is expected and ignored (the rebalance
that follows subscribing or a reset); POLLING_CR_RESET_INITIATED is the wait for a region reset that the
operator itself asked for after an unexpected revocation.
"""

from __future__ import annotations

from enum import Enum

from groupstream.state_table import TransitionTable

__all__ = ["OPERATOR_STATES", "OperatorState"]


class OperatorState(Enum):
    INITIALIZED = "INITIALIZED"
    SUBSCRIBED = "SUBSCRIBED"
    POLLING = "POLLING"
    POLLING_CR_RESET_INITIATED = "POLLING_CR_RESET_INITIATED"
    DRAINING = "DRAINING"
    DRAINED = "DRAINED"
    RESETTING = "RESETTING"
    RESET_COMPLETE = "RESET_COMPLETE"
    CLOSED = "CLOSED"


_S = OperatorState
_ALIVE = frozenset(s for s in OperatorState if s is not _S.CLOSED)

OPERATOR_STATES = TransitionTable("the group consumer operator", OperatorState, {
    _S.INITIALIZED: frozenset(),
    _S.SUBSCRIBED: frozenset({_S.INITIALIZED}),
    # the first poll after subscribing or a reset has returned; a checkpoint is done and polling resumes
    _S.POLLING: frozenset({_S.SUBSCRIBED, _S.RESET_COMPLETE, _S.DRAINED}),
    _S.POLLING_CR_RESET_INITIATED: frozenset({_S.POLLING, _S.DRAINING, _S.DRAINED}),
    _S.DRAINING: frozenset({_S.SUBSCRIBED, _S.POLLING, _S.RESET_COMPLETE}),
    _S.DRAINED: frozenset({_S.DRAINING}),
    _S.RESETTING: _ALIVE - {_S.INITIALIZED},
    _S.RESET_COMPLETE: frozenset({_S.RESETTING}),
    _S.CLOSED: _ALIVE,
})

