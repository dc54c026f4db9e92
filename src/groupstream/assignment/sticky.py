"""Kafka's client-side ``sticky`` assignor (KIP-54, KIP-341): balanced, then as sticky as balance allows.

It is an eager assignor: members revoke everything before they join, so what each one owned reaches the
leader only through the StickyAssignorUserData in its subscription (``user_data``), with the generation
it was assigned in. Members whose user data is missing or unreadable start from nothing, as in Kafka; a
member that sends no user data but fills the subscription's owned partitions (v1+) is taken at its word.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from groupstream.assignment.balance import balanced_sticky_assignment
from groupstream.assignment.base import ConsumerPartitionAssignor, index_subscriptions
from groupstream.assignment.ordering import java_string_key
from groupstream.assignment.ownership import Claim, resolve_claims
from groupstream.assignment.types import ClusterView, GroupAssignment, Subscription, TopicPartition
from groupstream.assignment.user_data import (
    DEFAULT_GENERATION,
    decode_sticky_user_data,
    encode_sticky_user_data,
)

__all__ = ["StickyAssignor", "sticky_assign", "sticky_target"]


def subscribed_topics(
    cluster: ClusterView, by_member: Mapping[str, Subscription]
) -> dict[str, frozenset[str]]:
    """Each member's topics that have partitions: the only ones there is anything to assign from."""
    return {
        member: frozenset(t for t in s.topics if cluster.partition_count(t) > 0)
        for member, s in by_member.items()
    }


def sticky_target(
    cluster: ClusterView, by_member: Mapping[str, Subscription], claims: Iterable[Claim]
) -> dict[str, list[TopicPartition]]:
    """The balanced, sticky assignment from resolved claims; shared by both sticky assignors."""
    members = sorted(by_member, key=java_string_key)
    subscribed = subscribed_topics(cluster, by_member)
    owned = resolve_claims(claims, subscribed, cluster)
    return balanced_sticky_assignment(members, subscribed, cluster, owned)


def _claim(subscription: Subscription) -> Claim:
    decoded = decode_sticky_user_data(subscription.user_data)
    if decoded is not None:
        generation = DEFAULT_GENERATION if decoded.generation is None else decoded.generation
        return Claim(subscription.member_id, decoded.partitions, generation)
    generation = DEFAULT_GENERATION if subscription.generation_id is None else subscription.generation_id
    return Claim(subscription.member_id, subscription.owned_partitions, generation)


def sticky_assign(cluster: ClusterView, subscriptions: Iterable[Subscription]) -> GroupAssignment:
    """The StickyAssignor over decoded subscriptions."""
    by_member = index_subscriptions(subscriptions)
    return GroupAssignment(sticky_target(cluster, by_member, (_claim(s) for s in by_member.values())))


class StickyAssignor(ConsumerPartitionAssignor):
    """``partition.assignment.strategy=sticky``."""

    name = "sticky"

    def assign(self, cluster: ClusterView, subscriptions: Iterable[Subscription]) -> GroupAssignment:
        return sticky_assign(cluster, subscriptions)

    def subscription_user_data(
        self,
        topics: Iterable[str],
        owned: Sequence[TopicPartition] | None,
        generation: int,
    ) -> bytes | None:
        """Java's StickyAssignorUserData v1; nothing before the member's first assignment, as in Kafka."""
        if owned is None:
            return None
        return encode_sticky_user_data(owned, generation)
