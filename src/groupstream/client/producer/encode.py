"""The producer's record encoder: records appended straight into the batch being built, C or pure Python.

A batch in the making is a bytearray that starts with the 61-byte RecordBatch v2 header. ``append_record``
writes one record after it, varint-framed, and keeps in the header the fields that change with every record
(lastOffsetDelta, baseTimestamp, maxTimestamp, recordsCount), so the producer keeps no per-record state: no
list of records, no Python object per record, only the bytes that go on the wire. ``append_rows`` does the
same for many rows in one call (a list of tuples, or the buffers of Arrow columns), each to the batch of its
partition, and stops where a partition needs a new batch. ``append_routed`` is a whole plain ``produce`` once
the topic has a route (partition, append, handle) in one call. ``key_partition`` is Java's partition of a key.

The functions are those of the C extension (``_crecords.c``) when it is built; the pure-Python versions below
produce the same bytes and take the same decisions (tests compare the two with Hypothesis), so an install
without a compiler only runs slower.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Sequence
from typing import Any

from groupstream.protocol.partitioner import default_partition
from groupstream.protocol.records.batch_header import HEADER_SIZE, MAGIC_V2, NO_PRODUCER_ID, NO_SEQUENCE
from groupstream.protocol.records.record import encode_record

HeaderList = Sequence[tuple[str, bytes | None]]
ArrowBinary = tuple[Any, Any, Any, int, int, bool]  # offsets, data, validity or None, shift, length, wide
ArrowInt32 = tuple[Any, Any, int, int]  # values, validity or None, shift, length

APPEND_FULL = -1  # what append_record returns when the record does not fit

_INT32 = struct.Struct(">i")
_TIMESTAMPS = struct.Struct(">qq")  # baseTimestamp @27, maxTimestamp @35
_AT_LAST_OFFSET_DELTA = 23
_AT_TIMESTAMPS = 27
_AT_COUNT = 57
_INT32_MAX = 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

# baseOffset 0, batchLength (at close), partitionLeaderEpoch -1, magic 2, crc (at close), attributes (at close),
# lastOffsetDelta, baseTimestamp, maxTimestamp, no producer id, epoch or sequence (stamped at the first send),
# recordsCount 0
EMPTY_BATCH = struct.pack(
    ">qiibIhiqqqhii", 0, 0, -1, MAGIC_V2, 0, 0, 0, 0, 0, NO_PRODUCER_ID, -1, NO_SEQUENCE, 0
)
assert len(EMPTY_BATCH) == HEADER_SIZE


def new_batch_buffer() -> bytearray:
    """The buffer of an empty batch: its header, no records."""
    return bytearray(EMPTY_BATCH)


def batch_count(batch: bytearray) -> int:
    """Records appended to ``batch`` so far."""
    count: int = _INT32.unpack_from(batch, _AT_COUNT)[0]
    return count


def as_bytes(obj: Any, what: str) -> bytes | None:
    """A key or value as the encoder writes it: bytes, str as UTF-8, any other buffer copied, or None."""
    if obj is None or type(obj) is bytes:
        return obj
    if isinstance(obj, str):
        return obj.encode()
    try:
        return memoryview(obj).tobytes()
    except TypeError:
        raise TypeError(f"a record's {what} must be bytes, str or None, not {type(obj).__name__}") from None


def _headers(headers: Any) -> HeaderList:
    if headers is None:
        return ()
    if not isinstance(headers, (list, tuple)):
        raise TypeError("headers must be a sequence of (str, bytes | None) tuples")
    for h in headers:
        if not (
            isinstance(h, tuple)
            and len(h) == 2
            and isinstance(h[0], str)
            and (h[1] is None or isinstance(h[1], bytes))
        ):
            raise TypeError("a header must be a (str, bytes | None) tuple")
    return headers


def py_append_record(
    batch: bytearray, timestamp: int, key: Any, value: Any, headers: HeaderList | None, limit: int
) -> int:
    """Append one record to ``batch``; returns its offset delta, or APPEND_FULL (changing nothing) when the
    batch already holds a record and this one would take it past ``limit`` bytes."""
    if type(batch) is not bytearray:
        raise TypeError("the batch must be a bytearray")
    if not _INT64_MIN <= timestamp <= _INT64_MAX:
        raise OverflowError("a timestamp is an int64")
    k = as_bytes(key, "key")
    v = as_bytes(value, "value")
    hs = _headers(headers)
    if len(batch) < HEADER_SIZE:
        raise ValueError("a batch buffer starts with its 61 header bytes")
    count = batch_count(batch)
    if not 0 <= count < _INT32_MAX:
        raise OverflowError("the batch holds as many records as a batch can")
    base = max_ts = timestamp
    if count:
        base, max_ts = _TIMESTAMPS.unpack_from(batch, _AT_TIMESTAMPS)
    delta = timestamp - base
    if not _INT64_MIN <= delta <= _INT64_MAX:
        raise OverflowError("timestamp delta does not fit a varlong")
    rec = encode_record(count, delta, k, v, hs)
    if count and len(batch) + len(rec) > limit:
        return APPEND_FULL
    batch += rec
    _INT32.pack_into(batch, _AT_LAST_OFFSET_DELTA, count)
    _TIMESTAMPS.pack_into(batch, _AT_TIMESTAMPS, base, max(max_ts, timestamp))
    _INT32.pack_into(batch, _AT_COUNT, count + 1)
    return count


def py_key_partition(key: Any, num_partitions: int) -> int:
    """Java's default partition of a non-null key: ``toPositive(murmur2(key)) % num_partitions``."""
    if key is None:
        raise TypeError("a null key has no key partition")
    k = as_bytes(key, "key")
    assert k is not None
    return default_partition(k, num_partitions)


