"""Fault tests of our broker's durable log, driven by confluent-kafka.

- kill -9 in the middle of a sustained idempotent acks=all produce, restart on the same data dir and port, let
  librdkafka retry to the end: every acknowledged record is read exactly once, offsets contiguous.
- a torn tail (the active segment truncated in the middle of its last batch while the broker is down) is cut
  back to the last complete batch on restart, every complete batch stays readable, and new records continue
  at the next offset.
- deleted ``.index`` files are recovered on restart: every record readable, from the start and from the middle.

Segment files are ``<data-dir>/<topic>-<partition>/%020d.log`` with ``.index`` / ``.timeindex`` beside them.
"""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from support.brokers import BrokerFactory, BrokerKind, BrokerProcess, api_versions_probe
from support.compat import Acked, Consumed, check_read_equals_acked, position
from support.waiting import wait_until

pytestmark = [pytest.mark.broker_ours, pytest.mark.slow]


# -- helpers -------------------------------------------------------------------------------------------------


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    assert futures[topic].result(timeout=30) is None

    def visible() -> bool:
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        return md is not None and md.error is None and len(md.partitions) == partitions

    wait_until(visible, 30, f"metadata to show {topic} with {partitions} partitions")


class TrackingProducer:
    """An idempotent acks=all producer whose delivery callbacks record what was acknowledged."""

    def __init__(self, bootstrap: str, **extra: object) -> None:
        self.acked: list[Acked] = []
        self.failed: list[str] = []
        self.fatal: list[str] = []
        config: dict[str, object] = {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "partitioner": "murmur2_random",
            "message.timeout.ms": 180_000,  # long enough to outlive a restart
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 500,
            "error_cb": self._on_error,
            **extra,
        }
        self.producer = Producer(config)

    def _on_error(self, err: KafkaError) -> None:
        if err.fatal():
            self.fatal.append(str(err))

    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.failed.append(str(err))
        else:
            self.acked.append(Acked(*position(msg), msg.key(), msg.value()))

    def produce(self, topic: str, key: bytes, value: bytes) -> None:
        """One record, waiting (and serving delivery callbacks) while librdkafka's queue is full."""
        while True:
            try:
                self.producer.produce(topic, value=value, key=key, on_delivery=self._on_delivery)
                return
            except BufferError:
                self.producer.poll(0.05)

    def produce_all(self, topic: str, records: list[tuple[bytes, bytes]], flush_timeout: float = 180) -> None:
        for i, (key, value) in enumerate(records):
            self.produce(topic, key, value)
            if i % 500 == 0:
                self.producer.poll(0)
        left = self.producer.flush(flush_timeout)
        assert left == 0, f"{left} records still undelivered after {flush_timeout}s"

    def close(self) -> None:
        """Destroy the librdkafka handle now, so it stops reconnecting to a broker the test has stopped."""
        self.producer.flush(10)
        del self.producer


