"""A corrupt batch in an older segment, found by the real broker after a restart (issue 12, part 2).

Five ~1 MiB segments (``segment.bytes=1048576``) are written through the broker by an idempotent acks=all
confluent-kafka producer. With the broker down, the length field of one batch in the middle of the second
segment is corrupted; then the broker starts again on the same data dir.

What must hold, after a clean stop and after kill -9 alike:

- no segment file is deleted or shortened: what validates is kept (the damaged segment's bytes too);
- every acknowledged record before the damaged batch, after it in the same segment (the broker resynchronises
  on the next intact batch) and in segments 3-5 is consumed, at its acknowledged offset;
- a fetch at the damaged batch's offsets answers CORRUPT_MESSAGE (librdkafka reports it as a consumer error),
  and a consumer that seeks to the next readable offset goes on;
- the broker logs a WARNING naming the partition, the unreadable offsets and the next readable offset.

After a clean stop nothing below the recovery point is scanned at start, so the damage is found by the first
fetch that reaches it. After kill -9 the recovery point (waited for here, so the case is deterministic) lies
past the second segment: the start scans the headers of every segment for the producer state, finds the damage
there, keeps everything and CRC-checks every later segment.

An in-process broker shows the protocol answers: CORRUPT_MESSAGE for the damaged partition only, the next
readable offset fetched normally, ListOffsets earliest/latest unaffected, a timestamp search that would have to
look inside the damaged range answered CORRUPT_MESSAGE, one WARNING per range however often it is fetched.
"""

from __future__ import annotations

import logging
import re
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.test_bad_input import FETCH, PRODUCE, Raw, _fetch_body, _produce_body
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name
from groupstream.protocol.records.batch import BatchBuilder, iter_record_batches
from support.brokers import BrokerFactory, BrokerKind, BrokerProcess
from support.inprocess import running_broker
from support.waiting import wait_until

LIST_OFFSETS = by_name("ListOffsets")

SEGMENT_BYTES = 1 << 20
RECORDS = 4_700  # of ~1 KB: four full 1 MiB segments and a fifth, active one
VALUE_BYTES = 1_000


@dataclass(frozen=True, slots=True)
class Extent:
    start: int  # byte position in the segment file
    size: int
    base_offset: int
    last_offset: int


_HEAD = struct.Struct(">qi")  # baseOffset, batchLength


def extents(segment: Path) -> list[Extent]:
    """The batches of an intact segment file (v2: baseOffset, batchLength, ..., lastOffsetDelta at byte 23)."""
    data = segment.read_bytes()
    pos = 0
    out = []
    while pos < len(data):
        base, length = _HEAD.unpack_from(data, pos)
        (delta,) = struct.unpack_from(">i", data, pos + 23)
        assert data[pos + 16] == 2, f"{segment.name}: no batch at {pos}"
        out.append(Extent(pos, 12 + length, base, base + delta))
        pos += 12 + length
    assert pos == len(data), f"{segment.name}: the last batch runs past the end of the file"
    return out


def snapshot(pdir: Path) -> dict[str, int]:
    """Segment file names and sizes."""
    return {p.name: p.stat().st_size for p in sorted(pdir.iterdir()) if p.suffix == ".log"}


