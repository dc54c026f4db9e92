"""Records as one Arrow record batch, with the columns of Spark's Kafka source, built column by column.

``poll_arrow`` decodes each fetched partition's batches once (``decode_fetch``) into a `ColumnBuilder`: the C
decoder appends each batch's offsets, timestamps, keys and values to Arrow buffers with no Python object per
record. Batches it leaves to the record decoder (headers, anything unusual, no C decoder) and records decoded
already are appended from record tuples. The fetch buffer then hands out slices of that record batch, at most
``max.poll.records`` rows a call, without copying; ``join`` copies slices of several fetches into one batch.
``records_to_arrow`` builds the same columns from record tuples (with deserializers, which change what a
record holds), and ``arrow_records`` turns rows back into records (``poll`` after ``poll_arrow``).
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Sequence
from itertools import accumulate, groupby, islice
from typing import Any

from groupstream.client.consumer.fetch_buffer import CompletedFetch
from groupstream.client.consumer.records import ConsumerRecord, Header, batch_records
from groupstream.protocol.records import RecordBatch
from groupstream.protocol.records.batch_header import TIMESTAMP_TYPE_BIT
from groupstream.protocol.records.record import append_batch_columns

__all__ = ["COLUMNS_SUPPORTED", "ColumnBuilder", "arrow_records", "decode_fetch", "join", "records_to_arrow"]

_NAMES = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
COLUMNS_SUPPORTED = sys.byteorder == "little"
"""The builder writes native-order buffers, which Arrow reads as little-endian."""
_INT64_WRAP = 1 << 64
_INT64_HALF = 1 << 63


class ColumnBuilder:
    """Spark's Kafka columns, appended to batch by batch or from records."""

    __slots__ = ("_cols", "_headers", "_rows", "_topics")

    def __init__(self) -> None:
        # offset (int64), timestamp (us, int64), partition (int32), timestampType (int32), then for the key and
        # the value: validity (a byte each), end offsets (int32, after the 0 that Arrow's offsets start with)
        # and data
        self._cols = (bytearray(), bytearray(), bytearray(), bytearray(),
                      bytearray(), bytearray(4), bytearray(), bytearray(), bytearray(4), bytearray())  # fmt: skip
        self._topics: list[tuple[str, int]] = []  # runs: (topic, rows)
        self._headers: list[tuple[int, tuple[Header, ...]]] = []  # (row, headers) of the rows that have some
        self._rows = 0

    def __len__(self) -> int:
        return self._rows

    def add_batch(self, topic: str, partition: int, batch: RecordBatch, min_offset: int) -> tuple[int, int]:
        h = batch.header
        log_append = h.attributes & TIMESTAMP_TYPE_BIT
        got = append_batch_columns(batch.records_buffer(), h.records_count, h.base_offset, h.base_timestamp,
                                   h.max_timestamp if log_append else None, min_offset, partition,
                                   1 if log_append else 0, self._cols)  # fmt: skip
        if got is None:  # the record decoder's batch (raises, having appended nothing, if it is corrupt)
            records = batch_records(topic, partition, batch, min_offset)
            self.add_records(records)
            return len(records), records[-1].offset if records else -1
        if got[0]:
            self._add_topic(topic, got[0])
            self._rows += got[0]
        return got

    def add_records(self, records: list[ConsumerRecord]) -> None:
        if not records:
            return
        c = self._cols
        c[0].extend(array("q", [r.offset for r in records]))
        c[1].extend(array("q", [(r.timestamp * 1000 + _INT64_HALF) % _INT64_WRAP - _INT64_HALF for r in records]))
        c[2].extend(array("i", [r.partition for r in records]))
        c[3].extend(array("i", [r.timestamp_type for r in records]))
        for valid, ends, data, items in ((c[4], c[5], c[6], [r.key for r in records]),
                                         (c[7], c[8], c[9], [r.value for r in records])):  # fmt: skip
            valid.extend(bytes(x is not None for x in items))
            lengths = (0 if x is None else len(x) for x in items)
            ends.extend(array("i", islice(accumulate(lengths, initial=len(data)), 1, None)))
            data.extend(b"".join(x for x in items if x))
        for i, r in enumerate(records, self._rows):
            if r.headers:
                self._headers.append((i, r.headers))
        for topic, group in groupby(r.topic for r in records):
            self._add_topic(topic, sum(1 for _ in group))
        self._rows += len(records)

    def _add_topic(self, topic: str, rows: int) -> None:
        runs = self._topics
        if runs and runs[-1][0] == topic:
            runs[-1] = (topic, runs[-1][1] + rows)
        else:
            runs.append((topic, rows))

    def offsets(self) -> Sequence[int]:
        """The offset of every row appended (a view of the offset column's buffer)."""
        return memoryview(self._cols[0]).cast("q")

    def finish(self) -> Any:
        """The columns as one ``pyarrow.RecordBatch`` (the builder's buffers are shared, not copied: it is done)."""
        import pyarrow as pa

        n = self._rows
        c = self._cols
        buf = pa.py_buffer
        return pa.RecordBatch.from_arrays(
            [
                _binary_column(c[4], c[5], c[6], n),
                _binary_column(c[7], c[8], c[9], n),
                self._topic_column(n),
                pa.Array.from_buffers(pa.int32(), n, [None, buf(c[2])]),
                pa.Array.from_buffers(pa.int64(), n, [None, buf(c[0])]),
                pa.Array.from_buffers(pa.timestamp("us", tz="UTC"), n, [None, buf(c[1])]),
                pa.Array.from_buffers(pa.int32(), n, [None, buf(c[3])]),
                self._header_column(n),
            ],
            names=_NAMES,
        )

    def _topic_column(self, n: int) -> Any:
        """The topic of every row. Its offsets are a running sum of the name lengths, taken by Arrow's
        ``cumulative_sum`` over an array made by repetition: a Python int per row (``range``) cost more than
        the rest of ``finish`` together (0.75 ms for 8,880 rows)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        steps = array("i", [0])
        parts: list[bytes] = []
        for topic, rows in self._topics:
            name = topic.encode()
            steps.extend(array("i", [len(name)]) * rows)
            parts.append(name * rows)
        ends = pc.cumulative_sum(pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(steps)]))
        return pa.Array.from_buffers(pa.string(), n, [None, ends.buffers()[1], pa.py_buffer(b"".join(parts))])

    def _header_column(self, n: int) -> Any:
        import pyarrow as pa

        header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
        if not self._headers:
            return _no_headers(n, header)
        rows: list[list[dict[str, Any]]] = [[] for _ in range(n)]
        for i, headers in self._headers:
            rows[i] = [{"key": k, "value": v} for k, v in headers]
        return pa.array(rows, pa.list_(header))


def decode_fetch(fetch: CompletedFetch) -> None:
    """Decode what ``fetch`` holds that is not in its ``arrow`` yet (records a ``poll`` decoded, then the
    batches) into one record batch, its ``arrow``. A batch that does not decode ends it there: raised when no
    row came before it, else left for the next call, which raises it once the rows before it are taken."""
    builder = ColumnBuilder()
    ends: list[int] = []
    topic, partition = fetch.tp.topic, fetch.tp.partition
    if fetch.index < len(fetch.records):
        builder.add_records(fetch.records[fetch.index :])
        ends.append(len(builder))
    fetch.records, fetch.index = [], 0
    batches = fetch.batches
    while fetch.batch_index < len(batches):
        batch = batches[fetch.batch_index]
        try:
            builder.add_batch(topic, partition, batch, fetch.fetch_offset)
        except Exception:
            if len(builder):
                break
            raise
        fetch.batch_index += 1
        fetch.pending -= batch.header.records_count
        if len(builder) > (ends[-1] if ends else 0):
            ends.append(len(builder))
    fetch.set_arrow(builder.finish(), builder.offsets(), ends)


def join(parts: list[Any]) -> Any:
    """One record batch of ``parts`` (what one ``poll_arrow`` took): the one part as it is, several copied
    into one; none: an empty batch of the same columns."""
    import pyarrow as pa

    if len(parts) == 1:
        return parts[0]
    if not parts:
        return ColumnBuilder().finish()
    concat = getattr(pa, "concat_batches", None)  # pyarrow >= 19
    if concat is not None:
        return concat(parts)
    return pa.Table.from_batches(parts).combine_chunks().to_batches()[0]


def arrow_records(rows: Any) -> list[ConsumerRecord]:
    """The rows of a ``poll_arrow`` record batch as records again (for a ``poll`` after a ``poll_arrow``
    decoded the fetch they came from: rare, so built simply, one Python object per value)."""
    import pyarrow as pa

    def column(name: str) -> list[Any]:
        return rows.column(name).to_pylist()  # type: ignore[no-any-return]

    micros = rows.column("timestamp").cast(pa.int64()).to_pylist()
    headers = [tuple((h["key"], h["value"]) for h in hs) for hs in column("headers")]
    columns = (column("topic"), column("partition"), column("offset"), micros, column("key"), column("value"),
               headers, column("timestampType"))  # fmt: skip
    return [ConsumerRecord(t, p, o, us // 1000, k, v, h, tt) for t, p, o, us, k, v, h, tt in zip(*columns, strict=True)]


def _binary_column(valid: bytearray, ends: bytearray, data: bytearray, n: int) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    nulls = n - valid.count(1)
    if nulls == n:
        return pa.nulls(n, pa.binary())
    bitmap = None
    if nulls:
        as_bytes = pa.Array.from_buffers(pa.uint8(), n, [None, pa.py_buffer(valid)])
        bitmap = pc.cast(as_bytes, pa.bool_()).buffers()[1]
    return pa.Array.from_buffers(pa.binary(), n, [bitmap, pa.py_buffer(ends), pa.py_buffer(data)], null_count=nulls)


def _no_headers(n: int, header: Any) -> Any:
    """The common case: one offsets buffer of zeros, no per-record lists. Built from buffers only: pyarrow's
    ``fill_null`` and ``pa.array`` import pandas on first use (0.3 s inside a consumer's first ``poll_arrow``)."""
    import pyarrow as pa

    empty = [pa.Array.from_buffers(f.type, 0, [None, pa.py_buffer(bytes(4)), pa.py_buffer(b"")]) for f in header]
    child = pa.StructArray.from_arrays(empty, fields=list(header))
    return pa.Array.from_buffers(pa.list_(header), n, [None, pa.py_buffer(bytes(4 * (n + 1)))], children=[child])


def records_to_arrow(records: list[ConsumerRecord]) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
    n = len(records)
    if n:
        topics, partitions, offsets, timestamps, keys, values, headers, types = zip(*records, strict=True)
    else:
        topics = partitions = offsets = timestamps = keys = values = headers = types = ()
    stamps = pc.multiply(pa.array(timestamps, pa.int64()), 1000).cast(pa.timestamp("us", tz="UTC"))
    if any(headers):
        header_column = pa.array([[{"key": k, "value": v} for k, v in h] for h in headers], pa.list_(header))
    else:
        header_column = _no_headers(n, header)
    return pa.RecordBatch.from_arrays(
        [
            _binary(keys, n),
            _binary(values, n),
            pa.array(topics, pa.string()),
            pa.array(partitions, pa.int32()),
            pa.array(offsets, pa.int64()),
            stamps,
            pa.array(types, pa.int32()),
            header_column,
        ],
        names=_NAMES,
    )


_JOIN_MIN_AVERAGE = 1024
_INT32_MAX = (1 << 31) - 1


def _binary(items: tuple[bytes | None, ...], n: int) -> Any:
    import pyarrow as pa

    nulls = items.count(None)
    # all-null columns (unkeyed records) are common, and pyarrow's per-item path is slow for them
    if nulls == n:
        return pa.nulls(n, pa.binary())
    if not nulls:
        # large values: one join into a buffer of the exact size beats pyarrow's builder, which grows (and
        # copies) its buffer as it appends; small ones are faster through the builder
        total = sum(map(len, items))  # type: ignore[arg-type]  # no None here
        if total >= _JOIN_MIN_AVERAGE * n and total <= _INT32_MAX:
            offsets = array("i", [0])
            offsets.extend(accumulate(map(len, items)))  # type: ignore[arg-type]
            data = b"".join(items)  # type: ignore[arg-type]
            return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    return pa.array(items, pa.binary())
