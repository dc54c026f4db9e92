"""Client-side ``range``: Kafka's documented answers, static members, rack matching, and properties."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
from assignor_checks import (
    assert_order_independent,
    assert_valid,
    clusters,
    static_members,
    subscriptions,
    tps,
)
from hypothesis import given
from hypothesis import strategies as st

from groupstream.assignment import ClusterView, RangeAssignor, Subscription, TopicPartition
from groupstream.assignment.ordering import java_string_key, member_order_key

ASSIGNOR = RangeAssignor()
ALL_RACKS = ("a", "b", "c", "d", "e", "f")


def test_kafka_documented_example() -> None:
    """RangeAssignor's Javadoc: two consumers, two topics of three partitions."""
    cluster = ClusterView({"t0": 3, "t1": 3})
    subs = [Subscription("C0", ("t0", "t1")), Subscription("C1", ("t0", "t1"))]
    assert ASSIGNOR.assign(cluster, subs) == {"C0": tps("t0-0, t0-1, t1-0, t1-1"), "C1": tps("t0-2, t1-2")}


def test_members_not_subscribed_get_nothing_and_unknown_topics_are_skipped() -> None:
    cluster = ClusterView({"t0": 3})
    subs = [Subscription("a", ("t0",)), Subscription("b", ("missing",))]
    assert ASSIGNOR.assign(cluster, subs) == {"a": tps("t0-0, t0-1, t0-2"), "b": ()}


def test_more_members_than_partitions() -> None:
    cluster = ClusterView({"t": 2})
    subs = [Subscription(m, ("t",)) for m in ("c", "a", "b")]
    assert ASSIGNOR.assign(cluster, subs) == {"a": tps("t-0"), "b": tps("t-1"), "c": ()}


def test_member_order_static_first() -> None:
    """Kafka's MemberInfo order: instance ids first (sorted), then member ids (AbstractPartitionAssignorTest)."""
    members = [("a", None), ("b", "y"), ("c", "x")]
    ordered = sorted(members, key=lambda m: member_order_key(*m))
    assert [m for m, _ in ordered] == ["c", "b", "a"]


def test_java_string_order_differs_from_python_above_the_bmp() -> None:
    high, private = "\U0001f600", "\uffee"
    assert high > private  # Python compares code points
    assert java_string_key(high) < java_string_key(private)  # Java compares UTF-16 units (D83D < FFEE)


def test_static_members_keep_their_ranges_when_dynamic_member_replaced() -> None:
    """RangeAssignorTest.testStaticMemberRangeAssignmentPersistent."""
    cluster = ClusterView({"topic1": 5, "topic2": 4})
    both = ("topic1", "topic2")
    static = static_members(both)
    expected_static = {
        "consumer1": tps("topic1-0, topic1-1, topic2-0"),
        "consumer2": tps("topic1-2, topic2-1"),
        "consumer3": tps("topic1-3, topic2-2"),
    }
    first = ASSIGNOR.assign(cluster, [*static, Subscription("consumer4", both)])
    assert first == {**expected_static, "consumer4": tps("topic1-4, topic2-3")}
    second = ASSIGNOR.assign(cluster, [*static, Subscription("consumer5", both)])
    assert second == {**expected_static, "consumer5": tps("topic1-4, topic2-3")}


def test_static_assignment_follows_instance_ids_when_member_ids_change() -> None:
    """RangeAssignorTest.testStaticMemberRangeAssignmentPersistentAfterMemberIdChanges."""
    cluster = ClusterView({"topic1": 5, "topic2": 5})
    both = ("topic1", "topic2")
    expected = {
        "instance1": tps("topic1-0, topic1-1, topic2-0, topic2-1"),
        "instance2": tps("topic1-2, topic1-3, topic2-2, topic2-3"),
        "instance3": tps("topic1-4, topic2-4"),
    }
    for member_ids in (("consumer1", "consumer2", "consumer3"), ("consumer1", "consumer5", "consumer4")):
        subs = [
            Subscription(member, both, group_instance_id=f"instance{i}")
            for i, member in enumerate(member_ids, start=1)
        ]
        result = ASSIGNOR.assign(cluster, subs)
        by_instance = {s.group_instance_id: result[s.member_id] for s in subs}
        assert by_instance == expected


# --- rack-aware range (KIP-881), with the cluster layout of Kafka's AbstractPartitionAssignorTest ---------


def rack_cluster(counts: dict[str, int], replication: int, broker_racks: Sequence[str]) -> ClusterView:
    """Partition p of the k-th topic (offset = partitions of the topics before it) has its replicas on
    brokers ``(p + j + offset) % brokers`` for ``j < replication``; broker i is on ``broker_racks[i]``."""
    racks: dict[TopicPartition, frozenset[str]] = {}
    offset = 0
    for topic, count in counts.items():
        for p in range(count):
            replicas = ((p + j + offset) % len(broker_racks) for j in range(replication))
            racks[TopicPartition(topic, p)] = frozenset(broker_racks[b] for b in replicas)
        offset += count
    return ClusterView(counts, racks)


