"""Typed storage errors, so the broker can map each one to a Kafka error code without parsing messages."""

from __future__ import annotations


class StorageError(Exception):
    """Base of every error the storage package raises on purpose."""


class OffsetOutOfRange(StorageError):
    """A fetch or DeleteRecords offset lies outside ``[log_start_offset, log_end_offset]``."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(
            f"offset {offset} is out of range [{log_start_offset}, {log_end_offset}]"
        )
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class RecordTooLargeError(StorageError):
    """A batch exceeds ``max.message.bytes`` or an append cannot fit into one segment."""


class CorruptBatchError(StorageError):
    """Bytes handed to ``append`` are not a sequence of complete v2 batches."""


class LogClosedError(StorageError):
    """The partition log was closed or deleted; nothing more may be done with it."""


class CatalogError(StorageError):
    """Base of the topic catalog's errors."""


class TopicExistsError(CatalogError):
    pass


class UnknownTopicError(CatalogError):
    """The topic, or the partition of a known topic, does not exist."""


class InvalidTopicError(CatalogError):
    pass


class InvalidPartitionsError(CatalogError):
    pass


class InvalidConfigError(CatalogError):
    pass


class CatalogCorruptError(CatalogError):
    """The catalog file exists but cannot be parsed: refuse to guess which topics exist."""
