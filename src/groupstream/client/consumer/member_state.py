"""The states of a member of a KIP-848 (``group.protocol=consumer``) group, as a table of valid moves.

The table follows Kafka's client ``MemberState``: a member may only enter a state from one of the states listed
for it, so a bug that would, say, acknowledge an assignment nobody reconciled fails loudly at the transition
instead of confusing the coordinator. ``UNJOINED`` is Kafka's ``STALE`` (the member left because
``max.poll.interval.ms`` ran out and waits for the application's next ``poll`` to rejoin); unlike Kafka, an
``UNJOINED`` member may also go straight to ``UNSUBSCRIBED`` when the application unsubscribes, so a later
subscribe starts from a clean state.
"""

from __future__ import annotations

from enum import Enum

from groupstream.state_table import TransitionTable

__all__ = ["MEMBER_STATES", "MemberState", "MemberStateMachine"]


class MemberState(Enum):
    UNSUBSCRIBED = "unsubscribed"
    """Not subscribed: no heartbeats; commits go out without a group identity."""
    JOINING = "joining"
    """Heartbeating with epoch 0 (a full request) until the coordinator answers with an epoch."""
    RECONCILING = "reconciling"
    """The target assignment differs from what the member owns: revoking, then assigning, or waiting for
    metadata to name the topic ids of the target."""
    ACKNOWLEDGING = "acknowledging"
    """A reconciliation finished: the next heartbeat goes out at once and reports the owned partitions."""
    STABLE = "stable"
    """Owns its target assignment; heartbeats on the interval."""
    FENCED = "fenced"
    """The coordinator no longer knows this member at its epoch: its partitions are being lost, then it rejoins."""
    PREPARE_LEAVING = "prepare_leaving"
    """Leaving: releasing the assignment (revoke: commit, callback) before the leave heartbeat."""
    LEAVING = "leaving"
    """The leave heartbeat (epoch -1, or -2 for a static member) goes out on the next poll."""
    UNJOINED = "unjoined"
    """Left because ``max.poll.interval.ms`` ran out (Kafka's STALE); rejoins on the next application poll."""
    FATAL = "fatal"
    """An error the member cannot recover from; no more requests. The error is kept for the application."""


_S = MemberState
_IN_GROUP = frozenset({_S.JOINING, _S.STABLE, _S.RECONCILING, _S.ACKNOWLEDGING})

MEMBER_STATES = TransitionTable("a consumer group member", MemberState, {
    _S.UNSUBSCRIBED: frozenset({_S.PREPARE_LEAVING, _S.LEAVING, _S.FENCED, _S.UNJOINED}),
    _S.JOINING: frozenset({_S.FENCED, _S.UNSUBSCRIBED, _S.UNJOINED}),
    _S.RECONCILING: frozenset({_S.STABLE, _S.JOINING, _S.ACKNOWLEDGING, _S.RECONCILING}),
    _S.ACKNOWLEDGING: frozenset({_S.RECONCILING}),
    _S.STABLE: frozenset({_S.JOINING, _S.ACKNOWLEDGING, _S.RECONCILING}),
    _S.FENCED: _IN_GROUP | {_S.PREPARE_LEAVING, _S.LEAVING},
    _S.PREPARE_LEAVING: _IN_GROUP | {_S.UNSUBSCRIBED},
    _S.LEAVING: frozenset({_S.PREPARE_LEAVING}),
    _S.UNJOINED: frozenset({_S.LEAVING}),
    _S.FATAL: _IN_GROUP | {_S.PREPARE_LEAVING, _S.LEAVING, _S.UNSUBSCRIBED},
})
"""A member may enter a state only from one of these (Kafka's table, with STALE named UNJOINED). Staying in
a state counts as a transition too: only RECONCILING may follow itself (a newer target while reconciling)."""


class MemberStateMachine:
    """The current state, changed only through the checked `transition_to`."""

    __slots__ = ("state",)

    def __init__(self, state: MemberState = MemberState.UNSUBSCRIBED) -> None:
        self.state = state

    def can_transition_to(self, target: MemberState) -> bool:
        return MEMBER_STATES.allows(self.state, target)

    def transition_to(self, target: MemberState) -> MemberState:
        """Move to ``target``; returns the state left. Raises `InvalidTransition` if the table forbids it."""
        previous = self.state
        self.state = MEMBER_STATES.check(previous, target)
        return previous