def rack_subscriptions(topics: Sequence[Sequence[str]], racks: Sequence[str | None]) -> list[Subscription]:
    return [
        Subscription(f"consumer{i}", tuple(t), rack_id=r)
        for i, (t, r) in enumerate(zip(topics, racks, strict=True))
    ]


def assert_rack_assignment(
    counts: dict[str, int],
    replication: int,
    broker_racks: Sequence[str],
    consumer_racks: Sequence[str | None],
    consumer_topics: Sequence[Sequence[str]],
    expected: Sequence[str],
) -> None:
    result = ASSIGNOR.assign(
        rack_cluster(counts, replication, broker_racks), rack_subscriptions(consumer_topics, consumer_racks)
    )
    assert result == {f"consumer{i}": tps(e) for i, e in enumerate(expected)}


def racks(n: int) -> list[str]:
    return [ALL_RACKS[i % len(ALL_RACKS)] for i in range(n)]


UNIFORM_SUBSCRIPTION_CASES = [
    # (replication, broker racks, consumer racks, expected) from RangeAssignorTest.testRackAwareAssignmentWithUniformSubscription
    (
        3,
        racks(3),
        [None, None, None],
        ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0", "t1-2, t1-3, t2-3, t2-4, t3-1", "t1-4, t1-5, t2-5, t2-6"],
    ),
    (
        1,
        racks(3),
        racks(3),
        ["t1-0, t1-3, t2-0, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t3-0", "t1-2, t1-5, t2-2, t2-5, t3-1"],
    ),
    (
        2,
        racks(3),
        racks(3),
        ["t1-0, t1-2, t2-0, t2-2, t2-3, t3-1", "t1-1, t1-3, t2-1, t2-4, t3-0", "t1-4, t1-5, t2-5, t2-6"],
    ),
    (
        3,
        racks(2),
        racks(3),
        ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0", "t1-2, t1-3, t2-3, t2-4, t3-1", "t1-4, t1-5, t2-5, t2-6"],
    ),
]


@pytest.mark.parametrize(
    ("replication", "broker_racks", "consumer_racks", "expected"), UNIFORM_SUBSCRIPTION_CASES
)
def test_rack_aware_uniform_subscription(
    replication: int, broker_racks: list[str], consumer_racks: list[str | None], expected: list[str]
) -> None:
    all_topics = ["t1", "t2", "t3"]
    counts = {"t1": 6, "t2": 7, "t3": 2}
    assert_rack_assignment(counts, replication, broker_racks, consumer_racks, [all_topics] * 3, expected)


NON_EQUAL_SUBSCRIPTION_CASES = [
    # RangeAssignorTest.testRackAwareAssignmentWithNonEqualSubscription
    (
        1,
        racks(3),
        racks(3),
        ["t1-0, t1-3, t2-0, t2-2, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t2-5, t3-0", "t1-2, t1-5, t3-1"],
    ),
    (
        2,
        racks(3),
        racks(3),
        ["t1-0, t1-2, t2-0, t2-2, t2-3, t2-5, t3-1", "t1-1, t1-3, t2-1, t2-4, t2-6, t3-0", "t1-4, t1-5"],
    ),
    (
        3,
        racks(2),
        racks(3),
        ["t1-0, t1-1, t2-0, t2-1, t2-2, t2-3, t3-0", "t1-2, t1-3, t2-4, t2-5, t2-6, t3-1", "t1-4, t1-5"],
    ),
]


@pytest.mark.parametrize(
    ("replication", "broker_racks", "consumer_racks", "expected"), NON_EQUAL_SUBSCRIPTION_CASES
)
def test_rack_aware_non_equal_subscription(
    replication: int, broker_racks: list[str], consumer_racks: list[str | None], expected: list[str]
) -> None:
    all_topics = ["t1", "t2", "t3"]
    counts = {"t1": 6, "t2": 7, "t3": 2}
    topics = [all_topics, all_topics, ["t1", "t3"]]
    assert_rack_assignment(counts, replication, broker_racks, consumer_racks, topics, expected)


