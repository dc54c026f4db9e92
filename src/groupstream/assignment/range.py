"""Kafka's client-side ``range`` assignor, including static-member order (KIP-345) and racks (KIP-881).

Per topic, the subscribed members are put in order (static members by group.instance.id first, then the
others by member id) and each takes the next contiguous range: ``n // m`` partitions, one more for the
first ``n % m``. Topics with the same partition count and the same subscribers therefore give a member the
same partition numbers, which is what joins of co-partitioned topics need.

When members and replicas carry racks and some partitions are not on every rack, partitions whose replicas
share a member's rack are matched first, within the same per-topic quotas, and co-partitioned topics are
matched partition number by partition number so that co-partitioning still holds; whatever cannot be
matched is then handed out as plain ranges.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import groupby

from groupstream.assignment.base import ConsumerPartitionAssignor, index_subscriptions
from groupstream.assignment.ordering import sorted_members
from groupstream.assignment.types import ClusterView, GroupAssignment, Subscription, TopicPartition

__all__ = ["RangeAssignor", "range_assign"]


class _TopicState:
    """One topic's progress: its ordered members, quotas left and partitions not yet handed out."""

    __slots__ = (
        "assigned_count",
        "extra_left",
        "member_racks",
        "members",
        "needs_rack_matching",
        "partition_racks",
        "per_member",
        "topic",
        "unassigned",
    )

    def __init__(
        self,
        topic: str,
        count: int,
        members: list[str],
        member_racks: dict[str, str],
        cluster: ClusterView,
    ) -> None:
        self.topic = topic
        self.members = members
        self.member_racks = {m: member_racks[m] for m in members if m in member_racks}
        # dict keeps partition order and removes in O(1): the ranges are taken in partition order.
        self.unassigned: dict[TopicPartition, None] = dict.fromkeys(
            TopicPartition(topic, p) for p in range(count)
        )
        self.assigned_count = dict.fromkeys(members, 0)
        self.per_member, self.extra_left = divmod(count, len(members)) if members else (0, 0)
        all_member_racks = set(self.member_racks.values())
        # As in Kafka, partition racks are only looked at when some member of this topic has a rack; the size
        # of this map is also what co-partitioned topics are grouped by.
        self.partition_racks: dict[TopicPartition, frozenset[str]] = (
            {tp: cluster.racks(tp) for tp in self.unassigned} if all_member_racks else {}
        )
        all_partition_racks: set[str] = set().union(*self.partition_racks.values())
        self.needs_rack_matching = (
            bool(all_member_racks)
            and not all_member_racks.isdisjoint(all_partition_racks)
            # If every partition is on every rack, matching cannot improve anything.
            and any(racks != all_partition_racks for racks in self.partition_racks.values())
        )

    def racks_match(self, member: str, tp: TopicPartition) -> bool:
        rack = self.member_racks.get(member)
        return rack is None or rack in self.partition_racks.get(tp, frozenset())

    def max_assignable(self, member: str) -> int:
        quota = self.per_member + (1 if self.extra_left > 0 else 0)
        return max(0, quota - self.assigned_count[member])

    def give(self, member: str, tps: list[TopicPartition], result: dict[str, list[TopicPartition]]) -> None:
        result[member].extend(tps)
        self.assigned_count[member] += len(tps)
        if self.assigned_count[member] > self.per_member:
            self.extra_left -= 1
        for tp in tps:
            del self.unassigned[tp]


def _assign_ranges(
    state: _TopicState,
    may_assign: Callable[[str, TopicPartition], bool],
    result: dict[str, list[TopicPartition]],
) -> None:
    for member in state.members:
        if not state.unassigned:
            return
        limit = state.max_assignable(member)
        if limit == 0:
            continue
        chosen: list[TopicPartition] = []
        for tp in state.unassigned:
            if len(chosen) == limit:
                break
            if may_assign(member, tp):
                chosen.append(tp)
        if chosen:
            state.give(member, chosen, result)


def _assign_co_partitioned_with_racks(
    members: list[str], count: int, states: list[_TopicState], result: dict[str, list[TopicPartition]]
) -> None:
    """Match partition p of every topic in ``states`` to the first member whose rack holds all of them."""
    remaining = list(members)
    for p in range(count):
        for member in remaining:
            if all(
                s.racks_match(member, TopicPartition(s.topic, p)) and s.max_assignable(member) > 0
                for s in states
            ):
                for s in states:
                    s.give(member, [TopicPartition(s.topic, p)], result)
                if all(s.max_assignable(member) == 0 for s in states):
                    remaining.remove(member)
                break
        if not remaining:
            return


def _assign_with_rack_matching(states: list[_TopicState], result: dict[str, list[TopicPartition]]) -> None:
    def by_members(s: _TopicState) -> tuple[str, ...]:
        return tuple(s.members)

    def by_count(s: _TopicState) -> int:
        return len(s.partition_racks)

    # Topics sharing their ordered subscribers and their partition count are co-partitioned. Each topic keeps
    # its own quotas, so the order in which groups are visited does not change the result.
    for members, group in groupby(sorted(states, key=by_members), key=by_members):
        same_members = sorted(group, key=by_count)
        for count, co_group in groupby(same_members, key=by_count):
            co_partitioned = list(co_group)
            if len(co_partitioned) > 1:
                _assign_co_partitioned_with_racks(list(members), count, co_partitioned, result)
            elif co_partitioned[0].needs_rack_matching:
                _assign_ranges(co_partitioned[0], co_partitioned[0].racks_match, result)


def range_assign(cluster: ClusterView, subscriptions: Iterable[Subscription]) -> GroupAssignment:
    """Kafka's RangeAssignor over decoded subscriptions."""
    by_member = index_subscriptions(subscriptions)
    ordered = sorted_members(by_member.values())
    member_racks = {s.member_id: s.rack_id for s in ordered if s.rack_id}
    members_per_topic: dict[str, list[str]] = {}
    for s in ordered:
        for topic in s.topics:
            members_per_topic.setdefault(topic, []).append(s.member_id)

    states = [
        _TopicState(topic, cluster.partition_count(topic), members, member_racks, cluster)
        for topic, members in sorted(members_per_topic.items())
        if cluster.partition_count(topic) > 0
    ]
    result: dict[str, list[TopicPartition]] = {member: [] for member in by_member}
    if any(s.needs_rack_matching for s in states):
        _assign_with_rack_matching(states, result)
    for state in states:
        _assign_ranges(state, lambda _member, _tp: True, result)
    return GroupAssignment(result)


class RangeAssignor(ConsumerPartitionAssignor):
    """``partition.assignment.strategy=range``."""

    name = "range"

    def assign(self, cluster: ClusterView, subscriptions: Iterable[Subscription]) -> GroupAssignment:
        return range_assign(cluster, subscriptions)
