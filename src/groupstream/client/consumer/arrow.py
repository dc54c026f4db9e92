"""Records as one Arrow record batch, with the columns of Spark's Kafka source."""

from __future__ import annotations

from typing import Any

from groupstream.client.consumer.records import ConsumerRecord

__all__ = ["records_to_arrow"]


def records_to_arrow(records: list[ConsumerRecord]) -> Any:
    import pyarrow as pa

    header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
    columns = list(zip(*records, strict=True)) if records else [()] * 8
    topics, partitions, offsets, timestamps, keys, values, headers, types = columns
    return pa.RecordBatch.from_arrays(
        [
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
            pa.array(topics, pa.string()),
            pa.array(partitions, pa.int32()),
            pa.array(offsets, pa.int64()),
            pa.array([t * 1000 for t in timestamps], pa.timestamp("us", tz="UTC")),
            pa.array(types, pa.int32()),
            pa.array([[{"key": k, "value": v} for k, v in h] for h in headers], pa.list_(header)),
        ],
        names=["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"],
    )
