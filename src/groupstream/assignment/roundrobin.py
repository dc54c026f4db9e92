"""Kafka's client-side ``roundrobin`` assignor.

All partitions of all subscribed topics, sorted by topic then partition, are dealt to the members in
Kafka's member order (static members first), skipping a member that is not subscribed to the partition's
topic. Identical subscriptions give counts within one of each other; different subscriptions can leave the
result unbalanced, which is what the sticky assignors fix.
"""

from __future__ import annotations

from collections.abc import Iterable

from groupstream.assignment.base import ConsumerPartitionAssignor, index_subscriptions
from groupstream.assignment.ordering import sorted_members
from groupstream.assignment.types import ClusterView, GroupAssignment, Subscription, TopicPartition

__all__ = ["RoundRobinAssignor", "roundrobin_assign"]


def roundrobin_assign(cluster: ClusterView, subscriptions: Iterable[Subscription]) -> GroupAssignment:
    """Kafka's RoundRobinAssignor over decoded subscriptions."""
    by_member = index_subscriptions(subscriptions)
    ordered = sorted_members(by_member.values())
    member_ids = [s.member_id for s in ordered]
    topic_sets = [frozenset(s.topics) for s in ordered]
    result: dict[str, list[TopicPartition]] = {member: [] for member in member_ids}
    topics = sorted({topic for s in ordered for topic in s.topics})

    position = 0  # the next member to consider, carried across topics like Kafka's circular iterator
    for topic in topics:
        for partition in range(cluster.partition_count(topic)):
            # Some member is subscribed to ``topic`` (it came from a subscription), so this loop ends.
            while topic not in topic_sets[position]:
                position = (position + 1) % len(member_ids)
            result[member_ids[position]].append(TopicPartition(topic, partition))
            position = (position + 1) % len(member_ids)
    return GroupAssignment(result)


class RoundRobinAssignor(ConsumerPartitionAssignor):
    """``partition.assignment.strategy=roundrobin``."""

    name = "roundrobin"

    def assign(self, cluster: ClusterView, subscriptions: Iterable[Subscription]) -> GroupAssignment:
        return roundrobin_assign(cluster, subscriptions)
