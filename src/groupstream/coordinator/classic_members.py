"""Classic members (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) of a ``consumer`` (KIP-848) group.

After an online upgrade (`migration`), and during a rolling upgrade in general, a consumer group holds members
that still speak the classic protocol. The coordinator serves them from the consumer group's own state, as
Kafka 4 does, so that the server assignor decides for everyone and a partition never has two owners:

- JoinGroup is the classic member's full heartbeat: its subscription (the embedded ``consumer`` protocol
  metadata, the same in every protocol it offers) and what it owns (the subscription's owned partitions) go
  through the same create-or-update, target and reconcile steps as a ConsumerGroupHeartbeat at epoch 0. The
  answer's generation is the member's epoch; nobody is leader (the assignment is the server's) and the
  protocol is the member's first. A new dynamic member (v4+) first gets MEMBER_ID_REQUIRED with its id; a
  static member that comes back under a new id takes its instance id's place.
- SyncGroup delivers the member's current assignment (revocations first, then what was released) encoded at
  its protocol's version, unless the group moved past the member's epoch: then REBALANCE_IN_PROGRESS.
- Heartbeat renews the session (the member's own classic session timeout) and answers REBALANCE_IN_PROGRESS
  when the member must rejoin: the group epoch is ahead of it, it has partitions to revoke, or partitions it
  waits for were released. That is how a classic member learns of revocations: it revokes, rejoins, syncs.
- LeaveGroup removes the member and bumps the group epoch.

A classic member told to rejoin must do so within its rebalance timeout, and one that joined must sync within
it, or it is fenced (Kafka's join and sync timeouts): otherwise a member that keeps heartbeating but never
rejoins would hold partitions others wait for, for ever.

Errors are Kafka's: a member unknown to the group or one using the consumer protocol is UNKNOWN_MEMBER_ID; a
static id owned by another member id is FENCED_INSTANCE_ID; a generation other than the member's epoch is
ILLEGAL_GENERATION; a protocol type or name the group does not use is INCONSISTENT_GROUP_PROTOCOL.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from groupstream.coordinator.classic_group import ClassicMember, Protocol
from groupstream.coordinator.consumer_admin import assignment_version
from groupstream.coordinator.consumer_group import ConsumerGroup, ConsumerMember
from groupstream.coordinator.consumer_membership import ClassicJoin, ConsumerMembership, HeartbeatRefused
from groupstream.coordinator.context import Op
from groupstream.coordinator.migration import downgrade_replacing
from groupstream.coordinator.reconcile import NO_PARTITIONS, MemberState
from groupstream.coordinator.request import ShardRequest, TopicsView, body_as, is_catalog
from groupstream.coordinator.responses import (
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    SYNC_GROUP,
    heartbeat_response,
    join_error,
    join_response,
    sync_response,
)
from groupstream.coordinator.timers import consumer_join_key, consumer_session_key, consumer_sync_key
from groupstream.protocol.consumer_group_records import ClassicProtocol, TopicPartitions
from groupstream.protocol.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    ConsumerAssignment,
    decode_subscription,
    encode_assignment,
)
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.errors import PeerProtocolError

__all__ = ["ClassicMembers", "supports_protocols"]

E = ErrorCode
_KNOWN_MEMBER_ID_FROM = 4  # JoinGroup v4+: a dynamic member without an id is sent one (MEMBER_ID_REQUIRED)


class _Refused(Exception):
    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.name)
        self.code = code


def supports_protocols(group: ConsumerGroup, protocol_type: str, names: set[str]) -> bool:
    """Kafka's ``supportsClassicProtocols``: the type is ``consumer`` and, when the group has classic
    members, one offered protocol is supported by every one of them."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE or not names:
        return False
    common: set[str] | None = None
    for m in group:
        protocols = m.metadata.classic_protocols
        if protocols is not None:
            own = {p.name for p in protocols}
            common = own if common is None else common & own
    return common is None or bool(common & names)


def _classic_member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember:
    """The member a classic request names, checked as Kafka's ``validateConsumerGroupMember`` and
    ``throwIfMemberDoesNotUseClassicProtocol`` do."""
    if instance_id is None:
        member = group.members.get(member_id)
    else:
        member = group.static_member(instance_id)
        if member is not None and member.member_id != member_id:
            raise _Refused(E.FENCED_INSTANCE_ID)
    if member is None or not member.metadata.uses_classic_protocol:
        raise _Refused(E.UNKNOWN_MEMBER_ID)
    return member


def _rebalancing(group: ConsumerGroup, member: ConsumerMember) -> bool:
    """Whether the member must rejoin: the group epoch moved past it (unless it is revoking: it rejoins
    once that is done), it has partitions to revoke, or partitions it waits for are free now."""
    a = member.assignment
    if a.state is MemberState.UNREVOKED_PARTITIONS:
        return True
    if group.epoch > a.epoch:
        return True
    if a.state is MemberState.UNRELEASED_PARTITIONS:
        target = group.targets.get(member.member_id, NO_PARTITIONS)
        waiting = any(group.owners.get(p) not in (None, member.member_id) for p in target - a.assigned)
        return not waiting
    return False


