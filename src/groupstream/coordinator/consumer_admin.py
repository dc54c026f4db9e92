"""What admin tools and classic clients see of ``consumer`` (KIP-848) groups.

- ConsumerGroupDescribe: epochs, assignor, and each member's current and target assignment.
- ListGroups shows a consumer group too, as Kafka does (protocol type and group type ``consumer``), and so
  does DescribeGroups (each member's subscription and assignment in the classic embedded format), so tools
  that speak only DescribeGroups list its members and lag. Kafka 4 does not describe a consumer group there
  (KIP-1043: a Dead group before v6, GROUP_ID_NOT_FOUND "is not a classic group" from v6); tools written for
  it ask ConsumerGroupDescribe, which we answer alike (the group protocol's differential tests pin this).
- Classic members of a consumer group (Kafka's online migration, see `migration` and `classic_members`) are
  listed like the others; ConsumerGroupDescribe v1+ tells them apart by ``MemberType`` (0 classic, 1 consumer).
  An empty classic group becomes a consumer group when a consumer member arrives, and an empty consumer group
  a classic one when a classic member arrives, keeping its committed offsets.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Any

from groupstream.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerMember,
    TopicIdPartition,
    preferred_assignor,
)
from groupstream.coordinator.context import Op
from groupstream.coordinator.request import ShardRequest, TopicIdsView, TopicsView, body_as, has_topic_ids
from groupstream.protocol.bodies import CONSUMER_GROUP_DESCRIBE
from groupstream.protocol.consumer_protocol import (
    ASSIGNMENT_MAX_VERSION,
    ConsumerAssignment,
    ConsumerSubscription,
    encode_assignment,
    encode_subscription,
)
from groupstream.protocol.error_codes import ErrorCode

__all__ = ["CONSUMER_GROUP_TYPE", "ConsumerGroupAdmin", "assignment_version", "describe_groups_entry"]

E = ErrorCode
CONSUMER_GROUP_TYPE = "consumer"
"""Kafka's group type (ListGroups v5) and protocol type for KIP-848 groups."""
_CLASSIC_MEMBER_TYPE, _CONSUMER_MEMBER_TYPE = 0, 1  # ConsumerGroupDescribe v1's MemberType


def _names(group: ConsumerGroup) -> dict[Any, str]:
    """Topic id -> name, from the group's own partition metadata (it holds every subscribed topic)."""
    return {} if group.partition_metadata is None else {t.topic_id: t.name for t in group.partition_metadata.topics}


def _named(
    group: ConsumerGroup, partitions: AbstractSet[TopicIdPartition], topics: TopicsView | None
) -> tuple[tuple[str, int], ...]:
    """Partitions by topic name. The group's partition metadata names only the existing topics subscribed to
    now; a topic it does not list is named from the broker's topics (``topics``), as Kafka names every topic
    from its metadata image; a topic deleted since has no name and is left out."""
    names = _names(group)
    out = []
    for t, p in partitions:
        name = names.get(t)
        if name is None and topics is not None and has_topic_ids(topics):
            name = topics.topic_name(t)
            if name is not None:
                names[t] = name
        if name is not None:
            out.append((name, p))
    return tuple(sorted(out))


def describe_groups_entry(group: ConsumerGroup, G: Any, topics: TopicsView | None = None) -> Any:
    """The group as DescribeGroups reports it (``G`` is the response's DescribedGroup type); ``topics``
    names the topics missing from the group's partition metadata.

    A ``consumer``-protocol member sent no embedded-protocol bytes: its subscription is written as version 0
    of the embedded protocol (its topics) and its assignment as version 0. A classic member (online
    migration) is described as a classic group describes it: the metadata bytes of its JoinGroup exactly as
    it sent them (its protocol's, with its owned partitions and user data), and its assignment as its
    SyncGroup receives it, at the version of that metadata, so that a tool reads the same bytes either way."""
    return G(
        error_code=0,
        group_id=group.group_id,
        group_state=group.state.value,
        protocol_type=CONSUMER_GROUP_TYPE,
        protocol_data=preferred_assignor(m.metadata for m in group),
        members=[_described_member(group, m, G, topics) for m in sorted(group, key=lambda m: m.member_id)],
    )


