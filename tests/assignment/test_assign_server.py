"""Server-side (KIP-848) ``uniform`` and ``range``: Kafka's documented answers and properties."""

from __future__ import annotations

import random
from collections.abc import Mapping

import pytest
from assignor_checks import (
    assert_kip54_balanced,
    assert_server_order_independent,
    assert_server_stable,
    assert_valid,
    assert_within_one,
    clusters,
    group_spec,
    minimum_moves,
    moved,
    subscribed_partitions,
    subscriptions,
    tps,
)
from hypothesis import given
from hypothesis import strategies as st

from groupstream.assignment import (
    ClusterView,
    GroupSpec,
    MemberSpec,
    ServerPartitionAssignor,
    ServerRangeAssignor,
    Subscription,
    TopicPartition,
    UniformAssignor,
)

UNIFORM = UniformAssignor()
RANGE = ServerRangeAssignor()


def spec(
    members: Mapping[str, tuple[str, ...]], target: Mapping[str, tuple[TopicPartition, ...]] | None = None
) -> GroupSpec:
    target = target or {}
    return GroupSpec(MemberSpec(m, frozenset(t), frozenset(target.get(m, ()))) for m, t in members.items())


# --- uniform -------------------------------------------------------------------------------------------


def test_uniform_fresh_group_is_dealt_round_robin() -> None:
    cluster = ClusterView({"t0": 3, "t1": 3})
    result = UNIFORM.assign(spec({"M0": ("t0", "t1"), "M1": ("t0", "t1")}), cluster)
    assert result == {"M0": tps("t0-0, t0-2, t1-1"), "M1": tps("t0-1, t1-0, t1-2")}


def test_uniform_eleventh_member_takes_only_what_it_needs() -> None:
    """The issue's scenario: 10 members on 60 partitions, an 11th joins; only its partitions move."""
    cluster = ClusterView({"t": 60})
    members = {f"m{i:02}": ("t",) for i in range(10)}
    before = UNIFORM.assign(spec(members), cluster)
    after = UNIFORM.assign(spec({**members, "m10": ("t",)}, dict(before)), cluster)
    assert len(after["m10"]) == 5
    assert moved(before, after) == 5
    assert all(set(after[m]) <= set(before[m]) for m in before)


def test_uniform_heterogeneous_follows_kafka_balance() -> None:
    """KIP-54's second example, on the server: the constrained topic first, then the least loaded."""
    cluster = ClusterView({"t0": 1, "t1": 2, "t2": 3})
    result = UNIFORM.assign(spec({"C0": ("t0",), "C1": ("t0", "t1"), "C2": ("t0", "t1", "t2")}), cluster)
    assert result == {"C0": tps("t0-0"), "C1": tps("t1-0, t1-1"), "C2": tps("t2-0, t2-1, t2-2")}


def test_uniform_drops_unsubscribed_and_vanished_partitions() -> None:
    cluster = ClusterView({"a": 2, "b": 2})
    target = {"m1": tps("a-0, a-1, b-0, b-5"), "m2": tps("b-1")}
    result = UNIFORM.assign(spec({"m1": ("a",), "m2": ("b",)}, target), cluster)
    assert result == {"m1": tps("a-0, a-1"), "m2": tps("b-0, b-1")}


def test_empty_group_and_unknown_topics() -> None:
    assert UNIFORM.assign(GroupSpec([]), ClusterView({"t": 3})) == {}
    assert RANGE.assign(spec({"m": ("nope",)}), ClusterView({"t": 3})) == {"m": ()}


@st.composite
def targets(
    draw: st.DrawFn, homogeneous: bool | None = None
) -> tuple[ClusterView, list[Subscription], dict[str, list[TopicPartition]]]:
    """A group and a current target assignment: disjoint, not necessarily valid any more."""
    cluster = draw(clusters())
    subs = draw(subscriptions(homogeneous=homogeneous))
    target: dict[str, list[TopicPartition]] = {s.member_id: [] for s in subs}
    every = [*sorted(subscribed_partitions(cluster, subs)), TopicPartition("t0", 40)]
    for tp in every:
        owner = draw(st.none() | st.sampled_from(sorted(target)))
        if owner is not None:
            target[owner].append(tp)
    return cluster, subs, target


@given(targets())
def test_uniform_valid_and_balanced(
    case: tuple[ClusterView, list[Subscription], dict[str, list[TopicPartition]]],
) -> None:
    cluster, subs, target = case
    result = UNIFORM.assign(group_spec(subs, target), cluster)
    assert_valid(result, cluster, subs)
    assert_kip54_balanced(result, subs)


@given(targets(homogeneous=True))
def test_uniform_homogeneous_moves_the_minimum(
    case: tuple[ClusterView, list[Subscription], dict[str, list[TopicPartition]]],
) -> None:
    cluster, subs, target = case
    result = UNIFORM.assign(group_spec(subs, target), cluster)
    assert_within_one(result)
    valid = subscribed_partitions(cluster, subs)
    owned = {m: [tp for tp in tps_ if tp in valid] for m, tps_ in target.items()}
    assert moved(owned, result) == minimum_moves({m: len(p) for m, p in owned.items()}, len(valid))




