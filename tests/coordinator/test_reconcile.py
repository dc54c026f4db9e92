"""KIP-848 reconciliation (issue 4): revoke first, assign only what was released, never two owners; and a
group whose members keep heartbeating converges to its target."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from groupstream.coordinator.reconcile import MemberAssignment, MemberState, owners, reconcile

S = MemberState
P0, P1, P2 = ("t", 0), ("t", 1), ("t", 2)


def member(mid: str, epoch: int, assigned: set[tuple[str, int]], state: MemberState = S.STABLE) -> MemberAssignment:
    return MemberAssignment(mid, epoch, epoch - 1, state, frozenset(assigned))


def test_a_stable_member_at_the_target_epoch_stays() -> None:
    m = member("a", 3, {P0})
    assert reconcile(m, 3, {P0}, {P0}, lambda p: "a") is m


def test_partitions_that_go_away_are_revoked_first_and_nothing_new_is_given_meanwhile() -> None:
    m = member("a", 3, {P0, P1})
    step = reconcile(m, 4, {P0, P2}, {P0, P1}, lambda p: "a" if p != P2 else None)
    assert (step.state, step.epoch, step.assigned, step.pending_revocation) == (
        S.UNREVOKED_PARTITIONS, 3, frozenset({P0}), frozenset({P1}))  # fmt: skip
    assert reconcile(step, 4, {P0, P2}, {P0, P1}, lambda p: "a") == step  # still owns P1: keep waiting
    done = reconcile(step, 4, {P0, P2}, {P0}, lambda p: None if p == P2 else "a")
    assert (done.state, done.epoch, done.previous_epoch, done.assigned) == (S.STABLE, 4, 3, frozenset({P0, P2}))


def test_partitions_the_member_reports_it_does_not_own_need_no_revocation() -> None:
    """As Kafka's ``ownsRevokedPartitions``: a member that owns none of what goes away (a static member's new
    process, a member rejoining at epoch 0) releases it at once and moves to the target epoch; one that did
    not report what it owns is taken to still own everything."""
    m = member("a", 3, {P0, P1})
    step = reconcile(m, 4, {P0, P2}, set(), lambda p: "a" if p != P2 else None)
    assert (step.state, step.epoch, step.assigned, step.pending_revocation) == (
        S.STABLE, 4, frozenset({P0, P2}), frozenset())  # fmt: skip
    assert reconcile(m, 4, {P0, P2}, None, lambda p: "a").state is S.UNREVOKED_PARTITIONS
    assert reconcile(m, 4, {P0, P2}, {P1}, lambda p: "a").state is S.UNREVOKED_PARTITIONS


def test_a_partition_another_member_holds_waits_until_released() -> None:
    m = member("b", 3, set())
    step = reconcile(m, 4, {P1}, set(), lambda p: "a")  # a still holds P1 (pending its revocation)
    assert (step.state, step.epoch, step.assigned) == (S.UNRELEASED_PARTITIONS, 4, frozenset())
    done = reconcile(step, 4, {P1}, set(), lambda p: None)
    assert (done.state, done.assigned) == (S.STABLE, frozenset({P1}))


PARTITIONS = [("t", p) for p in range(6)]
MEMBERS = ["a", "b", "c"]
targets = st.lists(st.fixed_dictionaries({p: st.sampled_from(MEMBERS) for p in PARTITIONS}), min_size=1, max_size=4)
orders = st.lists(st.sampled_from(MEMBERS), min_size=1, max_size=30)


@settings(max_examples=200, deadline=None)
@given(targets, orders)
def test_never_two_owners_and_the_group_converges(plans: list[dict[tuple[str, int], str]], order: list[str]) -> None:
    group = {m: member(m, 0, set()) for m in MEMBERS}
    client_owned: dict[str, frozenset[tuple[str, int]]] = {m: frozenset() for m in MEMBERS}
    epoch = 0

    def heartbeat(mid: str, target: dict[tuple[str, int], str]) -> None:
        mine = {p for p, o in target.items() if o == mid}
        holders = owners(group)
        nxt = reconcile(group[mid], epoch, mine, client_owned[mid], lambda p: holders.get(p))
        group[mid] = nxt
        client_owned[mid] = nxt.assigned  # the client revokes what it must, takes what it is given
        held = [p for m in group.values() for p in m.holds()]
        assert len(held) == len(set(held)), f"a partition has two owners: {group}"

    for target in plans:
        epoch += 1
        for mid in order:  # some heartbeats in an arbitrary order, then enough for everyone to settle
            heartbeat(mid, target)
        for _ in range(4):
            for mid in MEMBERS:
                heartbeat(mid, target)
        for mid in MEMBERS:
            m = group[mid]
            assert m.state is S.STABLE and m.epoch == epoch
            assert m.assigned == {p for p, o in target.items() if o == mid}
