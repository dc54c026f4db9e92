"""One `__consumer_offsets` partition's coordinator: classic and consumer groups and their committed offsets.

A pure state machine driven by its runtime (one writer per partition):

- ``handle(request, now_ms, metadata)`` and ``on_timer(key, now_ms, metadata)`` return a `CoordinatorResult`:
  records to append, responses (to this request or to requests parked earlier), timer operations.
- The runtime appends the records, calls ``replay(record)`` for each, and sends the responses once the records
  are durable. It must replay a result's records before it calls ``handle`` or ``on_timer`` again; if an
  append fails, the shard's memory is ahead of its log, and the runtime must unload the shard and load it
  afresh from the log (the way Kafka reverts its in-memory snapshot).
- Loading is the same ``replay`` over the partition, then ``on_loaded(now_ms)``; ``unload()`` returns every
  parked request, which the runtime answers with NOT_COORDINATOR.

What is durable and what is not:

- Durable, changed only by ``replay``: committed offsets, and each group's GroupMetadata (generation, protocol
  type and name, leader, members with subscription, timeouts and assignment); tombstones delete. A shard
  that replays the same records holds the same durable state (``durable_state()``), and a group at rest
  (Stable or Empty) shows exactly its last record.
- Session, changed by handlers as in Kafka's classic coordinator and lost on restart: parked JoinGroup and
  SyncGroup requests, timer deadlines, members that were given an id but have not joined, and, while a
  rebalance runs, the membership, leader and generation being formed. The record that ends the rebalance
  (the leader's SyncGroup, or an empty group's next generation) makes them durable; until then a restart
  loads the group as it last was, and its members rejoin, exactly as with Kafka.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from groupstream.coordinator.admin import GroupAdmin
from groupstream.coordinator.classic_group import ClassicGroup, GroupState
from groupstream.coordinator.classic_members import ClassicMembers
from groupstream.coordinator.config import GroupCoordinatorConfig
from groupstream.coordinator.consumer_admin import ConsumerGroupAdmin
from groupstream.coordinator.consumer_group import ConsumerGroup, ConsumerGroupSnapshot
from groupstream.coordinator.consumer_membership import ConsumerMembership
from groupstream.coordinator.consumer_records import (
    group_records_tombstones,
    is_consumer_group_record,
    replay_consumer_record,
)
from groupstream.coordinator.context import Op, ShardContext
from groupstream.coordinator.membership import ClassicMembership
from groupstream.coordinator.offset_handlers import OffsetHandlers
from groupstream.coordinator.offsets import OffsetAndMetadata, TransactionalRecord, TransactionMarker
from groupstream.coordinator.records import offset_tombstone
from groupstream.coordinator.request import ShardRequest, TopicsView
from groupstream.coordinator.result import CoordinatorRecord, CoordinatorResult, RequestToken
from groupstream.coordinator.timers import (
    RETENTION_KEY,
    TimerKind,
    heartbeat_key,
    parse_key,
)
from groupstream.protocol.group_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    UnknownRecordKey,
)

__all__ = ["SUPPORTED_API_KEYS", "DurableState", "GroupCoordinatorShard"]

JOIN_GROUP, SYNC_GROUP, HEARTBEAT, LEAVE_GROUP = 11, 14, 12, 13
OFFSET_COMMIT, OFFSET_FETCH, OFFSET_DELETE, TXN_OFFSET_COMMIT = 8, 9, 47, 28
DELETE_GROUPS, DESCRIBE_GROUPS, LIST_GROUPS = 42, 15, 16
CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 68, 69

SUPPORTED_API_KEYS = frozenset(
    {JOIN_GROUP, SYNC_GROUP, HEARTBEAT, LEAVE_GROUP, OFFSET_COMMIT, OFFSET_FETCH, OFFSET_DELETE, TXN_OFFSET_COMMIT}
    | {DELETE_GROUPS, DESCRIBE_GROUPS, LIST_GROUPS, CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE}
)
_CLASSIC_MEMBERSHIP_APIS = frozenset({JOIN_GROUP, SYNC_GROUP, HEARTBEAT, LEAVE_GROUP})


@dataclass(frozen=True, slots=True)
class DurableState:
    """What survives a restart: each logged group's last GroupMetadata (None for a group known only by its
    offsets) and every committed offset."""

    groups: Mapping[str, GroupMetadataValue | None]
    offsets: Mapping[tuple[str, str, int], OffsetAndMetadata]
    consumer_groups: Mapping[str, ConsumerGroupSnapshot] = field(default_factory=dict)


class GroupCoordinatorShard:
    def __init__(
        self, partition: int, config: GroupCoordinatorConfig, new_member_id: Callable[[str], str]
    ) -> None:
        """``new_member_id(prefix)`` returns a fresh, unique member id for a member whose client id (or group
        instance id, for static members) is ``prefix``; Kafka's form is ``prefix + "-" + uuid4``."""
        self._ctx = ShardContext(partition, config, new_member_id)
        self._membership = ClassicMembership()
        self._consumer_membership = ConsumerMembership()
        self._classic_members = ClassicMembers(self._consumer_membership)
        self._consumer_admin = ConsumerGroupAdmin()
        self._offsets = OffsetHandlers()
        self._admin = GroupAdmin()
        # Until on_loaded: replay is loading the log, so consumer groups keep only each member's last
        # current-assignment record (see ConsumerGroup.defer_assignments).
        self._loading = True

    @property
    def partition(self) -> int:
        return self._ctx.partition

    @property
    def config(self) -> GroupCoordinatorConfig:
        return self._ctx.config

    # --- the runtime's interface -----------------------------------------------------------------------

    def replay(self, record: CoordinatorRecord | TransactionalRecord | TransactionMarker) -> None:
        """Apply one record; the only code that changes durable state. Record types this shard does not
        handle (newer ones, or ones another kind of group owns) are skipped. Offsets written in a transaction
        stay pending until its marker: COMMIT replays them as commits, ABORT drops them."""
        if isinstance(record, TransactionalRecord):
            inner = record.record
            if isinstance(inner.key, OffsetCommitKey):
                value = inner.value
                offset = OffsetAndMetadata.from_value(value) if isinstance(value, OffsetCommitValue) else None
                self._ctx.offsets.put_pending(record.producer_id, inner.key.group, inner.key.topic,
                                              inner.key.partition, offset)  # fmt: skip
            return
        if isinstance(record, TransactionMarker):
            ended = self._ctx.offsets.end_transaction(record.producer_id)
            if record.commit:
                for (group, topic, partition), offset in sorted(ended.items()):
                    self._replay_offset(OffsetCommitKey(group, topic, partition),
                                        None if offset is None else offset.to_value())  # fmt: skip
            return
        key = record.key
        if isinstance(key, UnknownRecordKey):
            return
        if is_consumer_group_record(record):
            replay_consumer_record(record, self._consumer_group_for_replay, self._delete_consumer_group)
        elif isinstance(key, OffsetCommitKey):
            self._replay_offset(key, record.value)
        elif isinstance(key, GroupMetadataKey):
            self._replay_group(key.group, record.value)

    def _replay_offset(self, key: OffsetCommitKey, value: object) -> None:
        store = self._ctx.offsets
        if value is None:
            store.remove(key.group, key.topic, key.partition)
            return
        assert isinstance(value, OffsetCommitValue)
        group = self._ctx.groups.get(key.group)
        if group is None and key.group not in self._ctx.consumer_groups:
            # Offsets without group metadata: a simple (assign-mode) consumer's group, empty and protocol-less.
            group = self._ctx.groups[key.group] = ClassicGroup(key.group)
        if group is not None:
            group.in_log = True
        store.put(key.group, key.topic, key.partition, OffsetAndMetadata.from_value(value))

    def _replay_group(self, group_id: str, value: object) -> None:
        if value is None:
            group = self._ctx.groups.pop(group_id, None)
            if group is not None:
                group.transition_to(GroupState.DEAD, group.state_timestamp)
            return
        assert isinstance(value, GroupMetadataValue)
        group = self._ctx.groups.get(group_id)
        if group is None:
            group = self._ctx.groups[group_id] = ClassicGroup(group_id)
        group.apply_record(value)

    def _consumer_group_for_replay(self, group_id: str, create: bool) -> ConsumerGroup | None:
        group = self._ctx.consumer_groups.get(group_id)
        if group is None and create:
            classic = self._ctx.groups.pop(group_id, None)  # an empty classic group that became a consumer group
            if classic is not None:
                classic.transition_to(GroupState.DEAD, classic.state_timestamp)
            group = self._ctx.consumer_groups[group_id] = ConsumerGroup(group_id)
            if self._loading:
                group.defer_assignments()
        return group

    def _flush_consumer_groups(self) -> None:
        for group in self._ctx.consumer_groups.values():
            group.flush_assignments()

    def _delete_consumer_group(self, group_id: str) -> None:
        group = self._ctx.consumer_groups.pop(group_id, None)
        if group is not None:
            group.mark_dead()

    def _any_group(self, group_id: str) -> ClassicGroup | ConsumerGroup | None:
        return self._ctx.consumer_groups.get(group_id) or self._ctx.groups.get(group_id)

    def handle(self, request: ShardRequest, now_ms: int, metadata: TopicsView) -> CoordinatorResult:
        op = Op(self._ctx, now_ms)
        key = request.api_key
        consumer_group = self._ctx.consumer_groups.get(str(request.body.group_id)) if key in _CLASSIC_MEMBERSHIP_APIS else None
        if consumer_group is not None and key == JOIN_GROUP and not consumer_group.members:
            # An empty consumer group becomes a classic group when a classic member joins, as in Kafka.
            for record in group_records_tombstones(consumer_group):
                op.write(record)
            self._membership.join(op, request)
        elif consumer_group is not None:
            # A classic member of a consumer group (online migration): served from the group's state.
            self._classic_members.handle(op, request, consumer_group, metadata)
        elif key == CONSUMER_GROUP_HEARTBEAT:
            self._consumer_membership.heartbeat(op, request, metadata, self._any_group)
        elif key == CONSUMER_GROUP_DESCRIBE:
            self._consumer_admin.describe(op, request, metadata)
        elif key == JOIN_GROUP:
            self._membership.join(op, request)
        elif key == SYNC_GROUP:
            self._membership.sync(op, request)
        elif key == HEARTBEAT:
            self._membership.heartbeat(op, request)
        elif key == LEAVE_GROUP:
            self._membership.leave(op, request)
        elif key == OFFSET_COMMIT:
            self._offsets.commit(op, request, metadata)
        elif key == OFFSET_FETCH:
            self._offsets.fetch(op, request, metadata)
        elif key == OFFSET_DELETE:
            self._offsets.delete(op, request)
        elif key == TXN_OFFSET_COMMIT:
            self._offsets.txn_commit(op, request, metadata)
        elif key == DELETE_GROUPS:
            self._admin.delete(op, request)
        elif key == DESCRIBE_GROUPS:
            self._admin.describe(op, request, metadata)
        elif key == LIST_GROUPS:
            self._admin.list(op, request)
        else:
            raise ValueError(f"api key {key} is not a group coordinator API")
        return op.result

    def on_timer(self, key: str, now_ms: int, metadata: TopicsView) -> CoordinatorResult:
        """A timer fired. One the shard cancelled or moved since (the runtime may race it) does nothing."""
        op = Op(self._ctx, now_ms)
        deadline = self._ctx.deadlines.get(key)
        if deadline is None or now_ms < deadline:
            return op.result
        del self._ctx.deadlines[key]
        parsed = parse_key(key)
        if parsed is None:
            return op.result
        if parsed.kind is TimerKind.HEARTBEAT:
            self._membership.on_heartbeat_expired(op, parsed.group_id, parsed.member_id)
        elif parsed.kind is TimerKind.JOIN:
            self._membership.on_join_timer(op, parsed.group_id)
        elif parsed.kind is TimerKind.SYNC:
            self._membership.on_sync_timer(op, parsed.group_id)
        elif parsed.kind is TimerKind.TAKEOVER:
            self._membership.on_takeover_timer(op, parsed.group_id, parsed.member_id)
        elif parsed.kind is TimerKind.CLASSIC_REBALANCE:
            self._membership.on_classic_rebalance_timer(op, parsed.group_id)
        elif parsed.kind is TimerKind.CONSUMER_SESSION:
            group = self._ctx.consumer_groups.get(parsed.group_id)
            self._consumer_membership.on_session_expired(op, group, parsed.member_id, metadata)
        elif parsed.kind in (TimerKind.CONSUMER_JOIN, TimerKind.CONSUMER_SYNC):
            # A classic member of a consumer group did not rejoin, or sync, within its rebalance timeout.
            group = self._ctx.consumer_groups.get(parsed.group_id)
            self._consumer_membership.on_session_expired(op, group, parsed.member_id, metadata)
        elif parsed.kind is TimerKind.CONSUMER_REBALANCE:
            group = self._ctx.consumer_groups.get(parsed.group_id)
            self._consumer_membership.on_rebalance_expired(op, group, parsed.member_id, metadata)
        else:
            self._offsets.expire(op)
            op.schedule(RETENTION_KEY, self._ctx.config.offsets_retention_check_interval_ms)
        return op.result

    def on_loaded(self, now_ms: int) -> CoordinatorResult:
        """The whole partition has been replayed: give every loaded member a fresh session, rebalance groups
        over ``group.max.size``, and start the offsets retention check."""
        self._loading = False
        self._flush_consumer_groups()
        op = Op(self._ctx, now_ms)
        for group_id in sorted(self._ctx.groups):
            group = self._ctx.groups[group_id]
            for member in group.members.values():
                op.schedule(heartbeat_key(group_id, member.member_id), member.session_timeout_ms)
                # Unknown liveness counts as alive now: a running process reconnects within its interval.
                member.last_seen_ms = now_ms
            self._membership.rebalance_oversized(op, group)
        for group_id in sorted(self._ctx.consumer_groups):
            self._consumer_membership.on_loaded(op, self._ctx.consumer_groups[group_id])
        op.schedule(RETENTION_KEY, self._ctx.config.offsets_retention_check_interval_ms)
        return op.result

    def on_transaction_marker(self, producer_id: int, commit: bool, now_ms: int) -> CoordinatorResult:
        """The transaction coordinator appended producer ``producer_id``'s COMMIT or ABORT marker to this
        shard's partition: replay it (its transactional offsets become committed, or are dropped), as loading
        the partition would."""
        self.replay(TransactionMarker(producer_id, commit))
        return CoordinatorResult()

    def on_topics_deleted(self, topics: Collection[str], now_ms: int) -> CoordinatorResult:
        """Topics were deleted: tombstone every committed offset of theirs, as Kafka's coordinator does, so
        that a topic created again under the same name does not inherit a group's old positions."""
        op = Op(self._ctx, now_ms)
        deleted = frozenset(topics)
        store = self._ctx.offsets
        for group_id in sorted(store.groups()):
            for topic, partition, _ in store.partitions(group_id):
                if topic in deleted:
                    op.write(offset_tombstone(group_id, topic, partition))
        return op.result

    def unload(self) -> list[RequestToken]:
        """Give up the partition: every parked request is returned for the runtime to answer NOT_COORDINATOR,
        and the shard forgets everything (a new shard loads from the log)."""
        tokens = self.parked_tokens()
        for group in self._ctx.groups.values():
            for member in group.members.values():
                member.awaiting_join = None
                member.awaiting_sync = None
            group.transition_to(GroupState.DEAD, group.state_timestamp)
        for consumer_group in self._ctx.consumer_groups.values():
            consumer_group.mark_dead()
        self._ctx.consumer_groups.clear()
        self._ctx.pending_takeovers.clear()
        self._ctx.groups.clear()
        self._ctx.deadlines.clear()
        return tokens

    # --- inspection (tests, admin tooling) -------------------------------------------------------------

    def parked_tokens(self) -> list[RequestToken]:
        """Every request the shard holds unanswered."""
        tokens = [t for gid in sorted(self._ctx.groups) for t in self._ctx.groups[gid].parked_tokens()]
        tokens.extend(p.parked.token for p in self._ctx.pending_takeovers.values())
        return tokens

    def group(self, group_id: str) -> ClassicGroup | None:
        return self._ctx.groups.get(group_id)

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        return self._ctx.consumer_groups.get(group_id)

    def group_ids(self) -> list[str]:
        return sorted(set(self._ctx.groups) | set(self._ctx.consumer_groups))

    def committed_offset(self, group_id: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self._ctx.offsets.get(group_id, topic, partition)

    def committed_offsets(self, group_id: str) -> list[tuple[str, int, int]]:
        """``(topic, partition, offset)`` of every offset the group has committed (metrics: its lag)."""
        return [(t, p, o.offset) for t, p, o in self._ctx.offsets.partitions(group_id)]

    def offset_groups(self) -> list[str]:
        """Every group with committed offsets, live or not (an empty group's lag is still watched)."""
        return sorted(self._ctx.offsets.groups())

    @property
    def deadlines(self) -> Mapping[str, int]:
        """Timer deadlines the shard expects, by key (session state)."""
        return MappingProxyType(self._ctx.deadlines)

    def durable_state(self) -> DurableState:
        self._flush_consumer_groups()
        return DurableState(
            groups={gid: g.committed for gid, g in sorted(self._ctx.groups.items()) if g.in_log},
            offsets=self._ctx.offsets.snapshot(),
            consumer_groups={gid: g.snapshot() for gid, g in sorted(self._ctx.consumer_groups.items())},
        )
