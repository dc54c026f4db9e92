"""The records a shard writes, at the record types and value versions Kafka 4 writes."""

from __future__ import annotations

from groupstream.coordinator.offsets import NO_EXPIRE_TIMESTAMP, OffsetAndMetadata
from groupstream.protocol import consumer_group_records  # noqa: F401  (registers the KIP-848 record types)
from groupstream.protocol.group_records import (
    GROUP_METADATA_KEY_TYPE,
    GROUP_METADATA_VALUE_VERSION,
    OFFSET_COMMIT_KEY_TYPE,
    OFFSET_COMMIT_VALUE_EXPIRING_VERSION,
    OFFSET_COMMIT_VALUE_VERSION,
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
)

__all__ = ["group_metadata_record", "group_tombstone", "offset_commit_record", "offset_tombstone"]

_TOMBSTONE_VALUE_VERSION = -1


def group_metadata_record(group_id: str, value: GroupMetadataValue) -> CoordinatorRecord:
    return CoordinatorRecord(
        GROUP_METADATA_KEY_TYPE, GroupMetadataKey(group_id), GROUP_METADATA_VALUE_VERSION, value
    )


def group_tombstone(group_id: str) -> CoordinatorRecord:
    return CoordinatorRecord(
        GROUP_METADATA_KEY_TYPE, GroupMetadataKey(group_id), _TOMBSTONE_VALUE_VERSION, None
    )


def offset_commit_record(
    group_id: str, topic: str, partition: int, offset: OffsetAndMetadata
) -> CoordinatorRecord:
    version = (
        OFFSET_COMMIT_VALUE_VERSION
        if offset.expire_timestamp == NO_EXPIRE_TIMESTAMP
        else OFFSET_COMMIT_VALUE_EXPIRING_VERSION
    )
    return CoordinatorRecord(
        OFFSET_COMMIT_KEY_TYPE, OffsetCommitKey(group_id, topic, partition), version, offset.to_value()
    )


def offset_tombstone(group_id: str, topic: str, partition: int) -> CoordinatorRecord:
    return CoordinatorRecord(
        OFFSET_COMMIT_KEY_TYPE, OffsetCommitKey(group_id, topic, partition), _TOMBSTONE_VALUE_VERSION, None
    )
