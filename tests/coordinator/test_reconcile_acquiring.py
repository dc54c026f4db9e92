"""A member still taking on what its epoch gave it does not release partitions by leaving them out of a
heartbeat.

Found with Apache Kafka's Java consumer on our broker (tests/java/test_java_groups.py, regex subscription):
the first member got all six partitions at epoch 1; before it knew the names of their topics it reconciled
the part it could (nothing) and sent a heartbeat at epoch 1 reporting that it owned nothing. A second member
had joined meanwhile, so the target moved three partitions to it, and reporting nothing counted as having
revoked them: the second member got them while the first went on to take all six once their names arrived.
Both owned three partitions for 100-150 ms, in about one run in four.
"""

from __future__ import annotations

from groupstream.coordinator.reconcile import MemberAssignment, MemberState, reconcile

S = MemberState
P = [("t", p) for p in range(6)]


def test_a_heartbeat_at_the_members_epoch_leaving_out_what_it_was_given_does_not_release_it() -> None:
    first = MemberAssignment("a", 1, 0, S.STABLE, frozenset(P))  # given all six at epoch 1
    step = reconcile(first, 2, set(P[:3]), set(), lambda p: "a", reported_epoch=1)
    assert (step.state, step.epoch, step.assigned, step.pending_revocation) == (
        S.UNREVOKED_PARTITIONS, 1, frozenset(P[:3]), frozenset(P[3:]))  # fmt: skip
    # the other member waits for them
    other = reconcile(MemberAssignment("b", 0, 0, S.STABLE, frozenset()), 2, set(P[3:]), set(),
                      lambda p: "a" if p in step.holds() else None, reported_epoch=0)  # fmt: skip
    assert (other.state, other.assigned) == (S.UNRELEASED_PARTITIONS, frozenset())
    # the first member took all six, then revoked three: now they are released
    assert reconcile(step, 2, set(P[:3]), set(P), lambda p: "a", reported_epoch=1) == step
    done = reconcile(step, 2, set(P[:3]), set(P[:3]), lambda p: "a", reported_epoch=1)
    assert (done.state, done.epoch, done.assigned) == (S.STABLE, 2, frozenset(P[:3]))


def test_a_join_still_releases_at_once_what_the_member_does_not_own() -> None:
    """As Kafka's ``ownsRevokedPartitions``: a heartbeat at epoch 0 (a join) owns nothing for certain, and a
    caller that gives no epoch keeps that rule too; a member that reports what goes away revokes it."""
    m = MemberAssignment("a", 3, 2, S.STABLE, frozenset(P[:4]))
    for reported in (0, None):
        joined = reconcile(m, 4, set(P[:2]), set(), lambda p: "a", reported_epoch=reported)
        assert (joined.state, joined.epoch, joined.assigned) == (S.STABLE, 4, frozenset(P[:2]))
    step = reconcile(m, 4, set(P[:2]), set(P[:4]), lambda p: "a", reported_epoch=3)
    assert (step.state, step.pending_revocation) == (S.UNREVOKED_PARTITIONS, frozenset(P[2:4]))
