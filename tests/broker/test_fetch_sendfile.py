"""Fetch answered from segment files with sendfile (issue 13, broker >= 1.0x Kafka): on a PLAINTEXT listener a
partition's records of 32 KiB or more go to the socket as a range of the segment file, with batch boundaries
found from the offset index and batch headers. These tests fetch through the broker's socket and compare every
partition's records byte for byte with the copying read of the same log (`PartitionLog.read`), for single
requests, pipelined ones (responses in request order) and across segment rolls, including a roll while
requests are in flight."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from groupstream.broker.handlers.fetch import ZERO_COPY_FROM
from groupstream.protocol.messages import by_name
from groupstream.protocol.records.batch import BatchBuilder
from groupstream.storage.file_range import FileRange
from support.inprocess import OnLoop, broker_on_loop
from support.raw_client import RawClient

FETCH = by_name("Fetch")
PART_MAX = 200_000


def append_batches(b: OnLoop, topic: str, rng: random.Random, count: int) -> None:
    """``count`` batches of 1 to 40 records of 50 B to 3 KB random values."""

    def go() -> None:
        plog = b.broker.catalog.log(topic, 0)
        for _ in range(count):
            builder = BatchBuilder()
            for _ in range(rng.randint(1, 40)):
                builder.append(int(time.time() * 1000), None, rng.randbytes(rng.randint(50, 3000)))
            plog.append_checked(bytearray(builder.build()), int(time.time() * 1000))

    b.run(go)


def request(topic: str, offset: int) -> Any:
    R = FETCH.Request
    T_ = R.FetchTopic
    return R(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 24, isolation_level=0, session_id=0,
             session_epoch=-1, topics=[T_(topic=topic, partitions=[T_.FetchPartition(
                 partition=0, fetch_offset=offset, log_start_offset=-1, partition_max_bytes=PART_MAX)])],
             forgotten_topics_data=[], rack_id="")  # fmt: skip


def copied(b: OnLoop, topic: str, offset: int) -> bytes:
    """What the copying path reads for a fetch at ``offset``."""
    plog = b.run(lambda: b.broker.catalog.log(topic, 0))
    return b.run(lambda: plog.read(offset, PART_MAX, True, plog.log_end_offset).records)


def next_offset(b: OnLoop, topic: str, offset: int) -> int:
    plog = b.run(lambda: b.broker.catalog.log(topic, 0))
    return b.run(lambda: plog.read(offset, PART_MAX, True, plog.log_end_offset).next_offset)


@pytest.fixture
def rng() -> Iterator[random.Random]:
    seed = int.from_bytes(os.urandom(4), "big")
    print(f"seed {seed}")  # shown with a failure
    yield random.Random(seed)


def test_sendfile_ranges_are_the_copying_reads_bytes_single_pipelined_and_across_rolls(
    tmp_path: Path, rng: random.Random
) -> None:
    with broker_on_loop(tmp_path) as b:
        b.run(lambda: b.broker.catalog.create_topic("zc", 1, {"segment.bytes": str(600_000)}))
        append_batches(b, "zc", rng, 400)
        plog = b.run(lambda: b.broker.catalog.log("zc", 0))
        assert len(list(tmp_path.rglob("zc-0/*.log"))) >= 3  # rolls happened between the fetches
        # The range the handler sends is the copying read's bytes (the storage side of the claim).
        sent = b.run(lambda: plog.read_for_send(0, PART_MAX, True, plog.log_end_offset, ZERO_COPY_FROM))
        assert isinstance(sent.records, FileRange)
        assert sent.records.read_bytes() == copied(b, "zc", 0)
        assert sent.next_offset == next_offset(b, "zc", 0)
        # Past the cap on live ranges (each holds a descriptor) a fetch copies instead, and ranges give their
        # descriptors back once dropped.
        dir_fd = os.open(tmp_path, os.O_RDONLY)
        held = []
        while FileRange.available():
            held.append(FileRange(dir_fd, 0, 1))
        os.close(dir_fd)
        capped = b.run(lambda: plog.read_for_send(0, PART_MAX, True, plog.log_end_offset, ZERO_COPY_FROM))
        assert capped.records == copied(b, "zc", 0) and not isinstance(capped.records, FileRange)
        held.clear()
        assert FileRange.available()
        raw = RawClient(b.broker.config.port, "zc-test")
        try:
            # One request at a time, from 0 to the end: every range equals the copying read.
            offset, ranges, end = 0, 0, b.run(lambda: plog.log_end_offset)
            while offset < end:
                raw.send(FETCH, 12, request("zc", offset))
                part = raw.receive()[3].responses[0].partitions[0]
                assert part.error_code == 0
                got = bytes(part.records)
                assert got == copied(b, "zc", offset), f"fetch at {offset}"
                ranges += len(got) >= ZERO_COPY_FROM
                offset = next_offset(b, "zc", offset)
            assert ranges >= 3  # the sendfile path was taken for most responses
            # Pipelined: every offset's fetch sent before any answer is read; answers in request order.
            offsets = sorted(rng.sample(range(end), 40))
            corrs = [raw.send(FETCH, 12, request("zc", o)) for o in offsets]
            for corr, o in zip(corrs, offsets, strict=True):
                got_corr, _, _, body = raw.receive()
                assert got_corr == corr
                assert bytes(body.responses[0].partitions[0].records) == copied(b, "zc", o), f"pipelined at {o}"
            # A roll while fetches are in flight: they were answered from the old segment's ranges, and the
            # next ones read the new segment.
            expected = [copied(b, "zc", o) for o in offsets[-10:]]
            corrs = [raw.send(FETCH, 12, request("zc", o)) for o in offsets[-10:]]
            b.run(lambda: plog.roll(int(time.time() * 1000)))
            append_batches(b, "zc", rng, 30)
            for corr, want in zip(corrs, expected, strict=True):
                got_corr, _, _, body = raw.receive()
                assert got_corr == corr and bytes(body.responses[0].partitions[0].records) == want
            new_end = b.run(lambda: plog.log_end_offset)
            offset = end
            while offset < new_end:
                raw.send(FETCH, 12, request("zc", offset))
                got = bytes(raw.receive()[3].responses[0].partitions[0].records)
                assert got == copied(b, "zc", offset), f"after the roll at {offset}"
                offset = next_offset(b, "zc", offset)
        finally:
            raw.close()
