"""Decode throughput of RecordBatch v2: groupstream vs kafka-python vs aiokafka (compiled and pure Python).

Every decoder gets the same bytes: a fetch-response-like buffer of batches of ~16 KiB (what a producer's
default batch.size yields) holding records with a 12-byte key, a 100-byte value and no headers, built
without and with lz4. Each decoder walks the buffer, decodes every record and reads its value; CRC checks
are off for all (shown separately for ours). Decoders run round-robin and the table reports each one's
best run, so a noisy machine skews them alike.

    .venv/bin/python bench/records_decode.py [--records 200000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

from groupstream.protocol.records import BatchBuilder, Codec, iter_record_batches

RECORDS_PER_BATCH = 140  # ~16 KiB of 12-byte keys + 100-byte values


def make_buffer(n_records: int, codec: int) -> bytes:
    """Fetch-like bytes: consecutive batches, values half random hex half repeated text (lz4 ratio ~2)."""
    batches: list[bytes] = []
    ts = 1_700_000_000_000
    offset = 0
    while offset < n_records:
        b = BatchBuilder(compression=codec, base_offset=offset)
        for _ in range(min(RECORDS_PER_BATCH, n_records - offset)):
            value = os.urandom(25).hex().encode() + b"event-payload-" * 4
            b.append(ts + offset // 10, b"key-%08d" % offset, value[:100])
            offset += 1
        batches.append(b.build())
    return b"".join(batches)


def ours(buf: bytes) -> int:
    n = 0
    for batch in iter_record_batches(buf, check_crc=False):
        for r in batch.records():
            r.value  # noqa: B018 - touch it, as every decoder below does
            n += 1
    return n


def ours_crc(buf: bytes) -> int:
    n = 0
    for batch in iter_record_batches(buf, check_crc=True):
        for r in batch.records():
            r.value  # noqa: B018
            n += 1
    return n


def kafka_python(buf: bytes) -> int:
    from kafka.record.memory_records import MemoryRecords

    n = 0
    mr = MemoryRecords(buf)
    while (batch := mr.next_batch()) is not None:
        for r in batch:
            r.value  # noqa: B018
            n += 1
    return n


def _aiokafka(mr_cls: Callable[[bytes], object]) -> Callable[[bytes], int]:
    def run(buf: bytes) -> int:
        n = 0
        mr = mr_cls(buf)
        while (batch := mr.next_batch()) is not None:  # type: ignore[attr-defined]
            for r in batch:
                r.value  # noqa: B018
                n += 1
        return n

    return run


def aiokafka_pure(buf: bytes) -> int:
    """aiokafka's pure-Python batch class (its MemoryRecords hands out the compiled one when present)."""
    from aiokafka.record.default_records import _DefaultRecordBatchPy

    n = 0
    view = memoryview(buf)
    pos = 0
    while len(view) - pos >= 61:
        size = int.from_bytes(view[pos + 8 : pos + 12], "big") + 12
        if size > len(view) - pos:
            break
        for r in _DefaultRecordBatchPy(bytes(view[pos : pos + size])):
            r.value  # noqa: B018
            n += 1
        pos += size
    return n


def decoders() -> list[tuple[str, Callable[[bytes], int]]]:
    out: list[tuple[str, Callable[[bytes], int]]] = [("groupstream", ours), ("groupstream + CRC", ours_crc)]
    out.append(("kafka-python", kafka_python))
    try:
        from aiokafka.record._crecords.memory_records import MemoryRecords as CMemoryRecords

        out.append(("aiokafka (Cython)", _aiokafka(CMemoryRecords)))
    except ImportError:
        pass
    out.append(("aiokafka (pure Python)", aiokafka_pure))
    return out


def measure(
    decs: list[tuple[str, Callable[[bytes], int]]], buf: bytes, expected: int, repeat: int
) -> list[float]:
    """Best rate of each decoder, running them round-robin so background load hits all of them alike."""
    best = [float("inf")] * len(decs)
    for _ in range(repeat):
        for i, (name, fn) in enumerate(decs):
            t0 = time.perf_counter()
            n = fn(buf)
            dt = time.perf_counter() - t0
            if n != expected:
                raise SystemExit(f"{name} decoded {n} records, expected {expected}")
            best[i] = min(best[i], dt)
    return [expected / t for t in best]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    decs = decoders()
    print(f"{args.records} records, {RECORDS_PER_BATCH} per batch, 100-byte values, best of {args.repeat}")
    print(f"{'codec':<6} {'decoder':<24} {'records/s':>12} {'MB/s':>8} {'ours / it':>10}")
    for codec in (Codec.NONE, Codec.LZ4):
        buf = make_buffer(args.records, codec)
        rates = list(
            zip([name for name, _ in decs], measure(decs, buf, args.records, args.repeat), strict=True)
        )
        base = rates[0][1]
        for name, rate in rates:
            mbs = rate * len(buf) / args.records / 1e6
            print(f"{codec.name.lower():<6} {name:<24} {rate:>12,.0f} {mbs:>8.1f} {base / rate:>9.2f}x")


if __name__ == "__main__":
    main()
