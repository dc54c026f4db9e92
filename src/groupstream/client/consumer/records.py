"""What ``poll`` returns: records as small tuples, and the batch of them one call hands back."""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from groupstream.protocol.records import RecordBatch
from groupstream.protocol.records.batch_header import TIMESTAMP_TYPE_BIT
from groupstream.protocol.records.record import decode_batch_records

__all__ = ["ConsumerRecord", "ConsumerRecords", "Header", "batch_records"]

Header = tuple[str, bytes | None]


class ConsumerRecord(NamedTuple):
    """One record. A tuple, built with ``tuple.__new__`` on the hot path: a million of them must be cheap."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
    timestamp_type: int = 0
    """0: CreateTime (the producer's clock), 1: LogAppendTime (the broker's)."""


class ConsumerRecords:
    """The records one ``poll`` returned, in offset order within each partition. Supports ``len``, iteration,
    indexing, truth and ``by_partition``."""

    __slots__ = ("_records",)

    def __init__(self, records: list[ConsumerRecord]) -> None:
        self._records = records

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[ConsumerRecord]:
        return iter(self._records)

    def __getitem__(self, index: int) -> ConsumerRecord:
        return self._records[index]

    def __bool__(self) -> bool:
        return bool(self._records)

    def __repr__(self) -> str:
        return f"ConsumerRecords({len(self._records)} records)"

    def by_partition(self) -> dict[tuple[str, int], list[ConsumerRecord]]:
        out: dict[tuple[str, int], list[ConsumerRecord]] = {}
        for r in self._records:
            out.setdefault((r.topic, r.partition), []).append(r)
        return out

    def to_list(self) -> list[ConsumerRecord]:
        return list(self._records)




def batch_records(topic: str, partition: int, batch: RecordBatch, min_offset: int) -> list[ConsumerRecord]:
    """The records of a data batch from ``min_offset`` on (a fetch starts in the middle of the batch its offset
    falls in). With LogAppendTime the broker's time, carried once per batch, is every record's timestamp."""
    h = batch.header
    log_append = h.attributes & TIMESTAMP_TYPE_BIT
    return decode_batch_records(batch.records_buffer(), h.records_count, h.base_offset, h.base_timestamp,
                                ConsumerRecord, topic, partition, 1 if log_append else 0,
                                h.max_timestamp if log_append else None, min_offset)  # fmt: skip