# --- range ---------------------------------------------------------------------------------------------


def test_range_kafka_documented_example() -> None:
    """The server-side RangeAssignor's Javadoc: M0 and M1 on T1, T2 of three partitions."""
    cluster = ClusterView({"T1": 3, "T2": 3})
    result = RANGE.assign(spec({"M0": ("T1", "T2"), "M1": ("T1", "T2")}), cluster)
    assert result == {"M0": tps("T1-0, T1-1, T2-0, T2-1"), "M1": tps("T1-2, T2-2")}


def test_range_static_members_first_by_instance_id() -> None:
    cluster = ClusterView({"T": 3})
    group = GroupSpec(
        [
            MemberSpec("a", frozenset({"T"})),
            MemberSpec("b", frozenset({"T"}), instance_id="I1"),
            MemberSpec("c", frozenset({"T"}), instance_id="I0"),
        ]
    )
    assert RANGE.assign(group, cluster) == {"c": tps("T-0"), "b": tps("T-1"), "a": tps("T-2")}


def test_range_keeps_slots_when_member_ids_sort_differently() -> None:
    """Kafka's range would swap M0's and M1's ranges after a rolling bounce; with a target we do not."""
    cluster = ClusterView({"T1": 3, "T2": 3})
    target = {"M3": tps("T1-0, T1-1, T2-0, T2-1"), "M2": tps("T1-2, T2-2")}
    result = RANGE.assign(spec({"M3": ("T1", "T2"), "M2": ("T1", "T2")}, target), cluster)
    assert result == target


def test_range_join_only_shifts_boundaries() -> None:
    cluster = ClusterView({"t": 12})
    members = {"a": ("t",), "b": ("t",), "c": ("t",)}
    before = RANGE.assign(spec(members), cluster)
    assert before == {
        "a": tps("t-0, t-1, t-2, t-3"),
        "b": tps("t-4, t-5, t-6, t-7"),
        "c": tps("t-8, t-9, t-10, t-11"),
    }
    after = RANGE.assign(spec({**members, "0": ("t",)}, dict(before)), cluster)
    # "0" sorts first, so Kafka's range would shift every range; ours keeps a, b, c on the slots they overlap.
    assert after == {
        "a": tps("t-0, t-1, t-2"),
        "b": tps("t-3, t-4, t-5"),
        "0": tps("t-6, t-7, t-8"),
        "c": tps("t-9, t-10, t-11"),
    }
    assert moved(before, after) == 4  # Kafka's range ("0" first, ignoring the target) moves 6


@given(clusters(), subscriptions())
def test_range_valid_and_per_topic_balanced(cluster: ClusterView, subs: list[Subscription]) -> None:
    result = RANGE.assign(group_spec(subs), cluster)
    assert_valid(result, cluster, subs)
    for topic in {t for s in subs for t in s.topics}:
        sizes = [sum(1 for tp in result[s.member_id] if tp.topic == topic) for s in subs if topic in s.topics]
        assert max(sizes) - min(sizes) <= 1


@given(targets())
def test_range_co_partitioned_and_contiguous_with_any_target(
    case: tuple[ClusterView, list[Subscription], dict[str, list[TopicPartition]]],
) -> None:
    cluster, subs, target = case
    result = RANGE.assign(group_spec(subs, target), cluster)
    assert_valid(result, cluster, subs)
    for s in subs:
        by_topic: dict[str, list[int]] = {}
        for tp in result[s.member_id]:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        for numbers in by_topic.values():
            assert numbers == list(range(numbers[0], numbers[0] + len(numbers))), "a range is contiguous"
    # Topics with the same subscribers and partition count give each member the same partition numbers.
    for a in {t for s in subs for t in s.topics}:
        for b in {t for s in subs for t in s.topics}:
            same_members = {s.member_id for s in subs if a in s.topics} == {
                s.member_id for s in subs if b in s.topics
            }
            if a < b and same_members and cluster.partition_count(a) == cluster.partition_count(b):
                for _m, partitions in result.items():
                    assert {tp.partition for tp in partitions if tp.topic == a} == {
                        tp.partition for tp in partitions if tp.topic == b
                    }


# --- both ----------------------------------------------------------------------------------------------

BOTH = pytest.mark.parametrize("assignor", [UNIFORM, RANGE], ids=["uniform", "range"])


@BOTH
@given(targets())
def test_stable_when_nothing_changes(
    assignor: ServerPartitionAssignor,
    case: tuple[ClusterView, list[Subscription], dict[str, list[TopicPartition]]],
) -> None:
    cluster, subs, target = case
    assert_server_stable(assignor, cluster, subs, target)


@BOTH
@given(targets(), st.randoms(use_true_random=False))
def test_deterministic_under_reordering(
    assignor: ServerPartitionAssignor,
    case: tuple[ClusterView, list[Subscription], dict[str, list[TopicPartition]]],
    rnd: random.Random,
) -> None:
    cluster, subs, target = case
    assert_server_order_independent(assignor, cluster, subs, target, rnd)