def read_all(
    bootstrap: str, topic: str, partitions: int, start: dict[int, int] | None = None, timeout: float = 60
) -> tuple[list[Consumed], dict[int, int]]:
    """Assign-mode read of every partition from ``start`` (default 0) up to its high watermark, plus one short
    poll that must find nothing more. Returns the records and the high watermarks."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader", "enable.auto.commit": False}
    )
    try:
        begin = start or {}
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, begin.get(p, 0)) for p in range(partitions)])
        reached = {p: begin.get(p, 0) for p in range(partitions)}
        got: list[Consumed] = []
        deadline = time.monotonic() + timeout
        while any(reached[p] < ends[p] for p in range(partitions)):
            assert time.monotonic() < deadline, f"read stalled at {reached}, high watermarks {ends}"
            for m in consumer.consume(num_messages=10_000, timeout=0.5):
                assert m.error() is None, f"consume error: {m.error()}"
                c = Consumed(*position(m), m.key(), m.value())
                got.append(c)
                reached[c.partition] = c.offset + 1
        got += [
            Consumed(*position(m), m.key(), m.value())
            for m in consumer.consume(num_messages=10, timeout=0.2)
            if m.error() is None
        ]
        return got, ends
    finally:
        consumer.close()


def records_for(tag: str, n: int, keys: int = 31, pad: int = 0) -> list[tuple[bytes, bytes]]:
    return [(f"k{i % keys}".encode(), f"{tag}-{i:08d}".encode() + b"p" * pad) for i in range(n)]


@dataclass(frozen=True, slots=True)
class BatchExtent:
    start: int  # byte position of the batch in the segment file
    end: int
    base_offset: int
    last_offset: int


_BATCH_HEAD = struct.Struct(">qi")  # baseOffset, batchLength


def batch_extents(segment: Path) -> list[BatchExtent]:
    """Walk a segment file's record batches (v2: baseOffset int64, batchLength int32, ..., lastOffsetDelta at
    byte 23). Asserts the file is exactly a sequence of whole batches."""
    data = segment.read_bytes()
    pos = 0
    out = []
    while pos < len(data):
        assert len(data) - pos >= 61, f"{segment}: {len(data) - pos} stray bytes at {pos}"
        base, length = _BATCH_HEAD.unpack_from(data, pos)
        (last_delta,) = struct.unpack_from(">i", data, pos + 23)
        assert data[pos + 16] == 2, f"{segment}: batch at {pos} has magic {data[pos + 16]}"
        end = pos + 12 + length
        assert end <= len(data), f"{segment}: batch at {pos} runs past the end of the file"
        out.append(BatchExtent(pos, end, base, base + last_delta))
        pos = end
    return out


def partition_dir(data_dir: Path, topic: str, partition: int) -> Path:
    d = data_dir / f"{topic}-{partition}"
    assert d.is_dir(), f"no partition directory {d}; data dir holds {sorted(p.name for p in data_dir.iterdir())}"
    return d


def segments(pdir: Path) -> list[Path]:
    logs = sorted(pdir.glob("*.log"))
    assert logs, f"no segment files in {pdir}: {sorted(p.name for p in pdir.iterdir())}"
    for log in logs:
        assert len(log.stem) == 20 and log.stem.isdigit(), f"segment name {log.name} is not %020d.log"
    return logs


@pytest.fixture
def ours(broker_factory: BrokerFactory, tmp_path: Path) -> Iterator[BrokerProcess]:
    yield broker_factory(BrokerKind.GROUPSTREAM, name="broker", data_dir=tmp_path / "data")


# -- tests ---------------------------------------------------------------------------------------------------


def test_kill9_mid_produce_loses_no_acknowledged_record(ours: BrokerProcess) -> None:
    topic, partitions, total = "kill9", 3, 150_000
    create_topic(ours.bootstrap, topic, partitions)
    records = records_for("kill9", total)
    tracker = TrackingProducer(ours.bootstrap)
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            tracker.produce_all(topic, records)
        except BaseException as e:
            outcome.append(e)

    producer_thread = threading.Thread(target=run, name="kill9-producer")
    producer_thread.start()
    try:
        wait_until(lambda: len(tracker.acked) >= total // 3, 120, "a third of the records to be acknowledged")
        acked_before_kill = len(tracker.acked)
        ours.kill9()
        assert not api_versions_probe(ours.host, ours.port, timeout=0.5), "broker still answers after kill -9"
        ours.start()  # same port, same data dir
    finally:
        producer_thread.join(timeout=240)
    assert not producer_thread.is_alive(), "producer did not finish within 240 s of the restart"
    tracker.close()
    assert not outcome, f"producer raised {outcome[0]!r}"
    assert not tracker.fatal, f"fatal idempotent-producer errors: {tracker.fatal[:3]}"
    assert not tracker.failed, f"{len(tracker.failed)} records failed delivery, e.g. {tracker.failed[:3]}"
    assert acked_before_kill < total, "the kill came after the last acknowledgement: nothing was tested"

    consumed, ends = read_all(ours.bootstrap, topic, partitions)
    # all sent records acknowledged; each read exactly once at its acknowledged offset; contiguous; in order
    check_read_equals_acked(records, tracker.acked, consumed, partitions, end_offsets=ends)


def test_torn_tail_is_truncated_to_the_last_complete_batch(ours: BrokerProcess) -> None:
    topic = "torn"
    create_topic(ours.bootstrap, topic, 1)
    first = records_for("torn", 20_000, pad=50)
    tracker = TrackingProducer(ours.bootstrap, **{"batch.num.messages": 500})
    tracker.produce_all(topic, first)
    tracker.close()
    assert not tracker.failed
    ours.kill9()

    active = segments(partition_dir(ours.data_dir, topic, 0))[-1]
    extents = batch_extents(active)
    assert len(extents) >= 2, f"expected several batches in {active.name}, found {len(extents)}"
    torn = extents[-1]
    with open(active, "r+b") as f:
        f.truncate(torn.start + (torn.end - torn.start) // 2)

    ours.start()
    survivors = sorted((a for a in tracker.acked if a.offset < torn.base_offset), key=lambda a: a.offset)
    consumed, ends = read_all(ours.bootstrap, topic, 1)
    assert ends[0] == torn.base_offset, f"high watermark {ends[0]}, expected {torn.base_offset} after the tear"
    assert [(c.offset, c.key, c.value) for c in consumed] == [(a.offset, a.key, a.value) for a in survivors]

    # the log continues at the next offset after the last complete batch
    more = records_for("after", 2_000)
    tracker2 = TrackingProducer(ours.bootstrap)
    tracker2.produce_all(topic, more)
    tracker2.close()
    assert sorted(a.offset for a in tracker2.acked) == list(range(torn.base_offset, torn.base_offset + 2_000))
    consumed, ends = read_all(ours.bootstrap, topic, 1)
    assert ends[0] == torn.base_offset + 2_000
    check_read_equals_acked(
        [(a.key, a.value) for a in survivors if a.key is not None and a.value is not None] + more,
        survivors + tracker2.acked,
        consumed,
        1,
        end_offsets=ends,
    )


def test_deleted_index_is_rebuilt_on_restart(ours: BrokerProcess) -> None:
    topic, total = "noindex", 30_000
    create_topic(ours.bootstrap, topic, 1)
    records = records_for("noindex", total, pad=500)  # ~15 MB: indexes with many entries
    tracker = TrackingProducer(ours.bootstrap, **{"batch.num.messages": 200})
    tracker.produce_all(topic, records)
    tracker.close()
    assert not tracker.failed
    ours.stop()

    pdir = partition_dir(ours.data_dir, topic, 0)
    logs = segments(pdir)
    indexes = sorted(pdir.glob("*.index"))
    assert {i.stem for i in indexes} == {s.stem for s in logs}, f"every segment has an index: {indexes}"
    for index in indexes:
        index.unlink()

    ours.start()
    consumed, ends = read_all(ours.bootstrap, topic, 1)
    check_read_equals_acked(records, tracker.acked, consumed, 1, end_offsets=ends)

    # positioned reads need the offset index: read from several offsets in the middle
    by_offset = {a.offset: a for a in tracker.acked}
    for start in (1, 7_777, total // 2, total - 3):
        part, _ = read_all(ours.bootstrap, topic, 1, start={0: start})
        assert [c.offset for c in part] == list(range(start, total)), f"read from {start}"
        assert part[0].value == by_offset[start].value
