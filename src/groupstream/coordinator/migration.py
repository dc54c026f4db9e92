"""Online migration of a live group between the classic and the ``consumer`` (KIP-848) protocols (Kafka 4).

Upgrade: a ``consumer``-protocol member's first ConsumerGroupHeartbeat to a classic group that has members
converts it, when ``group.consumer.migration.policy`` allows (``bidirectional``, ``upgrade``), the group uses
the ``consumer`` embedded protocol and it is not larger than ``group.consumer.max.size``. Otherwise the
heartbeat is refused with GROUP_ID_NOT_FOUND, as Kafka does. The conversion is written as records, in
Kafka's order: the classic group's tombstone, then each member's metadata, the group epoch (the classic
generation), each member's target (what it holds), the target epoch, and each member's current assignment
(at the generation, Stable). Replay builds the consumer group from them, so a restart finds the same group.
Every classic member stays a member and carries ClassicMemberMetadata (its session timeout and the protocols
of its JoinGroup): its subscription is its JoinGroup metadata, its assignment the classic group's last one.
Offsets are keyed by group id and stay; static members keep their instance ids.

Downgrade: when a ``consumer``-protocol member leaves or is fenced and every other member speaks the classic
protocol, the policy allows it (``bidirectional``, ``downgrade``) and they fit in ``group.max.size``, the group
becomes a classic group of them: the consumer group's records are deleted and a GroupMetadata record written
at generation = the group epoch, with the protocol the members vote for, the first member as leader and each
member's partitions as it holds them now. (Kafka records the target assignment, which a member may not hold
yet while another still does: a consumer member converting the group again before the rebalance completes
would then take the current assignments from those and give a held partition a second owner.) A rebalance
follows at once (a timer due now, so that it runs on the replayed
classic group): the leaving member's partitions are given out by the classic leader's assignor.

The joining member's heartbeat then runs on the converted group (bumping the group epoch, so the server
assignor computes a target for everyone); the classic members learn of it through their next Heartbeat
(REBALANCE_IN_PROGRESS) and rejoin (`classic_members`). Requests the classic group held parked (a rebalance
in flight) are answered REBALANCE_IN_PROGRESS so that those members rejoin the new group.

Downgrade on replacement (Kafka's ``validateOnlineDowngradeWithReplacedMemberId``): a classic JoinGroup that
takes a static member's place (a new process under its ``group.instance.id``) from the group's last
``consumer``-protocol member converts the group the same way, the joiner in the replaced member's place with
what that member held, at the group epoch; the joiner is answered at that generation, with the protocol the
members vote for. Kafka never rebalances then; we do not either when the group was settled (what each member
holds is then its target), and otherwise rebalance at once, as after a leave (`downgrade_replacing`).
"""

from __future__ import annotations

from dataclasses import dataclass

from groupstream.coordinator.classic_group import ClassicGroup, ClassicMember, Protocol
from groupstream.coordinator.consumer_admin import assignment_version
from groupstream.coordinator.consumer_group import ConsumerGroup, ConsumerMember, PartitionSet
from groupstream.coordinator.consumer_records import (
    current_assignment_record,
    group_epoch_record,
    group_records_tombstones,
    member_metadata_record,
    member_removal_records,
    replay_consumer_record,
    target_epoch_record,
    target_member_record,
)
from groupstream.coordinator.context import Op
from groupstream.coordinator.reconcile import NO_PARTITIONS, MemberAssignment, MemberState
from groupstream.coordinator.records import group_metadata_record, group_tombstone
from groupstream.coordinator.request import TopicCatalogView, TopicsView, has_topic_ids
from groupstream.coordinator.responses import join_error, sync_response
from groupstream.coordinator.result import CoordinatorRecord
from groupstream.coordinator.timers import (
    classic_rebalance_key,
    consumer_join_key,
    consumer_rebalance_key,
    consumer_session_key,
    consumer_sync_key,
    heartbeat_key,
    join_key,
    sync_key,
    takeover_key,
)
from groupstream.protocol.consumer_group_records import ClassicProtocol, MemberMetadataValue
from groupstream.protocol.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    ConsumerAssignment,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.errors import PeerProtocolError

