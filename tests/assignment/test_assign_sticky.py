"""Client-side ``sticky``: KIP-54's examples, Kafka's generation rules, user data, and properties."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence

from assignor_checks import (
    TOPICS,
    assert_kip54_balanced,
    assert_order_independent,
    assert_valid,
    assert_within_one,
    clusters,
    minimum_moves,
    moved,
    subscribed_partitions,
    subscriptions,
    tps,
)
from hypothesis import given
from hypothesis import strategies as st

from groupstream.assignment import ClusterView, StickyAssignor, Subscription, TopicPartition
from groupstream.assignment.user_data import (
    StickyUserData,
    decode_cooperative_user_data,
    decode_sticky_user_data,
    encode_cooperative_user_data,
    encode_sticky_user_data,
)

ASSIGNOR = StickyAssignor()


def sticky(
    member: str, topics: Iterable[str], owned: Iterable[TopicPartition] = (), generation: int = 1
) -> Subscription:
    """A sticky member's subscription: its previous assignment travels in the user data."""
    owned = tuple(owned)
    data = ASSIGNOR.subscription_user_data(topics, owned, generation) if owned else None
    return Subscription(member, tuple(topics), user_data=data)


def rejoin(
    subs: Sequence[Subscription], previous: Mapping[str, Iterable[TopicPartition]], generation: int
) -> list[Subscription]:
    return [sticky(s.member_id, s.topics, previous.get(s.member_id, ()), generation) for s in subs]


# --- KIP-54's examples -----------------------------------------------------------------------------------


def test_kip54_example_1_identical_subscriptions() -> None:
    cluster = ClusterView({"t0": 2, "t1": 2, "t2": 2, "t3": 2})
    topics = ("t0", "t1", "t2", "t3")
    first = ASSIGNOR.assign(cluster, [sticky(c, topics) for c in ("C0", "C1", "C2")])
    assert first == {
        "C0": tps("t0-0, t1-1, t3-0"),
        "C1": tps("t0-1, t2-0, t3-1"),
        "C2": tps("t1-0, t2-1"),
    }
    # C1 leaves: C0 and C2 keep everything they had and split C1's partitions 4 / 4.
    second = ASSIGNOR.assign(cluster, [sticky(c, topics, first[c]) for c in ("C0", "C2")])
    assert set(first["C0"]) <= set(second["C0"]) and set(first["C2"]) <= set(second["C2"])
    assert [len(p) for p in second.values()] == [4, 4]


def test_kip54_example_2_different_subscriptions() -> None:
    cluster = ClusterView({"t0": 1, "t1": 2, "t2": 3})
    subs = [sticky("C0", ("t0",)), sticky("C1", ("t0", "t1")), sticky("C2", ("t0", "t1", "t2"))]
    first = ASSIGNOR.assign(cluster, subs)
    assert first == {"C0": tps("t0-0"), "C1": tps("t1-0, t1-1"), "C2": tps("t2-0, t2-1, t2-2")}
    # C0 leaves: sticky keeps all 5 other assignments (round robin would keep 3).
    second = ASSIGNOR.assign(cluster, [sticky(s.member_id, s.topics, first[s.member_id]) for s in subs[1:]])
    assert second == {"C1": tps("t0-0, t1-0, t1-1"), "C2": tps("t2-0, t2-1, t2-2")}


# --- generations (KIP-341), with the answers of Kafka's AbstractStickyAssignorTest ----------------------


def test_claims_from_an_older_generation_lose() -> None:
    """testOwnedPartitionsAreInvalidatedForConsumerWithMultipleGeneration."""
    cluster = ClusterView({"topic": 3, "topic2": 3})
    both = ("topic", "topic2")
    subs = [
        sticky("consumer1", both, tps("topic-0, topic2-1, topic-1"), 10),
        sticky("consumer2", both, tps("topic-0, topic2-1, topic2-2"), 8),
    ]
    assert ASSIGNOR.assign(cluster, subs) == {
        "consumer1": tps("topic-0, topic-1, topic2-1"),
        "consumer2": tps("topic-2, topic2-0, topic2-2"),
    }


def test_highest_generation_keeps_each_partition() -> None:
    """testEnsurePartitionsAssignedToHighestGeneration."""
    cluster = ClusterView({"topic": 3, "topic2": 3, "topic3": 3})
    topics = ("topic", "topic2", "topic3")
    subs = [
        sticky("consumer1", topics, tps("topic-0, topic2-0, topic3-0"), 10),
        sticky("consumer2", topics, tps("topic-1, topic2-1, topic3-1"), 9),
        sticky("consumer3", topics, tps("topic2-1, topic3-0, topic3-2"), 8),
    ]
    assert ASSIGNOR.assign(cluster, subs) == {
        "consumer1": tps("topic-0, topic2-0, topic3-0"),
        "consumer2": tps("topic-1, topic2-1, topic3-1"),
        "consumer3": tps("topic-2, topic2-2, topic3-2"),
    }


