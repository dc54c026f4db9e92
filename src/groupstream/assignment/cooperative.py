"""Kafka's client-side ``cooperative-sticky`` assignor (KIP-429) and the checks of incremental rebalancing.

Members keep consuming what they own while they rejoin and report it in the subscription's owned
partitions. The leader computes the same balanced, sticky target as ``sticky``, then holds back every
partition that would change hands: a partition another member still claims is only taken away from that
member in this round, not given to its new owner. The previous owner revokes it and rejoins, and the
follow-up rebalance, where nobody claims it any more, hands it over. So no partition ever has two owners.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from groupstream.assignment.base import AssignorError, ConsumerPartitionAssignor, index_subscriptions
from groupstream.assignment.ownership import Claim
from groupstream.assignment.sticky import sticky_target
from groupstream.assignment.types import (
    ClusterView,
    GroupAssignment,
    RebalanceProtocol,
    Subscription,
    TopicPartition,
)
from groupstream.assignment.user_data import decode_cooperative_user_data, encode_cooperative_user_data

__all__ = [
    "CooperativeStickyAssignor",
    "cooperative_sticky_assign",
    "needs_follow_up_rebalance",
    "revoked_partitions",
    "validate_cooperative_assignment",
]


def _generation(subscription: Subscription) -> int:
    """The generation of the owned partitions: the v2+ field, else the generation in the user data."""
    if subscription.generation_id is not None:
        return subscription.generation_id
    return decode_cooperative_user_data(subscription.user_data)


def cooperative_sticky_assign(cluster: ClusterView, subscriptions: Iterable[Subscription]) -> GroupAssignment:
    """One cooperative round: the sticky target minus the partitions that must first be revoked elsewhere."""
    by_member = index_subscriptions(subscriptions)
    claims = [Claim(m, s.owned_partitions, _generation(s)) for m, s in by_member.items()]
    target = sticky_target(cluster, by_member, claims)
    claimants: dict[TopicPartition, set[str]] = {}
    for member, s in by_member.items():
        for tp in s.owned_partitions:
            claimants.setdefault(tp, set()).add(member)
    # A partition the member claims itself stays (it won the claim); one only others claim waits a round.
    result = {
        member: [tp for tp in partitions if member in claimants.get(tp, (member,))]
        for member, partitions in target.items()
    }
    return GroupAssignment(result)


def revoked_partitions(
    owned: Iterable[TopicPartition], assigned: Iterable[TopicPartition]
) -> tuple[TopicPartition, ...]:
    """What a member must give up: owned and no longer assigned, in sorted order."""
    return tuple(sorted(set(owned) - set(assigned)))


def needs_follow_up_rebalance(
    subscriptions: Iterable[Subscription], assignment: Mapping[str, Sequence[TopicPartition]]
) -> bool:
    """True when some member must revoke partitions, so a second round has to hand them out (KIP-429)."""
    return any(revoked_partitions(s.owned_partitions, assignment.get(s.member_id, ())) for s in subscriptions)


def validate_cooperative_assignment(
    subscriptions: Iterable[Subscription], assignment: Mapping[str, Sequence[TopicPartition]]
) -> None:
    """Refuse an assignment that gives a partition to a new owner while it is revoked from another.

    The leader runs this on any assignor's result under the cooperative protocol (custom ones included), as
    Kafka's consumer does, because a violation would let two members consume one partition at once.
    """
    added: set[TopicPartition] = set()
    revoked: set[TopicPartition] = set()
    for s in subscriptions:
        assigned = set(assignment.get(s.member_id, ()))
        owned = set(s.owned_partitions)
        added |= assigned - owned
        revoked |= owned - assigned
    both = sorted(added & revoked)
    if both:
        raise AssignorError(f"cooperative assignment moves partitions without revoking them first: {both}")


class CooperativeStickyAssignor(ConsumerPartitionAssignor):
    """``partition.assignment.strategy=cooperative-sticky``; also usable eagerly while a group upgrades."""

    name = "cooperative-sticky"
    supported_protocols = (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)

    def assign(self, cluster: ClusterView, subscriptions: Iterable[Subscription]) -> GroupAssignment:
        return cooperative_sticky_assign(cluster, subscriptions)

    def subscription_user_data(
        self,
        topics: Iterable[str],
        owned: Sequence[TopicPartition] | None,
        generation: int,
    ) -> bytes | None:
        """The generation as an int32, for coordinators and leaders reading subscriptions older than v2."""
        return encode_cooperative_user_data(generation)