__all__ = ["Refused", "downgrade", "downgrade_replacing", "upgrade"]

E = ErrorCode


@dataclass(frozen=True, slots=True)
class Refused:
    """Why a classic group cannot be converted: the error and message the heartbeat answers."""

    code: ErrorCode
    message: str


_BUILT_IN_ASSIGNORS = frozenset({"range", "roundrobin", "sticky", "cooperative-sticky"})
"""Client assignors whose assignment user data the server assignor does not need. Kafka refuses to convert a
group whose assignments carry any user data (GROUP_ID_NOT_FOUND); librdkafka's assignments always do (each member's subscription
user data echoed back: the sticky assignors' previous assignment), so a confluent-kafka cooperative-sticky
group could never upgrade. We refuse only for another (custom) assignor's, whose meaning would be lost."""


def _not_consumer(group_id: str) -> Refused:
    return Refused(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")


def upgrade(op: Op, classic: ClassicGroup, topics: TopicCatalogView) -> tuple[ConsumerGroup, list[CoordinatorRecord]] | Refused:
    """The records converting ``classic`` to a consumer group, and the group they build (not registered:
    the runtime's replay of the records does that), or why it cannot be converted. Answers the classic
    group's parked requests and moves its members' sessions to consumer-group timers."""
    group_id, cfg = classic.group_id, op.ctx.config
    protocol = classic.protocol_name
    if not cfg.upgrade_enabled or not classic.uses_consumer_protocol or protocol is None:
        return _not_consumer(group_id)
    if len(classic.members) >= cfg.consumer_max_size:  # the joining member must fit too
        return _not_consumer(group_id)
    generation = classic.generation
    metadata: dict[str, MemberMetadataValue] = {}
    assignments: dict[str, MemberAssignment] = {}
    for member in classic.members.values():
        try:
            raw = member.metadata(protocol)
            if raw is None:
                raise PeerProtocolError("no metadata for the group's protocol")
            sub = decode_subscription(raw)
            given = decode_assignment(member.assignment) if member.assignment else None
        except PeerProtocolError:
            return Refused(E.GROUP_ID_NOT_FOUND, f"Cannot upgrade the classic group {group_id} to consumer group "
                                                 "because the embedded consumer protocol is malformed.")  # fmt: skip
        if given is not None and given.user_data and protocol not in _BUILT_IN_ASSIGNORS:
            # Kafka 4.4 answers GROUP_ID_NOT_FOUND (its log: UnsupportedVersionException, this message).
            return Refused(E.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group {group_id} to consumer group: "
                                                 "userData from a custom assignor would be lost.")  # fmt: skip
        held = set()
        for topic, partition in () if given is None else given.partitions:
            tid = topics.topic_id(topic)
            if tid is not None:
                held.add((tid, partition))
        metadata[member.member_id] = MemberMetadataValue(
            instance_id=member.group_instance_id, rack_id=sub.rack_id, client_id=member.client_id,
            client_host=member.client_host, subscribed_topics=tuple(sorted(set(sub.topics))), subscribed_regex=None,
            rebalance_timeout_ms=member.rebalance_timeout_ms, server_assignor=None,
            classic_protocols=tuple(ClassicProtocol(p.name, p.metadata) for p in member.protocols),
            classic_session_timeout_ms=member.session_timeout_ms,
        )  # fmt: skip
        assignments[member.member_id] = MemberAssignment(member.member_id, generation, generation, MemberState.STABLE,
                                                         PartitionSet.of(held))  # fmt: skip

    records = [group_tombstone(group_id)]
    records.extend(member_metadata_record(group_id, mid, md) for mid, md in metadata.items())
    records.append(group_epoch_record(group_id, generation, op.now_ms))
    records.extend(target_member_record(group_id, mid, a.assigned) for mid, a in assignments.items())
    records.append(target_epoch_record(group_id, generation, op.now_ms))
    records.extend(current_assignment_record(group_id, a) for a in assignments.values())
    converted = ConsumerGroup(group_id)
    for record in records[1:]:
        replay_consumer_record(record, lambda _gid, _create: converted, lambda _gid: None)

    _end_classic_session(op, classic)
    for mid, md in metadata.items():
        op.schedule(consumer_session_key(group_id, mid), md.classic_session_timeout_ms)
    return converted, records


def _end_classic_session(op: Op, classic: ClassicGroup) -> None:
    """Answer what the classic group holds parked (its members rejoin the consumer group) and cancel its
    timers, as Kafka completes the join and sync futures with REBALANCE_IN_PROGRESS."""
    group_id = classic.group_id
    for member in classic.members.values():
        if member.awaiting_join is not None:
            op.respond(member.awaiting_join.token, join_error(member.awaiting_join.version, E.REBALANCE_IN_PROGRESS,
                                                              member.member_id))  # fmt: skip
            member.awaiting_join = None
        if member.awaiting_sync is not None:
            op.respond(member.awaiting_sync.token, sync_response(member.awaiting_sync.version, E.REBALANCE_IN_PROGRESS))
            member.awaiting_sync = None
        op.cancel(heartbeat_key(group_id, member.member_id))
    for pending in sorted(classic.pending_join_members):
        op.cancel(heartbeat_key(group_id, pending))
    for key in [k for k in op.ctx.pending_takeovers if k[0] == group_id]:
        taking = op.ctx.pending_takeovers.pop(key)
        op.respond(taking.parked.token, join_error(taking.version, E.REBALANCE_IN_PROGRESS, taking.member_id))
        op.cancel(takeover_key(group_id, key[1]))
    op.cancel(join_key(group_id))
    op.cancel(sync_key(group_id))


def downgrade(op: Op, group: ConsumerGroup, leaving_id: str, topics: TopicsView) -> bool:
    """If ``leaving_id`` going away leaves only classic members and the policy allows it, write the records
    that make the group a classic group of them, schedule the rebalance that follows, and say so (True);
    otherwise do nothing (False): the caller removes the member from the consumer group as usual."""
    cfg = op.ctx.config
    leaving = group.members.get(leaving_id)
    stay = [m for m in group if m.member_id != leaving_id]
    if leaving is None or leaving.metadata.uses_classic_protocol or not stay:
        return False
    if not all(m.metadata.uses_classic_protocol for m in stay):
        return False
    if not cfg.downgrade_enabled or len(stay) > cfg.max_size:
        return False
    # No state timestamp (-1) in the record: it marks the rebalance still owed, which a restart before the
    # rebalance timer fires starts when the group is loaded (`ClassicMembership.rebalance_oversized`).
    classic = _classic_group(group, [(_as_classic(m), m.assignment.holds()) for m in stay], None, topics)
    if classic is None:
        return False  # no protocol every member supports: stay a consumer group
    _write_classic(op, group, [m.member_id for m in group], classic)
    op.schedule(classic_rebalance_key(group.group_id), 0)
    return True


def downgrade_replacing(
    op: Op, group: ConsumerGroup, replaced_id: str, joiner: ClassicMember, joiner_topics: tuple[str, ...],
    joiner_epoch: int, topics: TopicsView,
) -> ClassicGroup | None:  # fmt: skip
    """Kafka's downgrade on a static member's replacement (``validateOnlineDowngradeWithReplacedMemberId``):
    a classic JoinGroup (``joiner``) has just taken the place of the static member ``replaced_id``, its
    records written but not yet replayed. If that member was the group's last ``consumer``-protocol member,
    the policy allows a downgrade and the group fits ``group.max.size``, write the records that make the group
    a classic group (the joiner in the replaced member's place, holding what it held) and return it; else None.

    Kafka converts without a rebalance, at the group epoch, each member assigned its target. We record what
    each member holds (as `downgrade` does) and convert without a rebalance only when that is the same thing:
    every other member reconciled at the group's epoch, the replaced member holding its target and nothing
    pending, the joiner subscribing to what it subscribed to and answered at the group epoch. Otherwise the
    record carries no state timestamp and a rebalance follows at once, so that no partition stays unassigned
    or held by a member that was still to give it up."""
    cfg = op.ctx.config
    replaced = group.members.get(replaced_id)
    others = [m for m in group if m.member_id != replaced_id]
    if replaced is None or replaced.metadata.uses_classic_protocol:
        return None
    if not all(m.metadata.uses_classic_protocol for m in others):
        return None
    if not cfg.downgrade_enabled or len(group.members) > cfg.max_size:
        return None
    a, md = replaced.assignment, replaced.metadata
    steady = (
        group.epoch == group.assignment_epoch == joiner_epoch
        and all(m.epoch == group.epoch and m.is_reconciled for m in others)
        and not a.pending_revocation
        and a.assigned == group.targets.get(replaced_id, NO_PARTITIONS)
        and md.subscribed_regex is None
        and tuple(sorted(set(joiner_topics))) == md.subscribed_topics
    )
    members = [(_as_classic(m), m.assignment.holds()) for m in others]
    members.append((joiner, a.holds()))
    classic = _classic_group(group, members, op.now_ms if steady else None, topics)
    if classic is None:
        return None
    _write_classic(op, group, [*(m.member_id for m in others), joiner.member_id], classic)
    if not steady:
        op.schedule(classic_rebalance_key(group.group_id), 0)
    return classic


def _as_classic(m: ConsumerMember) -> ClassicMember:
    """A classic member of a consumer group as a member of the classic group it becomes (no assignment yet)."""
    md = m.metadata
    return ClassicMember(
        member_id=m.member_id, group_instance_id=md.instance_id, client_id=md.client_id, client_host=md.client_host,
        rebalance_timeout_ms=md.rebalance_timeout_ms, session_timeout_ms=md.classic_session_timeout_ms,
        protocol_type=CONSUMER_PROTOCOL_TYPE, protocols=tuple(Protocol(p.name, p.metadata) for p in md.classic_protocols or ()),
    )  # fmt: skip


def _classic_group(
    group: ConsumerGroup, members: list[tuple[ClassicMember, PartitionSet]], state_timestamp: int | None,
    topics: TopicsView,
) -> ClassicGroup | None:  # fmt: skip
    """The classic group of ``members`` (in order: the first leads), at generation = the group epoch, each
    assigned the partitions given with it, encoded at the version of its subscription for the protocol the
    members vote for; None when no protocol is common to all of them."""
    classic = ClassicGroup(group.group_id, state_timestamp)
    for cm, _ in members:
        classic.add(cm, None)
    try:
        protocol = classic.select_protocol()
    except ValueError:
        return None
    classic.protocol_name = protocol
    classic.generation = group.epoch
    for cm, held in members:
        named = []
        for t, p in held:
            name = topics.topic_name(t) if has_topic_ids(topics) else None
            if name is not None:
                named.append((name, p))
        version = assignment_version(cm.metadata(protocol) or b"")
        cm.assignment = encode_assignment(ConsumerAssignment(tuple(sorted(named))), version)
    return classic


def _write_classic(op: Op, group: ConsumerGroup, member_ids: list[str], classic: ClassicGroup) -> None:
    """The records of a downgrade: the members' (``member_ids``, as the records written so far leave them)
    and then the consumer group's deleted, then the classic group's record; the members' consumer timers
    cancelled and their classic sessions started."""
    group_id = group.group_id
    for mid in member_ids:
        for record in member_removal_records(group_id, mid):
            op.write(record)
        for key in (consumer_session_key, consumer_rebalance_key, consumer_join_key, consumer_sync_key):
            op.cancel(key(group_id, mid))
    for record in group_records_tombstones(group):
        op.write(record)
    op.write(group_metadata_record(group_id, classic.durable_view()))
    for cm in classic.members.values():
        op.schedule(heartbeat_key(group_id, cm.member_id), cm.session_timeout_ms)
