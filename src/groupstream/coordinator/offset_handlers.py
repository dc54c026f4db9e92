"""OffsetCommit, OffsetFetch, OffsetDelete and the periodic offsets expiry of one shard.

Commits are validated against the group the way Kafka's classic coordinator does (generation, member and
static instance; REBALANCE_IN_PROGRESS while the assignment is being handed out; generation -1 simple commits
only while the group has no members), then written as records; replay stores them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from groupstream.coordinator.classic_group import ClassicGroup, GroupState
from groupstream.coordinator.consumer_group import ConsumerGroup
from groupstream.coordinator.consumer_records import group_records_tombstones
from groupstream.coordinator.context import Op
from groupstream.coordinator.offsets import (
    NO_EXPIRE_TIMESTAMP,
    OffsetAndMetadata,
    TransactionalRecord,
    is_expired,
)
from groupstream.coordinator.records import group_tombstone, offset_commit_record, offset_tombstone
from groupstream.coordinator.request import ShardRequest, TopicsView, body_as, has_topic_ids
from groupstream.coordinator.responses import OFFSET_COMMIT, OFFSET_DELETE, OFFSET_FETCH
from groupstream.coordinator.timers import heartbeat_key
from groupstream.protocol.bodies import TXN_OFFSET_COMMIT, OffsetFetchRequest, TxnOffsetCommitRequest
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.primitives import ZERO_UUID

__all__ = ["OffsetHandlers"]


E = ErrorCode
_S = GroupState
_NO_OFFSET = -1
_TOPIC_IDS_FROM = 10  # OffsetCommit and OffsetFetch name topics by id from this version
_MEMBER_EPOCH_COMMITS_FROM = 9


@dataclass(frozen=True, slots=True)
class _Topic:
    """A request topic resolved to a name (None when its id is unknown)."""

    name: str | None
    topic_id: uuid.UUID
    wire: Any


def _resolve(topics: Iterable[Any], by_id: bool, metadata: TopicsView) -> list[_Topic]:
    resolved: list[_Topic] = []
    for t in topics:
        if not by_id:
            resolved.append(_Topic(str(t.name), ZERO_UUID, t))
            continue
        name = metadata.topic_name(t.topic_id) if has_topic_ids(metadata) else None
        resolved.append(_Topic(name, t.topic_id, t))
    return resolved


def _topic_id(metadata: TopicsView, name: str) -> uuid.UUID | None:
    return metadata.topic_id(name) if has_topic_ids(metadata) else None


@dataclass(frozen=True, slots=True)
class _CommittablePartitions:
    """A commit at an epoch older than the member's (KIP-1251): accepted for exactly these partitions, the
    ones the member holds and was given at or before that epoch; STALE_MEMBER_EPOCH for the others."""

    partitions: frozenset[tuple[uuid.UUID, int]]


def _validate_member_epoch(
    group: ConsumerGroup, member_id: str, epoch: int, commit_version: int | None
) -> ErrorCode | _CommittablePartitions | None:
    """Kafka's checks of a ``consumer`` group's commit (``commit_version`` set) or fetch: a simple commit
    (epoch < 0) only while the group is empty; otherwise a known member. A fetch must be at exactly the
    member's epoch. A commit (Kafka 4.4, KIP-1251) at the member's epoch is accepted, one ahead of it is
    STALE_MEMBER_EPOCH (the member has not heard of that epoch yet), and one behind it is accepted for the
    partitions the member has held since that epoch or earlier: a commit the client sent before its epoch
    moved on is not a zombie's."""
    if epoch < 0 and not group.members and commit_version is not None:
        return None
    member = group.members.get(member_id)
    if member is None:
        return E.UNKNOWN_MEMBER_ID
    if member.metadata.uses_classic_protocol:
        # A classic member of a consumer group (online migration) commits at any version with its
        # generation, which is its member epoch; another is ILLEGAL_GENERATION, as in Kafka.
        return None if epoch == member.epoch else E.ILLEGAL_GENERATION
    if commit_version is not None and commit_version < _MEMBER_EPOCH_COMMITS_FROM:
        return E.UNSUPPORTED_VERSION  # a KIP-848 member must send its epoch, which needs OffsetCommit v9
    if epoch == member.epoch:
        return None
    if epoch > member.epoch or commit_version is None:
        return E.STALE_MEMBER_EPOCH
    given = member.assignment.assignment_epochs()
    return _CommittablePartitions(frozenset(p for p, at in given.items() if at <= epoch))


