"""One partition's batch on its way to the broker: the records' bytes, and who to tell how it went.

A batch is open while records are appended (a `BatchBuilder`), closed into bytes when it is first drained
into a request, and stamped with the producer id, epoch and base sequence at that point: with idempotence
the sequence belongs to the first send, and a retry resends the same bytes so the broker can recognise a
duplicate. When an epoch bump renumbers a batch, only the header fields and the CRC are rewritten.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from groupstream.protocol.records import BatchBuilder
from groupstream.protocol.records.batch_header import NO_PRODUCER_ID, NO_SEQUENCE, patch_crc

# producerId int64 @43, producerEpoch int16 @51, baseSequence int32 @53 (inside the CRC'd range)
_PRODUCER_FIELDS = struct.Struct(">qhi")
_PRODUCER_FIELDS_AT = 43
# a record's bytes beyond key, value and headers: length, attributes, deltas, key/value lengths, header count
RECORD_OVERHEAD = 21

DeliveryCallback = Callable[[BaseException | None, Any], None]


class ProducerBatch:
    __slots__ = (
        "attempts",
        "base_sequence",
        "builder",
        "callbacks",
        "closed",
        "created_ms",
        "data",
        "drain_order",
        "estimated_size",
        "futures",
        "in_flight",
        "last_error",
        "memory",
        "partition",
        "producer_epoch",
        "producer_id",
        "retry_at_ms",
        "timestamps",
        "topic",
    )

    def __init__(self, topic: str, partition: int, compression: int, now_ms: int) -> None:
        self.topic = topic
        self.partition = partition
        self.created_ms = now_ms
        self.builder: BatchBuilder | None = BatchBuilder(compression=compression)
        self.futures: list[Future[Any]] = []
        self.timestamps: list[int] = []
        self.callbacks: list[tuple[int, DeliveryCallback]] | None = None
        self.memory = 0  # buffer.memory bytes this batch holds, released when it completes
        self.estimated_size = 0
        self.closed = False
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
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    @property
    def record_count(self) -> int:
        return len(self.futures)

    @property
    def is_retry(self) -> bool:
        return self.drain_order >= 0

    def __repr__(self) -> str:
        return (
            f"ProducerBatch({self.topic}-{self.partition}, {self.record_count} records, seq={self.base_sequence}, "
            f"attempts={self.attempts}{', closed' if self.closed else ''})"
        )

    def try_append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]],
        future: Future[Any],
        callback: DeliveryCallback | None,
        size: int,
        batch_size: int,
    ) -> bool:
        """Append unless the batch is closed or ``size`` more bytes would pass ``batch_size`` (a batch always
        takes its first record, however large)."""
        builder = self.builder
        if self.closed or builder is None or (self.futures and self.estimated_size + size > batch_size):
            return False
        builder.append(timestamp, key, value, headers)
        if callback is not None:
            if self.callbacks is None:
                self.callbacks = []
            self.callbacks.append((len(self.futures), callback))
        self.futures.append(future)
        self.timestamps.append(timestamp)
        self.estimated_size += size
        self.memory += size
        return True

    def is_full(self, batch_size: int) -> bool:
        return self.closed or self.estimated_size >= batch_size

    def close(self) -> bytearray:
        """Seal the batch into its wire bytes (compressing them) on first use; later appends go elsewhere."""
        if self.data is None:
            builder = self.builder
            assert builder is not None, "a batch without records is never drained"
            self.data = bytearray(builder.build())
            self.builder = None
            self.closed = True
        return self.data

    def seal(self) -> None:
        """Take no more records (a newer batch follows it), without building the bytes yet."""
        self.closed = True

    def stamp(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        """Write the idempotence fields into the header and recompute the CRC."""
        data = self.close()
        _PRODUCER_FIELDS.pack_into(data, _PRODUCER_FIELDS_AT, producer_id, producer_epoch, base_sequence)
        patch_crc(data, 0, len(data))
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
