"""The hot path and the bulk paths against real brokers, read back by confluent-kafka's consumer.

- ``produce_batch`` and ``produce_arrow`` (Spark's sink columns: keys with nulls, string values, explicit
  partitions, headers, a topic column, sliced and chunked tables): every row read back exactly once, keys at
  Java's partition, explicit partitions kept, rows of a partition in row order;
- several threads producing at once lose, duplicate or reorder nothing;
- per record, ``produce`` reserves no memory, creates no future and wakes no thread: that happens per batch.
"""

from __future__ import annotations

import threading
import uuid
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from groupstream.client.errors import KafkaError
from groupstream.client.producer import Producer, SerializationError
from groupstream.client.producer.future import DeliveryHandle
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.partitioner import default_partition
from support.brokers import BrokerFactory, BrokerKind, BrokerProcess
from support.waiting import wait_until

PARTITIONS = 4


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(30)

    def visible() -> bool:
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        return md is not None and md.error is None and len(md.partitions) == partitions

    wait_until(visible, 30, f"metadata to show {topic} with {partitions} partitions")


Read = tuple[int, bytes | None, bytes | None, list[tuple[str, bytes]]]  # partition, key, value, headers


def read_all(bootstrap: str, topic: str, expected: int, partitions: int = PARTITIONS) -> list[Read]:
    """Every record of ``topic`` in offset order per partition, plus a short poll that must add nothing."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"{topic}-r", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got: list[Read] = []

        def done() -> bool:
            for m in consumer.consume(num_messages=10_000, timeout=0.2):
                assert m.error() is None, m.error()
                got.append((m.partition(), m.key(), m.value(), m.headers() or []))
            return len(got) >= expected

        wait_until(done, 60, f"{expected} records in {topic}")
        got += [
            (m.partition(), m.key(), m.value(), []) for m in consumer.consume(10, 0.2) if m.error() is None
        ]
        return got
    finally:
        consumer.close()


def check_rows(read: list[Read], rows: list[tuple[bytes | None, int, int | None]], partitions: int) -> None:
    """``rows``: (key, row number, explicit partition) of every row; values carry the row number."""
    assert len(read) == len(rows), f"{len(read)} read, {len(rows)} produced"
    by_number = {n: (k, p) for k, n, p in rows}
    seen: set[int] = set()
    last: dict[int, int] = defaultdict(lambda: -1)
    for partition, key, value, _headers in read:
        assert value is not None
        n = int(value.split(b"|")[0])
        assert n not in seen, f"row {n} read twice"
        seen.add(n)
        k, explicit = by_number[n]
        assert key == k
        if explicit is not None:
            assert partition == explicit, f"row {n} asked for partition {explicit}, read from {partition}"
        elif k is not None:
            assert partition == default_partition(k, partitions), (
                f"row {n}: key {k!r} not at Java's partition"
            )
        assert n > last[partition], f"partition {partition}: row {n} after row {last[partition]}"
        last[partition] = n


@pytest.fixture
def producers() -> Iterator[list[Producer]]:
    made: list[Producer] = []
    yield made
    for p in made:
        p.close(5)


def key_of(i: int) -> bytes | None:
    return None if i % 7 == 0 else b"k%d" % (i % 50)


def test_produce_batch_and_produce_arrow_are_read_back_exactly(
    broker: BrokerProcess, producers: list[Producer]
) -> None:
    topic = unique("bulk")
    create_topic(broker.bootstrap, topic)
    p = Producer({"bootstrap.servers": broker.bootstrap, "batch.size": 4_096, "linger.ms": 5})
    producers.append(p)
    n = 12_000
    batch_rows = [(key_of(i), b"%d|batch" % i) for i in range(n)]
    bulk = p.produce_batch(topic, batch_rows)  # the topic has no route yet: its first row waits for one
    assert bulk.result(60) == n
    explicit = p.produce_batch(topic, [(None, b"%d|p2" % (n + i)) for i in range(50)], partition=2)
    table = pa.table(
        {
            "key": pa.array([key_of(i) for i in range(n)], pa.binary()),
            "value": pa.array([f"{2 * n + i}|arrow" for i in range(n)], pa.string()),
            "partition": pa.array([i % PARTITIONS if i % 3 == 0 else None for i in range(n)], pa.int64()),
        }
    )
    chunked = pa.concat_tables([table.slice(0, 5_000), table.slice(5_000)])  # two chunks, the second sliced
    arrow = p.produce_arrow(chunked, topic=topic)
    assert arrow.result(60) == n and explicit.result(60) == 50
    assert p.flush(30) == 0 and len(p) == 0
    expected = (
        [(key_of(i), i, None) for i in range(n)]
        + [(None, n + i, 2) for i in range(50)]
        + [(key_of(i), 2 * n + i, i % PARTITIONS if i % 3 == 0 else None) for i in range(n)]
    )
    check_rows(read_all(broker.bootstrap, topic, len(expected)), expected, PARTITIONS)


def test_produce_arrow_takes_headers_a_topic_column_and_large_types(
    groupstream_broker: BrokerProcess, producers: list[Producer]
) -> None:
    a, b = unique("arrow-a"), unique("arrow-b")
    for t in (a, b):
        create_topic(groupstream_broker.bootstrap, t)
    p = Producer({"bootstrap.servers": groupstream_broker.bootstrap})
    producers.append(p)
    header_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    n = 300
    table = pa.table(
        {
            "topic": pa.array([a if i % 2 else b for i in range(n)]),
            "key": pa.array([key_of(i) for i in range(n)], pa.large_binary()),
            "value": pa.array([b"%d|h" % i for i in range(n)], pa.large_binary()),
            "headers": pa.array(
                [[{"key": "i", "value": b"%d" % i}] if i % 5 == 0 else None for i in range(n)], header_type
            ),
        }
    )
    assert p.produce_arrow(table).result(60) == n
    for t, parity in ((a, 1), (b, 0)):
        read = read_all(groupstream_broker.bootstrap, t, n // 2)
        check_rows(read, [(key_of(i), i, None) for i in range(n) if i % 2 == parity], PARTITIONS)
        headers = {int((v or b"").split(b"|")[0]): h for _p, _k, v, h in read}
        assert all(headers[i] == ([("i", b"%d" % i)] if i % 5 == 0 else []) for i in headers)


def test_bulk_paths_refuse_what_cannot_be_delivered(
    broker_factory: BrokerFactory, producers: list[Producer]
) -> None:
    broker = broker_factory(BrokerKind.GROUPSTREAM, settings={"auto.create.topics.enable": "false"})
    p = Producer({"bootstrap.servers": broker.bootstrap, "max.block.ms": 1_000})
    producers.append(p)
    with pytest.raises(KafkaError) as info:
        p.produce_batch("no-such-topic", [(None, b"x"), (None, b"y")])
    assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    topic = unique("refuse")
    create_topic(broker.bootstrap, topic, 2)
    with pytest.raises(ValueError, match=r"outside 0\.\.1"):
        p.produce_arrow(pa.table({"value": [b"a", b"b"], "partition": [0, 2]}), topic=topic)
    with pytest.raises(ValueError, match="partition 5 of topic"):
        p.produce_batch(topic, [(None, b"a")], partition=5)
    with pytest.raises(TypeError):
        p.produce_arrow(pa.table({"value": [1, 2]}), topic=topic)
    assert p.flush(10) == 0
    assert p.produce_batch(topic, []).result(0) == 0


def test_threads_producing_at_once_lose_duplicate_and_reorder_nothing(
    groupstream_broker: BrokerProcess, producers: list[Producer]
) -> None:
    topic = unique("threads")
    create_topic(groupstream_broker.bootstrap, topic)
    p = Producer({"bootstrap.servers": groupstream_broker.bootstrap, "batch.size": 2_048, "linger.ms": 1,
                  "buffer.memory": 200_000})  # fmt: skip
    producers.append(p)
    threads, per_thread = 4, 15_000
    errors: list[BaseException] = []

    def run(t: int) -> None:
        try:
            for i in range(per_thread):
                key = b"t%d-%d" % (t, i % 16) if i % 3 else None
                p.produce(topic, b"%d|%d" % (t * per_thread + i, t), key=key)
                if i % 5_000 == 0:  # the bulk path interleaved with single records
                    p.produce_batch(topic, [(None, b"%d|bulk" % (10**9 + t * 10 + i // 5_000))])
        except BaseException as e:
            errors.append(e)

    workers = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
    assert not errors and p.flush(60) == 0
    read = read_all(groupstream_broker.bootstrap, topic, threads * (per_thread + 3))
    singles = [r for r in read if not (r[2] or b"").endswith(b"bulk")]
    assert len(read) == threads * (per_thread + 3) and len(singles) == threads * per_thread
    numbers = [int((v or b"").split(b"|")[0]) for _p, _k, v, _h in singles]
    assert sorted(numbers) == list(range(threads * per_thread))
    last: dict[tuple[int, int], int] = defaultdict(lambda: -1)  # (thread, partition) -> last row number
    for partition, key, value, _h in singles:
        n, t = (int(x) for x in (value or b"").split(b"|"))
        if key is not None:
            assert partition == default_partition(key, PARTITIONS)
        assert n > last[(t, partition)], (
            f"thread {t}, partition {partition}: {n} after {last[(t, partition)]}"
        )
        last[(t, partition)] = n


def test_per_record_work_is_an_append_memory_futures_and_wakeups_go_per_batch(
    groupstream_broker: BrokerProcess, producers: list[Producer], monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = unique("hot")
    create_topic(groupstream_broker.bootstrap, topic, 1)
    p = Producer({"bootstrap.servers": groupstream_broker.bootstrap, "linger.ms": 60_000, "batch.size": 16_384,
                  "batch.max.size": 16_384})  # fmt: skip
    producers.append(p)
    warm_up = p.produce(topic, b"warm-up")
    assert p.flush(30) == 0 and warm_up.result(0).offset == 0  # the topic has a route; nothing is queued
    futures = 0
    real_init = Future.__init__

    def counting_init(self: Future[Any]) -> None:
        nonlocal futures
        futures += 1
        real_init(self)

    wakeups = 0
    real_wakeup = p._wakeup

    def counting_wakeup() -> None:
        nonlocal wakeups
        wakeups += 1
        real_wakeup()

    monkeypatch.setattr(Future, "__init__", counting_init)
    monkeypatch.setattr(p, "_wakeup", counting_wakeup)
    used_before = p._memory.used
    handles = [p.produce(topic, b"x" * 100) for _ in range(1_000)]
    assert all(isinstance(h, DeliveryHandle) for h in handles)
    batches = len({id(h[0]) for h in handles})  # records share their batch's outcome
    assert 6 <= batches <= 8  # 1,000 records of ~120 bytes in batches of 16 KB
    assert futures == batches  # one future per batch, none per record
    assert wakeups <= batches  # the network thread hears of full batches, not of records
    assert p._memory.used - used_before == batches * 16_384  # buffer.memory by the batch
    assert p.flush(30) == 0
    assert [h.result(0).offset for h in handles] == list(range(1, 1_001))
    assert p._memory.used == 0


def test_the_one_call_path_takes_str_and_buffers_and_refuses_other_types(
    groupstream_broker: BrokerProcess, producers: list[Producer]
) -> None:
    topic = unique("types")
    create_topic(groupstream_broker.bootstrap, topic, 1)
    p = Producer({"bootstrap.servers": groupstream_broker.bootstrap})
    producers.append(p)
    assert p.produce(topic, b"first").result(30).offset == 0  # the topic has a route from now on
    mutable = bytearray(b"bytearray")
    handles = [
        p.produce(topic, "str", key="ключ"),
        p.produce(topic, mutable),
        p.produce(topic, memoryview(b"view")),
    ]
    mutable[:] = b"changed"  # appended already: the record keeps what it was given
    with pytest.raises(SerializationError, match=r"value for topic .* is a int"):
        p.produce(topic, 42)
    with pytest.raises(SerializationError, match="key for topic"):
        p.produce(topic, b"v", key=3.5)
    with pytest.raises(ValueError, match="timestamp"):
        p.produce(topic, b"v", timestamp=-5)
    assert [h.result(30).offset for h in handles] == [1, 2, 3]
    read = read_all(groupstream_broker.bootstrap, topic, 4, partitions=1)
    assert [(k, v) for _p, k, v, _h in read] == [
        (None, b"first"), ("ключ".encode(), b"str"), (None, b"bytearray"), (None, b"view")
    ]  # fmt: skip


def test_a_bulk_call_opens_batches_sized_for_its_rows(
    groupstream_broker: BrokerProcess, producers: list[Producer]
) -> None:
    topic = unique("sized")
    create_topic(groupstream_broker.bootstrap, topic, 2)
    p = Producer({"bootstrap.servers": groupstream_broker.bootstrap, "batch.size": 4_096,
                  "batch.max.size": 200_000, "linger.ms": 60_000})  # fmt: skip
    producers.append(p)
    warm_up = p.produce_batch(topic, [(None, b"warm-up")], partition=0)  # the topic gets a route
    assert p.flush(30) == 0 and warm_up.result(0) == 1
    rows = 20_000  # 100-byte values: about 2.3 MB, so 12 batches of 200 KB rather than about 560 of 4 KB
    table = pa.table({"value": pa.array([b"%099d" % i for i in range(rows)], pa.binary())})
    bulk = p.produce_arrow(table, topic=topic, partition=1)
    assert len(bulk._outcomes) <= 14
    assert p.flush(30) == 0 and bulk.result(0) == rows
    read = read_all(groupstream_broker.bootstrap, topic, rows + 1, partitions=2)
    assert [int(v or b"") for part, _k, v, _h in read if part == 1] == list(range(rows))