def py_append_routed(
    bufs: list[bytearray | None],
    limits: list[int],
    outcomes: list[Any],
    num_partitions: int,
    sticky: int,
    use_keys: bool,
    partition: int | None,
    key: Any,
    value: Any,
    timestamp: int | None,
    handle_type: type[tuple[Any, ...]],
) -> Any:
    """A plain ``produce`` into a routed topic in one call: pick the partition (``partition``, else Java's
    partition of the key when there is one and ``use_keys``, else ``sticky``), append to its open batch and
    return ``handle_type((outcomes[p], index, timestamp))``; ``timestamp`` None is now. None, appending nothing,
    when the partition is outside the topic, has no open batch or a full one, or the timestamp is negative."""
    k = as_bytes(key, "key")
    p = partition if partition is not None else _key_or_sticky(k, use_keys, num_partitions, sticky)
    if not 0 <= p < min(num_partitions, len(bufs), len(limits), len(outcomes)):
        return None
    batch = bufs[p]
    if batch is None:
        return None
    if timestamp is None:
        timestamp = time.time_ns() // 1_000_000
    elif timestamp < 0:
        return None
    index = py_append_record(batch, timestamp, k, value, None, limits[p])
    if index == APPEND_FULL:
        return None
    return tuple.__new__(handle_type, (outcomes[p], index, timestamp))


def _key_or_sticky(key: bytes | None, use_keys: bool, num_partitions: int, sticky: int) -> int:
    """The partition of a record that names none: Java's partition of its key when it has one and ``use_keys``,
    else ``sticky``."""
    if key is not None and use_keys and num_partitions > 0:
        return default_partition(key, num_partitions)
    return sticky


def _named(partition: int) -> int:
    """A partition a row names, which must not be negative."""
    if partition < 0:
        raise ValueError(f"partition {partition} does not exist")
    return partition


def _check_span(shift: int, length: int, end: int) -> None:
    if shift < 0 or length < end:
        raise ValueError("an Arrow column is shorter than the rows asked for")


def _is_null(validity: memoryview | None, j: int) -> bool:
    """Whether bit ``j`` of an Arrow validity bitmap (None: no nulls) is clear."""
    return validity is not None and not (validity[j >> 3] >> (j & 7)) & 1


def _arrow_binary_rows(spec: ArrowBinary | None, start: int, end: int) -> list[bytes | None]:
    if spec is None:
        return [None] * (end - start)
    offsets_buf, data_buf, validity_buf, shift, length, wide = spec
    _check_span(shift, length, end)
    offsets = memoryview(offsets_buf).cast("B").cast("q" if wide else "i")
    data = memoryview(data_buf).cast("B")
    valid = memoryview(validity_buf).cast("B") if validity_buf is not None else None
    out: list[bytes | None] = []
    for i in range(start, end):
        j = shift + i
        if _is_null(valid, j):
            out.append(None)
            continue
        lo, hi = offsets[j], offsets[j + 1]
        if lo < 0 or hi < lo or hi > len(data):
            raise ValueError("an Arrow column's offsets point outside its data")
        out.append(data[lo:hi].tobytes())
    return out


def _arrow_int32_rows(spec: ArrowInt32 | None, start: int, end: int) -> list[int | None] | None:
    if spec is None:
        return None
    values_buf, validity_buf, shift, length = spec
    _check_span(shift, length, end)
    values = memoryview(values_buf).cast("B").cast("i")
    valid = memoryview(validity_buf).cast("B") if validity_buf is not None else None
    return [None if _is_null(valid, shift + i) else values[shift + i] for i in range(start, end)]


