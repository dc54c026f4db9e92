"""Records as one Arrow record batch, with the columns of Spark's Kafka source, built column by column."""

from __future__ import annotations

from typing import Any

from groupstream.client.consumer.records import ConsumerRecord

__all__ = ["records_to_arrow"]

_NAMES = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]


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
    else:  # the common case: one offsets array, no per-record lists
        zeros = pa.nulls(n + 1, pa.int32()).fill_null(0)
        header_column = pa.ListArray.from_arrays(zeros, pa.array([], header))
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


def _binary(items: tuple[bytes | None, ...], n: int) -> Any:
    import pyarrow as pa

    # all-null columns (unkeyed records) are common, and pyarrow's per-item path is slow for them
    return pa.nulls(n, pa.binary()) if items.count(None) == n else pa.array(items, pa.binary())
