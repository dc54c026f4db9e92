"""The durable segmented log: partitions as directories of Kafka-layout segments, and the topic catalog.

Does file I/O but starts no threads, uses no asyncio and reads no clock (time arrives as ``now_ms``).
``PartitionLog.flush`` is the one method meant to run on another thread.
"""

from groupstream.storage.catalog import Catalog, TopicInfo, validate_topic_name
from groupstream.storage.config import CleanupPolicy, FlushPolicy, LogConfig, TimestampType
from groupstream.storage.errors import (
    CatalogCorruptError,
    CatalogError,
    CorruptBatchError,
    CorruptRangeError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidTopicError,
    LogClosedError,
    OffsetOutOfRange,
    RecordTooLargeError,
    StaleMarkerError,
    StorageError,
    TopicExistsError,
    UnknownTopicError,
)
from groupstream.storage.log import PartitionLog
from groupstream.storage.log_results import AppendInfo, ReadResult
from groupstream.storage.producer_state import (
    Accept,
    CheckResult,
    Duplicate,
    InvalidEpoch,
    OutOfOrder,
    ProducerStateManager,
    UnknownProducer,
)
from groupstream.storage.recovery import RecoveryReport

__all__ = [
    "Accept",
    "AppendInfo",
    "Catalog",
    "CatalogCorruptError",
    "CatalogError",
    "CheckResult",
    "CleanupPolicy",
    "CorruptBatchError",
    "CorruptRangeError",
    "Duplicate",
    "FlushPolicy",
    "InvalidConfigError",
    "InvalidEpoch",
    "InvalidPartitionsError",
    "InvalidTopicError",
    "LogClosedError",
    "LogConfig",
    "OffsetOutOfRange",
    "OutOfOrder",
    "PartitionLog",
    "ProducerStateManager",
    "ReadResult",
    "RecordTooLargeError",
    "RecoveryReport",
    "StaleMarkerError",
    "StorageError",
    "TimestampType",
    "TopicExistsError",
    "TopicInfo",
    "UnknownProducer",
    "UnknownTopicError",
    "validate_topic_name",
]
