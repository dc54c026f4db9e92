"""DeleteRecords through the Admin client: the log start moves, reads below it are refused, -1 means the high
watermark, and bad targets are named."""

from __future__ import annotations

import uuid

import pytest

from groupstream.client.admin import Admin, NewTopic
from groupstream.client.errors import KafkaError
from groupstream.protocol.error_codes import ErrorCode
from support.brokers import BrokerProcess
from support.records import produce_records, read_records

pytestmark = pytest.mark.broker_ours


def test_delete_records_moves_the_log_start(groupstream_broker: BrokerProcess) -> None:
    topic = f"dr-{uuid.uuid4().hex[:8]}"
    with Admin({"bootstrap.servers": groupstream_broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 2)])
        bs = groupstream_broker.bootstrap
        produce_records(bs, topic, [b"v%d" % i for i in range(50)], partition=0)
        produce_records(bs, topic, [b"w%d" % i for i in range(20)], partition=1)
        assert admin.delete_records({(topic, 0): 30, (topic, 1): -1}) == {(topic, 0): 30, (topic, 1): 20}
        assert admin.list_offsets({(topic, 0): "earliest"})[(topic, 0)].offset == 30
        assert [r.offset for r in read_records(bs, topic, 0, 30)] == list(range(30, 50))
        with pytest.raises(KafkaError) as below:
            read_records(bs, topic, 0, 0)
        assert below.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert admin.delete_records({(topic, 0): 10}) == {(topic, 0): 30}  # never moves back
        with pytest.raises(KafkaError) as past_end:
            admin.delete_records({(topic, 0): 51})
        assert past_end.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
        with pytest.raises(KafkaError) as unknown:
            admin.delete_records({(topic, 7): 1})
        assert unknown.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        with pytest.raises(KafkaError) as internal:
            admin.delete_records({("__consumer_offsets", 0): -1})
        assert internal.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION
