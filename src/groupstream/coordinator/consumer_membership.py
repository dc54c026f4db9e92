"""ConsumerGroupHeartbeat: joining, heartbeating and leaving a ``consumer`` (KIP-848) group, and fencing.

One heartbeat does Kafka's three steps: (1) create or update the member, bumping the group epoch when its
subscription, or the metadata of what the group subscribes to, changed; (2) compute a new target assignment
when the group epoch is ahead of it; (3) reconcile the member towards its target (`reconcile`), revoking
before assigning. Each step adds records; nothing changes until the runtime replays them, so a refusal part
way through leaves no trace. A member that stops heartbeating for the session timeout, or that does not
revoke within its rebalance timeout, is fenced: its records are deleted and the group epoch bumped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Set
from dataclasses import dataclass, field
from typing import Any

from groupstream.assignment.registry import SERVER_ASSIGNORS
from groupstream.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerMember,
    PartitionSet,
    TopicIdPartition,
    preferred_assignor,
    to_topic_partitions,
)
from groupstream.coordinator.consumer_records import (
    current_assignment_record,
    group_epoch_record,
    member_metadata_record,
    member_removal_records,
    partition_metadata_record,
    regex_record,
    target_epoch_record,
    target_member_record,
)
from groupstream.coordinator.context import Op
from groupstream.coordinator.heartbeat_checks import HeartbeatRefused, check_epoch, owned_partitions, validate
from groupstream.coordinator.migration import Refused, downgrade, upgrade
from groupstream.coordinator.reconcile import (
    NO_PARTITIONS,
    MemberAssignment,
    MemberState,
    epochs_for,
    reconcile,
)
from groupstream.coordinator.records import group_tombstone
from groupstream.coordinator.request import ShardRequest, TopicCatalogView, TopicsView, body_as, is_catalog
from groupstream.coordinator.result import CoordinatorRecord
from groupstream.coordinator.target_assignment import (
    compute_target,
    resolve_regex,
    subscription_metadata,
)
from groupstream.coordinator.timers import (
    consumer_join_key,
    consumer_rebalance_key,
    consumer_session_key,
    consumer_sync_key,
)
from groupstream.protocol.bodies import CONSUMER_GROUP_HEARTBEAT, ConsumerGroupHeartbeatRequest
from groupstream.protocol.consumer_group_records import (
    ClassicProtocol,
    MemberMetadataValue,
    PartitionMetadataValue,
    RegexValue,
    TopicMetadata,
)
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages.consumer_group_heartbeat import LEAVE_EPOCH, STATIC_LEAVE_EPOCH

__all__ = ["CONSUMER_GROUP_HEARTBEAT", "ClassicJoin", "ConsumerMembership", "HeartbeatRefused"]

E = ErrorCode


@dataclass(frozen=True, slots=True)
class ClassicJoin:
    """A classic member's JoinGroup, run as a heartbeat (`classic_members`): what its metadata record keeps
    of it (ClassicMemberMetadata), and whether it is a static member's new process taking its id's place."""

    protocols: tuple[ClassicProtocol, ...]
    session_timeout_ms: int
    replaces_static: bool = False


_Subscription = tuple[tuple[str, ...], str | None]
_NOTHING: _Subscription = ((), None)


def _subscription(md: MemberMetadataValue | None) -> _Subscription:
    return _NOTHING if md is None else (md.subscribed_topics, md.subscribed_regex)


class _Members(Mapping[str, MemberMetadataValue]):
    """Every member's metadata as it will be once a change is replayed: the group's own, overlaid with the
    few members the change adds, updates or removes.

    A heartbeat changes at most two members, and copying all of them made every heartbeat O(members); only a
    new target assignment reads them all. Iteration follows the group's order, members added last, as a
    copy of the group's members edited in place would.
    """

    __slots__ = ("_base", "_changed")

    def __init__(self, group: ConsumerGroup) -> None:
        self._base = group.members
        self._changed: dict[str, MemberMetadataValue | None] = {}  # None: removed

    def put(self, member_id: str, md: MemberMetadataValue) -> None:
        self._changed[member_id] = md

    def remove(self, member_id: str) -> None:
        if member_id not in self:
            raise KeyError(member_id)
        self._changed[member_id] = None

    def changes(self) -> Iterator[tuple[MemberMetadataValue | None, MemberMetadataValue | None]]:
        """(before, after) of each member the change touches; None: not a member."""
        for member_id, md in self._changed.items():
            member = self._base.get(member_id)
            yield (None if member is None else member.metadata), md

    def __getitem__(self, member_id: str) -> MemberMetadataValue:
        changed = self._changed
        if member_id in changed:
            md = changed[member_id]
            if md is None:
                raise KeyError(member_id)
            return md
        return self._base[member_id].metadata

    def __iter__(self) -> Iterator[str]:
        base, changed = self._base, self._changed
        for member_id in base:
            if member_id not in changed or changed[member_id] is not None:
                yield member_id
        for member_id, md in changed.items():
            if md is not None and member_id not in base:
                yield member_id

    def __len__(self) -> int:
        n = len(self._base)
        for member_id, md in self._changed.items():
            n += (md is not None) - (member_id in self._base)
        return n


@dataclass(slots=True)
class _Change:
    """What one heartbeat (or fencing) is about to write, and the group as it will be after it."""

    group: ConsumerGroup
    members: _Members
    records: list[CoordinatorRecord] = field(default_factory=list)
    regexes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    metadata: tuple[TopicMetadata, ...] = ()
    bump: bool = False

    @classmethod
    def of(cls, group: ConsumerGroup) -> _Change:
        return cls(group, _Members(group), regexes={r: v.topics for r, v in group.regexes.items()})


def _metadata_holds(held: tuple[TopicMetadata, ...], names: Set[str], topics: TopicCatalogView) -> bool:
    """Whether ``subscription_metadata(names, topics) == held``, answered with two lookups per topic and
    nothing built: the usual answer on a heartbeat. False also when ``held`` is not in the canonical form
    (sorted by name, no racks) or some name is of no existing topic: the caller then builds and compares."""
    if len(held) != len(names):
        return False
    previous = ""
    for t in held:
        name = t.name
        if name <= previous or name not in names or t.racks:
            return False
        if topics.partition_count(name) != t.partitions or topics.topic_id(name) != t.topic_id:
            return False
        previous = name
    return True


def _topic_ids(md: MemberMetadataValue, regexes: Mapping[str, tuple[str, ...]], topics: TopicCatalogView) -> set[Any]:
    """Ids of the existing topics the member subscribes to, by name or through its regular expression."""
    names = md.subscribed_topics
    if md.subscribed_regex:
        names = (*names, *regexes.get(md.subscribed_regex, ()))
    return {topic_id for topic_id in map(topics.topic_id, names) if topic_id is not None}


def _may_assign(group: ConsumerGroup, now_ms: int, interval_ms: int) -> bool:
    """Kafka's ``canComputeNextTargetAssignment`` (KIP-1263): at most one new target assignment per interval,
    so that members arriving together cost one computation instead of one each. A group that never computed
    one (or whose time is not recorded), or that had no member left to share its partitions with, computes
    at once; until then the group stays Assigning and members reconcile against the last target."""
    last = group.assignment_timestamp_ms
    return interval_ms == 0 or last <= 0 or not group.members or now_ms >= last + interval_ms


def _member_metadata(
    body: ConsumerGroupHeartbeatRequest, req: ShardRequest, old: MemberMetadataValue, instance_id: str | None,
    regex: str | None, classic: ClassicJoin | None,
) -> MemberMetadataValue:
    """The member's metadata as this heartbeat (or classic JoinGroup) states it, ``old`` filling what it
    leaves out."""
    epoch = body.member_epoch
    return MemberMetadataValue(
        instance_id=instance_id if instance_id is not None else old.instance_id,
        rack_id=body.rack_id if body.rack_id is not None else old.rack_id,
        client_id=req.client_id,
        client_host=req.client_host,
        # A join (epoch 0: a new process, a static member's new incarnation, a fenced member coming back)
        # states the whole subscription: names without a regex means no regex, and the other way round.
        # Later heartbeats send only what changed (null: unchanged; an empty regex clears it).
        subscribed_topics=(
            tuple(sorted(set(body.subscribed_topic_names)))
            if body.subscribed_topic_names is not None
            else () if epoch == 0 else old.subscribed_topics
        ),
        subscribed_regex=(regex or None) if regex is not None else None if epoch == 0 else old.subscribed_regex,
        rebalance_timeout_ms=body.rebalance_timeout_ms if body.rebalance_timeout_ms != -1 else old.rebalance_timeout_ms,
        server_assignor=body.server_assignor if body.server_assignor is not None else old.server_assignor,
        # A classic member's JoinGroup states its protocols and session; a consumer heartbeat has none.
        classic_protocols=None if classic is None else classic.protocols,
        classic_session_timeout_ms=-1 if classic is None else classic.session_timeout_ms,
    )


class ConsumerMembership:
    # --- ConsumerGroupHeartbeat ---------------------------------------------------------------------------

    def heartbeat(self, op: Op, req: ShardRequest, metadata: TopicsView, get_group: Callable[[str], Any]) -> None:
        """``get_group(id)`` is the shard's lookup: a ConsumerGroup, a classic group, or None."""
        R = CONSUMER_GROUP_HEARTBEAT.Response
        body = body_as(CONSUMER_GROUP_HEARTBEAT, req)
        try:
            if not is_catalog(metadata):
                raise HeartbeatRefused(E.UNSUPPORTED_VERSION, "this coordinator cannot list topics")
            if self._steady(op, req, metadata, get_group):
                return
            validate(body, req.version)
            if body.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                response = self._leave(op, body, metadata, get_group(str(body.group_id)))
            else:
                response = self._heartbeat(op, req, metadata, get_group(str(body.group_id)))
        except HeartbeatRefused as e:
            response = R(throttle_time_ms=0, error_code=int(e.code), error_message=e.message, member_id=None,
                         member_epoch=0, heartbeat_interval_ms=0, assignment=None)  # fmt: skip
        op.respond(req.token, response)

    def _steady(self, op: Op, req: ShardRequest, topics: TopicCatalogView, get_group: Callable[[str], Any]) -> bool:
        """Answer the heartbeat of a member that has nothing to say in a group with nothing to tell it, and
        say whether it did; any other heartbeat takes the full path (False).

        Most heartbeats of a large group are these: a member at the group's epoch, reconciled, reporting no
        change (no subscription, no new client id), while the group's subscription metadata still holds and
        no regular expression is due. The full path would conclude the same (no record, the session renewed,
        no assignment in the answer) after building the member's metadata and the group's change; this
        checks the same conditions directly.

        The owned partitions a heartbeat may carry do not matter here: reconciling a member that is Stable
        at the target epoch returns it as it is whatever it reports (Kafka's CurrentAssignmentBuilder
        likewise), and they are not a full request without a subscription and a rebalance timeout. So a
        member acknowledging the assignment it was just given (the Java client's immediate heartbeat, one
        per member per rebalance) is answered here too, without turning its list into a set."""
        body = body_as(CONSUMER_GROUP_HEARTBEAT, req)
        epoch = body.member_epoch
        if (
            epoch <= 0
            or body.subscribed_topic_names is not None
            or getattr(body, "subscribed_topic_regex", None) is not None
            or body.rebalance_timeout_ms != -1
            or body.server_assignor is not None
            or body.rack_id is not None
        ):
            return False
        group = get_group(body.group_id)
        if not isinstance(group, ConsumerGroup):
            return False
        member_id = body.member_id
        member = group.members.get(member_id)
        if member is None:
            return False
        a, md = member.assignment, member.metadata
        instance_id = body.instance_id
        if (
            a.epoch != epoch
            or a.state is not MemberState.STABLE
            or group.epoch != epoch
            or group.assignment_epoch != epoch
            or md.client_id != req.client_id
            or md.client_host != req.client_host
            or md.classic_protocols is not None  # a classic member's metadata: this heartbeat would rewrite it
            or (instance_id is not None and (instance_id != md.instance_id or group.static_members.get(instance_id) != member_id))
            or (group.regex_subscribers and op.now_ms >= group.regex_refresh_deadline_ms)
        ):
            return False
        held = () if group.partition_metadata is None else group.partition_metadata.topics
        if not _metadata_holds(held, group.subscribed_topic_names(), topics):
            return False
        cfg = op.ctx.config
        op.schedule(consumer_session_key(group.group_id, member_id), cfg.consumer_session_timeout_ms)
        op.respond(req.token, CONSUMER_GROUP_HEARTBEAT.Response(
            throttle_time_ms=0, error_code=0, error_message=None, member_id=member_id, member_epoch=epoch,
            heartbeat_interval_ms=cfg.consumer_heartbeat_interval_ms, assignment=None))  # fmt: skip
        return True

    def classic_join(self, op: Op, req: ShardRequest, topics: TopicCatalogView, group: ConsumerGroup,
                     classic: ClassicJoin) -> Any:  # fmt: skip
        """A classic member's JoinGroup to a consumer group, ``req.body`` shaped as a joining heartbeat."""
        return self._heartbeat(op, req, topics, group, classic)

    def _heartbeat(
        self, op: Op, req: ShardRequest, topics: TopicCatalogView, found: Any, classic: ClassicJoin | None = None
    ) -> Any:
        # a ConsumerGroupHeartbeat, or a classic member's JoinGroup shaped as one (classic_join)
        body: ConsumerGroupHeartbeatRequest = req.body
        cfg = op.ctx.config
        group_id, member_id, epoch = str(body.group_id), str(body.member_id), int(body.member_epoch)
        instance_id = body.instance_id
        owned = owned_partitions(body)
        records: list[CoordinatorRecord] = []
        if isinstance(found, ConsumerGroup):
            group = found
        else:
            live = found is not None and not found.is_empty()
            if live and epoch != 0:
                raise HeartbeatRefused(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
            if epoch != 0:
                raise HeartbeatRefused(E.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
            if live:
                converted = upgrade(op, found, topics)  # a live classic group (online upgrade, `migration`)
                if isinstance(converted, Refused):
                    raise HeartbeatRefused(converted.code, converted.message)
                group, conversion = converted
                records.extend(conversion)
            else:
                if found is not None:
                    records.append(group_tombstone(group_id))  # an empty classic group becomes a consumer group
                group = ConsumerGroup(group_id)  # replaying the records registers it
        if len(group.members) >= cfg.consumer_max_size and member_id not in group.members:
            raise HeartbeatRefused(
                E.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {cfg.consumer_max_size} members.",
            )
        if not member_id:
            member_id = op.ctx.new_member_id(req.client_id)

        # 1. The member, found or created (a static member rejoining under a new id replaces its old self).
        replaced: ConsumerMember | None = None
        if instance_id is None:
            member = group.members.get(member_id)
            if epoch != 0:
                if member is None:
                    raise HeartbeatRefused(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
                check_epoch(member, epoch, owned)
        else:
            existing = group.static_member(instance_id)
            member = group.members.get(member_id)
            if epoch == 0:
                if existing is not None and existing.member_id != member_id:
                    # Kafka asks for the instance id to be released (a static leave) only between two
                    # `consumer`-protocol processes: across protocols (a rolling upgrade or rollback of static
                    # members) the new process takes the place at once, the old one being fenced.
                    released = existing.epoch == STATIC_LEAVE_EPOCH or existing.metadata.uses_classic_protocol
                    if not released and (classic is None or not classic.replaces_static):
                        raise HeartbeatRefused(
                            E.UNRELEASED_INSTANCE_ID,
                            f"Static member {member_id} with instance id {instance_id} cannot join the group because "
                            f"the instance id is owned by {existing.member_id} member.",
                        )
                    replaced = existing
            else:
                if existing is None:
                    raise HeartbeatRefused(E.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
                if existing.member_id != member_id:
                    raise HeartbeatRefused(
                        E.FENCED_INSTANCE_ID,
                        f"Static member {member_id} with instance id {instance_id} was fenced by member "
                        f"{existing.member_id}.",
                    )
                member = existing
                check_epoch(member, epoch, owned)
        is_new = member is None
        if member is None:
            member = ConsumerMember(member_id)
            if replaced is not None:
                member.metadata = replaced.metadata
                kept = replaced.assignment.assigned
                member.assignment = MemberAssignment(member_id, 0, 0, MemberState.STABLE, kept,
                                                     partition_epochs=epochs_for(replaced.assignment, kept, 0))  # fmt: skip

        change = _Change.of(group)
        change.records = records
        if replaced is not None:
            records.extend(member_removal_records(group_id, replaced.member_id))
            change.members.remove(replaced.member_id)
            op.cancel(consumer_session_key(group_id, replaced.member_id))
            op.cancel(consumer_rebalance_key(group_id, replaced.member_id))

        old = member.metadata
        regex = getattr(body, "subscribed_topic_regex", None)
        if (
            epoch != 0
            and classic is None
            and body.subscribed_topic_names is None
            and regex is None
            and body.rebalance_timeout_ms == -1
            and body.server_assignor is None
            and body.rack_id is None
            and (instance_id is None or instance_id == old.instance_id)
            and req.client_id == old.client_id
            and req.client_host == old.client_host
            and old.classic_protocols is None
            and old.classic_session_timeout_ms == -1
        ):
            md = old  # a heartbeat stating nothing new: built below, it would equal the metadata as it is
        else:
            md = _member_metadata(body, req, old, instance_id, regex, classic)
        if is_new or md != old:
            records.append(member_metadata_record(group_id, member_id, md))
        change.members.put(member_id, md)
        change.bump = (
            group.epoch == 0
            or (is_new and replaced is None)
            or (md.subscribed_topics, md.subscribed_regex) != (old.subscribed_topics, old.subscribed_regex)
        )
        self._update_subscriptions(op, change, topics)

        group_epoch = group.epoch + 1 if change.bump else group.epoch
        if change.bump:
            creation = group.creation_time_ms if group.creation_time_ms >= 0 else op.now_ms
            records.append(group_epoch_record(group_id, group_epoch, creation))

        # 2. The target assignment, when the group epoch moved past it.
        targets: Mapping[str, PartitionSet] = group.targets
        if replaced is not None:  # the new incarnation inherits the target (a copy: the group's is read-only)
            moved = dict(targets)
            moved[member_id] = moved.pop(replaced.member_id, NO_PARTITIONS)
            targets = moved
        if group_epoch > group.assignment_epoch and _may_assign(group, op.now_ms, cfg.consumer_assignment_interval_ms):
            assignor = SERVER_ASSIGNORS[preferred_assignor(change.members.values())]
            new_targets = compute_target(assignor, change.members, targets, change.regexes, change.metadata)
            held_targets = group.targets
            for mid in sorted(new_targets):
                new, old_target = new_targets[mid], held_targets.get(mid)
                # Only the members whose target changed get a record (an unchanged target is usually the
                # very same set: no element-by-element comparison).
                if old_target is None or (new is not old_target and new != old_target) or mid == member_id:
                    records.append(target_member_record(group_id, mid, new))
            records.append(target_epoch_record(group_id, group_epoch, op.now_ms))
            target_epoch, target = group_epoch, new_targets.get(member_id, NO_PARTITIONS)
        else:
            target_epoch, target = group.assignment_epoch, targets.get(member_id, NO_PARTITIONS)
            if replaced is not None:
                records.append(target_member_record(group_id, member_id, target))

        # 3. Reconcile: revoke first, then take what the previous owners released.
        replaced_id = None if replaced is None else replaced.member_id
        group_owner_of = group.owner_of

        def replacing_owner_of(p: TopicIdPartition) -> str | None:
            owner = group_owner_of(p)
            return member_id if owner is not None and owner == replaced_id else owner

        # The owners index itself answers (a whole set at once) unless a static member's old incarnation is
        # being replaced. Nobody holds anything (a group's first member): no question to ask.
        owner_of: Callable[[TopicIdPartition], str | None] | None = (
            None if not group.has_owners() else group_owner_of if replaced_id is None else replacing_owner_of
        )
        held_elsewhere = group.held_elsewhere if replaced_id is None else None

        current = member.assignment
        subscribed_ids = _topic_ids(md, change.regexes, topics)
        updated = reconcile(current, target_epoch, target, owned, owner_of, epoch, subscribed_ids.__contains__,
                            held_elsewhere=held_elsewhere)  # fmt: skip
        if is_new or updated != current:
            records.append(current_assignment_record(group_id, updated))
        rebalance_key = consumer_rebalance_key(group_id, member_id)
        if updated.state is MemberState.UNREVOKED_PARTITIONS:
            if current.state is not MemberState.UNREVOKED_PARTITIONS or rebalance_key not in op.ctx.deadlines:
                op.schedule(rebalance_key, max(md.rebalance_timeout_ms, 0))
        else:
            op.cancel(rebalance_key)
        op.schedule(consumer_session_key(group_id, member_id),
                    cfg.consumer_session_timeout_ms if classic is None else classic.session_timeout_ms)  # fmt: skip
        for record in records:
            op.write(record)

        R = CONSUMER_GROUP_HEARTBEAT.Response
        full = epoch == 0 or (
            body.rebalance_timeout_ms != -1 and body.subscribed_topic_names is not None and owned is not None
        )
        assignment = None
        if full or updated.assigned != current.assigned:
            assignment = R.Assignment(topic_partitions=[
                R.Assignment.TopicPartitions(topic_id=t.topic_id, partitions=list(t.partitions))
                for t in to_topic_partitions(updated.assigned)])  # fmt: skip
        return R(throttle_time_ms=0, error_code=0, error_message=None, member_id=member_id,
                 member_epoch=updated.epoch, heartbeat_interval_ms=cfg.consumer_heartbeat_interval_ms,
                 assignment=assignment)  # fmt: skip

    def _update_subscriptions(self, op: Op, change: _Change, topics: TopicCatalogView) -> None:
        """Resolve new (and, on schedule, all) regular expressions, retire unused ones, and write the
        partition metadata when the subscribed topics or their partition counts changed.

        What the members subscribe to comes from the group's subscriber counts, corrected for the members
        the change touches, never from a pass over every member: this runs on every heartbeat. Only the
        partition counts and ids of the subscribed topics are looked up each time, to notice topics created,
        deleted or grown."""
        group = change.group
        topic_counts, regex_counts = group.topic_subscribers, group.regex_subscribers
        changes = change.members.changes()
        moved = [(old, new) for old, new in changes if _subscription(old) != _subscription(new)]
        if moved:
            topic_counts, regex_counts = topic_counts.copy(), regex_counts.copy()
            for old, new in moved:
                for sub, n in ((_subscription(old), -1), (_subscription(new), 1)):
                    for topic in sub[0]:
                        topic_counts[topic] += n
                    if sub[1]:
                        regex_counts[sub[1]] += n
        in_use = {regex for regex, n in regex_counts.items() if n > 0}
        refresh = op.now_ms >= group.regex_refresh_deadline_ms
        regexes_changed = False
        for regex in sorted(in_use):
            if regex in group.regexes and not refresh:
                continue
            resolved = resolve_regex(regex, topics)
            if regex not in group.regexes or group.regexes[regex].topics != resolved:
                change.records.append(regex_record(group.group_id, regex, RegexValue(resolved, group.epoch, op.now_ms)))
                change.regexes[regex] = resolved
                regexes_changed = True
        if refresh and in_use:
            group.regex_refresh_deadline_ms = op.now_ms + op.ctx.config.consumer_regex_refresh_interval_ms
        for regex in sorted(set(group.regexes) - in_use):
            change.records.append(regex_record(group.group_id, regex, None))
            del change.regexes[regex]
            regexes_changed = True
        names: Set[str]
        if moved or regexes_changed:
            found = {topic for topic, n in topic_counts.items() if n > 0}
            for regex in in_use:
                found.update(change.regexes.get(regex, ()))
            names = found
        else:
            names = group.subscribed_topic_names()  # the members' and regexes' as replayed: unchanged
        held = () if group.partition_metadata is None else group.partition_metadata.topics
        if _metadata_holds(held, names, topics):
            change.metadata = held
            return
        wanted = subscription_metadata(names, topics)
        if wanted != held:
            change.records.append(partition_metadata_record(group.group_id, PartitionMetadataValue(group.epoch, wanted)))
            change.bump = True
        change.metadata = wanted

    # --- leaving and fencing --------------------------------------------------------------------------------

    def _leave(self, op: Op, body: Any, topics: TopicCatalogView, found: Any) -> Any:
        group_id, member_id, epoch = str(body.group_id), str(body.member_id), int(body.member_epoch)
        if not isinstance(found, ConsumerGroup):
            raise HeartbeatRefused(E.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
        group = found
        if body.instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise HeartbeatRefused(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
        else:
            member = group.static_member(body.instance_id)
            if member is None:
                raise HeartbeatRefused(E.UNKNOWN_MEMBER_ID, f"Instance id {body.instance_id} is unknown.")
            if member.member_id != member_id:
                raise HeartbeatRefused(
                    E.FENCED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {body.instance_id} was fenced by member "
                    f"{member.member_id}.",
                )
        if epoch == STATIC_LEAVE_EPOCH:
            # Gone for now: the member keeps its partitions (nobody else gets them) until its session ends.
            a = member.assignment
            op.write(current_assignment_record(
                group_id, MemberAssignment(a.member_id, STATIC_LEAVE_EPOCH, a.epoch, a.state, a.assigned,
                                           partition_epochs=epochs_for(a, a.assigned, a.epoch, omit=0))))  # fmt: skip
            op.cancel(consumer_rebalance_key(group_id, member.member_id))
        else:
            self.fence(op, group, member.member_id, topics)
        R = CONSUMER_GROUP_HEARTBEAT.Response
        return R(throttle_time_ms=0, error_code=0, error_message=None, member_id=member_id, member_epoch=epoch,
                 heartbeat_interval_ms=0, assignment=None)  # fmt: skip

    def fence(self, op: Op, group: ConsumerGroup, member_id: str, topics: TopicsView) -> None:
        """Remove the member for good and bump the group epoch, so that the others get its partitions; or,
        when only classic members stay and the policy allows, make the group a classic one (`migration`)."""
        if downgrade(op, group, member_id, topics):
            return
        change = _Change.of(group)
        change.records.extend(member_removal_records(group.group_id, member_id))
        change.members.remove(member_id)
        if is_catalog(topics):
            self._update_subscriptions(op, change, topics)
        change.records.append(group_epoch_record(group.group_id, group.epoch + 1, group.creation_time_ms))
        if not change.members:
            # The last member is gone: an empty group's target assignment is the (empty) one of its epoch,
            # so its assignment epoch catches up (Kafka 4.4, KAFKA-20442: ConsumerGroupDescribe shows both
            # epochs equal for an empty group).
            change.records.append(target_epoch_record(group.group_id, group.epoch + 1, op.now_ms))
        for record in change.records:
            op.write(record)
        op.cancel(consumer_session_key(group.group_id, member_id))
        op.cancel(consumer_rebalance_key(group.group_id, member_id))
        op.cancel(consumer_join_key(group.group_id, member_id))  # a classic member's (`classic_members`)
        op.cancel(consumer_sync_key(group.group_id, member_id))

    # --- timers -----------------------------------------------------------------------------------------------

    def on_loaded(self, op: Op, group: ConsumerGroup) -> None:
        """The group was loaded from the log: every member gets a fresh session, and a member that was
        revoking partitions a fresh rebalance timeout (timers are not in the log; without it, a member that
        never reports the revocation would keep the partitions, and the group Reconciling, for ever)."""
        session_ms = op.ctx.config.consumer_session_timeout_ms
        for member_id in sorted(group.members):
            member = group.members[member_id]
            md = member.metadata
            op.schedule(consumer_session_key(group.group_id, member_id),
                        md.classic_session_timeout_ms if md.uses_classic_protocol else session_ms)  # fmt: skip
            revoking = member.assignment.state is MemberState.UNREVOKED_PARTITIONS
            if revoking and member.epoch != STATIC_LEAVE_EPOCH:
                rebalance_ms = max(member.metadata.rebalance_timeout_ms, 0)
                op.schedule(consumer_rebalance_key(group.group_id, member_id), rebalance_ms)

    def on_session_expired(self, op: Op, group: ConsumerGroup | None, member_id: str, topics: TopicsView) -> None:
        if group is not None and member_id in group.members:
            self.fence(op, group, member_id, topics)

    def on_rebalance_expired(self, op: Op, group: ConsumerGroup | None, member_id: str, topics: TopicsView) -> None:
        member = None if group is None else group.members.get(member_id)
        if group is not None and member is not None and member.assignment.state is MemberState.UNREVOKED_PARTITIONS:
            self.fence(op, group, member_id, topics)
