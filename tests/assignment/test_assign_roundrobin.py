"""Client-side ``roundrobin``: Kafka's documented answers and properties."""

from __future__ import annotations

import random

from assignor_checks import (
    assert_order_independent,
    assert_valid,
    assert_within_one,
    clusters,
    static_members,
    subscriptions,
    tps,
)
from hypothesis import given
from hypothesis import strategies as st

from groupstream.assignment import ClusterView, RoundRobinAssignor, Subscription

ASSIGNOR = RoundRobinAssignor()


def test_kafka_documented_example() -> None:
    """RoundRobinAssignor's Javadoc: identical subscriptions."""
    cluster = ClusterView({"t0": 3, "t1": 3})
    subs = [Subscription("C0", ("t0", "t1")), Subscription("C1", ("t0", "t1"))]
    assert ASSIGNOR.assign(cluster, subs) == {"C0": tps("t0-0, t0-2, t1-1"), "C1": tps("t0-1, t1-0, t1-2")}


def test_kafka_documented_unequal_subscriptions() -> None:
    """RoundRobinAssignor's Javadoc: C0 on t0; C1 on t0, t1; C2 on t0, t1, t2 -- unbalanced by design."""
    cluster = ClusterView({"t0": 1, "t1": 2, "t2": 3})
    subs = [
        Subscription("C0", ("t0",)),
        Subscription("C1", ("t0", "t1")),
        Subscription("C2", ("t0", "t1", "t2")),
    ]
    assert ASSIGNOR.assign(cluster, subs) == {
        "C0": tps("t0-0"),
        "C1": tps("t1-0"),
        "C2": tps("t1-1, t2-0, t2-1, t2-2"),
    }


def test_multiple_consumers_mixed_topics() -> None:
    """RoundRobinAssignorTest.testMultipleConsumersMixedTopics."""
    cluster = ClusterView({"topic1": 3, "topic2": 2})
    subs = [
        Subscription("consumer1", ("topic1",)),
        Subscription("consumer2", ("topic1", "topic2")),
        Subscription("consumer3", ("topic1",)),
    ]
    assert ASSIGNOR.assign(cluster, subs) == {
        "consumer1": tps("topic1-0"),
        "consumer2": tps("topic1-1, topic2-0, topic2-1"),
        "consumer3": tps("topic1-2"),
    }


def test_static_members_persist() -> None:
    """RoundRobinAssignorTest.testStaticMemberRoundRobinAssignmentPersistent."""
    cluster = ClusterView({"topic1": 3, "topic2": 3})
    both = ("topic1", "topic2")
    static = static_members(both)
    expected = {
        "consumer1": tps("topic1-0, topic2-1"),
        "consumer2": tps("topic1-1, topic2-2"),
        "consumer3": tps("topic1-2"),
    }
    for dynamic in ("consumer4", "consumer5"):
        result = ASSIGNOR.assign(cluster, [*static, Subscription(dynamic, both)])
        assert result == {**expected, dynamic: tps("topic2-0")}


@given(clusters(), subscriptions())
def test_valid(cluster: ClusterView, subs: list[Subscription]) -> None:
    assert_valid(ASSIGNOR.assign(cluster, subs), cluster, subs)


@given(clusters(), subscriptions(homogeneous=True))
def test_identical_subscriptions_are_balanced(cluster: ClusterView, subs: list[Subscription]) -> None:
    assert_within_one(ASSIGNOR.assign(cluster, subs))


@given(clusters(), subscriptions(), st.randoms(use_true_random=False))
def test_deterministic_under_reordering(
    cluster: ClusterView, subs: list[Subscription], rnd: random.Random
) -> None:
    assert_order_independent(ASSIGNOR, cluster, subs, rnd)
