"""``Producer.metrics()`` against our broker: records sent and failed, requests and their latency, batch sizes,
each moving as the test produces (and fails to produce, to a partition that does not exist)."""

from __future__ import annotations

import uuid

from groupstream import Producer
from groupstream.client.admin import Admin, NewTopic
from support.brokers import BrokerProcess


def test_sent_failed_requests_and_batches(groupstream_broker: BrokerProcess) -> None:
    bs = groupstream_broker.bootstrap
    topic = f"pm-{uuid.uuid4().hex[:8]}"
    with Admin({"bootstrap.servers": bs}) as admin:
        admin.create_topics([NewTopic(topic, 2)])
    with Producer({"bootstrap.servers": bs, "linger.ms": 5, "delivery.timeout.ms": 3000,
                   "request.timeout.ms": 1000}) as p:  # fmt: skip
        assert p.metrics()["record-send-total"] == 0
        for i in range(2000):
            p.produce(topic, b"x" * 100, partition=i % 2)
        assert p.flush(30) == 0
        m = p.metrics()
        assert m["record-send-total"] == 2000 and m["record-error-total"] == 0
        assert m["record-send-rate"] > 0 and m["request-total"] >= 1
        assert 1 <= m["records-per-request-avg"] <= 2000
        assert m["batch-size-avg"] >= 100 and m["batch-size-max"] >= m["batch-size-avg"]
        assert m["outgoing-byte-rate"] > 0 and m["request-latency-max"] >= m["request-latency-avg"]
        failed = p.produce(topic, b"y", partition=7)  # no such partition: refused before it reaches a batch
        p.flush(30)
        assert failed.exception(timeout=1) is not None
        m = p.metrics()
        assert m["record-error-total"] == 1 and m["record-send-total"] == 2000
