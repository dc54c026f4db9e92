"""The classic member's transition table: what the membership manager relies on (every row of it is walked by
tests/test_state_tables.py)."""

from __future__ import annotations

import itertools

from groupstream.client.consumer.classic_member_state import CLASSIC_MEMBER_STATES, ClassicMemberState

S = ClassicMemberState


def test_fatal_is_final_and_a_join_goes_through_every_step() -> None:
    assert all(S.FATAL not in CLASSIC_MEMBER_STATES.previous(s) for s in S)
    steps = [S.UNJOINED, S.PREPARING, S.JOINING, S.SYNCING, S.RECONCILING, S.STABLE]
    assert all(CLASSIC_MEMBER_STATES.allows(a, b) for a, b in itertools.pairwise(steps))
    assert CLASSIC_MEMBER_STATES.previous(S.SYNCING) == {S.JOINING}  # no SyncGroup without a JoinGroup answer
