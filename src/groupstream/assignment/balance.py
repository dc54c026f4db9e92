"""The balanced and sticky assignment shared by ``sticky``, ``cooperative-sticky`` and the server's ``uniform``.

Input: members in tie-break order, the topics each may take, the partition counts, and the partitions each
member may keep (already validated: at most one member per partition, all subscribed and existing).

Balance comes first, stickiness second (KIP-54):

- Identical subscriptions: with P partitions and N members, ``P % N`` members get ``P // N + 1`` and the
  rest ``P // N``. The larger quotas go to the members that already own the most, and each member keeps
  as many of its partitions as its quota allows; that moves the fewest partitions any balanced assignment
  can. The partitions left over are dealt round-robin to the members still under quota.
- Different subscriptions: each member keeps all its partitions; the rest go, most constrained topic
  first, to the least loaded member that may take them; then, topic by topic, a partition moves from the
  most loaded holder to the least loaded subscriber while their counts differ by two or more, preferring
  partitions that were not owned before this round. This ends (every move lowers the sum of squared
  counts) in Kafka's balance condition: no member could take a partition from a member holding two more.

An assignment that is already balanced is returned unchanged, which is what makes a rebalance without
changes move nothing.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Mapping, Sequence

from groupstream.assignment.types import ClusterView, TopicPartition

__all__ = ["balanced_sticky_assignment"]


def balanced_sticky_assignment(
    members: Sequence[str],
    subscribed: Mapping[str, frozenset[str]],
    cluster: ClusterView,
    owned: Mapping[str, Sequence[TopicPartition]],
) -> dict[str, list[TopicPartition]]:
    """Member -> partitions; ``subscribed`` must only name topics with partitions in ``cluster``."""
    if not members:
        return {}
    first = subscribed[members[0]]
    if first and all(subscribed[m] == first for m in members):
        return _homogeneous(members, sorted(first), cluster, owned)
    return _heterogeneous(members, subscribed, cluster, owned)


def _homogeneous(
    members: Sequence[str],
    topics: list[str],
    cluster: ClusterView,
    owned: Mapping[str, Sequence[TopicPartition]],
) -> dict[str, list[TopicPartition]]:
    total = sum(cluster.partition_count(t) for t in topics)
    base, extra = divmod(total, len(members))
    rank = {m: i for i, m in enumerate(members)}
    by_claims = sorted(members, key=lambda m: (-len(owned.get(m, ())), rank[m]))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(by_claims)}

    result: dict[str, list[TopicPartition]] = {}
    # Taken partition numbers by topic: no partition object is built just to look it up.
    taken: dict[str, set[int]] = {topic: set() for topic in topics}
    for m in members:
        # Keeping the lowest partition numbers across topics spreads a member's topics evenly.
        keep = sorted(owned.get(m, ()), key=lambda tp: (tp.partition, tp.topic))[: quota[m]]
        result[m] = keep
        for tp in keep:
            taken.setdefault(tp.topic, set()).add(tp.partition)

    waiting = deque(m for m in members if len(result[m]) < quota[m])
    for topic in topics:
        taken_here = taken[topic]
        for p in range(cluster.partition_count(topic)):
            if p in taken_here:
                continue
            m = waiting.popleft()
            result[m].append(TopicPartition(topic, p))
            if len(result[m]) < quota[m]:
                waiting.append(m)
    return result


class _Holdings:
    """Per topic and member, the partition numbers held: those kept from before and those new this round."""

    __slots__ = ("count", "fresh", "kept", "rank")

    def __init__(self, members: Sequence[str]) -> None:
        self.rank = {m: i for i, m in enumerate(members)}
        self.count = dict.fromkeys(members, 0)
        self.kept: dict[str, dict[str, list[int]]] = {}
        self.fresh: dict[str, dict[str, list[int]]] = {}

    def add(self, topic: str, member: str, partition: int, *, fresh: bool) -> None:
        table = self.fresh if fresh else self.kept
        table.setdefault(topic, {}).setdefault(member, []).append(partition)
        self.count[member] += 1

    def holds(self, topic: str, member: str) -> bool:
        return bool(self.fresh.get(topic, {}).get(member)) or bool(self.kept.get(topic, {}).get(member))

    def take_one(self, topic: str, member: str) -> int:
        """Remove and return one partition, a new one if there is any (moving it costs no stickiness)."""
        fresh = self.fresh.get(topic, {}).get(member)
        source = fresh if fresh else self.kept[topic][member]
        self.count[member] -= 1
        return source.pop()


def _heterogeneous(
    members: Sequence[str],
    subscribed: Mapping[str, frozenset[str]],
    cluster: ClusterView,
    owned: Mapping[str, Sequence[TopicPartition]],
) -> dict[str, list[TopicPartition]]:
    holdings = _Holdings(members)
    subscribers: dict[str, list[str]] = {}
    for m in members:
        for topic in subscribed[m]:
            subscribers.setdefault(topic, []).append(m)
    taken: set[TopicPartition] = set()
    for m in members:
        for tp in owned.get(m, ()):
            holdings.add(tp.topic, m, tp.partition, fresh=False)
            taken.add(tp)

    # Topics few members can take go first, while everyone still has room for them.
    topic_order = sorted(subscribers, key=lambda t: (len(subscribers[t]), -cluster.partition_count(t), t))
    for topic in topic_order:
        heap = [(holdings.count[m], holdings.rank[m], m) for m in subscribers[topic]]
        heapq.heapify(heap)
        for p in range(cluster.partition_count(topic)):
            if TopicPartition(topic, p) in taken:
                continue
            _count, rank, m = heapq.heappop(heap)
            holdings.add(topic, m, p, fresh=True)
            heapq.heappush(heap, (holdings.count[m], rank, m))

    movable = [t for t in topic_order if len(subscribers[t]) >= 2]
    moved = True
    while moved:
        moved = False
        for topic in movable:
            moved = _balance_topic(topic, subscribers[topic], holdings) or moved

    result: dict[str, list[TopicPartition]] = {m: [] for m in members}
    for table in (holdings.kept, holdings.fresh):
        for topic, by_member in table.items():
            for m, partitions in by_member.items():
                result[m].extend(TopicPartition(topic, p) for p in partitions)
    return result


def _balance_topic(topic: str, subscribers: list[str], holdings: _Holdings) -> bool:
    """Move partitions of ``topic`` from its most loaded holder to its least loaded subscriber until balanced.

    Both heaps are lazy: an entry whose count is out of date is dropped when it surfaces, and every change
    pushes a fresh entry, so the valid top of each heap is the true most/least loaded member.
    """
    count, rank = holdings.count, holdings.rank
    givers = [(-count[m], rank[m], m) for m in subscribers if holdings.holds(topic, m)]
    takers = [(count[m], rank[m], m) for m in subscribers]
    heapq.heapify(givers)
    heapq.heapify(takers)
    moved = False
    while givers and takers:
        neg, _, giver = givers[0]
        if -neg != count[giver] or not holdings.holds(topic, giver):
            heapq.heappop(givers)
            continue
        held, _, taker = takers[0]
        if held != count[taker]:
            heapq.heappop(takers)
            continue
        if count[giver] - count[taker] < 2:
            break
        partition = holdings.take_one(topic, giver)
        holdings.add(topic, taker, partition, fresh=True)
        moved = True
        for m in (giver, taker):
            heapq.heappush(takers, (count[m], rank[m], m))
            if holdings.holds(topic, m):
                heapq.heappush(givers, (-count[m], rank[m], m))
    return moved