class OffsetHandlers:
    # --- OffsetCommit ----------------------------------------------------------------------------------------

    def commit(self, op: Op, req: ShardRequest, metadata: TopicsView) -> None:
        body = body_as(OFFSET_COMMIT, req)
        v = req.version
        R = OFFSET_COMMIT.Response
        group_id = str(body.group_id)
        by_id = v >= _TOPIC_IDS_FROM
        topics = _resolve(body.topics, by_id, metadata)

        # Partition-level checks first, as Kafka's request layer does before the coordinator sees the rest.
        errors: dict[tuple[int, int], ErrorCode] = {}
        valid: list[tuple[int, int]] = []
        for ti, topic in enumerate(topics):
            count = None if topic.name is None else metadata.partition_count(topic.name)
            for pi, part in enumerate(topic.wire.partitions):
                if topic.name is None:
                    errors[ti, pi] = E.UNKNOWN_TOPIC_ID
                elif count is None or not 0 <= part.partition_index < count:
                    errors[ti, pi] = E.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    valid.append((ti, pi))

        if valid:
            group_error = self._validate_commit(op, req, group_id)
            expire = NO_EXPIRE_TIMESTAMP if body.retention_time_ms < 0 else op.now_ms + body.retention_time_ms
            limit = op.ctx.config.offset_metadata_max_bytes
            for ti, pi in valid:
                topic = topics[ti]
                assert topic.name is not None
                part = topic.wire.partitions[pi]
                meta = "" if part.committed_metadata is None else str(part.committed_metadata)
                if isinstance(group_error, _CommittablePartitions):
                    tid = _topic_id(metadata, topic.name)
                    if tid is None or (tid, part.partition_index) not in group_error.partitions:
                        errors[ti, pi] = E.STALE_MEMBER_EPOCH
                        continue
                if isinstance(group_error, ErrorCode):
                    errors[ti, pi] = group_error
                elif len(meta) > limit:
                    # Kafka compares the string's length with offset.metadata.max.bytes, not its UTF-8 size.
                    errors[ti, pi] = E.OFFSET_METADATA_TOO_LARGE
                else:
                    stamp = part.commit_timestamp if part.commit_timestamp >= 0 else op.now_ms
                    offset = OffsetAndMetadata(
                        part.committed_offset, part.committed_leader_epoch, meta, stamp, expire
                    )
                    op.write(offset_commit_record(group_id, topic.name, part.partition_index, offset))
                    errors[ti, pi] = E.NONE

        op.respond(
            req.token,
            R(
                throttle_time_ms=0,
                topics=[
                    R.OffsetCommitResponseTopic(
                        name="" if by_id or topic.name is None else topic.name,  # None only by id
                        topic_id=topic.topic_id,
                        partitions=[
                            R.OffsetCommitResponseTopic.OffsetCommitResponsePartition(
                                partition_index=part.partition_index, error_code=int(errors[ti, pi])
                            )
                            for pi, part in enumerate(topic.wire.partitions)
                        ],
                    )
                    for ti, topic in enumerate(topics)
                ],
            ),
        )

    @staticmethod
    def _validate_commit(op: Op, req: ShardRequest, group_id: str) -> ErrorCode | _CommittablePartitions | None:
        body = body_as(OFFSET_COMMIT, req)
        if not group_id:
            return E.INVALID_GROUP_ID
        generation = int(body.generation_id_or_member_epoch)
        member_id = str(body.member_id)
        consumer_group = op.ctx.consumer_groups.get(group_id)
        if consumer_group is not None:
            return _validate_member_epoch(consumer_group, member_id, generation, req.version)
        group = op.ctx.groups.get(group_id)
        if group is None:
            if generation < 0:
                return None  # a simple consumer's first commit: replaying it creates the (empty) group
            # From v9 the answer names the real problem; older clients expect ILLEGAL_GENERATION.
            return E.GROUP_ID_NOT_FOUND if req.version >= 9 else E.ILLEGAL_GENERATION
        error = group.validate_offset_commit(member_id, body.group_instance_id, generation)
        if error is None and group.state in (_S.STABLE, _S.PREPARING_REBALANCE):
            member = group.members.get(member_id)
            if member is not None:
                # A commit keeps a classic member's session alive, as in Kafka.
                op.schedule(heartbeat_key(group_id, member_id), member.session_timeout_ms)
        return error

    # --- TxnOffsetCommit --------------------------------------------------------------------------------------

    def txn_commit(self, op: Op, req: ShardRequest, metadata: TopicsView) -> None:
        """Offsets committed inside a transaction: validated as Kafka does for TxnOffsetCommit (KIP-447: the
        member, generation and static instance when the client sends them, v3+), then written as OffsetCommit
        records in a transactional batch of the producer; they stay pending until the transaction's marker.
        The broker checked beforehand that the group's partition is in the producer's ongoing transaction."""
        body = body_as(TXN_OFFSET_COMMIT, req)
        R = TXN_OFFSET_COMMIT.Response
        T = R.TxnOffsetCommitResponseTopic
        P = T.TxnOffsetCommitResponsePartition
        group_id = str(body.group_id)
        group_error = self._validate_txn_commit(op, body, group_id)
        limit = op.ctx.config.offset_metadata_max_bytes
        topics = []
        for t in body.topics:
            count = metadata.partition_count(t.name)
            parts = []
            for part in t.partitions:
                meta = "" if part.committed_metadata is None else str(part.committed_metadata)
                if count is None or not 0 <= part.partition_index < count:
                    code = E.UNKNOWN_TOPIC_OR_PARTITION
                elif group_error is not None:
                    code = group_error
                elif len(meta) > limit:
                    code = E.OFFSET_METADATA_TOO_LARGE
                else:
                    code = E.NONE
                    offset = OffsetAndMetadata(part.committed_offset, part.committed_leader_epoch, meta, op.now_ms)
                    record = offset_commit_record(group_id, t.name, part.partition_index, offset)
                    op.write(TransactionalRecord(int(body.producer_id), int(body.producer_epoch), record))  # type: ignore[arg-type]
                parts.append(P(partition_index=part.partition_index, error_code=int(code)))
            topics.append(T(name=t.name, partitions=parts))
        op.respond(req.token, R(throttle_time_ms=0, topics=topics))

    @staticmethod
    def _validate_txn_commit(op: Op, body: TxnOffsetCommitRequest, group_id: str) -> ErrorCode | None:
        if not group_id:
            return E.INVALID_GROUP_ID
        generation = int(body.generation_id)
        member_id = str(body.member_id)
        if generation < 0 and not member_id:
            return None  # a client without group metadata (TxnOffsetCommit v0-2, or an assign-mode consumer)
        consumer_group = op.ctx.consumer_groups.get(group_id)
        if consumer_group is not None:
            member = consumer_group.members.get(member_id)
            if member is None:
                return E.UNKNOWN_MEMBER_ID
            return None if generation == member.epoch else E.ILLEGAL_GENERATION
        group = op.ctx.groups.get(group_id)
        if group is None or group.state is _S.DEAD:
            return E.ILLEGAL_GENERATION
        error = group.validate_offset_commit(member_id, body.group_instance_id, generation)
        # a transactional commit is not sent back to finish a rebalance, as Kafka's transactional check
        return None if error is E.REBALANCE_IN_PROGRESS else error

    # --- OffsetFetch -----------------------------------------------------------------------------------------

    def fetch(self, op: Op, req: ShardRequest, metadata: TopicsView) -> None:
        body = body_as(OFFSET_FETCH, req)
        v = req.version
        R = OFFSET_FETCH.Response
        if v < 8:
            group_id = str(body.group_id)
            error = None if group_id else E.INVALID_GROUP_ID
            topics = self._fetch_group(op, v, group_id, body.topics, metadata, error, _stable(body))
            op.respond(req.token, R(throttle_time_ms=0, topics=topics, error_code=int(error or E.NONE)))
            return
        groups = []
        for g in body.groups:
            group_id = str(g.group_id)
            error = None if group_id else E.INVALID_GROUP_ID
            consumer_group = op.ctx.consumer_groups.get(group_id)
            if consumer_group is not None and (g.member_id is not None or g.member_epoch >= 0):
                checked = _validate_member_epoch(consumer_group, g.member_id or "", g.member_epoch, None)
                error = E.STALE_MEMBER_EPOCH if isinstance(checked, _CommittablePartitions) else checked
            groups.append(
                R.OffsetFetchResponseGroup(
                    group_id=group_id,
                    topics=self._fetch_group(op, v, group_id, g.topics, metadata, error, _stable(body)),
                    error_code=int(error or E.NONE),
                )
            )
        op.respond(req.token, R(throttle_time_ms=0, groups=groups))

    def _fetch_group(
        self,
        op: Op,
        v: int,
        group_id: str,
        requested: Any,
        metadata: TopicsView,
        error: ErrorCode | None,
        require_stable: bool = False,
    ) -> list[Any]:
        """One group's topics in the response layout of version ``v``.

        ``requested`` None means every committed partition (v2+). A group that does not exist has no offsets:
        each requested partition answers -1, as in Kafka. With ``require_stable`` (v7+, KIP-447) a partition
        with an offset pending in an open transaction answers UNSTABLE_OFFSET_COMMIT, and the client retries.
        """
        R = OFFSET_FETCH.Response
        by_id = v >= _TOPIC_IDS_FROM
        group = op.ctx.groups.get(group_id)
        known = group_id in op.ctx.consumer_groups or (group is not None and group.state is not _S.DEAD)
        store = op.ctx.offsets

        def partition(index: int, found: OffsetAndMetadata | None, err: ErrorCode, topic: str = "") -> Any:
            if require_stable and err is E.NONE and store.is_pending(group_id, topic, index):
                found, err = None, E.UNSTABLE_OFFSET_COMMIT
            cls = (
                R.OffsetFetchResponseTopic.OffsetFetchResponsePartition
                if v < 8
                else (R.OffsetFetchResponseGroup.OffsetFetchResponseTopics.OffsetFetchResponsePartitions)
            )
            return cls(
                partition_index=index,
                committed_offset=_NO_OFFSET if found is None else found.offset,
                committed_leader_epoch=-1 if found is None else found.leader_epoch,
                metadata="" if found is None else found.metadata,
                error_code=int(err),
            )

        def topic(name: str, topic_id: uuid.UUID, partitions: list[Any]) -> Any:
            if v < 8:
                return R.OffsetFetchResponseTopic(name=name, partitions=partitions)
            return R.OffsetFetchResponseGroup.OffsetFetchResponseTopics(
                name="" if by_id else name, topic_id=topic_id, partitions=partitions
            )

        if error is not None and v >= 8:
            return []  # a group's error answers none of its topics (Kafka 4.4, seen by the differential tests)
        if requested is None:
            if error is not None or not known:
                return []
            out: list[Any] = []
            for name, offsets in sorted(store.group_offsets(group_id).items()):
                tid = ZERO_UUID
                if by_id:
                    found_id = _topic_id(metadata, name)
                    if found_id is None:
                        continue  # a topic without an id (deleted since) cannot be named at this version
                    tid = found_id
                out.append(topic(name, tid, [partition(p, offsets[p], E.NONE, name) for p in sorted(offsets)]))
            return out

        out = []
        for t in _resolve(requested, by_id, metadata):
            if t.name is None:
                out.append(
                    topic(
                        "",
                        t.topic_id,
                        [partition(p, None, E.UNKNOWN_TOPIC_ID) for p in t.wire.partition_indexes],
                    )
                )
                continue
            # v0-1 carry errors only per partition, so a group-level error is repeated there too.
            err = error if error is not None and v < 2 else E.NONE
            out.append(
                topic(
                    t.name,
                    t.topic_id,
                    [
                        partition(p, store.get(group_id, t.name, p) if known and error is None else None, err, t.name)
                        for p in t.wire.partition_indexes
                    ],
                )
            )
        return out

    # --- OffsetDelete ----------------------------------------------------------------------------------------

    def delete(self, op: Op, req: ShardRequest) -> None:
        body = body_as(OFFSET_DELETE, req)
        R = OFFSET_DELETE.Response
        group_id = str(body.group_id)
        group: ClassicGroup | ConsumerGroup | None = None
        if group_id:
            group = op.ctx.consumer_groups.get(group_id) or op.ctx.groups.get(group_id)
        error: ErrorCode | None = None
        if not group_id:
            error = E.INVALID_GROUP_ID
        elif group is None or group.state is _S.DEAD:
            error = E.GROUP_ID_NOT_FOUND
        elif isinstance(group, ClassicGroup) and group.state is not _S.EMPTY and not group.uses_consumer_protocol:
            # Without the consumer protocol nobody can tell which topics the members still read.
            error = E.NON_EMPTY_GROUP
        if error is not None or group is None:
            op.respond(
                req.token, R(error_code=int(error or E.GROUP_ID_NOT_FOUND), throttle_time_ms=0, topics=[])
            )
            return
        topics = []
        for t in body.topics:
            name = str(t.name)
            subscribed = group.is_subscribed_to_topic(name)
            partitions = []
            for part in t.partitions:
                index = part.partition_index
                if subscribed:
                    partitions.append(
                        R.OffsetDeleteResponseTopic.OffsetDeleteResponsePartition(
                            partition_index=index, error_code=int(E.GROUP_SUBSCRIBED_TO_TOPIC)
                        )
                    )
                    continue
                if op.ctx.offsets.get(group_id, name, index) is not None:
                    op.write(offset_tombstone(group_id, name, index))
                partitions.append(
                    R.OffsetDeleteResponseTopic.OffsetDeleteResponsePartition(
                        partition_index=index, error_code=0
                    )
                )
            topics.append(R.OffsetDeleteResponseTopic(name=name, partitions=partitions))
        op.respond(req.token, R(error_code=0, throttle_time_ms=0, topics=topics))

    # --- retention -------------------------------------------------------------------------------------------

    def expire(self, op: Op) -> None:
        """Kafka's periodic cleanup: expire offsets past ``offsets.retention.minutes`` (for an empty group,
        counted from when it became empty), then delete empty groups that have no offsets left."""
        for group_id in sorted(op.ctx.groups):
            group = op.ctx.groups[group_id]
            all_expired = self._expire_group(op, group)
            if all_expired and group.state is _S.EMPTY and not group.pending_join_members:
                op.write(group_tombstone(group_id))
        for group_id in sorted(op.ctx.consumer_groups):
            consumer_group = op.ctx.consumer_groups[group_id]
            if self._expire_consumer_group(op, consumer_group) and not consumer_group.members:
                for record in group_records_tombstones(consumer_group):
                    op.write(record)

    @staticmethod
    def _expire_consumer_group(op: Op, group: ConsumerGroup) -> bool:
        """A consumer group's offsets of topics it no longer subscribes to expire from their commit."""
        subscribed = group.subscribed_topic_names()
        retention = op.ctx.config.offsets_retention_ms
        all_expired = True
        for topic, partition, offset in op.ctx.offsets.partitions(group.group_id):
            if topic in subscribed or not is_expired(offset, op.now_ms, retention, offset.commit_timestamp):
                all_expired = False
            else:
                op.write(offset_tombstone(group.group_id, topic, partition))
        return all_expired

    @staticmethod
    def _expire_group(op: Op, group: ClassicGroup) -> bool:
        store = op.ctx.offsets
        if not store.has_offsets(group.group_id):
            return True
        if group.protocol_type is None:
            since_empty = None  # a simple group: each offset counts from its own commit
        elif group.state is _S.EMPTY:
            since_empty = group.state_timestamp
        elif (
            group.state is _S.STABLE
            and group.uses_consumer_protocol
            and group.subscribed_topics() is not None
        ):
            since_empty = None  # only offsets of topics nobody subscribes to any more can expire
        else:
            return False
        retention = op.ctx.config.offsets_retention_ms
        all_expired = True
        for topic, partition, offset in store.partitions(group.group_id):
            if group.is_subscribed_to_topic(topic):
                all_expired = False
                continue
            base = offset.commit_timestamp if since_empty is None else since_empty
            if is_expired(offset, op.now_ms, retention, base):
                op.write(offset_tombstone(group.group_id, topic, partition))
            else:
                all_expired = False
        return all_expired


def _stable(body: OffsetFetchRequest) -> bool:
    """OffsetFetch v7+'s ``require_stable`` (False for older versions, which cannot ask)."""
    return body.require_stable