class ClassicMembers:
    def __init__(self, consumer_membership: ConsumerMembership) -> None:
        self._cm = consumer_membership

    def handle(self, op: Op, req: ShardRequest, group: ConsumerGroup, metadata: TopicsView) -> None:
        key = req.api_key
        if key == JOIN_GROUP.key:
            self._join(op, req, group, metadata)
        elif key == SYNC_GROUP.key:
            self._sync(op, req, group, metadata)
        elif key == HEARTBEAT.key:
            self._heartbeat(op, req, group)
        else:
            self._leave(op, req, group, metadata)

    # --- JoinGroup ----------------------------------------------------------------------------------------

    def _join(self, op: Op, req: ShardRequest, group: ConsumerGroup, topics: TopicsView) -> None:
        body, version, cfg = body_as(JOIN_GROUP, req), req.version, op.ctx.config
        member_id = str(body.member_id)
        instance_id = body.group_instance_id if version >= 5 else None
        protocols = tuple(ClassicProtocol(str(p.name), bytes(p.metadata)) for p in body.protocols)

        def refuse(code: ErrorCode, mid: str = member_id) -> None:
            op.respond(req.token, join_error(version, code, mid))

        if not is_catalog(topics):
            refuse(E.COORDINATOR_NOT_AVAILABLE)
            return
        if not cfg.min_session_timeout_ms <= body.session_timeout_ms <= cfg.max_session_timeout_ms:
            refuse(E.INVALID_SESSION_TIMEOUT)
            return
        unknown = not member_id
        if unknown:
            member_id = op.ctx.new_member_id(instance_id or req.client_id)
        if member_id not in group.members and len(group.members) >= cfg.consumer_max_size:
            refuse(E.GROUP_MAX_SIZE_REACHED)
            return
        if not supports_protocols(group, str(body.protocol_type), {p.name for p in protocols}):
            refuse(E.INCONSISTENT_GROUP_PROTOCOL)
            return
        if unknown and instance_id is None and version >= _KNOWN_MEMBER_ID_FROM:
            refuse(E.MEMBER_ID_REQUIRED, member_id)
            return
        replaces_static: ConsumerMember | None = None
        if instance_id is None:
            existing = group.members.get(member_id)
            if existing is not None and not existing.metadata.uses_classic_protocol:
                refuse(E.UNKNOWN_MEMBER_ID)
                return
        else:
            static = group.static_member(instance_id)
            if static is not None and static.member_id != member_id:
                if not unknown:
                    refuse(E.FENCED_INSTANCE_ID)
                    return
                replaces_static = static  # a new process of the static member: it takes the id's place
        try:
            sub = decode_subscription(protocols[0].metadata)
        except PeerProtocolError:
            refuse(E.INCONSISTENT_GROUP_PROTOCOL)
            return
        owned: dict[Any, list[int]] = {}
        for topic, partition in sub.owned_partitions:
            tid = topics.topic_id(topic)
            if tid is not None:
                owned.setdefault(tid, []).append(partition)
        rebalance_ms = body.rebalance_timeout_ms if version >= 1 and body.rebalance_timeout_ms > 0 else body.session_timeout_ms
        as_heartbeat = SimpleNamespace(
            group_id=group.group_id, member_id=member_id, member_epoch=0, instance_id=instance_id,
            rack_id=sub.rack_id or None, rebalance_timeout_ms=rebalance_ms,
            subscribed_topic_names=list(sub.topics), subscribed_topic_regex=None, server_assignor=None,
            topic_partitions=[TopicPartitions(t, tuple(sorted(ps))) for t, ps in owned.items()],
        )  # fmt: skip
        classic = ClassicJoin(protocols, int(body.session_timeout_ms), replaces_static is not None)
        try:
            answer = self._cm.classic_join(op, replace(req, body=as_heartbeat), topics, group, classic)
        except HeartbeatRefused as e:
            refuse(e.code)
            return
        op.cancel(consumer_join_key(group.group_id, member_id))
        generation, protocol_name = answer.member_epoch, protocols[0].name
        downgraded = None
        if replaces_static is not None:
            # The group's last `consumer`-protocol member may just have been replaced (Kafka's downgrade on
            # static replacement): then the group is a classic one from here on, and the answer its generation.
            joiner = ClassicMember(
                member_id=member_id, group_instance_id=instance_id, client_id=req.client_id,
                client_host=req.client_host, rebalance_timeout_ms=rebalance_ms,
                session_timeout_ms=int(body.session_timeout_ms), protocol_type=CONSUMER_PROTOCOL_TYPE,
                protocols=tuple(Protocol(p.name, p.metadata) for p in protocols),
            )  # fmt: skip
            downgraded = downgrade_replacing(op, group, replaces_static.member_id, joiner, tuple(sub.topics),
                                             answer.member_epoch, topics)  # fmt: skip
        if downgraded is None:
            op.schedule(consumer_sync_key(group.group_id, member_id), rebalance_ms)
        else:
            generation, protocol_name = downgraded.generation, downgraded.protocol_name or protocol_name
        op.respond(req.token, join_response(
            version, member_id=member_id, generation=generation, protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=protocol_name, leader="", members=()))  # fmt: skip

    # --- SyncGroup ----------------------------------------------------------------------------------------

    def _sync(self, op: Op, req: ShardRequest, group: ConsumerGroup, topics: TopicsView) -> None:
        body, version = body_as(SYNC_GROUP, req), req.version
        try:
            member = _classic_member(group, str(body.member_id), body.group_instance_id if version >= 3 else None)
            if body.generation_id != member.epoch:
                raise _Refused(E.ILLEGAL_GENERATION)
            protocols = member.metadata.classic_protocols or ()
            name = protocols[0].name if protocols else None
            protocol_type = getattr(body, "protocol_type", None)
            protocol_name = getattr(body, "protocol_name", None)
            if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or (
                protocol_name is not None and protocol_name != name
            ):
                raise _Refused(E.INCONSISTENT_GROUP_PROTOCOL)
            if group.epoch > member.epoch and member.assignment.state is not MemberState.UNREVOKED_PARTITIONS:
                raise _Refused(E.REBALANCE_IN_PROGRESS)
        except _Refused as e:
            op.respond(req.token, sync_response(version, e.code))
            return
        named = []
        if is_catalog(topics):
            for t, p in member.assignment.assigned:
                topic = topics.topic_name(t)
                if topic is not None:
                    named.append((topic, p))
        # Encoded at the version of the member's subscription, as Kafka does (capped to what we can write).
        at = assignment_version(protocols[0].metadata) if protocols else 0
        encoded = encode_assignment(ConsumerAssignment(tuple(sorted(named))), at)
        op.schedule(consumer_session_key(group.group_id, member.member_id), member.metadata.classic_session_timeout_ms)
        op.cancel(consumer_sync_key(group.group_id, member.member_id))
        op.respond(req.token, sync_response(version, E.NONE, encoded, CONSUMER_PROTOCOL_TYPE, name))

    # --- Heartbeat ----------------------------------------------------------------------------------------

    def _heartbeat(self, op: Op, req: ShardRequest, group: ConsumerGroup) -> None:
        body = body_as(HEARTBEAT, req)
        try:
            member = _classic_member(group, str(body.member_id), body.group_instance_id if req.version >= 3 else None)
            if body.generation_id != member.epoch:
                raise _Refused(E.ILLEGAL_GENERATION)
        except _Refused as e:
            op.respond(req.token, heartbeat_response(e.code))
            return
        op.schedule(consumer_session_key(group.group_id, member.member_id), member.metadata.classic_session_timeout_ms)
        rejoin = _rebalancing(group, member)
        join_key = consumer_join_key(group.group_id, member.member_id)
        if rejoin and join_key not in op.ctx.deadlines:
            op.schedule(join_key, max(member.metadata.rebalance_timeout_ms, 0))
        op.respond(req.token, heartbeat_response(E.REBALANCE_IN_PROGRESS if rejoin else E.NONE))

    # --- LeaveGroup ---------------------------------------------------------------------------------------

    def _leave(self, op: Op, req: ShardRequest, group: ConsumerGroup, topics: TopicsView) -> None:
        body, version = body_as(LEAVE_GROUP, req), req.version
        R = LEAVE_GROUP.Response
        identities = [(str(body.member_id), None)] if version < 3 else [
            (str(m.member_id), m.group_instance_id) for m in body.members]  # fmt: skip
        answers = []
        gone: set[str] = set()
        for member_id, instance_id in identities:
            try:
                if instance_id is None:
                    member = _classic_member(group, member_id, None)
                else:
                    static = group.static_member(instance_id)
                    if static is None:
                        raise _Refused(E.UNKNOWN_MEMBER_ID)
                    # An admin may remove a static member by instance id alone (no member id).
                    member = _classic_member(group, member_id or static.member_id, instance_id)
                if member.member_id not in gone:
                    self._cm.fence(op, group, member.member_id, topics)
                    op.cancel(consumer_join_key(group.group_id, member.member_id))
                    op.cancel(consumer_sync_key(group.group_id, member.member_id))
                    gone.add(member.member_id)
                answers.append(R.MemberResponse(member_id=member.member_id, group_instance_id=instance_id, error_code=0))
            except _Refused as e:
                answers.append(R.MemberResponse(member_id=member_id, group_instance_id=instance_id, error_code=int(e.code)))
        if version < 3:
            op.respond(req.token, R(throttle_time_ms=0, error_code=answers[0].error_code, members=[]))
        else:
            op.respond(req.token, R(throttle_time_ms=0, error_code=0, members=answers))
