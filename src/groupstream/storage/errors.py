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


class StaleMarkerError(StorageError):
    """A transaction marker from a fenced producer epoch (Kafka answers INVALID_PRODUCER_EPOCH /
    PRODUCER_FENCED) or, when ``fenced_by_coordinator``, from an older transaction coordinator
    (TRANSACTION_COORDINATOR_FENCED). Nothing was written."""

    def __init__(self, message: str, *, fenced_by_coordinator: bool) -> None:
        super().__init__(message)
        self.fenced_by_coordinator = fenced_by_coordinator


class LogClosedError(StorageError):
    """The partition log was closed or deleted; nothing more may be done with it."""


class CorruptRangeError(StorageError):
    """Offsets whose bytes on disk are damaged: they cannot be read, and are never skipped silently.

    Recovery keeps a damaged segment's bytes and every intact batch around them; only the offsets in between
    are unreadable. Reading one of them raises this error (the broker answers CORRUPT_MESSAGE); a consumer that
    accepts the loss seeks to ``next_offset``.
    """

    def __init__(self, partition: str, first_offset: int, last_offset: int, next_offset: int, detail: str) -> None:
        super().__init__(
            f"partition {partition}: offsets {first_offset}..{last_offset} are unreadable ({detail}); "
            f"the next readable offset is {next_offset}"
        )
        self.partition = partition
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.next_offset = next_offset
        self.detail = detail


class LogWriteError(StorageError):
    """The disk refused a write (full, quota, I/O error). What was partly written has been cut off again, so
    the log is as it was before the call and the same append may be retried once the disk recovers:
    Kafka's KAFKA_STORAGE_ERROR, a retriable error for clients."""


class LogOfflineError(LogWriteError):
    """An fsync failed. After a failed fsync the kernel may already have dropped the dirty pages it could not
    write, and a retried fsync would report success for data that is gone (PostgreSQL's "fsyncgate"), so the
    partition serves nothing more until the broker restarts and recovers it from its last durable state."""


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
