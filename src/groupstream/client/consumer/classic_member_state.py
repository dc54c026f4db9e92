"""The classic group member's states, as a table of valid transitions with one checked ``transition_to``."""

from __future__ import annotations

from enum import Enum

from groupstream.state_table import TransitionTable

__all__ = ["CLASSIC_MEMBER_STATES", "ClassicMemberState"]


class ClassicMemberState(Enum):
    UNJOINED = "unjoined"
    """Not in the group: never joined, left, or reset after the coordinator forgot it."""
    PREPARING = "preparing"
    """A (re)join is due; an eager member first revokes everything it owns."""
    JOINING = "joining"
    """JoinGroup sent, waiting for the rebalance's join phase to end."""
    SYNCING = "syncing"
    """SyncGroup sent (the leader's with the assignment it computed)."""
    RECONCILING = "reconciling"
    """Applying the assignment SyncGroup returned: revoke what went away, then assign."""
    STABLE = "stable"
    """Owns its assignment and heartbeats."""
    LEAVING = "leaving"
    """Giving up its partitions and sending LeaveGroup."""
    FATAL = "fatal"
    """Refused for good (a fenced static member, an inconsistent protocol); the application is told."""


S = ClassicMemberState

CLASSIC_MEMBER_STATES = TransitionTable("a classic group member", ClassicMemberState, {
    S.UNJOINED: frozenset({S.PREPARING, S.JOINING, S.SYNCING, S.RECONCILING, S.STABLE, S.LEAVING}),
    S.PREPARING: frozenset({S.UNJOINED, S.JOINING, S.SYNCING, S.RECONCILING, S.STABLE}),
    S.JOINING: frozenset({S.PREPARING}),
    S.SYNCING: frozenset({S.JOINING}),
    S.RECONCILING: frozenset({S.SYNCING}),
    S.STABLE: frozenset({S.RECONCILING}),
    S.LEAVING: frozenset({S.UNJOINED, S.PREPARING, S.JOINING, S.SYNCING, S.RECONCILING, S.STABLE}),
    S.FATAL: frozenset({S.UNJOINED, S.PREPARING, S.JOINING, S.SYNCING, S.RECONCILING, S.STABLE, S.LEAVING}),
})

