"""Kafka conformance points of the ``consumer`` group coordinator (issue 18), each from Kafka's own rules:
subscription consistency (KAFKA-19431), the member epoch when a revocation is acknowledged (KAFKA-19974),
the rebalance timeout checked against the member's epoch, and the classic DescribeGroups of a consumer
group. Manual clock, one shard."""

from __future__ import annotations

from consumer_group_kit import Member, heartbeat, settle
from coordinator_harness import GROUP, Harness, StaticTopics, topic_id

from groupstream.coordinator.config import GroupCoordinatorConfig
from groupstream.coordinator.consumer_admin import describe_groups_entry
from groupstream.coordinator.consumer_group import ConsumerGroup, ConsumerGroupState
from groupstream.coordinator.reconcile import MemberState
from groupstream.protocol.consumer_group_records import (
    CurrentMemberAssignmentValue,
    MemberMetadataValue,
    PartitionMetadataValue,
    TopicMetadata,
    TopicPartitions,
)
from groupstream.protocol.consumer_protocol import decode_assignment
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name

E = ErrorCode
S = ConsumerGroupState
U = {("u", 0), ("u", 1)}
T = {("t", p) for p in range(4)}


def group(h: Harness) -> ConsumerGroup:
    g = h.shard.consumer_group(GROUP)
    assert g is not None
    return g


def test_an_unsubscribed_topic_moves_to_pending_revocation_at_once() -> None:
    """Even while the next target assignment waits for the assignment interval, a member that drops a topic
    is asked to give its partitions up in the same heartbeat's answer, and gets nothing of it afterwards."""
    h = Harness(config=GroupCoordinatorConfig(consumer_assignment_interval_ms=1_000))
    a = Member(h, "a", topics=("t", "u"))
    a.join()
    assert a.owned == T | U
    epoch = a.epoch
    answer = heartbeat(h, "a", epoch, topics=("t",), owned=T | U)
    assert group(h).assignment_epoch == epoch  # no new target yet: the interval runs
    assert (answer.error_code, answer.member_epoch) == (E.NONE, epoch)
    assigned = {(t.topic_id, p) for t in answer.assignment.topic_partitions for p in t.partitions}
    assert assigned == {(topic_id("t"), p) for p in range(4)}
    m = group(h).members["a"].assignment
    assert m.state is MemberState.UNREVOKED_PARTITIONS
    assert m.pending_revocation == {(topic_id("u"), 0), (topic_id("u"), 1)}
    assert m.previous_epoch == epoch  # Kafka's updateMemberEpoch(memberEpoch) on this path
    heartbeat(h, "a", epoch, owned=T)  # revoked
    assert group(h).members["a"].assignment.state is MemberState.STABLE
    assert group(h).owners.keys() == {(topic_id("t"), p) for p in range(4)}
    # A newcomer subscribed to u gets it once the target catches up, and a never again.
    b = Member(h, "b", topics=("u",))
    b.join()
    h.advance(1_000)
    a.owned = T
    settle([a, b])
    assert (a.owned, b.owned) == (T, U)


def test_the_revocation_acknowledgement_moves_the_member_to_the_target_epoch() -> None:
    """KAFKA-19974: leaving UNREVOKED_PARTITIONS, the member takes the target assignment's epoch (one step,
    no extra bump); its previous epoch is the one it revoked at."""
    h = Harness()
    a, b = Member(h, "a"), Member(h, "b")
    a.join()
    before = a.epoch
    b.join()  # the new target takes two of a's partitions
    answer = heartbeat(h, "a", before, owned=T)
    assert answer.member_epoch == before  # revoking at its own epoch
    target_epoch = group(h).assignment_epoch
    assert target_epoch > before
    kept = {(h.topics.topic_name(t.topic_id), p) for t in answer.assignment.topic_partitions for p in t.partitions}
    answer = heartbeat(h, "a", before, owned=kept)
    m = group(h).members["a"].assignment
    assert (answer.member_epoch, m.epoch, m.previous_epoch, m.state) == (target_epoch, target_epoch, before, MemberState.STABLE)


def test_a_rebalance_timeout_of_an_older_epoch_fences_nobody() -> None:
    """The rebalance timeout belongs to the revocation it was started for: a member that rejoined since
    (KIP-1082: same member id, epoch 0, owning nothing) is not fenced when that timeout's time comes."""
    h = Harness(topics=StaticTopics({"t": 4}))
    a, b = Member(h, "a", rebalance_timeout_ms=10_000), Member(h, "b")
    a.join()
    b.join()
    heartbeat(h, "a", a.epoch, owned=T)  # asked to revoke; keeps them
    assert group(h).members["a"].assignment.state is MemberState.UNREVOKED_PARTITIONS
    h.advance(6_000)
    answer = heartbeat(h, "a", 0, topics=("t",), owned=set(), rebalance_timeout_ms=10_000)
    assert answer.error_code == E.NONE
    assert group(h).members["a"].assignment.state is not MemberState.UNREVOKED_PARTITIONS
    h.advance(5_000)  # past the first revocation's timeout
    assert "a" in group(h).members
    assert heartbeat(h, "a", answer.member_epoch, owned=set()).error_code == E.NONE


def test_classic_describe_names_assigned_topics_missing_from_the_partition_metadata() -> None:
    """DescribeGroups (the classic API) on a consumer group encodes each member's assignment by topic name;
    a topic the group's partition metadata does not list is named from the broker's topics, as Kafka names
    it from its metadata image, instead of being left out."""
    h = Harness()
    t, u = topic_id("t"), topic_id("u")
    g = ConsumerGroup(GROUP)
    g.apply_epoch(3, 0)
    g.apply_partition_metadata(PartitionMetadataValue(3, (TopicMetadata(t, "t", 4),)))
    g.apply_member_metadata("a", MemberMetadataValue(None, None, "c", "/h", ("t",), None, 30_000, None))
    g.apply_current_assignment("a", CurrentMemberAssignmentValue(
        3, 2, 0, (TopicPartitions(t, (0, 1)), TopicPartitions(u, (1,))), ()))  # fmt: skip
    G = by_name("DescribeGroups").Response.DescribedGroup
    (member,) = describe_groups_entry(g, G, h.topics).members
    assert decode_assignment(member.member_assignment).partitions == (("t", 0), ("t", 1), ("u", 1))
    (member,) = describe_groups_entry(g, G).members  # without the broker's topics: what the group knows
    assert decode_assignment(member.member_assignment).partitions == (("t", 0), ("t", 1))
