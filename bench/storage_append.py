"""Append throughput of PartitionLog with 1 KB batches, in MB/s (10^6 bytes of batches per second).

Each append gets a fresh bytearray copy of one prebuilt, CRC-valid 1 KB batch (as the broker gets a fresh
buffer per produce request), so the figure covers header parsing, offset patching, the write and the index
updates. Three cases:
- ``no flush``: appends only (flush.policy=os);
- ``flusher thread``: a second thread calls ``flush()`` in a loop while appending (flush.policy=interval
  at its most aggressive), showing what the fsyncs cost the appending thread;
- ``flush every 100``: the appender itself flushes after every 100 appends (an ``always``-style group
  commit of 100 KB), the worst case for the owner thread.

    .venv/bin/python bench/storage_append.py [--mb 200] [--batch 1024] [--repeat 3]
"""

from __future__ import annotations

import argparse
import struct
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import crc32c

from groupstream.storage import FlushPolicy, LogConfig, PartitionLog

_HEADER = struct.Struct(">qiibIhiqqqhii")


def one_batch(size: int, records: int = 10) -> bytes:
    payload = b"v" * (size - 61)
    buf = bytearray(_HEADER.pack(0, size - 12, -1, 2, 0, 0, records - 1, 0, 0, -1, -1, -1, records))
    buf += payload
    struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:])))
    return bytes(buf)


def run(case: str, total_bytes: int, batch_size: int) -> tuple[float, float]:
    """(MB/s of wall-clock time, MB per CPU-second of the appending thread): the second figure is what
    the code costs, the first what this machine delivered (it includes waiting for the disk and for
    other processes on a shared machine)."""
    template = one_batch(batch_size)
    n = total_bytes // batch_size
    config = LogConfig(segment_bytes=64 << 20, flush_policy=FlushPolicy.OS, retention_ms=-1)
    with tempfile.TemporaryDirectory(prefix="gs-bench-") as tmp:
        log = PartitionLog.open(Path(tmp) / "bench-0", config, 0)
        stop = threading.Event()
        worker: threading.Thread | None = None
        if case == "flusher thread":

            def flush_loop() -> None:
                while not stop.is_set():
                    log.flush()

            worker = threading.Thread(target=flush_loop)
            worker.start()
        every = 100 if case == "flush every 100" else 0
        append: Callable[[bytearray, int], object] = log.append
        start = time.perf_counter()
        cpu = time.thread_time()
        for i in range(n):
            append(bytearray(template), 0)
            if every and i % every == every - 1:
                log.flush()
        cpu = time.thread_time() - cpu
        elapsed = time.perf_counter() - start
        stop.set()
        if worker is not None:
            worker.join()
        assert log.log_end_offset == n * 10
        log.close()
    return n * batch_size / elapsed / 1e6, n * batch_size / cpu / 1e6


def main() -> None:
    """Print the best of ``--repeat`` runs for each case."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=200, help="megabytes appended per run")
    parser.add_argument("--batch", type=int, default=1024, help="batch size in bytes")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{args.mb} MB of {args.batch}-byte batches, best of {args.repeat}")
    for case in ("no flush", "flusher thread", "flush every 100"):
        runs = [run(case, args.mb * 10**6, args.batch) for _ in range(args.repeat)]
        wall = max(r[0] for r in runs)
        cpu = max(r[1] for r in runs)
        print(
            f"{case:>16}: {wall:8.1f} MB/s  ({wall * 1e6 / args.batch:,.0f} appends/s);"
            f" {cpu:8.1f} MB per CPU-second of the appender"
        )


if __name__ == "__main__":
    main()
