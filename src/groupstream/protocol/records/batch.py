"""RecordBatch v2 as a lazy view (client side), a builder (producer and coordinator side) and validation (broker).

The broker never decodes records on the produce path: ``validate_batch`` checks the header, the CRC and the
producer fields, which is what Java's broker checks before it assigns offsets in place. Deep mode (used in
tests and by tools) also decompresses and decodes every record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from groupstream.protocol.errors import LocalProtocolError, PeerProtocolError
from groupstream.protocol.records.batch_header import (
    COMPRESSION_MASK,
    CONTROL_BIT,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    BatchHeader,
    crc_ok,
    encode_header,
    parse_header,
    patch_crc,
    peek_size,
)
from groupstream.protocol.records.compression import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    Codec,
    compress,
    decompress,
)
from groupstream.protocol.records.record import (
    ControlType,
    EndTxnMarker,
    Record,
    decode_records,
    encode_control_key,
    encode_end_txn_value,
    encode_record,
    parse_end_txn_marker,
)

Buffer = bytes | bytearray | memoryview

NO_TIMESTAMP = -1
NO_PARTITION_LEADER_EPOCH = -1


class RecordBatch:
    """One complete batch, header parsed, records decoded only when asked and then kept."""

    __slots__ = ("_data", "_max_size", "_records", "_view", "header")

    def __init__(
        self,
        buf: Buffer,
        header: BatchHeader | None = None,
        *,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    ) -> None:
        view = memoryview(buf)
        if header is None:
            header = parse_header(view, 0)
        if header.size > len(view):
            raise PeerProtocolError(f"record batch claims {header.size} bytes but only {len(view)} are given")
        self._view = view[: header.size]
        self.header = header
        self._max_size = max_decompressed_size
        self._data: bytes | None = None
        self._records: list[Record] | None = None

    # --- header fields ---------------------------------------------------------------------------------

    @property
    def raw(self) -> memoryview:
        """The batch's bytes, exactly as received (what the broker stores and serves)."""
        return self._view

    @property
    def size(self) -> int:
        return self.header.size

    @property
    def base_offset(self) -> int:
        return self.header.base_offset

    @property
    def last_offset(self) -> int:
        return self.header.last_offset

    @property
    def next_offset(self) -> int:
        return self.header.next_offset

    @property
    def records_count(self) -> int:
        return self.header.records_count

    @property
    def compression(self) -> int:
        return self.header.compression

    @property
    def timestamp_type(self) -> int:
        return self.header.timestamp_type

    @property
    def base_timestamp(self) -> int:
        return self.header.base_timestamp

    @property
    def max_timestamp(self) -> int:
        return self.header.max_timestamp

    @property
    def partition_leader_epoch(self) -> int:
        return self.header.partition_leader_epoch

    @property
    def producer_id(self) -> int:
        return self.header.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.header.producer_epoch

    @property
    def base_sequence(self) -> int:
        return self.header.base_sequence

    @property
    def is_transactional(self) -> bool:
        return self.header.is_transactional

    @property
    def is_control(self) -> bool:
        return self.header.is_control

    def validate_crc(self) -> bool:
        return crc_ok(self._view, 0, self.header)

    # --- records ---------------------------------------------------------------------------------------

    def records_data(self) -> bytes:
        """The uncompressed records section, decompressed on first use and kept."""
        if self._data is None:
            self._data = decompress(self.header.compression, self._view[HEADER_SIZE:], self._max_size)
        return self._data

    def records_buffer(self) -> bytes | memoryview:
        """The uncompressed records section without copying it when the batch is not compressed (a view of
        ``raw``), else ``records_data()``."""
        if self.header.compression == Codec.NONE and self._data is None:
            view = self._view[HEADER_SIZE:]
            if len(view) > self._max_size:
                return self.records_data()  # raises, naming the limit
            return view
        return self.records_data()

    def records(self) -> list[Record]:
        """All records of the batch (decoded once; the same list is returned on later calls)."""
        if self._records is None:
            h = self.header
            recs = decode_records(self.records_data(), h.records_count, h.base_offset, h.base_timestamp)
            if h.attributes & TIMESTAMP_TYPE_BIT:  # LogAppendTime: the broker's time, carried once per batch
                t = h.max_timestamp
                recs = [r._replace(timestamp=t) for r in recs]
            self._records = recs
        return self._records

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def __len__(self) -> int:
        return self.header.records_count

    def control_marker(self) -> EndTxnMarker | None:
        """The transaction marker of a control batch (None for data batches and other control records)."""
        if not self.header.is_control:
            return None
        recs = self.records()
        if not recs:
            return None
        return parse_end_txn_marker(recs[0])

    def __repr__(self) -> str:
        h = self.header
        return (
            f"RecordBatch(base_offset={h.base_offset}, count={h.records_count}, codec={h.compression}, "
            f"size={h.size}, producer_id={h.producer_id}, control={h.is_control})"
        )


