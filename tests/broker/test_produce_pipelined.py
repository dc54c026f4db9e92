"""One connection's pipelined acks=all Produce requests (issue 14: a producer keeps five in flight): answered in
request order, each only once its records are fsynced, and requests that arrive together share one fsync round
of their partition (group commit) instead of one round each. Large requests, read straight into a buffer of
their own, are stored byte for byte."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from groupstream.protocol.messages import by_name
from groupstream.protocol.records.batch import BatchBuilder
from groupstream.storage.log import PartitionLog
from support.inprocess import OnLoop, broker_on_loop
from support.raw_client import RawClient

PRODUCE = by_name("Produce")


@pytest.fixture
def rng() -> Iterator[random.Random]:
    seed = int.from_bytes(os.urandom(4), "big")
    print(f"seed {seed}")  # shown with a failure
    yield random.Random(seed)


def _batch(values: list[bytes]) -> bytes:
    builder = BatchBuilder()
    for value in values:
        builder.append(0, None, value, ())
    return builder.build()


def _request(topic: str, records: bytes) -> Any:
    R: Any = PRODUCE.Request
    T = R.TopicProduceData
    return R(acks=-1, timeout_ms=30_000, topic_data=[
        T(name=topic, partition_data=[T.PartitionProduceData(index=0, records=records)])])  # fmt: skip


class FlushCounter:
    """Counts the real flushes of one partition log (the flusher calls ``plog.flush`` on its threads)."""

    def __init__(self, plog: PartitionLog) -> None:
        self.rounds = 0
        self._flush = plog.flush

        def counted() -> int:
            self.rounds += 1
            return self._flush()

        plog.flush = counted  # type: ignore[method-assign]


def _send_together(raw: RawClient, topic: str, batches: list[bytes]) -> list[int]:
    """All requests in one write, so the broker reads them together; their correlation ids."""
    corrs, wire = [], []
    for records in batches:
        corr, framed = raw.conn.send_request(PRODUCE, 9, _request(topic, records))
        corrs.append(corr)
        wire.append(framed)
    raw.sock.sendall(b"".join(wire))
    return corrs


def _answers_in_order(raw: RawClient, corrs: list[int], plog: PartitionLog, b: OnLoop) -> list[int]:
    """Base offsets of the answers, checked to come in request order, each for records already fsynced."""
    bases = []
    for corr in corrs:
        got_corr, _, _, body = raw.receive()
        assert got_corr == corr
        (part,) = body.responses[0].partition_responses
        assert part.error_code == 0
        bases.append(part.base_offset)
    assert b.run(lambda: plog.flushed_offset) == b.run(lambda: plog.log_end_offset)
    return bases


def test_pipelined_acks_all_produces_share_one_fsync_round_and_are_answered_in_order(tmp_path: Path) -> None:
    with broker_on_loop(tmp_path) as b:
        b.run(lambda: b.broker.catalog.create_topic("pipe", 1, {}))
        plog = b.run(lambda: b.broker.catalog.log("pipe", 0))
        raw = RawClient(b.broker.config.port, "pipe-test")
        try:
            assert raw.api_versions()
            counter = FlushCounter(plog)
            corrs = _send_together(raw, "pipe", [_batch([b"r%d-%d" % (r, i) for i in range(10)]) for r in range(3)])
            assert _answers_in_order(raw, corrs, plog, b) == [0, 10, 20]
            assert counter.rounds == 1  # one fsync covered all three requests
        finally:
            raw.close()


def test_large_pipelined_produces_are_stored_byte_for_byte(tmp_path: Path, rng: random.Random) -> None:
    """Requests of 64 KB to 1 MB (each read into a buffer of its own) and small ones, pipelined in one write."""
    with broker_on_loop(tmp_path) as b:
        b.run(lambda: b.broker.catalog.create_topic("big", 1, {}))
        plog = b.run(lambda: b.broker.catalog.log("big", 0))
        raw = RawClient(b.broker.config.port, "big-test")
        try:
            sizes = [rng.choice((100, 70_000, 300_000, 1_000_000)) for _ in range(8)]
            values = [[rng.randbytes(size // 4) for _ in range(4)] for size in sizes]
            corrs = _send_together(raw, "big", [_batch(v) for v in values])
            assert _answers_in_order(raw, corrs, plog, b) == [4 * i for i in range(8)]
            stored = b.run(lambda: bytes(plog.read(0, 1 << 30, True, plog.log_end_offset).records))
            for i, v in enumerate(values):
                assert all(value in stored for value in v), f"request {i} of {sizes[i]} bytes"
        finally:
            raw.close()
