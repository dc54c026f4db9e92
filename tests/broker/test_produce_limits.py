"""Produce size limits as Kafka applies them: ``max.message.bytes`` bounds each batch, not the sum of the
batches a request carries for one partition; ``segment.bytes`` bounds that sum."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from groupstream.client.admin import Admin, NewTopic
from groupstream.client.errors import KafkaError
from groupstream.client.net.sync_client import NodeChannel
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name
from groupstream.protocol.records import BatchBuilder
from support.brokers import BrokerProcess
from support.records import read_records

pytestmark = pytest.mark.broker_ours


def test_many_batches_may_exceed_max_message_bytes_together_but_not_one_alone(
    groupstream_broker: BrokerProcess,
) -> None:
    topic = f"limits-{uuid.uuid4().hex[:8]}"
    with Admin({"bootstrap.servers": groupstream_broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1, config={"max.message.bytes": "4000", "segment.bytes": "1048576"})])
        conn = admin.connection
        values = [b"x" * 100 for _ in range(200)]  # ~22 KB in batches of ~1 KB, all in one request
        assert _produce_in_one_request(conn, topic, values, batch_size=1000) == 0
        assert [r.offset for r in read_records(groupstream_broker.bootstrap, topic, 0)] == list(range(200))
        with pytest.raises(KafkaError) as one_too_big:
            _produce_in_one_request(conn, topic, [b"y" * 5000], batch_size=16384)
        assert one_too_big.value.code == ErrorCode.MESSAGE_TOO_LARGE
        assert "max.message.bytes=4000" in str(one_too_big.value)
        with pytest.raises(KafkaError) as past_segment:  # 1.2 MB of small batches for one partition
            _produce_in_one_request(conn, topic, [b"z" * 1000] * 1200, batch_size=3000)
        assert past_segment.value.code == ErrorCode.RECORD_LIST_TOO_LARGE


def _produce_in_one_request(conn: NodeChannel, topic: str, values: list[bytes], batch_size: int) -> int:
    """Partition 0's base offset after one Produce request carrying ``values`` in batches of about
    ``batch_size`` bytes (a client's batching is not the point here: the request's shape is); raises the
    partition's error."""
    batches: list[bytes] = []
    builder = BatchBuilder()
    for value in values:
        builder.append(0, None, value, ())
        if builder.uncompressed_size >= batch_size:
            batches.append(builder.build())
            builder = BatchBuilder()
    if len(builder):
        batches.append(builder.build())
    R: Any = by_name("Produce").Request
    T = R.TopicProduceData
    body = R(acks=-1, timeout_ms=30_000, topic_data=[
        T(name=topic, partition_data=[T.PartitionProduceData(index=0, records=b"".join(batches))])])  # fmt: skip
    version = conn.version_for("Produce", 12)
    (partition,) = [p for t in conn.request("Produce", body, version).responses for p in t.partition_responses]
    if partition.error_code != ErrorCode.NONE:
        raise KafkaError(partition.error_code, partition.error_message, resource=f"{topic}[0]")
    return int(partition.base_offset)
