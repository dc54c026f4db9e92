"""Produce size limits as Kafka applies them: ``max.message.bytes`` bounds each batch, not the sum of the
batches a request carries for one partition; ``segment.bytes`` bounds that sum."""

from __future__ import annotations

import uuid

import pytest

from groupstream.client.admin import Admin, NewTopic
from groupstream.client.errors import KafkaError
from groupstream.client.lite import fetch_range, produce
from groupstream.protocol.error_codes import ErrorCode
from support.brokers import BrokerProcess

pytestmark = pytest.mark.broker_ours


def test_many_batches_may_exceed_max_message_bytes_together_but_not_one_alone(
    groupstream_broker: BrokerProcess,
) -> None:
    topic = f"limits-{uuid.uuid4().hex[:8]}"
    with Admin({"bootstrap.servers": groupstream_broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1, config={"max.message.bytes": "4000", "segment.bytes": "1048576"})])
        conn = admin.connection
        values = [b"x" * 100 for _ in range(200)]  # ~22 KB in batches of ~1 KB, all in one request
        result = produce(conn, topic, values, partition=0, batch_size=1000, max_request_bytes=1 << 20)
        assert result.records == 200
        assert [r.offset for r in fetch_range(conn, topic, 0, 0)] == list(range(200))
        with pytest.raises(KafkaError) as one_too_big:
            produce(conn, topic, [b"y" * 5000], partition=0)
        assert one_too_big.value.code == ErrorCode.MESSAGE_TOO_LARGE
        assert "max.message.bytes=4000" in str(one_too_big.value)
        with pytest.raises(KafkaError) as past_segment:  # 1.2 MB of small batches for one partition
            produce(conn, topic, [b"z" * 1000] * 1200, partition=0, batch_size=3000, max_request_bytes=4 << 20)
        assert past_segment.value.code == ErrorCode.RECORD_LIST_TOO_LARGE
