"""Fetch handler cost by isolation level (issue 17), measured inside the broker process, without sockets.

The broker's Fetch handler builds its answer in ``_collect`` (read every requested partition, then the response
body); this times that function directly on a broker whose data directory holds two 6-partition topics of the
same size: ``plain`` (non-transactional batches of 100 records) and ``txn`` (the same batches written in
transactions of one batch each, every ``--abort-every``-th aborted, the rest committed, so every batch is
followed by a marker). Cases, side by side in one run, rounds interleaved, the fastest round counted:

- ``before``: the handler as it was before read_committed (commit 501e357, loaded from git), read_uncommitted,
  on ``plain``: the anchor;
- ``after``: today's handler, read_uncommitted, on ``plain``: the fast path, which must not have slowed down;
- read_uncommitted and read_committed on ``txn``.

Each case reads every partition from offset 0 to its end with one 6-partition request after another (1 MB per
partition, as a consumer's fetch.max.bytes would allow), then answers empty fetches at the end (the fixed cost
of a request). Prints MB/s of record bytes and microseconds per empty fetch (process CPU time, so other load on the machine
distorts it less than wall time), with ratios to ``before``; ``before again`` is a control that shows the noise.

    .venv/bin/python bench/fetch_isolation.py [--batches 400] [--repeat 5] [--abort-every 10]
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from groupstream.broker.config import BrokerConfig
from groupstream.broker.handlers import fetch as fetch_now
from groupstream.broker.node import Broker
from groupstream.protocol.connection import Request
from groupstream.protocol.messages import by_name
from groupstream.protocol.records.batch import BatchBuilder

FETCH = by_name("Fetch")
PARTITIONS = 6
BEFORE = "501e357"
Collect = Callable[[Any, Any, frozenset[str]], tuple[Any, int, Any, Any, Any]]


def old_collect() -> Collect:
    """The handler module as of ``BEFORE``, loaded under another name (its registration dropped)."""
    root = Path(__file__).resolve().parents[1]
    source = subprocess.run(["git", "-C", str(root), "show", f"{BEFORE}:src/groupstream/broker/handlers/fetch.py"],
                            check=True, capture_output=True, text=True).stdout  # fmt: skip
    module = types.ModuleType("fetch_before")
    exec(compile(source.replace('@handles("Fetch")\n', ""), "fetch_before.py", "exec"), module.__dict__)
    return module._collect  # type: ignore[no-any-return]


def request(topic: str, offsets: list[int], isolation: int) -> Request:
    R = FETCH.Request
    T = R.FetchTopic
    body = R(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=64 << 20, isolation_level=isolation, session_id=0,
             session_epoch=-1, topics=[T(topic=topic, partitions=[
                 T.FetchPartition(partition=p, fetch_offset=o, log_start_offset=-1, partition_max_bytes=1 << 20)
                 for p, o in enumerate(offsets)])], forgotten_topics_data=[], rack_id="")  # fmt: skip
    header = types.SimpleNamespace(api_version=12)
    return Request(header, FETCH, body)  # type: ignore[arg-type]


def fill(broker: Broker, batches: int, abort_every: int) -> int:
    """Both topics; returns the record bytes of one topic."""
    catalog = broker.catalog
    catalog.create_topic("plain", PARTITIONS, {})
    catalog.create_topic("txn", PARTITIONS, {})
    value = b"v" * 100
    total = 0
    for p in range(PARTITIONS):
        plain, txn = catalog.log("plain", p), catalog.log("txn", p)
        pid = 1000 + p
        for i in range(batches):
            b = BatchBuilder()
            for _ in range(100):
                b.append(0, None, value)
            data = b.build()
            total += len(data)
            plain.append(bytearray(data), 0)
            t = BatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=(i * 100) % (2**31), transactional=True)
            for _ in range(100):
                t.append(0, None, value)
            txn.append_checked(bytearray(t.build()), 0)
            txn.append_marker(pid, 0, commit=(i % abort_every != abort_every - 1), coordinator_epoch=0, now_ms=0)
    return total


def read_all(collect: Collect, broker: Broker, topic: str, isolation: int) -> int:
    """Fetch every partition to its end; returns the record bytes read."""
    offsets = [0] * PARTITIONS
    ends = [broker.catalog.log(topic, p).log_end_offset for p in range(PARTITIONS)]
    got = 0
    while any(o < e for o, e in zip(offsets, ends, strict=True)):
        body, total, *_ = collect(broker, request(topic, offsets, isolation), frozenset())
        got += total
        for part in body.responses[0].partitions:
            if part.records:
                offsets[part.partition_index] = _next_offset(part.records)
            else:
                offsets[part.partition_index] = ends[part.partition_index]
    return got


def _next_offset(records: bytes) -> int:
    from groupstream.protocol.records.batch_header import iter_batches

    last = 0
    for _, h in iter_batches(records, validate_crc=False):
        last = h.next_offset
    return last


def empty_fetch_us(collect: Collect, broker: Broker, topic: str, isolation: int, n: int) -> float:
    ends = [broker.catalog.log(topic, p).log_end_offset for p in range(PARTITIONS)]
    req = request(topic, ends, isolation)
    began = time.process_time()
    for _ in range(n):
        collect(broker, req, frozenset())
    return (time.process_time() - began) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=400, help="batches of 100 records per partition")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--abort-every", type=int, default=10)
    ap.add_argument("--empty-fetches", type=int, default=5000)
    args = ap.parse_args()
    before = old_collect()
    now: Collect = fetch_now._collect
    cases: list[tuple[str, Collect, str, int]] = [
        ("before, read_uncommitted, plain", before, "plain", 0),
        ("after, read_uncommitted, plain", now, "plain", 0),
        ("after, read_committed, plain", now, "plain", 1),
        ("after, read_uncommitted, txn", now, "txn", 0),
        ("after, read_committed, txn", now, "txn", 1),
        ("before again (control), plain", before, "plain", 0),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        broker = Broker(BrokerConfig(data_dir=Path(tmp), host="127.0.0.1", port=0))
        try:
            size = fill(broker, args.batches, args.abort_every)
            best: dict[str, tuple[float, float]] = {}
            for _ in range(args.repeat):
                for name, collect, topic, isolation in cases:
                    began = time.process_time()
                    got = read_all(collect, broker, topic, isolation)
                    seconds = time.process_time() - began
                    assert got >= size * 0.99, (name, got, size)
                    us = empty_fetch_us(collect, broker, topic, isolation, args.empty_fetches)
                    mbs = got / seconds / 1e6
                    old = best.get(name)
                    best[name] = (max(mbs, old[0]) if old else mbs, min(us, old[1]) if old else us)
        finally:
            broker.catalog.close()
    anchor = best[cases[0][0]]
    print(f"{PARTITIONS} partitions x {args.batches} batches of 100 x 100 B records; fastest of {args.repeat}")
    print(f"{'case':36} {'MB/s':>8} {'ratio':>6} {'empty fetch us':>15} {'ratio':>6}")
    for name, *_ in cases:
        mbs, us = best[name]
        print(f"{name:36} {mbs:8.0f} {mbs / anchor[0]:6.2f} {us:15.1f} {us / anchor[1]:6.2f}")


if __name__ == "__main__":
    main()
