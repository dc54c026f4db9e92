"""Hypothesis strategies for groups and clusters, and the invariants every assignor must keep."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence

from hypothesis import strategies as st

from groupstream.assignment import (
    ClusterView,
    ConsumerPartitionAssignor,
    GroupSpec,
    MemberSpec,
    ServerPartitionAssignor,
    Subscription,
    TopicPartition,
)

TOPICS = ("t0", "t1", "t2", "t3", "t4")

# Member ids mix ASCII with characters on both sides of U+FFFF, where Java and Python order strings differently.
member_ids = st.text(alphabet="abcXYZ019-\u00e9\uffee\U0001f600", min_size=1, max_size=6)


@st.composite
def clusters(draw: st.DrawFn, max_partitions: int = 12) -> ClusterView:
    """Partition counts for some of TOPICS (a subscribed topic may be missing or have no partitions)."""
    counts = draw(st.dictionaries(st.sampled_from(TOPICS), st.integers(0, max_partitions), min_size=1))
    return ClusterView(counts)


@st.composite
def subscriptions(
    draw: st.DrawFn,
    *,
    min_members: int = 1,
    max_members: int = 8,
    homogeneous: bool | None = None,
    static: bool = True,
    racks: bool = False,
) -> list[Subscription]:
    """Members with distinct ids, subscribed to subsets of TOPICS (all the same set if ``homogeneous``)."""
    ids = draw(st.lists(member_ids, min_size=min_members, max_size=max_members, unique=True))
    same = draw(st.booleans()) if homogeneous is None else homogeneous
    shared = draw(st.sets(st.sampled_from(TOPICS), min_size=1))
    result = []
    for member in ids:
        topics = shared if same else draw(st.sets(st.sampled_from(TOPICS), min_size=1))
        instance = draw(st.none() | st.sampled_from(["i0", "i1", "i2", "i3"])) if static else None
        rack = draw(st.none() | st.sampled_from(["a", "b", "c"])) if racks else None
        result.append(Subscription(member, tuple(topics), group_instance_id=instance, rack_id=rack))
    return result


def tps(text: str) -> tuple[TopicPartition, ...]:
    """'t1-0, t2-3' -> sorted partitions, the notation Kafka's tests use."""
    if not text:
        return ()
    out = []
    for item in text.split(", "):
        topic, _, number = item.rpartition("-")
        out.append(TopicPartition(topic, int(number)))
    return tuple(sorted(out))


def static_members(topics: tuple[str, ...], numbers: Iterable[int] = (1, 2, 3)) -> list[Subscription]:
    """``consumerN`` with ``group.instance.id`` ``instanceN``, all subscribed to ``topics``: the static
    members of Kafka's persistent-assignment tests."""
    return [Subscription(f"consumer{i}", topics, group_instance_id=f"instance{i}") for i in numbers]


def group_spec(
    subs: Iterable[Subscription], target: Mapping[str, Iterable[TopicPartition]] | None = None
) -> GroupSpec:
    """The server-side view of the same members, with an optional current target assignment."""
    target = target or {}
    return GroupSpec(
        MemberSpec(
            s.member_id,
            frozenset(s.topics),
            frozenset(target.get(s.member_id, ())),
            instance_id=s.group_instance_id,
            rack_id=s.rack_id,
        )
        for s in subs
    )


def subscribed_partitions(cluster: ClusterView, subs: Iterable[Subscription]) -> set[TopicPartition]:
    topics = {t for s in subs for t in s.topics}
    return {TopicPartition(t, p) for t in topics for p in range(cluster.partition_count(t))}


def assert_valid(
    result: Mapping[str, Sequence[TopicPartition]], cluster: ClusterView, subs: Sequence[Subscription]
) -> None:
    """Every member present; every subscribed partition exactly once, and only to a member subscribed to it."""
    assert set(result) == {s.member_id for s in subs}
    topics_of = {s.member_id: set(s.topics) for s in subs}
    seen: list[TopicPartition] = []
    for member, partitions in result.items():
        assert list(partitions) == sorted(partitions), "partitions are returned sorted"
        for tp in partitions:
            assert tp.topic in topics_of[member], f"{tp} given to {member!r}, not subscribed to {tp.topic}"
        seen.extend(partitions)
    assert len(seen) == len(set(seen)), "a partition was given to two members"
    assert set(seen) == subscribed_partitions(cluster, subs)


def counts(result: Mapping[str, Sequence[TopicPartition]]) -> dict[str, int]:
    return {member: len(partitions) for member, partitions in result.items()}


def assert_within_one(result: Mapping[str, Sequence[TopicPartition]]) -> None:
    sizes = counts(result).values()
    assert max(sizes) - min(sizes) <= 1, f"unbalanced: {counts(result)}"


def assert_kip54_balanced(
    result: Mapping[str, Sequence[TopicPartition]], subs: Sequence[Subscription]
) -> None:
    """KIP-54's balance: no member could take a partition of a topic it subscribes to from one holding 2 more."""
    size = counts(result)
    topics_of = {s.member_id: set(s.topics) for s in subs}
    for giver, partitions in result.items():
        for taker in result:
            if size[giver] - size[taker] >= 2:
                movable = [tp for tp in partitions if tp.topic in topics_of[taker]]
                assert not movable, (
                    f"{taker!r} ({size[taker]}) could take {movable[0]} from {giver!r} ({size[giver]})"
                )


def moved(
    before: Mapping[str, Iterable[TopicPartition]], after: Mapping[str, Iterable[TopicPartition]]
) -> int:
    """Partitions whose owner in ``before`` still exists but no longer holds them."""
    owner_after = {tp: m for m, tps in after.items() for tp in tps}
    return sum(1 for m, tps in before.items() if m in after for tp in tps if owner_after.get(tp) != m)


def minimum_moves(owned: Mapping[str, int], total: int) -> int:
    """The fewest partitions a balanced assignment of ``total`` partitions must take away from their owners.

    Balanced means ``total % n`` members hold one more than the others; giving the larger quotas to the
    members that own most is optimal, and whatever a member owns above its quota must move.
    """
    n = len(owned)
    base, extra = divmod(total, n)
    ordered = sorted(owned.values(), reverse=True)
    return sum(max(0, have - (base + (1 if i < extra else 0))) for i, have in enumerate(ordered))


def assert_order_independent(
    assignor: ConsumerPartitionAssignor,
    cluster: ClusterView,
    subs: Sequence[Subscription],
    rnd: random.Random,
) -> None:
    """The leader sees the members in no fixed order, so the same subscriptions shuffled must give the same
    assignment."""
    shuffled = list(subs)
    rnd.shuffle(shuffled)
    assert assignor.assign(cluster, shuffled) == assignor.assign(cluster, subs)


def assert_server_order_independent(
    assignor: ServerPartitionAssignor,
    cluster: ClusterView,
    subs: Sequence[Subscription],
    target: Mapping[str, Iterable[TopicPartition]],
    rnd: random.Random,
) -> None:
    """`assert_order_independent` for a server-side assignor, from the current ``target``."""
    shuffled = list(subs)
    rnd.shuffle(shuffled)
    assert assignor.assign(group_spec(shuffled, target), cluster) == assignor.assign(
        group_spec(subs, target), cluster
    )


def assert_server_stable(
    assignor: ServerPartitionAssignor,
    cluster: ClusterView,
    subs: Sequence[Subscription],
    target: Mapping[str, Iterable[TopicPartition]],
) -> None:
    """Nothing changed since the last assignment, so assigning again from it gives it back."""
    first = assignor.assign(group_spec(subs, target), cluster)
    assert assignor.assign(group_spec(subs, first), cluster) == first
