"""Client-side ``cooperative-sticky`` (KIP-429): revoke first, hand over in the follow-up round."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence

import pytest
from assignor_checks import (
    assert_kip54_balanced,
    assert_order_independent,
    assert_valid,
    assert_within_one,
    clusters,
    subscribed_partitions,
    subscriptions,
    tps,
)
from hypothesis import given
from hypothesis import strategies as st

from groupstream.assignment import (
    AssignorError,
    ClusterView,
    CooperativeStickyAssignor,
    GroupAssignment,
    RebalanceProtocol,
    Subscription,
    TopicPartition,
    needs_follow_up_rebalance,
    revoked_partitions,
    validate_cooperative_assignment,
)
from groupstream.assignment.user_data import encode_cooperative_user_data

ASSIGNOR = CooperativeStickyAssignor()


def member(
    member_id: str, topics: Iterable[str], owned: Iterable[TopicPartition] = (), generation: int | None = 1
) -> Subscription:
    return Subscription(member_id, tuple(topics), owned_partitions=tuple(owned), generation_id=generation)


def rejoin(
    subs: Sequence[Subscription], owned: Mapping[str, Iterable[TopicPartition]], generation: int
) -> list[Subscription]:
    """Every member reports exactly what it owns now (it revoked what it lost, kept the rest)."""
    return [member(s.member_id, s.topics, owned.get(s.member_id, ()), generation) for s in subs]


def rounds_until_stable(
    cluster: ClusterView, subs: Sequence[Subscription], limit: int = 6
) -> tuple[GroupAssignment, int]:
    """Run rebalances as the consumers would, checking the cooperative rule in each; return the last one."""
    current = list(subs)
    for n in range(1, limit + 1):
        result = ASSIGNOR.assign(cluster, current)
        validate_cooperative_assignment(current, result)
        if not needs_follow_up_rebalance(current, result):
            return result, n
        current = rejoin(current, result, n + 1)
    raise AssertionError(f"no stable assignment after {limit} rebalances")


def test_supports_both_protocols_preferring_cooperative() -> None:
    assert ASSIGNOR.supported_protocols == (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)


def test_new_member_gets_moving_partitions_only_in_the_second_round() -> None:
    cluster = ClusterView({"t": 4})
    owned = {"a": tps("t-0, t-1"), "b": tps("t-2, t-3")}
    subs = [
        member("a", ("t",), owned["a"]),
        member("b", ("t",), owned["b"]),
        member("c", ("t",), generation=None),
    ]
    first = ASSIGNOR.assign(cluster, subs)
    # The sticky target moves one partition to c; round one only takes it away from its owner.
    assert first["c"] == ()
    assert sum(len(p) for p in first.values()) == 3
    assert needs_follow_up_rebalance(subs, first)
    losers = {m: revoked_partitions(owned[m], first[m]) for m in owned}
    (lost,) = [tp for revoked in losers.values() for tp in revoked]
    second = ASSIGNOR.assign(cluster, rejoin(subs, first, 2))
    assert second["c"] == (lost,)
    assert not needs_follow_up_rebalance(rejoin(subs, first, 2), second)


def test_double_claim_in_same_generation_is_revoked_before_reassignment() -> None:
    """Kafka's answer (consumer3 would get topic-0) minus the transfer: round one revokes it from both."""
    cluster = ClusterView({"topic": 3})
    subs = [
        member("consumer1", ("topic",), tps("topic-0, topic-1"), 5),
        member("consumer2", ("topic",), tps("topic-0, topic-2"), 5),
        member("consumer3", ("topic",), (), 5),
    ]
    assert ASSIGNOR.assign(cluster, subs) == {
        "consumer1": tps("topic-1"),
        "consumer2": tps("topic-2"),
        "consumer3": (),
    }


def test_stale_claims_lose_without_a_transfer() -> None:
    """testOwnedPartitionsAreInvalidatedForConsumerWithMultipleGeneration: nothing transfers ownership."""
    cluster = ClusterView({"topic": 3, "topic2": 3})
    both = ("topic", "topic2")
    subs = [
        member("consumer1", both, tps("topic-0, topic2-1, topic-1"), 10),
        member("consumer2", both, tps("topic-0, topic2-1, topic2-2"), 8),
    ]
    result = ASSIGNOR.assign(cluster, subs)
    assert result == {
        "consumer1": tps("topic-0, topic-1, topic2-1"),
        "consumer2": tps("topic-2, topic2-0, topic2-2"),
    }
    validate_cooperative_assignment(subs, result)


def test_generation_from_user_data_when_the_subscription_has_none() -> None:
    """Subscriptions older than v2 carry the generation in cooperative user data; the newer claim wins."""
    cluster = ClusterView({"t": 2})
    old = Subscription("old", ("t",), owned_partitions=tps("t-0"), user_data=encode_cooperative_user_data(3))
    new = Subscription("new", ("t",), owned_partitions=tps("t-0"), user_data=encode_cooperative_user_data(4))
    assert ASSIGNOR.assign(cluster, [old, new]) == {"new": tps("t-0"), "old": tps("t-1")}


def test_validation_rejects_a_transfer_in_one_round() -> None:
    subs = [member("a", ("t",), tps("t-0")), member("b", ("t",))]
    with pytest.raises(AssignorError, match="t-0"):
        validate_cooperative_assignment(subs, {"a": (), "b": tps("t-0")})


def test_user_data_carries_the_generation() -> None:
    assert ASSIGNOR.subscription_user_data(["t"], tps("t-0"), 9) == b"\x00\x00\x00\x09"


# --- properties ------------------------------------------------------------------------------------------


@st.composite
def owned_state(draw: st.DrawFn, homogeneous: bool | None = None) -> tuple[ClusterView, list[Subscription]]:
    """A group where members own disjoint partitions they may or may not still subscribe to."""
    cluster = draw(clusters())
    subs = draw(subscriptions(homogeneous=homogeneous))
    partitions = sorted(subscribed_partitions(cluster, subs))
    owners = {tp: draw(st.none() | st.sampled_from([s.member_id for s in subs])) for tp in partitions}
    return cluster, [
        member(s.member_id, s.topics, [tp for tp, o in owners.items() if o == s.member_id], 4) for s in subs
    ]


@given(owned_state())
def test_no_partition_changes_hands_within_one_round(group: tuple[ClusterView, list[Subscription]]) -> None:
    cluster, subs = group
    result = ASSIGNOR.assign(cluster, subs)
    claimed = {tp: s.member_id for s in subs for tp in s.owned_partitions}
    for m, partitions in result.items():
        for tp in partitions:
            assert claimed.get(tp, m) == m, f"{tp} given to {m!r} while {claimed[tp]!r} still owns it"
    validate_cooperative_assignment(subs, result)


@given(owned_state(homogeneous=True))
def test_identical_subscriptions_settle_in_the_follow_up_round(
    group: tuple[ClusterView, list[Subscription]],
) -> None:
    cluster, subs = group
    final, rounds = rounds_until_stable(cluster, subs)
    assert rounds <= 2
    assert_valid(final, cluster, subs)
    assert_within_one(final)


@given(owned_state())
def test_any_group_settles_balanced(group: tuple[ClusterView, list[Subscription]]) -> None:
    cluster, subs = group
    final, _rounds = rounds_until_stable(cluster, subs)
    assert_valid(final, cluster, subs)
    assert_kip54_balanced(final, subs)


@given(owned_state())
def test_a_stable_group_stays_put(group: tuple[ClusterView, list[Subscription]]) -> None:
    cluster, subs = group
    final, rounds = rounds_until_stable(cluster, subs)
    again = rejoin(subs, final, rounds + 5)
    assert ASSIGNOR.assign(cluster, again) == final
    assert not needs_follow_up_rebalance(again, final)


@given(owned_state(), st.randoms(use_true_random=False))
def test_deterministic_under_reordering(
    group: tuple[ClusterView, list[Subscription]], rnd: random.Random
) -> None:
    cluster, subs = group
    assert_order_independent(ASSIGNOR, cluster, subs, rnd)
