"""One partition's batch on its way to the broker: the records' bytes, and who to tell how it went.

A batch is open while application threads append records to ``buf`` (under the accumulator's lock; see
``encode``): ``buf`` is the batch's own wire format, header first, so nothing is copied or re-encoded later.
It is *sealed* when it takes no more records (it is full, or drained into a request), and *closed* into its
final bytes when it goes into its first request: the header's length, attributes and CRC are filled in (and
the records compressed, if the producer compresses). With idempotence the producer id, epoch and base sequence are
stamped at that point, because a sequence belongs to the first send and a retry resends the same bytes so the
broker can recognise a duplicate; an epoch bump rewrites only those fields and the CRC.

``memory`` is what the batch holds of ``buffer.memory``: reserved once when it was opened (its capacity),
released when it completes, either way.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from groupstream.client.producer.encode import batch_count, new_batch_buffer
from groupstream.client.producer.future import BatchOutcome
from groupstream.protocol.records.batch_header import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    patch_crc,
)
from groupstream.protocol.records.compression import compress
from groupstream.protocol.topic_partition import TopicPartition

# producerId int64 @43, producerEpoch int16 @51, baseSequence int32 @53 (inside the CRC'd range)
_PRODUCER_FIELDS = struct.Struct(">qhi")
_PRODUCER_FIELDS_AT = 43
_LENGTH = struct.Struct(">i")
_ATTRIBUTES = struct.Struct(">h")
_TRANSACTIONAL = 0x10  # the batch attributes' isTransactional bit
# a record's bytes beyond key, value and headers, at most: length, attributes, deltas, key/value lengths, header
# count (what a record is assumed to take before it is encoded: sizing a new batch, checking max.request.size)
RECORD_OVERHEAD = 21

DeliveryCallback = Callable[[BaseException | None, Any], None]
# (index in the batch, timestamp, on_delivery or None, the record's own outcome or None): records that asked
# for a callback, and records that waited for metadata and hold an outcome of their own
Extra = tuple[int, int, DeliveryCallback | None, BatchOutcome | None]


class ProducerBatch:
    __slots__ = (
        "attempts",
        "base_sequence",
        "buf",
        "capacity",
        "closed",
        "compression",
        "count",
        "created_ms",
        "data",
        "drain_order",
        "extras",
        "in_flight",
        "last_error",
        "memory",
        "outcome",
        "partition",
        "producer_epoch",
        "producer_id",
        "retry_at_ms",
        "sealed",
        "topic",
    )

    def __init__(
        self, topic: str, partition: int, compression: int, now_ms: int, capacity: int, memory: int = 0
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.compression = compression
        self.created_ms = now_ms
        self.capacity = capacity  # bytes ``buf`` may grow to (header included) once it holds a record
        self.memory = memory
        self.buf = new_batch_buffer()
        self.outcome = BatchOutcome(topic, partition)
        self.extras: list[Extra] | None = None
        self.sealed = False
        self.closed = False
        self.count = 0  # records, known once closed (``record_count`` reads an open batch's header)
        self.data: bytearray | None = None
        self.attempts = 0  # sends so far
        self.retry_at_ms = 0
        self.drain_order = -1  # position in the partition's send order, fixed at the first drain
        self.base_sequence = NO_SEQUENCE
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = -1
        self.in_flight = False
        self.last_error: BaseException | None = None

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def record_count(self) -> int:
        return self.count if self.closed else batch_count(self.buf)

    @property
    def size(self) -> int:
        """Bytes on the wire: final once closed, else the uncompressed size so far."""
        return len(self.data) if self.data is not None else len(self.buf)

    @property
    def is_retry(self) -> bool:
        return self.drain_order >= 0

    def __repr__(self) -> str:
        return (
            f"ProducerBatch({self.topic}-{self.partition}, {self.record_count} records, seq={self.base_sequence}, "
            f"attempts={self.attempts}{', closed' if self.closed else ''})"
        )

    def add_extra(
        self, index: int, timestamp: int, callback: DeliveryCallback | None, own: BatchOutcome | None
    ) -> None:
        if self.extras is None:
            self.extras = []
        self.extras.append((index, timestamp, callback, own))

    def is_full(self) -> bool:
        return self.sealed or len(self.buf) >= self.capacity

    def seal(self) -> None:
        """Take no more records (a newer batch follows it, or it is being sent)."""
        self.sealed = True

    def close(self) -> bytearray:
        """The batch's wire bytes, finished on first use (length, attributes, compression, CRC). Only a sealed
        batch is closed: no record can be appended meanwhile."""
        data = self.data
        if data is None:
            data = self._finish()
            patch_crc(data, 0, len(data))
        return data

    def _finish(self) -> bytearray:
        data = self.data
        if data is None:
            buf = self.buf
            self.count = batch_count(buf)
            assert self.count > 0, "a batch without records is never drained"
            if self.compression:
                data = bytearray(buf[:HEADER_SIZE])
                data += compress(self.compression, memoryview(buf)[HEADER_SIZE:])
            else:
                data = buf
            _LENGTH.pack_into(data, 8, len(data) - LOG_OVERHEAD)
            _ATTRIBUTES.pack_into(data, 21, self.compression)
            self.data = data
            self.buf = data  # the uncompressed copy is not needed any more
            self.sealed = self.closed = True
        return data

    def stamp(self, producer_id: int, producer_epoch: int, base_sequence: int, transactional: bool = False) -> None:
        """Write the idempotence fields (and a transactional producer's isTransactional attribute, bit 4, which
        read_committed consumers go by) into the header and recompute the CRC."""
        data = self._finish()  # the CRC is computed once, below
        _PRODUCER_FIELDS.pack_into(data, _PRODUCER_FIELDS_AT, producer_id, producer_epoch, base_sequence)
        if transactional:
            _ATTRIBUTES.pack_into(data, 21, self.compression | _TRANSACTIONAL)
        patch_crc(data, 0, len(data))
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
