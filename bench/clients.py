"""Client throughput in one run, same broker, same data: consume with our ``poll``, our Arrow batches
(``poll_arrow``), confluent-kafka, aiokafka and kafka-python; produce with ours, confluent-kafka and aiokafka.

Consumers read a whole topic in assign mode from offset 0 (``max.poll.records`` or the client's equivalent set
to 10,000 for all), timed from the first poll to the last record; every record must arrive. Producers are the
ones of ``bench/producer.py`` (acks=all, idempotence on, linger 5 ms). Each data set is one topic of
``--partitions`` partitions filled once, then read by every consumer; the fastest of ``--repeat`` runs counts.

    .venv/bin/python bench/clients.py [--records 1000000] [--large-records 10000] [--partitions 4] [--repeat 2]
        [--write-results]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

import producer as producer_bench  # noqa: E402
from results import machine, write_section  # noqa: E402
from support.brokers import BrokerKind, BrokerProcess  # noqa: E402

MAX_RECORDS = 10_000


def fill(bootstrap: str, topic: str, partitions: int, n: int, value: bytes) -> None:
    from groupstream.client.admin import Admin
    from groupstream.client.lite import produce

    producer_bench.create_topic(bootstrap, topic, partitions)
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        step = 50_000
        for start in range(0, n, step):
            count = min(step, n - start)
            for p in range(partitions):
                share = count // partitions + (1 if p < count % partitions else 0)
                produce(admin.connection, topic, [value] * share, partition=p)


def consume_groupstream(bootstrap: str, topic: str, partitions: int, n: int, arrow: bool = False) -> float:
    from groupstream import Consumer

    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest",
                   "max.poll.records": MAX_RECORDS}) as c:  # fmt: skip
        c.assign([(topic, p) for p in range(partitions)])
        got = 0
        start = time.perf_counter()
        if arrow:
            while got < n:
                got += c.poll_arrow(5.0).num_rows
        else:
            while got < n:
                got += len(c.poll(5.0))
        return time.perf_counter() - start


def consume_groupstream_arrow(bootstrap: str, topic: str, partitions: int, n: int) -> float:
    return consume_groupstream(bootstrap, topic, partitions, n, arrow=True)


def consume_confluent(bootstrap: str, topic: str, partitions: int, n: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})  # fmt: skip
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got = 0
        start = time.perf_counter()
        while got < n:
            for m in c.consume(num_messages=MAX_RECORDS, timeout=5.0):
                if m.error() is None:
                    got += 1
        return time.perf_counter() - start
    finally:
        c.close()


def consume_kafka_python(bootstrap: str, topic: str, partitions: int, n: int) -> float:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        got = 0
        start = time.perf_counter()
        while got < n:
            for records in c.poll(timeout_ms=5000, max_records=MAX_RECORDS).values():
                got += len(records)
        return time.perf_counter() - start
    finally:
        c.close()


def consume_aiokafka(bootstrap: str, topic: str, partitions: int, n: int) -> float:
    async def run() -> float:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
        await c.start()
        try:
            c.assign([TopicPartition(topic, p) for p in range(partitions)])
            got = 0
            start = time.perf_counter()
            while got < n:
                for records in (await c.getmany(timeout_ms=5000, max_records=MAX_RECORDS)).values():
                    got += len(records)
            return time.perf_counter() - start
        finally:
            await c.stop()

    return asyncio.run(run())


CONSUMERS: dict[str, Callable[[str, str, int, int], float]] = {
    "groupstream poll": consume_groupstream,
    "groupstream poll_arrow": consume_groupstream_arrow,
    "confluent": consume_confluent,
    "aiokafka": consume_aiokafka,
    "kafka-python": consume_kafka_python,
}
PRODUCERS = ("groupstream", "confluent", "aiokafka")


def table(title: str, best: dict[str, float], n: int, size: int, ours: str) -> str:
    lines = [f"| {title} ({n:,} x {size} B) | records/s | MB/s | ours / client |", "|---|---:|---:|---:|"]
    base = best.get(ours)
    for name, seconds in best.items():
        rps = n / seconds
        ratio = f"{(n / base) / rps:.2f}x" if base is not None else ""
        lines.append(f"| {name} | {rps:,.0f} | {rps * size / 1e6:.1f} | {ratio} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--large-records", type=int, default=10_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args()
    env = f"{machine()}; {producer_bench.versions()}"
    print(env, flush=True)
    sections = []
    with tempfile.TemporaryDirectory(prefix="bench-clients-") as tmp, \
            BrokerProcess(BrokerKind.GROUPSTREAM, Path(tmp), start_timeout=60) as broker:  # fmt: skip
        bs = broker.bootstrap
        for n, size in ((args.records, 100), (args.large_records, 10_240)):
            value = os.urandom(size)
            topic = f"bench-consume-{size}"
            fill(bs, topic, args.partitions, n, value)
            best: dict[str, float] = {}
            for r in range(args.repeat):
                for name, fn in CONSUMERS.items():
                    seconds = fn(bs, topic, args.partitions, n)
                    best[name] = min(best.get(name, seconds), seconds)
                    print(f"  consume {size} B run {r + 1}: {name:<24} {n / seconds:>12,.0f} records/s", flush=True)
            sections.append(table("consume", best, n, size, "groupstream poll"))
            pbest: dict[str, float] = {}
            for r in range(args.repeat):
                for name in PRODUCERS:
                    topic = f"bench-produce-{size}-{name}-{r}"
                    producer_bench.create_topic(bs, topic, args.partitions)
                    seconds = producer_bench.CLIENTS[name](bs, topic, n, value)
                    pbest[name] = min(pbest.get(name, seconds), seconds)
                    print(f"  produce {size} B run {r + 1}: {name:<13} {n / seconds:>12,.0f} records/s", flush=True)
            sections.append(table("produce", pbest, n, size, "groupstream"))
    text = "\n\n".join(sections)
    print(text)
    if args.write_results:
        cmd = " ".join(["python", "bench/clients.py", *sys.argv[1:]])
        write_section("clients", f"## Client throughput (`bench/clients.py`)\n\n{env}. One broker (ours), one run; "
                                 f"consumers in assign mode from offset 0, {MAX_RECORDS:,} records per poll; producers "
                                 f"acks=all, idempotent, linger 5 ms.\n\nCommand: `{cmd}`\n\n{text}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
