"""Our Producer against real brokers (ours and Tansu), read back by confluent-kafka's consumer.

- 100k keyed records with each codec: every acknowledged record read exactly once, in order per partition, at
  the partition Java's murmur2 picks;
- idempotent produce across a kill -9 and restart of our broker: nothing lost, nothing twice, order kept;
- a topic that does not exist (auto-creation off) fails the future with a KafkaError naming it;
- callbacks on the application thread, back-pressure, closing, acks=0, headers and serializers.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from groupstream.client.errors import KafkaError
from groupstream.client.net.network_thread import ClientClosedError
from groupstream.client.producer import BufferFullError, Producer, ProducerClosedError, RecordMetadata
from groupstream.client.producer.record_path import ROUTE_WAIT_MS
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.records import Codec, iter_batches
from support.brokers import BrokerFactory, BrokerKind, BrokerProcess, free_port
from support.compat import (
    CODECS,
    Acked,
    check_read_equals_acked,
    confluent_read,
    expects_true_high_watermark,
    make_records,
)
from support.waiting import wait_until

PARTITIONS = 6
RECORDS_PER_CODEC = 100_000


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    assert (
        admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(
            30
        )
        is None
    )

    def visible() -> bool:
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        return md is not None and md.error is None and len(md.partitions) == partitions

    wait_until(visible, 30, f"metadata to show {topic} with {partitions} partitions")


def acked_of(futures: list[Future[RecordMetadata]], records: list[tuple[bytes, bytes]]) -> list[Acked]:
    out = []
    for f, (k, v) in zip(futures, records, strict=True):
        md = f.result(0)
        out.append(Acked(md.partition, md.offset, k, v))
    return out


def codecs_on_disk(broker: BrokerProcess, topic: str) -> set[int]:
    found: set[int] = set()
    for log in Path(broker.data_dir).glob(f"{topic}-*/*.log"):
        data = log.read_bytes()
        found |= {h.compression for _, h in iter_batches(data)}
    return found


@pytest.fixture
def producers() -> Iterator[list[Producer]]:
    made: list[Producer] = []
    yield made
    for p in made:
        p.close(5)


# -- data path -----------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("codec", CODECS)
def test_each_codec_is_read_back_exactly_by_confluent(
    broker: BrokerProcess, codec: str, producers: list[Producer]
) -> None:
    topic = unique(f"codec-{codec}")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    records = make_records(codec, RECORDS_PER_CODEC)
    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 5})
    producers.append(p)
    futures = [p.produce(topic, v, key=k) for k, v in records]
    assert p.flush(180) == 0
    acked = acked_of(futures, records)
    consumed, ends = confluent_read(broker.bootstrap, topic, PARTITIONS, len(records), timeout_s=120)
    check_read_equals_acked(
        records,
        acked,
        consumed,
        PARTITIONS,
        end_offsets=ends if expects_true_high_watermark(broker.kind) else None,
    )
    if broker.kind is BrokerKind.GROUPSTREAM:
        assert codecs_on_disk(broker, topic) == {int(Codec[codec.upper()])}


@pytest.mark.broker_ours
@pytest.mark.slow
def test_idempotent_produce_survives_kill9_and_restart(
    broker_factory: BrokerFactory, producers: list[Producer], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="groupstream.client")
    broker = broker_factory(BrokerKind.GROUPSTREAM)
    topic = unique("kill9")
    create_topic(broker.bootstrap, topic, 3)
    records = make_records("kill9", 40_000)
    p = Producer(
        {"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "reconnect.backoff.max.ms": 200,
         "retry.backoff.max.ms": 200}
    )  # fmt: skip
    producers.append(p)
    futures: list[Future[RecordMetadata]] = []
    for i, (k, v) in enumerate(records):
        futures.append(p.produce(topic, v, key=k))
        if i == 15_000:
            futures[10_000].result(60)  # acknowledgements are flowing, requests are in flight
            broker.kill9()
        elif i == 25_000:
            assert not futures[20_000].done()  # held while the broker is down
            broker.start()  # same port and data directory
    assert p.flush(180) == 0
    errors = [f.exception(0) for f in futures if f.exception(0) is not None]
    assert not errors, f"{len(errors)} records failed, e.g. {errors[:3]}"
    assert any("disconnected from node" in r.getMessage() for r in caplog.records)
    acked = acked_of(futures, records)
    consumed, ends = confluent_read(broker.bootstrap, topic, 3, len(records), timeout_s=120)
    check_read_equals_acked(records, acked, consumed, 3, end_offsets=ends)


@pytest.mark.broker_ours
def test_an_unknown_topic_fails_the_future_with_a_kafka_error_naming_it(
    broker_factory: BrokerFactory, producers: list[Producer]
) -> None:
    broker = broker_factory(BrokerKind.GROUPSTREAM, settings={"auto.create.topics.enable": "false"})
    p = Producer({"bootstrap.servers": broker.bootstrap, "max.block.ms": 1_000})
    producers.append(p)
    seen: list[tuple[BaseException | None, RecordMetadata]] = []
    start = time.monotonic()
    f = p.produce("no-such-topic", b"x", on_delivery=lambda e, md: seen.append((e, md)))
    with pytest.raises(KafkaError) as info:
        f.result(10)
    assert time.monotonic() - start >= 0.9
    err = info.value
    assert err.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and err.resource == "no-such-topic"
    assert "topic 'no-such-topic' does not exist" in str(err) and "max.block.ms=1000" in str(err)
    assert p.poll(5) == 1 and seen[0][0] is err and seen[0][1].topic == "no-such-topic"
    assert len(p) == 0


def test_auto_created_topics_work(broker: BrokerProcess, producers: list[Producer]) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap})
    producers.append(p)
    md = p.produce(unique("auto"), b"v").result(30)
    assert md.offset == 0 and md.partition >= 0


def test_the_first_record_of_a_new_topic_waits_for_its_route_so_the_rest_are_appended_directly(
    groupstream_broker: BrokerProcess, producers: list[Producer]
) -> None:
    """As Java's send waits for a new topic's metadata: without the wait, a loop handed every record to the
    network thread while holding the GIL that thread needs to fetch the route (issue 17's transaction bench)."""
    topic = unique("route")
    create_topic(groupstream_broker.bootstrap, topic, 3)
    p = Producer({"bootstrap.servers": groupstream_broker.bootstrap})
    producers.append(p)
    first = p.produce(topic, b"first")
    assert topic in p._acc.routes and p._acc.pending == 0  # the route came while produce() waited; placed
    rest = [p.produce(topic, b"v%d" % i) for i in range(1000)]
    assert p.flush(30) == 0
    md = first.result(0)
    assert md.offset == 0 and [f.result(0).partition for f in rest[:10]] == [md.partition] * 10


def test_a_new_topic_no_broker_answers_for_holds_only_its_first_record_back_and_briefly(
    producers: list[Producer],
) -> None:
    """The first record waits ROUTE_WAIT_MS for the route, not max.block.ms (60 s here); later records of a
    topic still without a route do not wait (they fail after max.block.ms, as before)."""
    p = Producer({"bootstrap.servers": f"127.0.0.1:{free_port()}"})
    producers.append(p)
    start = time.monotonic()
    p.produce("t", b"x")
    first = time.monotonic() - start
    start = time.monotonic()
    p.produce("t", b"y")
    second = time.monotonic() - start
    assert ROUTE_WAIT_MS / 1000 <= first < 10, first
    assert second < ROUTE_WAIT_MS / 1000, second
    assert len(p) == 2


def test_callbacks_run_on_the_polling_thread_and_flush_reports_what_is_left(
    groupstream_broker: BrokerProcess, producers: list[Producer]
) -> None:
    topic = unique("cb")
    create_topic(groupstream_broker.bootstrap, topic, 2)
    p = Producer({"bootstrap.servers": groupstream_broker.bootstrap, "linger.ms": 50})
    producers.append(p)
    calls: list[tuple[str, BaseException | None, RecordMetadata]] = []

    def cb(err: BaseException | None, md: RecordMetadata) -> None:
        calls.append((threading.current_thread().name, err, md))

    ts = 1_700_000_000_000
    futures = [p.produce(topic, b"v%d" % i, key=b"k", timestamp=ts + i, on_delivery=cb) for i in range(10)]
    assert len(p) == 10
    assert p.flush(30) == 0 and len(p) == 0
    assert len(calls) == 10 and {c[0] for c in calls} == {threading.current_thread().name}
    mds = [f.result(0) for f in futures]
    assert [c[2] for c in calls] == mds
    assert [m.offset for m in mds] == list(range(10)) and len({m.partition for m in mds}) == 1
    assert [m.timestamp for m in mds] == [ts + i for i in range(10)]


def test_headers_serializers_and_explicit_partitions(
    broker: BrokerProcess, producers: list[Producer]
) -> None:
    topic = unique("hdr")
    create_topic(broker.bootstrap, topic, 3)
    p = Producer(
        {"bootstrap.servers": broker.bootstrap, "key.serializer": lambda k: str(k).encode(),
         "value.serializer": lambda v: repr(v).encode()}
    )  # fmt: skip
    producers.append(p)
    md = p.produce(topic, {"a": 1}, key=42, partition=2, headers={"h": "x", "n": None}).result(30)
    assert md.partition == 2
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": f"{topic}-r", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, 2, 0)])
        msgs: list[Any] = []
        deadline = time.monotonic() + 30
        while not msgs and time.monotonic() < deadline:
            msgs = [m for m in consumer.consume(1, 0.5) if m.error() is None]
        (m,) = msgs
        assert (m.key(), m.value(), m.headers()) == (b"42", b"{'a': 1}", [("h", b"x"), ("n", None)])
    finally:
        consumer.close()
    with pytest.raises(KafkaError, match="partition 3 of topic") as info:
        p.produce(topic, b"x", partition=3).result(30)
    assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_acks_zero(groupstream_broker: BrokerProcess, producers: list[Producer]) -> None:
    topic = unique("acks0")
    create_topic(groupstream_broker.bootstrap, topic, 1)
    p = Producer({"bootstrap.servers": groupstream_broker.bootstrap, "acks": 0})
    producers.append(p)
    assert p.produce(topic, b"x").result(30).offset == -1
    assert p.flush(10) == 0


def test_a_record_above_max_request_size_fails_alone(producers: list[Producer]) -> None:
    p = Producer({"bootstrap.servers": f"127.0.0.1:{free_port()}", "max.request.size": 1000})
    producers.append(p)
    with pytest.raises(KafkaError, match=r"max\.request\.size=1000") as info:
        p.produce("t", b"x" * 2000).result(5)
    assert info.value.code == ErrorCode.MESSAGE_TOO_LARGE


def test_a_full_buffer_blocks_for_max_block_ms_then_raises(producers: list[Producer]) -> None:
    p = Producer(
        {"bootstrap.servers": f"127.0.0.1:{free_port()}", "buffer.memory": 1_000, "max.block.ms": 300}
    )
    producers.append(p)
    start = time.monotonic()
    with pytest.raises(BufferFullError, match=r"buffer\.memory=1000") as info:
        for _ in range(100):
            p.produce("t", b"x" * 100)
    assert isinstance(info.value, BufferError) and time.monotonic() - start >= 0.3


def test_close_fails_what_cannot_be_delivered_and_refuses_more(producers: list[Producer]) -> None:
    p = Producer({"bootstrap.servers": f"127.0.0.1:{free_port()}"})
    seen: list[BaseException | None] = []
    f = p.produce("t", b"x", on_delivery=lambda e, md: seen.append(e))
    start = time.monotonic()
    p.close(0.3)
    assert time.monotonic() - start < 5
    with pytest.raises(ProducerClosedError, match="closed before this record was delivered"):
        f.result(0)
    assert len(seen) == 1 and isinstance(seen[0], ClientClosedError)  # the callback ran inside close()
    with pytest.raises(ProducerClosedError):
        p.produce("t", b"y")
    p.close()  # again: nothing happens


def test_context_manager_flushes_on_exit(groupstream_broker: BrokerProcess) -> None:
    topic = unique("ctx")
    create_topic(groupstream_broker.bootstrap, topic, 1)
    with Producer({"bootstrap.servers": groupstream_broker.bootstrap, "linger.ms": 1_000}) as p:
        f = p.produce(topic, b"x")
    assert f.result(0).offset == 0