def _described_member(group: ConsumerGroup, m: ConsumerMember, G: Any, topics: TopicsView | None) -> Any:
    md = m.metadata
    assigned = ConsumerAssignment(_named(group, m.assignment.assigned, topics))
    if md.classic_protocols:
        metadata = md.classic_protocols[0].metadata  # the protocol its JoinGroup answer and SyncGroup name
        assignment = encode_assignment(assigned, assignment_version(metadata))
    else:
        metadata = encode_subscription(ConsumerSubscription(topics=md.subscribed_topics), 0)
        assignment = encode_assignment(assigned)
    return G.DescribedGroupMember(member_id=m.member_id, group_instance_id=m.instance_id, client_id=md.client_id,
                                  client_host=md.client_host, member_metadata=metadata, member_assignment=assignment)  # fmt: skip


def assignment_version(subscription: bytes) -> int:
    """The embedded-protocol version a classic member's assignment is encoded at: its subscription's, as
    Kafka encodes it (capped to what we can write; 0 for bytes too short to say)."""
    at = int.from_bytes(subscription[:2], "big", signed=True) if len(subscription) >= 2 else 0
    return min(max(at, 0), ASSIGNMENT_MAX_VERSION)


def _assignment(G: Any, names: dict[Any, str], partitions: AbstractSet[TopicIdPartition]) -> Any:
    by_topic: dict[Any, list[int]] = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(p)
    A = G.Member.Assignment
    return A(topic_partitions=[
        A.TopicPartitions(topic_id=t, topic_name=names.get(t, ""), partitions=sorted(ps))
        for t, ps in sorted(by_topic.items(), key=lambda kv: names.get(kv[0], ""))])  # fmt: skip


class ConsumerGroupAdmin:
    def describe(self, op: Op, req: ShardRequest, metadata: TopicsView) -> None:
        R = CONSUMER_GROUP_DESCRIBE.Response
        G = R.DescribedGroup
        out = []
        for raw in body_as(CONSUMER_GROUP_DESCRIBE, req).group_ids:
            group_id = str(raw)
            group = op.ctx.consumer_groups.get(group_id)
            if group is None:
                message = (f"Group {group_id} is not a consumer group." if group_id in op.ctx.groups
                           else f"Group {group_id} not found.")  # fmt: skip
                out.append(G(error_code=int(E.GROUP_ID_NOT_FOUND), error_message=message, group_id=group_id,
                             group_state="", group_epoch=0, assignment_epoch=0, assignor_name="", members=[]))  # fmt: skip
                continue
            names = _names(group)
            if isinstance(metadata, TopicIdsView):
                # A member may still hold partitions of a topic nobody subscribes to any more (it has not
                # revoked them yet): the group's metadata has forgotten the name, the broker's has not.
                held = {t for m in group for t, _ in m.assignment.holds()}
                held.update(t for partitions in group.targets.values() for t, _ in partitions)
                for topic_id in held - names.keys():
                    name = metadata.topic_name(topic_id)
                    if name is not None:
                        names[topic_id] = name

            members = [
                G.Member(
                    member_id=m.member_id, instance_id=m.instance_id, rack_id=m.metadata.rack_id,
                    member_epoch=m.epoch, client_id=m.metadata.client_id, client_host=m.metadata.client_host,
                    subscribed_topic_names=list(m.metadata.subscribed_topics),
                    subscribed_topic_regex=m.metadata.subscribed_regex or "",
                    assignment=_assignment(G, names, m.assignment.holds()),
                    target_assignment=_assignment(G, names, group.targets.get(m.member_id, frozenset())),
                    member_type=_CLASSIC_MEMBER_TYPE if m.metadata.uses_classic_protocol else _CONSUMER_MEMBER_TYPE,
                )
                for m in sorted(group, key=lambda m: m.member_id)
            ]  # fmt: skip
            out.append(G(error_code=0, error_message=None, group_id=group_id, group_state=group.state.value,
                         group_epoch=group.epoch, assignment_epoch=group.assignment_epoch,
                         assignor_name=preferred_assignor(m.metadata for m in group), members=members))  # fmt: skip
        op.respond(req.token, R(throttle_time_ms=0, groups=out))
