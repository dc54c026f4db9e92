"""Placing records on the network thread, with a manual clock: routes, partitions, waiting for metadata,
giving up, and the order of records handed over against records appended directly."""

from __future__ import annotations

import queue
from typing import Any

import pytest
from producer_kit import METADATA, accumulator, metadata

from groupstream.client.errors import KafkaError
from groupstream.client.net.metadata import MetadataCache
from groupstream.client.producer.future import BatchOutcome, DeliveryHandle
from groupstream.client.producer.intake import PendingRecord, RecordIntake
from groupstream.client.producer.memory import BufferMemory
from groupstream.client.producer.partitioner import Partitioner
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.partitioner import default_partition

SIZE = 30


class Rig:
    def __init__(
        self, meta: MetadataCache, max_block_ms: int = 1_000, partitioner: Partitioner | None = None
    ) -> None:
        self.records: queue.SimpleQueue[PendingRecord] = queue.SimpleQueue()
        self.acc = accumulator(batch_size=10_000, linger_ms=10_000)
        self.memory = BufferMemory(10**6)
        self.meta = meta
        self.failed: list[tuple[PendingRecord, BaseException]] = []
        self.intake = RecordIntake(
            self.records,
            self.acc,
            meta,
            partitioner or Partitioner("murmur2_random", lambda n: 0),
            self.memory,
            max_block_ms=max_block_ms,
            on_failed=self.on_failed,
        )

    def on_failed(self, rec: PendingRecord, err: BaseException) -> None:
        self.failed.append((rec, err))
        self.memory.release(rec[-1])

    def put(
        self, topic: str, value: bytes, partition: int | None = None, key: bytes | None = None
    ) -> DeliveryHandle:
        """What ``produce`` does for a topic without a route."""
        outcome = BatchOutcome(topic, -1 if partition is None else partition)
        self.memory.reserve(SIZE, 0)
        with self.acc.lock:
            self.records.put((topic, partition, key, value, 0, None, outcome, None, SIZE))
            self.acc.pending += 1
        return DeliveryHandle.make(outcome, 0, 0)

    def placed(self, topic: str, partition: int) -> list[bytes]:
        from groupstream.protocol.records import RecordBatch

        out: list[bytes] = []
        for b in self.acc.queued((topic, partition)):
            b.seal()
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


def test_records_for_a_known_topic_are_placed_at_once_and_the_topic_gets_a_route() -> None:
    r = Rig(metadata({"t": [1, 1, 1]}))
    first = r.put("t", b"a", key=b"k3")
    r.put("t", b"b", partition=2)
    assert r.intake.poll(0).next_poll_delay_ms is None
    assert default_partition(b"k3", 3) == 1
    assert (r.placed("t", 1), r.placed("t", 2)) == ([b"a"], [b"b"])
    route = r.acc.routes["t"]
    assert route.count == 3 and route.available == (0, 1, 2)
    assert r.acc.pending == 0 and r.acc.outstanding() == 2
    assert first[0].partition == 1  # the record's own outcome learns where it went
    assert r.memory.used == 2 * r.acc.capacity  # each record's own reservation gave way to its batch's


def test_records_handed_over_before_the_route_go_before_records_appended_after_it() -> None:
    meta = metadata({})
    r = Rig(meta)
    r.put("new", b"1", partition=0)
    r.intake.poll(0)  # waiting for the metadata
    r.put("new", b"2", partition=0)  # still queued when the metadata arrives
    answer_metadata(meta, 10, {"new": 1})
    r.intake.poll(10)
    r.acc.append("new", 0, 11, None, b"3", None, 11)  # an application thread, once the route is there
    assert r.placed("new", 0) == [b"1", b"2", b"3"]


def test_a_new_partition_count_grows_the_route() -> None:
    meta = metadata({"t": [1]})
    r = Rig(meta)
    r.put("t", b"a")
    r.intake.poll(0)
    answer_metadata(meta, 5, {"t": 3})
    r.intake.poll(5)
    route = r.acc.routes["t"]
    assert (route.count, len(route.open), len(route.bufs), len(route.limits)) == (3, 3, 3, 3)


def test_records_wait_for_the_metadata_in_order_then_are_placed() -> None:
    meta = metadata({"t": [1]})
    r = Rig(meta, max_block_ms=1_000)
    r.put("new", b"1")
    r.put("new", b"2")
    result = r.intake.poll(100)
    assert result.next_poll_delay_ms == 1_000 and r.acc.records == 0 and r.acc.outstanding() == 2
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
    assert r.acc.outstanding() == 0 and r.memory.used == 0
    assert isinstance(r.acc.refusal, RuntimeError)  # and produce refuses records from now on


def test_a_custom_partitioner_that_raises_fails_its_record_not_the_thread() -> None:
    def broken(topic: str, key: bytes | None, n: int) -> int:
        raise ZeroDivisionError("the user's partitioner")

    r = Rig(metadata({"t": [1, 1]}), partitioner=Partitioner(broken, lambda n: 0))
    r.put("t", b"x")
    r.put("t", b"y", partition=1)
    r.intake.poll(0)
    (_, err) = r.failed[0]
    assert isinstance(err, ZeroDivisionError) and r.placed("t", 1) == [b"y"]
