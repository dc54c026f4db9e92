"""Committed offsets of the groups one shard coordinates: group -> topic -> partition -> offset and metadata.

Only ``replay`` writes here (a commit record puts, a tombstone removes). There is nothing pending: without
transactions a commit is visible as soon as its record is replayed, so ``require_stable`` has nothing to wait for.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from groupstream.protocol.group_records import OffsetCommitValue

__all__ = ["NO_EXPIRE_TIMESTAMP", "NO_LEADER_EPOCH", "OffsetAndMetadata", "OffsetStore", "is_expired"]

NO_LEADER_EPOCH = -1
NO_EXPIRE_TIMESTAMP = -1


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = NO_EXPIRE_TIMESTAMP
    """Set only by OffsetCommit v2-4 commits that asked for their own retention (written as value v1)."""

    @classmethod
    def from_value(cls, value: OffsetCommitValue) -> OffsetAndMetadata:
        return cls(
            value.offset, value.leader_epoch, value.metadata, value.commit_timestamp, value.expire_timestamp
        )

    def to_value(self) -> OffsetCommitValue:
        return OffsetCommitValue(
            self.offset, self.leader_epoch, self.metadata, self.commit_timestamp, self.expire_timestamp
        )


def is_expired(offset: OffsetAndMetadata, now_ms: int, retention_ms: int, base_timestamp_ms: int) -> bool:
    """Kafka's rule: an explicit expire timestamp wins; otherwise the retention counts from the base
    timestamp (when an empty group became empty, or the commit itself; the caller decides)."""
    if offset.expire_timestamp != NO_EXPIRE_TIMESTAMP:
        return now_ms >= offset.expire_timestamp
    return now_ms - base_timestamp_ms >= retention_ms


class OffsetStore:
    def __init__(self) -> None:
        self._by_group: dict[str, dict[str, dict[int, OffsetAndMetadata]]] = {}

    def get(self, group_id: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self._by_group.get(group_id, {}).get(topic, {}).get(partition)

    def put(self, group_id: str, topic: str, partition: int, offset: OffsetAndMetadata) -> None:
        self._by_group.setdefault(group_id, {}).setdefault(topic, {})[partition] = offset

    def remove(self, group_id: str, topic: str, partition: int) -> None:
        topics = self._by_group.get(group_id)
        if topics is None:
            return
        partitions = topics.get(topic)
        if partitions is None:
            return
        partitions.pop(partition, None)
        if not partitions:
            del topics[topic]
        if not topics:
            del self._by_group[group_id]

    def group_offsets(self, group_id: str) -> Mapping[str, Mapping[int, OffsetAndMetadata]]:
        return self._by_group.get(group_id, {})

    def has_offsets(self, group_id: str) -> bool:
        return group_id in self._by_group

    def groups(self) -> Iterator[str]:
        return iter(list(self._by_group))

    def partitions(self, group_id: str) -> Iterator[tuple[str, int, OffsetAndMetadata]]:
        """(topic, partition, offset) in a stable order, so responses and tombstones are deterministic."""
        topics = self._by_group.get(group_id, {})
        for topic in sorted(topics):
            for partition in sorted(topics[topic]):
                yield topic, partition, topics[topic][partition]

    def snapshot(self) -> dict[tuple[str, str, int], OffsetAndMetadata]:
        """Every committed offset, flat: what two shards compare to show they hold the same state."""
        return {
            (group_id, topic, partition): offset
            for group_id in self._by_group
            for topic, partition, offset in self.partitions(group_id)
        }
