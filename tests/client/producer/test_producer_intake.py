"""Placing records on the network thread, with a manual clock: partitions, waiting for metadata, giving up."""

from __future__ import annotations

import queue
from concurrent.futures import Future
from typing import Any

import pytest
from producer_kit import METADATA, accumulator, metadata

from groupstream.client.errors import KafkaError
from groupstream.client.net.metadata import MetadataCache
from groupstream.client.producer.intake import PendingRecord, RecordIntake
from groupstream.client.producer.partitioner import Partitioner
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.partitioner import default_partition


class Rig:
    def __init__(self, meta: MetadataCache, max_block_ms: int = 1_000) -> None:
        self.records: queue.SimpleQueue[PendingRecord] = queue.SimpleQueue()
        self.acc = accumulator(batch_size=10_000, linger_ms=10_000)
        self.meta = meta
        self.failed: list[tuple[PendingRecord, BaseException]] = []
        partitioner = Partitioner("murmur2_random", 10_000, lambda n: 0, meta.available_partitions)
        self.intake = RecordIntake(
            self.records,
            self.acc,
            meta,
            partitioner,
            max_block_ms=max_block_ms,
            on_failed=lambda rec, err: self.failed.append((rec, err)),
        )

    def put(self, topic: str, value: bytes, partition: int | None = None, key: bytes | None = None) -> None:
        f: Future[Any] = Future()
        self.records.put((topic, partition, key, value, 0, (), f, None, 30))

    def placed(self, topic: str, partition: int) -> list[bytes]:
        from groupstream.protocol.records import RecordBatch

        out: list[bytes] = []
        for b in self.acc.queued((topic, partition)):
            out += [r.value or b"" for r in RecordBatch(b.close()).records()]
        return out


def answer_metadata(
    meta: MetadataCache, now_ms: int, topics: dict[str, int], unknown: tuple[str, ...] = ()
) -> None:
    R: Any = METADATA.Response
    P = R.MetadataResponseTopic.MetadataResponsePartition
    ts = [
        R.MetadataResponseTopic(
            error_code=0,
            name=n,
            partitions=[P(error_code=0, partition_index=i, leader_id=1) for i in range(c)],
        )
        for n, c in topics.items()
    ] + [R.MetadataResponseTopic(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=n) for n in unknown]
    meta.apply(R(brokers=[R.MetadataResponseBroker(node_id=1, host="h", port=1)], topics=ts), 12, now_ms)


def test_records_for_a_known_topic_are_placed_at_once() -> None:
    r = Rig(metadata({"t": [1, 1, 1]}))
    r.put("t", b"a", key=b"k3")
    r.put("t", b"b", partition=2)
    assert r.intake.poll(0).next_poll_delay_ms is None
    assert default_partition(b"k3", 3) == 1
    assert (r.placed("t", 1), r.placed("t", 2)) == ([b"a"], [b"b"])


def test_records_wait_for_the_metadata_in_order_then_are_placed() -> None:
    meta = metadata({"t": [1]})
    r = Rig(meta, max_block_ms=1_000)
    r.put("new", b"1")
    r.put("new", b"2")
    result = r.intake.poll(100)
    assert result.next_poll_delay_ms == 1_000 and r.acc.records == 0
    assert "new" in meta.topics and meta.update_requested
    r.put("new", b"3")
    r.intake.poll(200)
    answer_metadata(meta, 300, {"t": 1, "new": 1})
    assert r.intake.poll(300).next_poll_delay_ms is None
    assert r.placed("new", 0) == [b"1", b"2", b"3"] and not r.failed


def test_a_topic_that_never_appears_fails_after_max_block_ms() -> None:
    meta = metadata({})
    r = Rig(meta, max_block_ms=500)
    r.put("ghost", b"x")
    r.intake.poll(0)
    answer_metadata(meta, 100, {}, unknown=("ghost",))
    assert r.intake.poll(100).next_poll_delay_ms == 400
    r.intake.poll(500)
    (_, err) = r.failed[0]
    assert isinstance(err, KafkaError) and err.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert "topic 'ghost' does not exist" in str(err) and "max.block.ms=500" in str(err)
    assert "ghost" not in meta.topics  # no more metadata requests for it


def test_a_non_retriable_topic_error_fails_at_once() -> None:
    meta = metadata({})
    r = Rig(meta)
    r.put("secret", b"x")
    r.intake.poll(0)
    R: Any = METADATA.Response
    body = R(
        brokers=[],
        topics=[R.MetadataResponseTopic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name="secret")],
    )
    meta.apply(body, 12, 10)
    r.intake.poll(10)
    (_, err) = r.failed[0]
    assert isinstance(err, KafkaError) and err.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    r.put("secret", b"y")
    r.intake.poll(20)
    assert len(r.failed) == 2


@pytest.mark.parametrize("partition", [3, -1])
def test_a_partition_that_does_not_exist_fails_the_record(partition: int) -> None:
    r = Rig(metadata({"t": [1, 1, 1]}))
    r.put("t", b"x", partition=partition)
    r.intake.poll(0)
    (_, err) = r.failed[0]
    assert isinstance(
        err, KafkaError
    ) and f"partition {partition} of topic 't' does not exist (it has 3)" in str(err)


def test_closing_fails_waiting_and_queued_records() -> None:
    r = Rig(metadata({}))
    r.put("later", b"1")
    r.intake.poll(0)
    r.put("later", b"2")
    assert r.intake.has_pending_work()
    r.intake.fail_pending(RuntimeError("closed"))
    assert len(r.failed) == 2 and not r.intake.has_pending_work()
