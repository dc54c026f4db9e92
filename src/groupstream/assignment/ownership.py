"""Who owns what before a rebalance: claims resolved by generation, then checked against the subscriptions.

Members report what they owned (sticky: in user data; cooperative-sticky: in the subscription), each with
the generation it was assigned in. A member that missed a rebalance reports an older generation, so two
members may claim one partition. Kafka's rule: the claim from the highest generation wins; two claims from
the same highest generation are both dropped (neither can be trusted). We apply it to all claims at once,
so the outcome does not depend on the order members are listed in.

A surviving claim still only counts if the member is subscribed to the topic and the partition exists; a
partition whose winning claim is invalid is simply unowned.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from groupstream.assignment.types import ClusterView, TopicPartition, partition_order

__all__ = ["Claim", "resolve_claims", "valid_for"]


@dataclass(frozen=True, slots=True)
class Claim:
    """One member's report of the partitions it owned and the generation it owned them in."""

    member_id: str
    partitions: tuple[TopicPartition, ...]
    generation: int


def valid_for(tp: TopicPartition, topics: frozenset[str], cluster: ClusterView) -> bool:
    """A member may keep ``tp`` only if it subscribes to the topic and the partition exists."""
    return tp.topic in topics and 0 <= tp.partition < cluster.partition_count(tp.topic)


def resolve_claims(
    claims: Iterable[Claim],
    subscribed: Mapping[str, frozenset[str]],
    cluster: ClusterView,
) -> dict[str, list[TopicPartition]]:
    """Member -> the partitions it may keep as its starting point, each partition given to at most one member."""
    best: dict[TopicPartition, tuple[int, str | None]] = {}
    for claim in claims:
        generation, member_id = claim.generation, claim.member_id
        entry: tuple[int, str | None] = (generation, member_id)
        for tp in claim.partitions:
            current = best.setdefault(tp, entry)  # one lookup when nobody else claims it (the usual case)
            if current is entry:
                continue
            if generation > current[0]:
                best[tp] = entry
            elif generation == current[0] and current[1] != member_id:
                best[tp] = (generation, None)  # a tie at the top: nobody keeps it
    owned: dict[str, list[TopicPartition]] = {member: [] for member in subscribed}
    counts = cluster.partitions_per_topic
    for tp, (_generation, member) in best.items():
        # valid_for, inlined: this runs once per owned partition of the group.
        if member is not None and member in subscribed:
            topic = tp.topic
            if topic in subscribed[member] and 0 <= tp.partition < counts.get(topic, 0):
                owned[member].append(tp)
    for partitions in owned.values():
        partitions.sort(key=partition_order)
    return owned