def produce(bootstrap: str, topic: str) -> dict[int, tuple[bytes, bytes]]:
    """RECORDS records through an idempotent acks=all producer; returns offset -> (key, value) as acknowledged."""
    acked: dict[int, tuple[bytes, bytes]] = {}
    failed: list[str] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            failed.append(str(err))
            return
        offset, key, value = msg.offset(), msg.key(), msg.value()
        assert offset is not None and key is not None and value is not None
        acked[offset] = (key, value)

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "batch.size": 32_768,  # about 30 batches per segment, so one can be damaged in the middle
        }
    )
    for i in range(RECORDS):
        value = f"rec-{i:06d}-".encode() + bytes([0x61 + i % 26]) * (VALUE_BYTES - 11)
        while True:
            try:
                producer.produce(topic, key=f"k{i % 37}".encode(), value=value, partition=0, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0, "records still undelivered after 60 s"
    assert not failed, f"{len(failed)} deliveries failed, e.g. {failed[:3]}"
    assert sorted(acked) == list(range(RECORDS)), "acknowledged offsets are not 0..N-1"
    return acked


@dataclass
class Consumed:
    records: dict[int, tuple[bytes, bytes]]
    errors: list[tuple[int, int, str]]  # (position when seen, error code, text)


def consume(bootstrap: str, topic: str, end: int, skip: tuple[int, int]) -> Consumed:
    """Read partition 0 from 0 to ``end``. An error at ``skip[0]`` is answered by seeking to ``skip[1]``, as an
    operator would after reading the broker's warning; any other error fails the read."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader", "enable.auto.commit": False})
    out = Consumed({}, [])
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        position = 0
        deadline = time.monotonic() + 30
        while position < end:
            assert time.monotonic() < deadline, f"read stalled at {position} of {end}; errors {out.errors}"
            for m in consumer.consume(num_messages=1_000, timeout=0.5):
                err = m.error()
                if err is not None:
                    out.errors.append((position, err.code(), err.str()))
                    assert position == skip[0], f"unexpected consumer error at {position}: {err}"
                    assert len(out.errors) <= 5, f"the seek past the damage did not help: {out.errors}"
                    consumer.seek(TopicPartition(topic, 0, skip[1]))
                    position = skip[1]
                    break
                offset, key, value = m.offset(), m.key(), m.value()
                assert offset is not None and key is not None and value is not None
                assert offset == position, f"read offset {offset}, expected {position}"
                out.records[offset] = (key, value)
                position = offset + 1
        return out
    finally:
        consumer.close()


@pytest.fixture
def broker(broker_factory: BrokerFactory, tmp_path: Path) -> Iterator[BrokerProcess]:
    yield broker_factory(BrokerKind.GROUPSTREAM, name="broker", data_dir=tmp_path / "data")


@pytest.mark.broker_ours
@pytest.mark.slow
@pytest.mark.parametrize("stop", ["clean", "kill9"])
def test_intact_later_segments_keep_every_record_after_a_corrupt_batch(broker: BrokerProcess, stop: str) -> None:
    topic = f"damaged-{stop}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    created = admin.create_topics([NewTopic(topic, 1, 1, config={"segment.bytes": str(SEGMENT_BYTES)})])
    assert created[topic].result(timeout=30) is None
    del admin, created  # no librdkafka handle left reconnecting to the stopped broker
    acked = produce(broker.bootstrap, topic)

    pdir = broker.data_dir / f"{topic}-0"
    logs = sorted(pdir.glob("*.log"))
    assert len(logs) == 5, f"expected five segments, found {[p.name for p in logs]}"
    if stop == "clean":
        broker.stop()
        assert (pdir / "clean-shutdown").exists()
    else:
        active_base = int(logs[-1].stem)

        def recovery_point() -> int:
            text = (pdir / "recovery-point").read_text() if (pdir / "recovery-point").exists() else "0\n-1\n"
            return int(text.split("\n")[1])

        wait_until(lambda: recovery_point() >= active_base, 20, "the flusher to checkpoint past segment 4")
        broker.kill9()
        assert not (pdir / "clean-shutdown").exists()

    second = extents(logs[1])
    victim = second[len(second) // 2]
    after = second[len(second) // 2 + 1]
    assert after.base_offset == victim.last_offset + 1
    with open(logs[1], "r+b") as f:  # the length field, 8 bytes into the batch: now it ends mid-records
        f.seek(victim.start + 8)
        f.write(struct.pack(">i", victim.size - 12 - 17))
    before = snapshot(pdir)

    broker.start()
    end = RECORDS
    got = consume(broker.bootstrap, topic, end, skip=(victim.base_offset, after.base_offset))

    lost = range(victim.base_offset, after.base_offset)
    expected = {o: kv for o, kv in acked.items() if o not in lost}
    missing = sorted(set(expected) - set(got.records))
    assert not missing, f"{len(missing)} acknowledged records not read, first {missing[:5]} (damage at {lost})"
    assert got.records == expected
    assert [(p, code) for p, code, _ in got.errors] == [(victim.base_offset, KafkaError.INVALID_MSG)], got.errors

    assert snapshot(pdir) == before, "a segment file was deleted or cut"
    warning = re.compile(
        rf"WARNING .*{topic}-0.*offsets {victim.base_offset}\.\.{victim.last_offset} are unreadable.*"
        rf"next readable offset is {after.base_offset}"
    )
    text = broker.log_text()
    assert warning.search(text), f"no WARNING about the unreadable range\n{broker.log_tail()}"


# -- the protocol answers, in process ------------------------------------------------------------------------


def _records(first: int, n: int) -> bytes:
    """A batch of ``n`` records with timestamps 1000 * (first + i), so timestamps follow offsets."""
    b = BatchBuilder()
    for i in range(n):
        b.append(value=f"v{first + i}".encode() * 20, key=None, timestamp=1000 * (first + i))
    return b.build()


def _fetch(raw: Raw, offsets: dict[int, int]) -> dict[int, tuple[int, list[int]]]:
    """Fetch ``partition -> offset`` of topic "t" in one request: ``partition -> (error code, offsets read)``."""
    body = _fetch_body("t", 0, 0, max_wait_ms=0)
    ft = body.topics[0]
    parts = [ft.partitions[0]._replace(partition=p, fetch_offset=o) for p, o in offsets.items()]
    raw.send(FETCH, 12, body._replace(topics=[ft._replace(partitions=parts)]))
    out = {}
    for part in raw.receive()[3].responses[0].partitions:
        read = [r.offset for b in iter_record_batches(part.records) for r in b.records()] if part.records else []
        out[part.partition_index] = (part.error_code, read)
    return out


def _list_offset(raw: Raw, timestamp: int) -> tuple[int, int]:
    R = LIST_OFFSETS.Request
    T = R.ListOffsetsTopic
    raw.send(LIST_OFFSETS, 7, R(replica_id=-1, isolation_level=0, topics=[
        T(name="t", partitions=[T.ListOffsetsPartition(partition_index=0, timestamp=timestamp)])]))  # fmt: skip
    p = raw.receive()[3].topics[0].partitions[0]
    return p.error_code, p.offset


def test_fetch_answers_corrupt_message_for_the_damaged_range_only(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with running_broker(tmp_path) as broker:
        broker.catalog.create_topic("t", 2, {"segment.bytes": "2000"})
        raw = Raw(broker.config.port)
        for partition in (0, 1):
            for first in range(0, 60, 3):  # 20 batches of 3 records, ~480 bytes each: 4 per segment
                raw.send(PRODUCE, 9, _produce_body("t", partition, _records(first, 3)))
                assert raw.receive()[3].responses[0].partition_responses[0].error_code == 0
        raw.close()
    logs = sorted((tmp_path / "t-0").glob("*.log"))
    assert len(logs) >= 3, logs
    batches = extents(logs[1])
    victim, after = batches[1], batches[2]  # the second batch of the second segment: it ends mid-records
    with open(logs[1], "r+b") as f:
        f.seek(victim.start + 8)
        f.write(struct.pack(">i", victim.size - 12 - 40))
    before, first, last, resume = batches[0].base_offset, victim.base_offset, victim.last_offset, after.base_offset

    with caplog.at_level(logging.WARNING), running_broker(tmp_path) as broker:
        raw = Raw(broker.config.port)
        assert _fetch(raw, {0: before})[0] == (0, list(range(before, first)))  # stops before the damage
        for _ in range(3):  # the same offsets of the other partition are fine
            got = _fetch(raw, {0: first + 1, 1: first + 1})
            assert got[0] == (ErrorCode.CORRUPT_MESSAGE, [])
            assert got[1][0] == 0 and got[1][1][0] == first and got[1][1][-1] >= resume
        offset, read = resume, []  # from the next readable offset to the end
        while offset < 60:
            code, part = _fetch(raw, {0: offset})[0]
            assert code == 0 and part and part[0] == offset
            read += part
            offset = part[-1] + 1
        assert read == list(range(resume, 60))
        assert _list_offset(raw, -2) == (0, 0) and _list_offset(raw, -1) == (0, 60)
        assert _list_offset(raw, 1000 * (first - 1)) == (0, first - 1)
        assert _list_offset(raw, 1000 * first)[0] == ErrorCode.CORRUPT_MESSAGE  # the range may hold it: no guess
        third = int(logs[2].stem)  # the damaged segment's largest timestamp lies below: it is not searched
        assert _list_offset(raw, 1000 * third) == (0, third)
        raw.close()
    fetch_warnings = [r.getMessage() for r in caplog.records if r.name == "groupstream.broker.fetch"]
    assert len(fetch_warnings) == 1, fetch_warnings
    assert f"partition t-0: offsets {first}..{last} are unreadable" in fetch_warnings[0]
    assert f"the next readable offset is {resume}" in fetch_warnings[0]
