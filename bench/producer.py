"""Producer throughput: our Producer against confluent-kafka, kafka-python and aiokafka, on our broker, in one run.

Every client produces the same records (keyless values of ``--value-size`` random bytes) to its own fresh topic
of ``--partitions`` partitions on one broker process, with the same settings: acks=all, idempotence on,
linger 5 ms, batch size 16 KB, no compression. Each run is timed from the first produce call to the end of
the flush that waits for the last acknowledgement, and every record must be acknowledged. The fastest of
``--repeat`` runs counts; the table gives records/s and the ratio to ours.

    .venv/bin/python bench/producer.py [--records 200000] [--value-size 100] [--partitions 6] [--repeat 3]
        [--clients groupstream,confluent,kafka-python,aiokafka] [--write-results]
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

from kit import (
    RESULTS,
    command_line,
    confluent_produce,
    create_topic,
    machine,
    matched_producer,
    write_section,
)
from support.brokers import BrokerKind, BrokerProcess

LINGER_MS = 5
BATCH_SIZE = 16_384

def run_groupstream(bootstrap: str, topic: str, n: int, value: bytes) -> float:
    from groupstream.client.producer import Producer

    with Producer({"bootstrap.servers": bootstrap, **matched_producer(LINGER_MS, BATCH_SIZE)}) as producer:
        producer.produce(topic, value).result(30)  # connected and idempotent before the clock starts
        produce = producer.produce
        start = time.perf_counter()
        last = None
        for _ in range(n):
            last = produce(topic, value)
        left = producer.flush(300)
        elapsed = time.perf_counter() - start
        assert last is not None and last.result(0).offset >= 0
    if left:
        raise RuntimeError(f"groupstream: {left} records not delivered")
    return elapsed

def run_confluent(bootstrap: str, topic: str, n: int, value: bytes) -> float:
    return confluent_produce(bootstrap, topic, n, value, settings=matched_producer(LINGER_MS, BATCH_SIZE), warm_up=True)

def run_kafka_python(bootstrap: str, topic: str, n: int, value: bytes) -> float:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=LINGER_MS,
        batch_size=BATCH_SIZE, compression_type=None,
    )  # fmt: skip
    try:
        producer.send(topic, value).get(30)
        send = producer.send
        start = time.perf_counter()
        futures = [send(topic, value) for _ in range(n)]
        producer.flush(300)
        elapsed = time.perf_counter() - start
        failed = [f for f in futures if not f.succeeded()]
        if failed:
            raise RuntimeError(
                f"kafka-python: {len(failed)} records not acknowledged, e.g. {failed[0].exception}"
            )
        return elapsed
    finally:
        producer.close()

def run_aiokafka(bootstrap: str, topic: str, n: int, value: bytes) -> float:
    from aiokafka import AIOKafkaProducer

    async def go() -> float:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=LINGER_MS,
            max_batch_size=BATCH_SIZE, compression_type=None,
        )  # fmt: skip
        await producer.start()
        try:
            await producer.send_and_wait(topic, value)
            send = producer.send
            start = time.perf_counter()
            futures = [await send(topic, value) for _ in range(n)]
            await producer.flush()
            elapsed = time.perf_counter() - start
            failed = [f for f in futures if not f.done() or f.exception() is not None]
            if failed:
                raise RuntimeError(f"aiokafka: {len(failed)} records not acknowledged")
            return elapsed
        finally:
            await producer.stop()

    return asyncio.run(go())

CLIENTS: dict[str, Callable[[str, str, int, bytes], float]] = {
    "groupstream": run_groupstream,
    "confluent": run_confluent,
    "kafka-python": run_kafka_python,
    "aiokafka": run_aiokafka,
}

def versions() -> str:
    import aiokafka
    import confluent_kafka
    import kafka

    return (
        f"confluent-kafka {confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]}), "
        f"kafka-python {kafka.__version__}, aiokafka {aiokafka.__version__}"
    )

def table(best: dict[str, float], n: int, value_size: int, partitions: int) -> str:
    ours = best.get("groupstream")
    lines = [
        f"| client ({n:,} x {value_size} B, {partitions} partitions) | records/s | MB/s | ours / client |",
        "|---|---:|---:|---:|",
    ]
    for name, seconds in best.items():
        rps = n / seconds
        ratio = f"{(n / ours) / rps:.2f}x" if ours is not None else ""
        lines.append(f"| {name} | {rps:,.0f} | {rps * value_size / 1e6:.1f} | {ratio} |")
    return "\n".join(lines)

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=3, help="runs per client; the fastest is reported")
    ap.add_argument("--clients", default=",".join(CLIENTS), help=f"comma-separated: {', '.join(CLIENTS)}")
    ap.add_argument("--workdir", help="broker data and log directory (default: a new temporary one)")
    ap.add_argument(
        "--write-results", action="store_true", help=f"update the producer section of {RESULTS.name}"
    )
    args = ap.parse_args()
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    unknown = set(clients) - CLIENTS.keys()
    if unknown:
        ap.error(f"unknown clients: {', '.join(sorted(unknown))}")
    value = os.urandom(args.value_size)
    best: dict[str, float] = {}
    print(environment(), flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-producer-") as tmp:
        workdir = Path(args.workdir) if args.workdir else Path(tmp)
        with BrokerProcess(BrokerKind.GROUPSTREAM, workdir, start_timeout=60) as broker:
            for r in range(args.repeat):
                for name in clients:
                    topic = f"bench-{name}-{r}"
                    create_topic(broker.bootstrap, topic, args.partitions)
                    seconds = CLIENTS[name](broker.bootstrap, topic, args.records, value)
                    best[name] = min(best.get(name, seconds), seconds)
                    print(f"  run {r + 1}: {name:<13} {args.records / seconds:>10,.0f} records/s", flush=True)
    text = table(best, args.records, args.value_size, args.partitions)
    print(text)
    if args.write_results:
        cmd = command_line("producer.py")
        write_results(
            f"## Producer throughput (`bench/producer.py`)\n\n{environment()}. Broker: ours, durable log, "
            f"default flush policy. All clients: acks=all, idempotence on, linger.ms={LINGER_MS}, "
            f"batch size {BATCH_SIZE}, no compression, keyless values.\n\nCommand: `{cmd}`\n\n{text}"
        )
    return 0

def environment() -> str:
    return f"{machine()}; {versions()}"

def write_results(text: str) -> None:
    write_section("producer", text)

if __name__ == "__main__":
    sys.exit(main())