def py_append_rows(
    batches: list[bytearray | None],
    limits: list[int],
    timestamp: int,
    num_partitions: int,
    sticky: int,
    use_keys: bool,
    start: int,
    end: int,
    rows: Sequence[tuple[Any, ...]] | None,
    partitions: int | list[int | None] | None,
    arrow_keys: ArrowBinary | None,
    arrow_values: ArrowBinary | None,
    arrow_partitions: ArrowInt32 | None,
    touched: bytearray | None,
) -> tuple[int, int]:
    """Append rows ``start..end-1`` each to the batch of its partition; stop at the first row whose partition
    has no batch (None) or a full one and return ``(row, partition)``, or ``(end, -1)`` when all went in.

    A row's partition is its own (``partitions``: one int for all rows or a list with an int or None per row;
    or ``arrow_partitions``), else Java's partition of its key when it has one and ``use_keys``, else
    ``sticky``. Rows are ``(key, value)`` or ``(key, value, headers)`` tuples from ``rows``, or, when ``rows`` is
    None, the Arrow columns' buffers (``ArrowBinary`` keys and values, ``ArrowInt32`` partitions). ``touched``,
    if given, gets a 1 at every partition a row went to."""
    if (
        num_partitions <= 0
        or len(batches) < num_partitions
        or len(limits) < num_partitions
        or not 0 <= start <= end
        or (touched is not None and (type(touched) is not bytearray or len(touched) < num_partitions))
    ):
        raise ValueError("append_rows: inconsistent arguments")
    fixed = -1
    if isinstance(partitions, int):
        fixed = _named(partitions)
    elif partitions is not None and (not isinstance(partitions, list) or len(partitions) < end):
        raise ValueError("partitions must be None, an int or a list as long as the rows")
    if rows is not None:
        if len(rows) < end:
            raise ValueError("append_rows: fewer rows than asked for")
        source: Sequence[tuple[Any, ...]] = rows
        first = 0
        arrow_parts = None
    else:
        keys = _arrow_binary_rows(arrow_keys, start, end)
        values = _arrow_binary_rows(arrow_values, start, end)
        arrow_parts = _arrow_int32_rows(arrow_partitions, start, end)
        source = list(zip(keys, values, strict=True))
        first = start
    for i in range(start, end):
        row = source[i - first]
        if not isinstance(row, tuple) or len(row) not in (2, 3):
            raise TypeError("a row must be a (key, value) or (key, value, headers) tuple")
        key = as_bytes(row[0], "key")
        value = as_bytes(row[1], "value")
        headers = row[2] if len(row) == 3 else None
        p = fixed
        own = arrow_parts[i - first] if arrow_parts is not None else None
        if own is not None:
            p = _named(own)
        if p < 0 and isinstance(partitions, list):
            q = partitions[i]
            if q is not None:
                p = _named(q)
        if p < 0:
            p = _key_or_sticky(key, use_keys, num_partitions, sticky)
        if p >= num_partitions:
            raise ValueError(f"partition {p} does not exist (the topic has {num_partitions})")
        batch = batches[p]
        if batch is None:
            return i, p
        if py_append_record(batch, timestamp, key, value, headers, limits[p]) == APPEND_FULL:
            return i, p
        if touched is not None:
            touched[p] = 1
    return end, -1


AppendRecord = Callable[[bytearray, int, Any, Any, "HeaderList | None", int], int]
AppendRows = Callable[..., tuple[int, int]]
AppendRouted = Callable[..., Any]
KeyPartition = Callable[[Any, int], int]

append_record: AppendRecord
append_rows: AppendRows
append_routed: AppendRouted
key_partition: KeyPartition
try:  # the C encoder, built by `pip install` (setup.py); without a compiler the Python one above runs alone
    from groupstream.protocol.records._crecords import append_record as _c_append_record
    from groupstream.protocol.records._crecords import append_routed as _c_append_routed
    from groupstream.protocol.records._crecords import append_rows as _c_append_rows
    from groupstream.protocol.records._crecords import key_partition as _c_key_partition
except ImportError:  # pragma: no cover - depends on the build
    append_record, append_rows, key_partition = py_append_record, py_append_rows, py_key_partition
    append_routed = py_append_routed
    C_ENCODER = False
else:
    append_record, append_rows, key_partition = _c_append_record, _c_append_rows, _c_key_partition
    append_routed = _c_append_routed
    C_ENCODER = True
