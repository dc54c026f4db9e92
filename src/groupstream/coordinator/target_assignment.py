"""What a ``consumer`` group subscribes to, and the target assignment the server-side assignor makes of it.

Both are pure: the heartbeat handler passes the group's members as they will be once its records are
replayed, and writes records for whatever differs from what the group holds.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping

from groupstream.assignment.server import GroupSpec, MemberSpec, ServerPartitionAssignor
from groupstream.assignment.types import ClusterView, TopicPartition
from groupstream.coordinator.consumer_group import TopicIdPartition
from groupstream.coordinator.request import TopicCatalogView
from groupstream.protocol.consumer_group_records import MemberMetadataValue, TopicMetadata

__all__ = ["compute_target", "resolve_regex", "subscribed_topics", "subscription_metadata"]


def resolve_regex(regex: str, topics: TopicCatalogView) -> tuple[str, ...]:
    """Topics whose whole name matches ``regex`` (internal topics never do, as in Kafka)."""
    pattern = re.compile(regex)
    return tuple(sorted(t for t in topics.topic_names() if not t.startswith("__") and pattern.fullmatch(t)))


def subscribed_topics(md: MemberMetadataValue, resolved: Mapping[str, Iterable[str]]) -> frozenset[str]:
    """A member's topics: those it names and those its regular expression resolved to."""
    names = set(md.subscribed_topics)
    if md.subscribed_regex:
        names.update(resolved.get(md.subscribed_regex, ()))
    return frozenset(names)


def subscription_metadata(names: Iterable[str], topics: TopicCatalogView) -> tuple[TopicMetadata, ...]:
    """The subscribed topics that exist, with their ids and partition counts, sorted by name: what the
    ConsumerGroupPartitionMetadata record holds; a change of it (a topic created or grown) bumps the epoch."""
    out = []
    for name in sorted(set(names)):
        count = topics.partition_count(name)
        topic_id = topics.topic_id(name)
        if count is not None and topic_id is not None:
            out.append(TopicMetadata(topic_id, name, count))
    return tuple(out)


def compute_target(
    assignor: ServerPartitionAssignor,
    members: Mapping[str, MemberMetadataValue],
    current: Mapping[str, frozenset[TopicIdPartition]],
    resolved: Mapping[str, Iterable[str]],
    metadata: Iterable[TopicMetadata],
) -> dict[str, frozenset[TopicIdPartition]]:
    """The new target of every member. ``current`` (the targets so far) lets sticky assignors keep
    partitions where they are; partitions of topics that no longer exist are dropped from it."""
    by_name = {t.name: t for t in metadata}
    # One lookup per partition each way: (name, partition count) by topic id, and topic id by name.
    topic_of = {t.topic_id: (t.name, t.partitions) for t in by_name.values()}
    id_of = {name: t.topic_id for name, t in by_name.items()}
    specs = []
    for member_id, md in members.items():
        assigned = []
        last: uuid.UUID | None = None
        topic: tuple[str, int] | None = None
        for t, p in current.get(member_id, ()):
            # One topic's partitions share its id object: hash it (uuid's hash is Python code) once per topic.
            if t is not last:
                last, topic = t, topic_of.get(t)
            if topic is not None and p < topic[1]:
                assigned.append(TopicPartition(topic[0], p))
        topics = subscribed_topics(md, resolved)
        specs.append(MemberSpec(member_id, topics, frozenset(assigned), md.instance_id, md.rack_id))
    view = ClusterView({name: t.partitions for name, t in by_name.items()})
    result = assignor.assign(GroupSpec(specs), view)
    return {
        member_id: frozenset([(id_of[tp.topic], tp.partition) for tp in result.get(member_id, ())])
        for member_id in members
    }