def iter_record_batches(
    buf: Buffer,
    *,
    check_crc: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> Iterator[RecordBatch]:
    """The complete batches of a fetch response's records, skipping a partial batch at the end.

    A broker may cut the last batch short at the fetch size limit, so a trailing fragment is normal and
    dropped; a complete batch that is corrupt (bad magic, bad CRC) raises PeerProtocolError.
    """
    view = memoryview(buf)
    end = len(view)
    pos = 0
    while pos < end:
        size = peek_size(view, pos)
        if size is None or size > end - pos or end - pos < HEADER_SIZE:
            return
        h = parse_header(view, pos)
        batch = RecordBatch(view[pos : pos + h.size], h, max_decompressed_size=max_decompressed_size)
        if check_crc and not batch.validate_crc():
            raise PeerProtocolError(f"record batch at offset {h.base_offset} fails its CRC check")
        yield batch
        pos += h.size


_T = TypeVar("_T")


def keyed_records(
    data: Buffer, decode: Callable[[bytes, bytes | None], _T]
) -> Iterator[tuple[Record, _T | PeerProtocolError]]:
    """The keyed records of the data batches in ``data`` (a read of a coordinator's log: `__consumer_offsets`,
    `__transaction_state`), each with ``decode(key, value)``, or with the error that says why it does not
    decode: the caller decides (loading logs and skips it, the console skips it)."""
    for batch in iter_record_batches(data, check_crc=False):
        if batch.is_control:
            continue
        for rec in batch:
            if rec.key is None:
                continue
            try:
                yield rec, decode(rec.key, rec.value)
            except PeerProtocolError as e:
                yield rec, e


def complete_batches_size(buf: Buffer) -> int:
    """Bytes taken by the complete batches at the start of ``buf`` (the rest is a truncated fragment)."""
    view = memoryview(buf)
    pos = 0
    while True:
        size = peek_size(view, pos)
        if size is None or size < HEADER_SIZE or size > len(view) - pos:
            return pos
        pos += size


class BatchBuilder:
    """Accumulates records and produces one complete, CRC'd batch.

    Timestamps are passed in (the codec has no clock). Offset deltas count up from 0 unless given; the
    broker assigns the real base offset later by patching the header.
    """

    __slots__ = (
        "_attributes",
        "_base_offset",
        "_base_sequence",
        "_base_timestamp",
        "_codec",
        "_count",
        "_last_offset_delta",
        "_leader_epoch",
        "_level",
        "_max_timestamp",
        "_parts",
        "_producer_epoch",
        "_producer_id",
        "_size",
    )

    def __init__(
        self,
        *,
        compression: int = Codec.NONE,
        compression_level: int | None = None,
        base_offset: int = 0,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = -1,
        base_sequence: int = NO_SEQUENCE,
        transactional: bool = False,
        control: bool = False,
        log_append_time: bool = False,
    ) -> None:
        if compression not in Codec.__members__.values():
            raise LocalProtocolError(f"unknown compression codec id {compression}")
        if (transactional or control) and producer_id < 0:
            raise LocalProtocolError("transactional and control batches need a producer id")
        if producer_id >= 0 and not control and (producer_epoch < 0 or base_sequence < 0):
            raise LocalProtocolError("an idempotent batch needs a producer epoch and a base sequence")
        self._codec = int(compression)
        self._level = compression_level
        self._attributes = (
            int(compression)
            | (TIMESTAMP_TYPE_BIT if log_append_time else 0)
            | (TRANSACTIONAL_BIT if transactional else 0)
            | (CONTROL_BIT if control else 0)
        )
        self._base_offset = base_offset
        self._leader_epoch = partition_leader_epoch
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._parts: list[bytes] = []
        self._count = 0
        self._size = HEADER_SIZE
        self._last_offset_delta = -1
        self._base_timestamp = NO_TIMESTAMP
        self._max_timestamp = NO_TIMESTAMP

    def append(
        self,
        timestamp: int,
        key: Buffer | None,
        value: Buffer | None,
        headers: Sequence[tuple[str, Buffer | None]] = (),
        *,
        offset_delta: int | None = None,
    ) -> int:
        """Add a record; returns its offset delta. The first record's timestamp is the batch's base."""
        if offset_delta is None:
            offset_delta = self._last_offset_delta + 1
        elif offset_delta <= self._last_offset_delta:
            raise LocalProtocolError(f"offset delta {offset_delta} does not follow {self._last_offset_delta}")
        if self._count == 0:
            self._base_timestamp = timestamp
            self._max_timestamp = timestamp
        elif timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        rec = encode_record(offset_delta, timestamp - self._base_timestamp, key, value, headers)
        self._parts.append(rec)
        self._size += len(rec)
        self._count += 1
        self._last_offset_delta = offset_delta
        return offset_delta

    def __len__(self) -> int:
        return self._count

    @property
    def uncompressed_size(self) -> int:
        """Header plus encoded records before compression: what a producer compares with batch.size."""
        return self._size

    @property
    def max_timestamp(self) -> int:
        return self._max_timestamp

    def build(self) -> bytes:
        if self._count == 0:
            raise LocalProtocolError("a record batch needs at least one record")
        records = b"".join(self._parts)
        payload = compress(self._codec, records, self._level) if self._codec else records
        header = BatchHeader(
            base_offset=self._base_offset,
            batch_length=HEADER_SIZE - LOG_OVERHEAD + len(payload),
            partition_leader_epoch=self._leader_epoch,
            magic=MAGIC_V2,
            crc=0,
            attributes=self._attributes,
            last_offset_delta=self._last_offset_delta,
            base_timestamp=self._base_timestamp,
            max_timestamp=self._max_timestamp,
            producer_id=self._producer_id,
            producer_epoch=self._producer_epoch,
            base_sequence=self._base_sequence,
            records_count=self._count,
        )
        out = bytearray(encode_header(header))
        out += payload
        patch_crc(out, 0, len(out))
        return bytes(out)


def build_control_batch(
    control_type: ControlType,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """An end-transaction marker batch (ABORT or COMMIT), as a transaction coordinator writes it."""
    if control_type not in (ControlType.ABORT, ControlType.COMMIT):
        raise LocalProtocolError(f"only ABORT and COMMIT markers are built here, not {control_type!r}")
    b = BatchBuilder(
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
    )
    b.append(timestamp, encode_control_key(control_type), encode_end_txn_value(coordinator_epoch))
    return b.build()


def validate_batch(
    buf: Buffer,
    *,
    deep: bool = False,
    allow_control: bool = False,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> BatchHeader:
    """Check that ``buf`` is exactly one well-formed batch from a producer; return its header.

    Cheap mode (every produce): framing, magic, CRC, codec id, record count against the offset range, and
    producer fields (a producer id needs a sequence; a transactional batch needs a producer id; no control
    batches unless ``allow_control``). Deep mode also decompresses and decodes every record and checks the
    offset deltas run 0..count-1, as they do in every batch a client builds.
    """
    view = memoryview(buf)
    h = parse_header(view, 0)
    if h.size != len(view):
        raise PeerProtocolError(f"records hold {len(view)} bytes but the batch declares {h.size}")
    if not crc_ok(view, 0, h):
        raise PeerProtocolError("record batch fails its CRC check")
    if h.attributes & COMPRESSION_MASK > Codec.ZSTD:
        raise PeerProtocolError(
            f"record batch uses unknown compression codec {h.attributes & COMPRESSION_MASK}"
        )
    if h.records_count != h.last_offset_delta + 1:
        raise PeerProtocolError(
            f"record batch holds {h.records_count} records but spans {h.last_offset_delta + 1} offsets"
        )
    if h.is_control and not allow_control:
        raise PeerProtocolError("clients may not write control batches")
    if h.producer_id >= 0 and h.base_sequence < 0 and not h.is_control:
        raise PeerProtocolError("idempotent record batch has no base sequence")
    if h.is_transactional and h.producer_id < 0:
        raise PeerProtocolError("transactional record batch has no producer id")
    if deep:
        records = RecordBatch(view, h, max_decompressed_size=max_decompressed_size).records()
        base = h.base_offset
        for i, r in enumerate(records):
            if r.offset - base != i:
                raise PeerProtocolError(f"record {i} of the batch has offset delta {r.offset - base}")
    return h