def test_same_generation_double_claim_is_dropped() -> None:
    """testPartitionsTransferringOwnershipIncludeThePartitionClaimedByMultipleConsumersInSameGeneration."""
    cluster = ClusterView({"topic": 3})
    subs = [
        sticky("consumer1", ("topic",), tps("topic-0, topic-1"), 5),
        sticky("consumer2", ("topic",), tps("topic-0, topic-2"), 5),
        sticky("consumer3", ("topic",)),
    ]
    assert ASSIGNOR.assign(cluster, subs) == {
        "consumer1": tps("topic-1"),
        "consumer2": tps("topic-2"),
        "consumer3": tps("topic-0"),
    }


def test_no_reassignment_of_current_members() -> None:
    """testNoReassignmentOnCurrentMembers: the new member only gets what nobody owns."""
    cluster = ClusterView({"topic": 3, "topic1": 3, "topic2": 3, "topic3": 3})
    topics = ("topic", "topic1", "topic2", "topic3")
    subs = [
        sticky("consumer1", topics),
        sticky("consumer2", topics, tps("topic-0, topic2-0, topic1-0"), 9),
        sticky("consumer3", topics, tps("topic3-2, topic2-2, topic1-1"), 8),
        sticky("consumer4", topics, tps("topic3-1, topic-1, topic-2"), 7),
    ]
    assert ASSIGNOR.assign(cluster, subs)["consumer1"] == tps("topic1-2, topic2-1, topic3-0")


def test_unreadable_user_data_is_ignored() -> None:
    cluster = ClusterView({"t": 4})
    subs = [
        Subscription("a", ("t",), user_data=b"\x00\x00\x00\x05junk"),
        sticky("b", ("t",), tps("t-0, t-1, t-2")),
    ]
    result = ASSIGNOR.assign(cluster, subs)
    assert len(result["a"]) == len(result["b"]) == 2
    assert set(result["b"]) <= set(tps("t-0, t-1, t-2"))


def test_no_user_data_before_the_first_assignment() -> None:
    assert ASSIGNOR.subscription_user_data(["t"], None, -1) is None


# --- user data ---------------------------------------------------------------------------------------------


def test_user_data_java_layout() -> None:
    """StickyAssignorUserData v1 as Java's Struct writes it: no version prefix."""
    data = encode_sticky_user_data(tps("b-1, a-0, b-0"), 7)
    expected = (
        b"\x00\x00\x00\x02"  # two topics
        + b"\x00\x01a"
        + b"\x00\x00\x00\x01"
        + b"\x00\x00\x00\x00"
        + b"\x00\x01b"
        + b"\x00\x00\x00\x02"
        + b"\x00\x00\x00\x00"
        + b"\x00\x00\x00\x01"
        + b"\x00\x00\x00\x07"  # generation
    )
    assert data == expected
    assert encode_sticky_user_data(tps("a-0"), 7, with_version_prefix=True)[:2] == b"\x00\x01"


def test_user_data_v0_has_no_generation() -> None:
    v0 = b"\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x01\x00\x00\x00\x03"
    assert decode_sticky_user_data(v0) == StickyUserData(tps("t-3"), None)


@given(
    st.sets(st.builds(TopicPartition, st.sampled_from(TOPICS), st.integers(0, 70000)), max_size=30),
    st.integers(-(2**31), 2**31 - 1),
    st.booleans(),
)
def test_user_data_round_trips_in_both_framings(
    partitions: set[TopicPartition], generation: int, prefix: bool
) -> None:
    data = encode_sticky_user_data(partitions, generation, with_version_prefix=prefix)
    assert decode_sticky_user_data(data) == StickyUserData(tuple(sorted(partitions)), generation)


@given(st.binary(max_size=64))
def test_user_data_decoder_never_raises(data: bytes) -> None:
    decoded = decode_sticky_user_data(data)
    assert decoded is None or isinstance(decoded, StickyUserData)


def test_cooperative_user_data_is_a_generation() -> None:
    assert encode_cooperative_user_data(12) == b"\x00\x00\x00\x0c"
    assert decode_cooperative_user_data(b"\x00\x00\x00\x0c") == 12
    assert decode_cooperative_user_data(None) == -1
    assert decode_cooperative_user_data(b"\x01") == -1