def test_rack_aware_prefers_co_partitioning_over_rack_alignment() -> None:
    """RangeAssignorTest.testRackAwareAssignmentWithUniformPartitions(NonEqualSubscription)."""
    counts = {"t1": 5, "t2": 5, "t3": 5}
    all_topics = ["t1", "t2", "t3"]
    plain = ["t1-0, t1-1, t2-0, t2-1, t3-0, t3-1", "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3", "t1-4, t2-4, t3-4"]
    for replication in (1, 2):
        assert_rack_assignment(counts, replication, racks(3), racks(3), [all_topics] * 3, plain)
    uneven = [all_topics, all_topics, ["t1", "t3"]]
    assert_rack_assignment(
        counts,
        1,
        racks(3),
        racks(3),
        uneven,
        ["t1-0, t1-1, t2-0, t2-1, t2-4, t3-0, t3-1", "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3", "t1-4, t3-4"],
    )
    assert_rack_assignment(
        counts,
        2,
        racks(3),
        racks(3),
        uneven,
        ["t1-2, t2-0, t2-1, t2-3, t3-2", "t1-0, t1-3, t2-2, t2-4, t3-0, t3-3", "t1-1, t1-4, t3-1, t3-4"],
    )


def test_rack_aware_co_partitioned_topics_move_together() -> None:
    """RangeAssignorTest.testRackAwareAssignmentWithCoPartitioning."""
    counts = {"t1": 6, "t2": 6, "t3": 2, "t4": 2}
    consumer_racks = ["a", "b", "b", "a"]
    pairs = [["t1", "t2"], ["t1", "t2"], ["t3", "t4"], ["t3", "t4"]]
    assert_rack_assignment(
        counts,
        1,
        racks(2),
        consumer_racks,
        pairs,
        [
            "t1-0, t1-2, t1-4, t2-0, t2-2, t2-4",
            "t1-1, t1-3, t1-5, t2-1, t2-3, t2-5",
            "t3-1, t4-1",
            "t3-0, t4-0",
        ],
    )
    everything = [["t1", "t2", "t3", "t4"]] * 4
    assert_rack_assignment(
        counts,
        1,
        racks(2),
        consumer_racks,
        everything,
        [
            "t1-0, t1-2, t2-0, t2-2, t3-0, t4-0",
            "t1-1, t1-3, t2-1, t2-3, t3-1, t4-1",
            "t1-5, t2-5",
            "t1-4, t2-4",
        ],
    )
    assert_rack_assignment(
        counts,
        1,
        racks(3),
        consumer_racks,
        everything,
        [
            "t1-0, t1-3, t2-0, t2-3, t3-0, t4-0",
            "t1-1, t1-4, t2-1, t2-4, t3-1, t4-1",
            "t1-2, t2-2",
            "t1-5, t2-5",
        ],
    )


# --- properties ------------------------------------------------------------------------------------------


@given(clusters(), subscriptions())
def test_valid_and_balanced_per_topic(cluster: ClusterView, subs: list[Subscription]) -> None:
    result = ASSIGNOR.assign(cluster, subs)
    assert_valid(result, cluster, subs)
    for topic in {t for s in subs for t in s.topics}:
        sizes = [sum(1 for tp in result[s.member_id] if tp.topic == topic) for s in subs if topic in s.topics]
        assert max(sizes) - min(sizes) <= 1


@given(clusters(), subscriptions(homogeneous=True))
def test_co_partitioned_topics_give_each_member_the_same_partition_numbers(
    cluster: ClusterView, subs: list[Subscription]
) -> None:
    result = ASSIGNOR.assign(cluster, subs)
    topics = subs[0].topics
    for member in result:
        numbers: dict[int, set[int]] = {}
        for topic in topics:
            count = cluster.partition_count(topic)
            numbers.setdefault(count, set())
            mine = {tp.partition for tp in result[member] if tp.topic == topic}
            if numbers[count] and count:
                assert numbers[count] == mine
            numbers[count] = mine


@given(clusters(), subscriptions(racks=True), st.data())
def test_rack_aware_stays_valid_and_per_topic_balanced(
    cluster: ClusterView, subs: list[Subscription], data: st.DataObject
) -> None:
    layout = {
        TopicPartition(t, p): frozenset(data.draw(st.sets(st.sampled_from("abcd"))))
        for t, n in cluster.partitions_per_topic.items()
        for p in range(n)
    }
    racked = ClusterView(cluster.partitions_per_topic, layout)
    result = ASSIGNOR.assign(racked, subs)
    assert_valid(result, racked, subs)
    for topic in {t for s in subs for t in s.topics}:
        sizes = [sum(1 for tp in result[s.member_id] if tp.topic == topic) for s in subs if topic in s.topics]
        assert max(sizes) - min(sizes) <= 1


@given(clusters(), subscriptions(racks=True), st.randoms(use_true_random=False))
def test_deterministic_under_reordering(
    cluster: ClusterView, subs: list[Subscription], rnd: random.Random
) -> None:
    assert_order_independent(ASSIGNOR, cluster, subs, rnd)
