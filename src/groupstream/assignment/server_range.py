"""The server-side ``range`` assignor (KIP-848): contiguous ranges per topic, co-partitioned, and sticky.

For a topic with ``n`` partitions and ``m`` subscribers the ranges ("slots") are Kafka's: ``n // m``
partitions each, one more for the first ``n % m`` slots. Topics with the same subscribers and the same
partition count form a co-partitioned group and share one slot per member, so a member gets the same
partition numbers of every topic in the group (the join use case).

Without a current assignment, slot ``i`` goes to the ``i``-th member in Kafka's order (static members by
instance id first, then member ids), which is exactly Kafka's range assignor. With one, each slot goes
preferably to the member already holding most of its partitions (largest overlap first, ties by slot
then member order), so an unchanged group keeps its assignment and a join or leave only shifts the
boundaries instead of reshuffling everything. Like Kafka's, it balances each topic, not the totals.
"""

from __future__ import annotations

from collections.abc import Sequence

from groupstream.assignment.ordering import member_order_key
from groupstream.assignment.server import GroupSpec, MemberSpec, ServerPartitionAssignor
from groupstream.assignment.types import ClusterView, GroupAssignment, TopicPartition

__all__ = ["ServerRangeAssignor", "server_range_assign"]


def _slot_of(partition: int, base: int, extra: int) -> int:
    """Index of the range holding ``partition`` when the first ``extra`` ranges have ``base + 1`` partitions."""
    wide = (base + 1) * extra
    if partition < wide:
        return partition // (base + 1)
    return extra + (partition - wide) // base


def _match_slots(members: Sequence[MemberSpec], topics: Sequence[str], count: int) -> list[str]:
    """slot index -> member id for one co-partitioned group, keeping current holders where possible."""
    base, extra = divmod(count, len(members))
    group_topics = set(topics)
    overlap: dict[tuple[str, int], int] = {}
    for member in members:
        for tp in member.assigned:
            if tp.topic in group_topics and 0 <= tp.partition < count:
                key = (member.member_id, _slot_of(tp.partition, base, extra))
                overlap[key] = overlap.get(key, 0) + 1
    rank = {m.member_id: i for i, m in enumerate(members)}
    slot_owner: list[str | None] = [None] * len(members)
    matched: set[str] = set()
    for (member_id, slot), _size in sorted(
        overlap.items(), key=lambda kv: (-kv[1], kv[0][1], rank[kv[0][0]])
    ):
        if slot_owner[slot] is None and member_id not in matched:
            slot_owner[slot] = member_id
            matched.add(member_id)
    free = iter(m.member_id for m in members if m.member_id not in matched)
    return [owner if owner is not None else next(free) for owner in slot_owner]


def server_range_assign(group: GroupSpec, topics: ClusterView) -> GroupAssignment:
    """The range target assignment of ``group``."""
    ordered = sorted(group, key=lambda m: member_order_key(m.member_id, m.instance_id))
    subscribers: dict[str, list[MemberSpec]] = {}
    for member in ordered:
        for topic in sorted(member.subscribed_topics):
            if topics.partition_count(topic) > 0:
                subscribers.setdefault(topic, []).append(member)

    groups: dict[tuple[tuple[str, ...], int], list[str]] = {}
    for topic in sorted(subscribers):
        key = (tuple(m.member_id for m in subscribers[topic]), topics.partition_count(topic))
        groups.setdefault(key, []).append(topic)

    result: dict[str, list[TopicPartition]] = {m.member_id: [] for m in ordered}
    for (member_ids, count), group_topics in groups.items():
        members = subscribers[group_topics[0]]
        slot_owner = _match_slots(members, group_topics, count)
        base, extra = divmod(count, len(member_ids))
        for slot, member_id in enumerate(slot_owner):
            start = base * slot + min(slot, extra)
            end = start + base + (1 if slot < extra else 0)
            for topic in group_topics:
                result[member_id].extend(TopicPartition(topic, p) for p in range(start, end))
    return GroupAssignment(result)


class ServerRangeAssignor(ServerPartitionAssignor):
    """``group.remote.assignor=range``."""

    name = "range"

    def assign(self, group: GroupSpec, topics: ClusterView) -> GroupAssignment:
        return server_range_assign(group, topics)
