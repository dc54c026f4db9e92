"""Versions that name topics by id (Produce v13+, Fetch v13+) and ListOffsets v0's old-style answer."""

from __future__ import annotations

import uuid

from broker.test_bad_input import FETCH, PRODUCE, Raw, _batch, _fetch_body
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name
from groupstream.protocol.records.batch import iter_record_batches
from support.inprocess import running_broker

LIST_OFFSETS = by_name("ListOffsets")


def _produce_by_id(topic_id: uuid.UUID, records: bytes):
    R = PRODUCE.Request
    TD = R.TopicProduceData
    return R(transactional_id=None, acks=-1, timeout_ms=5000,
             topic_data=[TD(topic_id=topic_id, partition_data=[TD.PartitionProduceData(index=0, records=records)])])


def test_produce_and_fetch_by_topic_id(tmp_path):
    with running_broker(tmp_path) as broker:
        topic = broker.catalog.create_topic("ids", 1, {})
        raw = Raw(broker.config.port)
        raw.send(PRODUCE, 13, _produce_by_id(topic.topic_id, _batch(3)))
        resp = raw.receive()[3].responses[0]
        assert resp.topic_id == topic.topic_id
        assert (resp.partition_responses[0].error_code, resp.partition_responses[0].base_offset) == (0, 0)
        raw.send(PRODUCE, 13, _produce_by_id(uuid.uuid4(), _batch(1)))
        assert raw.receive()[3].responses[0].partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID

        body = _fetch_body("", 0, 0, max_wait_ms=0)
        ft = body.topics[0]._replace(topic_id=topic.topic_id)
        raw.send(FETCH, 16, body._replace(topics=[ft]))
        part = raw.receive()[3].responses[0].partitions[0]
        assert part.error_code == 0 and part.high_watermark == 3
        values = [r.value for b in iter_record_batches(part.records) for r in b.records()]
        assert values == [b"v0", b"v1", b"v2"]
        raw.close()


def test_list_offsets_v0_answers_with_old_style_offsets(tmp_path):
    with running_broker(tmp_path) as broker:
        broker.catalog.create_topic("t", 1, {})
        raw = Raw(broker.config.port)
        raw.send(PRODUCE, 9, PRODUCE.Request(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
            PRODUCE.Request.TopicProduceData(name="t", partition_data=[
                PRODUCE.Request.TopicProduceData.PartitionProduceData(index=0, records=_batch(5))])]))
        raw.receive()
        R = LIST_OFFSETS.Request
        T = R.ListOffsetsTopic
        for ts, expected in ((-1, 5), (-2, 0)):
            raw.send(LIST_OFFSETS, 0, R(replica_id=-1, topics=[
                T(name="t", partitions=[T.ListOffsetsPartition(partition_index=0, timestamp=ts, max_num_offsets=1)])]))
            p = raw.receive()[3].topics[0].partitions[0]
            assert (p.error_code, p.old_style_offsets) == (0, [expected])
        raw.close()