# --- properties ------------------------------------------------------------------------------------------


@st.composite
def previous_claims(draw: st.DrawFn, cluster: ClusterView, subs: list[Subscription]) -> list[Subscription]:
    """Members with arbitrary (possibly overlapping, stale or invalid) previous assignments and generations."""
    known = [
        *sorted(subscribed_partitions(cluster, subs)),
        TopicPartition("t0", 99),
        TopicPartition("gone", 0),
    ]
    out = []
    for s in subs:
        owned = draw(st.lists(st.sampled_from(known), max_size=8, unique=True))
        out.append(sticky(s.member_id, s.topics, owned, draw(st.integers(-1, 3))))
    return out


@st.composite
def groups_with_claims(
    draw: st.DrawFn, homogeneous: bool | None = None
) -> tuple[ClusterView, list[Subscription]]:
    cluster = draw(clusters())
    subs = draw(subscriptions(homogeneous=homogeneous))
    return cluster, draw(previous_claims(cluster, subs))


@given(groups_with_claims())
def test_valid_whatever_the_claims(group: tuple[ClusterView, list[Subscription]]) -> None:
    cluster, subs = group
    result = ASSIGNOR.assign(cluster, subs)
    assert_valid(result, cluster, subs)
    assert_kip54_balanced(result, subs)


@given(groups_with_claims(homogeneous=True))
def test_identical_subscriptions_are_within_one(group: tuple[ClusterView, list[Subscription]]) -> None:
    cluster, subs = group
    assert_within_one(ASSIGNOR.assign(cluster, subs))


@given(groups_with_claims())
def test_nothing_moves_when_nothing_changed(group: tuple[ClusterView, list[Subscription]]) -> None:
    cluster, subs = group
    first = ASSIGNOR.assign(cluster, subs)
    assert ASSIGNOR.assign(cluster, rejoin(subs, first, 7)) == first


@st.composite
def disjoint_ownership(
    draw: st.DrawFn, cluster: ClusterView, subs: list[Subscription]
) -> dict[str, list[TopicPartition]]:
    """A valid previous state: each partition owned by at most one member subscribed to it."""
    owned: dict[str, list[TopicPartition]] = {s.member_id: [] for s in subs}
    for tp in sorted(subscribed_partitions(cluster, subs)):
        candidates = [s.member_id for s in subs if tp.topic in s.topics]
        owner = draw(st.none() | st.sampled_from(candidates))
        if owner is not None:
            owned[owner].append(tp)
    return owned


@given(clusters(), subscriptions(homogeneous=True), st.data())
def test_moves_the_minimum_from_any_previous_state(
    cluster: ClusterView, subs: list[Subscription], data: st.DataObject
) -> None:
    """Identical subscriptions: from any valid ownership, exactly the unavoidable partitions change owner."""
    owned = data.draw(disjoint_ownership(cluster, subs))
    result = ASSIGNOR.assign(cluster, rejoin(subs, owned, 3))
    total = len(subscribed_partitions(cluster, subs))
    assert moved(owned, result) == minimum_moves({m: len(p) for m, p in owned.items()}, total)


@given(clusters(), subscriptions(homogeneous=True, min_members=2), st.data())
def test_one_member_leaving_or_joining_moves_the_minimum(
    cluster: ClusterView, subs: list[Subscription], data: st.DataObject
) -> None:
    before = ASSIGNOR.assign(cluster, subs)
    total = len(subscribed_partitions(cluster, subs))
    leaver = data.draw(st.sampled_from(subs))
    stayers = [s for s in subs if s is not leaver]
    after_leave = ASSIGNOR.assign(cluster, rejoin(stayers, before, 2))
    assert (
        moved(before, after_leave)
        == minimum_moves({s.member_id: len(before[s.member_id]) for s in stayers}, total)
        == 0
    )
    assert_within_one(after_leave)
    joiner = Subscription("\x00new", subs[0].topics)
    after_join = ASSIGNOR.assign(cluster, [*rejoin(subs, before, 2), joiner])
    counts = {**{m: len(p) for m, p in before.items()}, joiner.member_id: 0}
    assert moved(before, after_join) == minimum_moves(counts, total)
    assert_within_one(after_join)


@given(groups_with_claims(), st.randoms(use_true_random=False))
def test_deterministic_under_reordering(
    group: tuple[ClusterView, list[Subscription]], rnd: random.Random
) -> None:
    cluster, subs = group
    assert_order_independent(ASSIGNOR, cluster, subs, rnd)
