"""Java's ``KafkaProducer`` (idempotent, ``acks=all``) on our broker with each codec: every acknowledged record
is read back exactly once by an independent reader (confluent-kafka) and by Java's ``KafkaConsumer``, at the
offset the producer was told, in send order, in the partition Java's murmur2 partitioner picked, and each
partition's high watermark is what was acknowledged there.

Why: Java 4.x sends Produce v13 (topics by id) with its own batching and compression libraries; our codec's
tests only prove that we agree with ourselves.
"""

from __future__ import annotations

import pytest
from group_harness import create_topic, unique
from java_harness import Harness

from support.brokers import BrokerProcess
from support.compat import CODECS, Acked, Consumed, check_read_equals_acked, confluent_read, make_records

pytestmark = [pytest.mark.compat, pytest.mark.broker_ours]

PARTITIONS = 6
RECORDS = 8000  # per codec


@pytest.mark.parametrize("codec", CODECS)
def test_java_idempotent_producer_read_back_exactly(
    java_broker: BrokerProcess, harness: Harness, codec: str
) -> None:
    bs = java_broker.bootstrap
    topic = unique(f"java-produce-{codec}")
    create_topic(bs, topic, PARTITIONS)
    events = harness.call("produce", bootstrap=bs, topic=topic, count=RECORDS, codec=codec, tag=codec)
    failed = [e for e in events if e["ev"] == "ack_error"]
    assert not failed, f"{len(failed)} records failed, e.g. {failed[:3]}"
    acks = sorted((e for e in events if e["ev"] == "ack"), key=lambda e: e["i"])
    assert [e["i"] for e in acks] == list(range(RECORDS)), "not every record acknowledged once"
    acked = [Acked(e["partition"], e["offset"], e["key"].encode(), e["value"].encode()) for e in acks]
    sent = make_records(codec, RECORDS)
    consumed, ends = confluent_read(bs, topic, PARTITIONS, RECORDS)
    check_read_equals_acked(sent, acked, consumed, PARTITIONS, end_offsets=ends)
    # Java's consumer too: Fetch v17+ by topic id, its own decompression of what its producer compressed
    read = harness.call("read", bootstrap=bs, topic=topic, count=RECORDS)
    by_java = [Consumed(e["partition"], e["offset"], e["key"].encode(), e["value"].encode())
               for e in read if e["ev"] == "record"]  # fmt: skip
    check_read_equals_acked(sent, acked, by_java, PARTITIONS)
