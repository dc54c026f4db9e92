"""Committed offsets of the groups one shard coordinates: group -> topic -> partition -> offset and metadata.

Only ``replay`` writes here (a commit record puts, a tombstone removes). A plain commit is visible as soon as
its record is replayed. A transactional one (TxnOffsetCommit, KIP-98/447) is written as Kafka writes it: the
same OffsetCommit records in a transactional batch of the producer's id and epoch; replaying it keeps the
offsets *pending* for that producer, invisible to OffsetFetch (which answers UNSTABLE_OFFSET_COMMIT to
``require_stable`` fetches of such partitions) until the transaction's COMMIT marker reaches the partition and
makes them committed; an ABORT marker drops them. `coordinator_log_records` reads both kinds, and the markers,
from the partition.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from groupstream.coordinator.consumer_records import replaced_later
from groupstream.protocol.errors import PeerProtocolError
from groupstream.protocol.group_records import CoordinatorRecord, OffsetCommitValue, decode_record
from groupstream.protocol.records import Record
from groupstream.protocol.records.batch import iter_record_batches
from groupstream.protocol.records.record import ControlType

__all__ = [
    "NO_EXPIRE_TIMESTAMP",
    "NO_LEADER_EPOCH",
    "OffsetAndMetadata",
    "OffsetStore",
    "TransactionMarker",
    "TransactionalRecord",
    "coordinator_log_records",
    "is_expired",
]

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


@dataclass(frozen=True, slots=True)
class TransactionalRecord:
    """An OffsetCommit record written inside producer ``producer_id``'s transaction (the runtime writes these
    as one transactional batch: ``producer`` says whose)."""

    producer_id: int
    producer_epoch: int
    record: CoordinatorRecord

    @property
    def producer(self) -> tuple[int, int]:
        return self.producer_id, self.producer_epoch


@dataclass(frozen=True, slots=True)
class TransactionMarker:
    """A COMMIT or ABORT marker of producer ``producer_id`` found in (or appended to) the partition."""

    producer_id: int
    commit: bool


def coordinator_log_records(data: bytes | memoryview) -> Iterator[tuple[Record | None, Any]]:
    """Every record of a `__consumer_offsets` read for the coordinator's load: plain records decoded (or the
    `PeerProtocolError` saying why not), records of transactional batches as `TransactionalRecord`, and each
    transaction marker as a `TransactionMarker` (with no record of its own: None). A consumer group member's
    target or current-assignment record that a later one of the read replaces is left out undecoded
    (`replaced_later`: replaying it would leave no trace; decoding them was most of loading a long log)."""
    batches = [(batch, None if batch.is_control else list(batch)) for batch in iter_record_batches(data, check_crc=False)]
    skip = replaced_later([rec.key for _, recs in batches if recs is not None for rec in recs])
    i = -1
    for batch, recs in batches:
        if recs is None:
            marker = batch.control_marker()
            if marker is not None:
                yield None, TransactionMarker(batch.producer_id, marker.control_type == ControlType.COMMIT)
            continue
        for rec in recs:
            i += 1
            if rec.key is None or i in skip:
                continue
            try:
                decoded: Any = decode_record(rec.key, rec.value)
            except PeerProtocolError as e:
                yield rec, e
                continue
            if batch.is_transactional:
                decoded = TransactionalRecord(batch.producer_id, batch.producer_epoch, decoded)
            yield rec, decoded


class OffsetStore:
    def __init__(self) -> None:
        self._by_group: dict[str, dict[str, dict[int, OffsetAndMetadata]]] = {}
        self._pending: dict[int, dict[tuple[str, str, int], OffsetAndMetadata | None]] = {}
        """producer id -> (group, topic, partition) -> its transaction's offset (None: a tombstone)."""

    # -- transactional offsets (pending until their transaction's marker) ----------------------------------

    def put_pending(self, producer_id: int, group_id: str, topic: str, partition: int,
                    offset: OffsetAndMetadata | None) -> None:
        self._pending.setdefault(producer_id, {})[group_id, topic, partition] = offset

    def end_transaction(self, producer_id: int) -> dict[tuple[str, str, int], OffsetAndMetadata | None]:
        """The producer's pending offsets, removed (the caller commits them or drops them)."""
        return self._pending.pop(producer_id, {})

    def is_pending(self, group_id: str, topic: str, partition: int) -> bool:
        return any((group_id, topic, partition) in p for p in self._pending.values())

    def has_pending(self, group_id: str) -> bool:
        return any(key[0] == group_id for p in self._pending.values() for key in p)

    def pending_snapshot(self) -> dict[int, dict[tuple[str, str, int], OffsetAndMetadata | None]]:
        return {pid: dict(p) for pid, p in self._pending.items()}

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
