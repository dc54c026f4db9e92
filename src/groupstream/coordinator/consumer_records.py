"""The records a ``consumer`` (KIP-848) group writes, and ``replay_consumer_record``, which applies one.

Kafka's order when a member goes away is current assignment, then target, then metadata; a deleted group
loses its target metadata, partition metadata and group metadata last. Replay follows whatever order the log
holds, so a restart rebuilds exactly the state the handlers saw.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from groupstream.coordinator.consumer_group import (
    ConsumerGroup,
    PartitionSet,
    TopicIdPartition,
    remember_assignment,
    remember_set,
    to_topic_partitions,
)
from groupstream.coordinator.reconcile import MemberAssignment
from groupstream.protocol.consumer_group_records import (
    CURRENT_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    PARTITION_METADATA,
    REGULAR_EXPRESSION,
    TARGET_MEMBER,
    TARGET_METADATA,
    ConsumerGroupKey,
    ConsumerMemberKey,
    CurrentMemberAssignmentValue,
    GroupMetadataValue848,
    MemberMetadataValue,
    PartitionMetadataValue,
    RegexKey,
    RegexValue,
    TargetAssignmentMemberValue,
    TargetAssignmentMetadataValue,
    TopicPartitions,
)
from groupstream.protocol.group_records import CoordinatorRecord

__all__ = [
    "current_assignment_record",
    "group_epoch_record",
    "group_records_tombstones",
    "is_consumer_group_record",
    "member_metadata_record",
    "member_removal_records",
    "partition_metadata_record",
    "regex_record",
    "replaced_later",
    "replay_consumer_record",
    "target_epoch_record",
    "target_member_record",
]

_VALUE_VERSION = 0
_TOMBSTONE = -1


def group_epoch_record(group_id: str, epoch: int, creation_time_ms: int) -> CoordinatorRecord:
    return CoordinatorRecord(GROUP_METADATA, ConsumerGroupKey(group_id), _VALUE_VERSION,
                             GroupMetadataValue848(epoch, 0, creation_time_ms))  # fmt: skip


def partition_metadata_record(group_id: str, value: PartitionMetadataValue) -> CoordinatorRecord:
    return CoordinatorRecord(PARTITION_METADATA, ConsumerGroupKey(group_id), _VALUE_VERSION, value)


def member_metadata_record(group_id: str, member_id: str, value: MemberMetadataValue) -> CoordinatorRecord:
    return CoordinatorRecord(MEMBER_METADATA, ConsumerMemberKey(group_id, member_id), _VALUE_VERSION, value)


def target_member_record(group_id: str, member_id: str, partitions: Iterable[TopicIdPartition]) -> CoordinatorRecord:
    grouped = to_topic_partitions(partitions)
    if type(partitions) is PartitionSet:
        remember_set(grouped, partitions)  # the replay of this very record takes the set back
    value = TargetAssignmentMemberValue(grouped)
    return CoordinatorRecord(TARGET_MEMBER, ConsumerMemberKey(group_id, member_id), _VALUE_VERSION, value)


def target_epoch_record(group_id: str, epoch: int, now_ms: int) -> CoordinatorRecord:
    return CoordinatorRecord(TARGET_METADATA, ConsumerGroupKey(group_id), _VALUE_VERSION,
                             TargetAssignmentMetadataValue(epoch, now_ms))  # fmt: skip


def _with_epochs(
    partitions: PartitionSet, known: Mapping[TopicIdPartition, int], default: int
) -> tuple[TopicPartitions, ...]:
    """The record's layout, each topic's partitions with the epochs they were given at (KIP-1251): ``known``
    where it says, ``default`` (the member's epoch) elsewhere."""
    out = []
    for t in to_topic_partitions(partitions):
        if known:
            epochs = tuple([known.get((t.topic_id, p), default) for p in t.partitions])
        else:
            epochs = (default,) * len(t.partitions)
        out.append(TopicPartitions(t.topic_id, t.partitions, epochs))
    grouped = tuple(out)
    remember_set(grouped, partitions)  # the replay of this very record takes the set back
    return grouped


def current_assignment_record(group_id: str, a: MemberAssignment) -> CoordinatorRecord:
    known, default = a.partition_epochs, a.default_epoch()
    value = CurrentMemberAssignmentValue(a.epoch, a.previous_epoch, int(a.state), _with_epochs(a.assigned, known, default),
                                         _with_epochs(a.pending_revocation, known, default))  # fmt: skip
    if not known and a.given_at < 0:
        # Every partition at the member's epoch: replaying this record would build ``a`` again; it takes it.
        remember_assignment(value, a)
    return CoordinatorRecord(CURRENT_ASSIGNMENT, ConsumerMemberKey(group_id, a.member_id), _VALUE_VERSION, value)


def regex_record(group_id: str, regex: str, value: RegexValue | None) -> CoordinatorRecord:
    return CoordinatorRecord(REGULAR_EXPRESSION, RegexKey(group_id, regex),
                             _TOMBSTONE if value is None else _VALUE_VERSION, value)  # fmt: skip


def member_removal_records(group_id: str, member_id: str) -> list[CoordinatorRecord]:
    """A member leaves for good: its current assignment, its target and its metadata, in Kafka's order."""
    key = ConsumerMemberKey(group_id, member_id)
    return [CoordinatorRecord(t, key, _TOMBSTONE, None) for t in (CURRENT_ASSIGNMENT, TARGET_MEMBER, MEMBER_METADATA)]


def group_records_tombstones(group: ConsumerGroup) -> list[CoordinatorRecord]:
    """Everything an empty group wrote, deleted: its regexes, target metadata, partition metadata, epoch."""
    key = ConsumerGroupKey(group.group_id)
    out = [regex_record(group.group_id, r, None) for r in sorted(group.regexes)]
    out.extend(CoordinatorRecord(t, key, _TOMBSTONE, None) for t in (TARGET_METADATA, PARTITION_METADATA, GROUP_METADATA))
    return out


_REPLACEABLE = frozenset({TARGET_MEMBER, CURRENT_ASSIGNMENT})


def replaced_later(keys: Sequence[bytes | memoryview | None]) -> set[int]:
    """Positions of the member target and current-assignment records that a later record of the same key
    replaces, among ``keys`` (one read of the log, in order): loading need not decode them.

    Replaying either kind only sets (or deletes) the member's value, which the later record of the key sets
    again; a group is created by its epoch and member metadata records, which come first, never by these; a
    loading group applies only each member's last current assignment anyway (``defer_assignments``). A log
    holds both per member per rebalance, so most of a long log's records are these."""
    last: dict[bytes, int] = {}
    out: set[int] = set()
    for i, key in enumerate(keys):
        if key is None or len(key) < 2 or int.from_bytes(key[:2], "big", signed=True) not in _REPLACEABLE:
            continue
        k = bytes(key)
        earlier = last.get(k)
        if earlier is not None:
            out.add(earlier)
        last[k] = i
    return out


_KEY_TYPES = frozenset({ConsumerGroupKey, ConsumerMemberKey, RegexKey})


def is_consumer_group_record(record: CoordinatorRecord) -> bool:
    key = record.key
    return type(key) in _KEY_TYPES or isinstance(key, ConsumerGroupKey | ConsumerMemberKey | RegexKey)


def replay_consumer_record(
    record: CoordinatorRecord, get_group: Callable[[str, bool], ConsumerGroup | None], delete_group: Callable[[str], None]
) -> None:
    """Apply one consumer-group record. ``get_group(id, create)`` finds (or creates) the group;
    ``delete_group`` drops one whose epoch record was tombstoned."""
    key, value, kind = record.key, record.value, record.key_version
    group = get_group(key.group, value is not None)
    if group is None:
        return
    if kind == GROUP_METADATA:
        if value is None:
            delete_group(key.group)
        else:
            group.apply_epoch(value.epoch, value.creation_time_ms)
    elif kind == PARTITION_METADATA:
        group.apply_partition_metadata(value)
    elif kind == TARGET_METADATA:
        group.apply_target_epoch(0 if value is None else value.epoch, 0 if value is None else value.timestamp_ms)
    elif kind == MEMBER_METADATA:
        group.apply_member_metadata(key.member_id, value)
    elif kind == TARGET_MEMBER:
        group.apply_target_member(key.member_id, value)
    elif kind == CURRENT_ASSIGNMENT:
        group.apply_current_assignment(key.member_id, value)
    elif kind == REGULAR_EXPRESSION:
        group.apply_regex(key.regex, value)
