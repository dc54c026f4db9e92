"""Broker throughput: our broker against Tansu, with confluent-kafka as the client, in one run.

For each broker and each (records, value size) case, on a fresh topic with 6 partitions:
- produce: keyless values, acks=all, linger.ms=10 so batches form, no compression; timed from the first
  produce() to the end of flush() (every record acknowledged);
- fetch: an assign-mode consumer reads every partition from offset 0; timed from assign() until every record
  has been read.
Prints records/s and MB/s (10^6 bytes of values per second) for each broker and the ratio ours/Tansu.

Our broker runs with its durable log and default flush policy; Tansu with its default (memory) storage.

    .venv/bin/python bench/broker_throughput.py [--brokers tansu,groupstream] [--records 500000,200000]
        [--value-size 100,1024] [--partitions 6] [--repeat 3] [--write-results]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # for support.brokers

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from results import RESULTS, confluent_versions, machine, write_section  # noqa: E402
from support.brokers import BrokerKind, BrokerProcess  # noqa: E402


@dataclass(frozen=True, slots=True)
class Case:
    records: int
    value_size: int

    def __str__(self) -> str:
        size = f"{self.value_size // 1024} KB" if self.value_size % 1024 == 0 else f"{self.value_size} B"
        return f"{self.records:,} x {size}"

@dataclass(frozen=True, slots=True)
class Measurement:
    broker: BrokerKind
    case: Case
    produce_s: float
    fetch_s: float

    @property
    def mb(self) -> float:
        return self.case.records * self.case.value_size / 1e6

    @property
    def produce_rps(self) -> float:
        return self.case.records / self.produce_s

    @property
    def fetch_rps(self) -> float:
        return self.case.records / self.fetch_s

    @property
    def produce_mbps(self) -> float:
        return self.mb / self.produce_s

    @property
    def fetch_mbps(self) -> float:
        return self.mb / self.fetch_s

def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(30)
    deadline = time.monotonic() + 30
    while True:
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        if md is not None and md.error is None and len(md.partitions) == partitions:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {topic} not visible with {partitions} partitions")
        time.sleep(0.05)  # poll interval, bounded by the deadline above

def produce(bootstrap: str, topic: str, case: Case) -> float:
    value = os.urandom(case.value_size)
    acked = 0
    errors: list[str] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        nonlocal acked
        if err is None:
            acked += 1
        else:
            errors.append(str(err))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": False,
            "compression.type": "none",
            "linger.ms": 10,
            "batch.size": 1_000_000,
            "batch.num.messages": 10_000,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
        }
    )
    produce_one = producer.produce
    start = time.perf_counter()
    for i in range(case.records):
        try:
            produce_one(topic, value, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.01)
            produce_one(topic, value, on_delivery=on_delivery)
        if i & 0x3FFF == 0:
            producer.poll(0)
    left = producer.flush(300)
    elapsed = time.perf_counter() - start
    if left or errors or acked != case.records:
        raise RuntimeError(f"produce: {acked} acked, {left} left, errors {errors[:3]}")
    return elapsed

def fetch(bootstrap: str, topic: str, case: Case, partitions: int) -> float:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}-bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 10_485_760,
            "queued.max.messages.kbytes": 262_144,
        }
    )
    try:
        consumer.list_topics(topic, timeout=10)  # connect and learn the leaders before the clock starts
        got = 0
        start = time.perf_counter()
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + 600
        while got < case.records:
            for m in consumer.consume(num_messages=10_000, timeout=1.0):
                if m.error() is not None:
                    raise RuntimeError(f"fetch error: {m.error()}")
                got += 1
            if time.monotonic() > deadline:
                raise RuntimeError(f"fetch stalled at {got} of {case.records}")
        return time.perf_counter() - start
    finally:
        consumer.close()

def run_broker(
    kind: BrokerKind, cases: list[Case], partitions: int, repeat: int, workdir: Path
) -> list[Measurement]:
    """Each case ``repeat`` times on fresh topics; keeps the fastest produce and the fastest fetch."""
    out = []
    with BrokerProcess(kind, workdir / str(kind), start_timeout=60) as broker:
        for n, case in enumerate(cases):
            runs = []
            for r in range(repeat):
                topic = f"bench-{n}-{case.value_size}-{r}"
                create_topic(broker.bootstrap, topic, partitions)
                runs.append((produce(broker.bootstrap, topic, case), fetch(broker.bootstrap, topic, case, partitions)))
            m = Measurement(kind, case, min(p for p, _ in runs), min(f for _, f in runs))
            out.append(m)
            print(
                f"  {kind:<11} {case!s:<16} produce {m.produce_rps:>10,.0f} rec/s {m.produce_mbps:7.1f} MB/s"
                f"   fetch {m.fetch_rps:>10,.0f} rec/s {m.fetch_mbps:7.1f} MB/s",
                flush=True,
            )
    return out

def table(results: list[Measurement], cases: list[Case], partitions: int) -> str:
    lines = [
        f"| case ({partitions} partitions) | broker | produce rec/s | produce MB/s | fetch rec/s | fetch MB/s |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for case in cases:
        row = {m.broker: m for m in results if m.case == case}
        for kind in (BrokerKind.TANSU, BrokerKind.GROUPSTREAM):
            if kind in row:
                m = row[kind]
                lines.append(
                    f"| {case} | {kind} | {m.produce_rps:,.0f} | {m.produce_mbps:.1f} | "
                    f"{m.fetch_rps:,.0f} | {m.fetch_mbps:.1f} |"
                )
        if BrokerKind.TANSU in row and BrokerKind.GROUPSTREAM in row:
            ours, tansu = row[BrokerKind.GROUPSTREAM], row[BrokerKind.TANSU]
            lines.append(
                f"| {case} | **ours/Tansu** | {ours.produce_rps / tansu.produce_rps:.2f}x | | "
                f"{ours.fetch_rps / tansu.fetch_rps:.2f}x | |"
            )
    return "\n".join(lines)

def parse_ints(text: str) -> list[int]:
    return [int(x.replace("_", "")) for x in text.split(",") if x.strip()]

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brokers", default="tansu,groupstream", help="comma-separated: tansu, groupstream")
    ap.add_argument("--records", default="500000,200000", help="records per case (one value, or one per size)")
    ap.add_argument("--value-size", default="100,1024", help="value sizes in bytes, one case each")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=3, help="runs per case; the fastest is reported")
    ap.add_argument("--write-results", action="store_true", help=f"update the section in {RESULTS}")
    args = ap.parse_args()

    kinds = [BrokerKind(k.strip()) for k in args.brokers.split(",") if k.strip()]
    sizes = parse_ints(args.value_size)
    counts = parse_ints(args.records)
    if len(counts) == 1:
        counts = counts * len(sizes)
    if len(counts) != len(sizes):
        ap.error("--records takes one value or one per --value-size")
    cases = [Case(n, s) for n, s in zip(counts, sizes, strict=True)]

    env = environment()
    print(f"broker throughput: {env}")
    results: list[Measurement] = []
    with tempfile.TemporaryDirectory(prefix="bench-brokers-") as tmp:
        for kind in kinds:
            results += run_broker(kind, cases, args.partitions, args.repeat, Path(tmp))
    text = table(results, cases, args.partitions)
    print()
    print(text)
    if args.write_results:
        write_results(
            "## Broker throughput (`bench/broker_throughput.py`)\n\n"
            f"{env}. Client: confluent-kafka; produce acks=all, linger.ms=10, no compression, keyless; fetch in "
            "assign mode from offset 0. Our broker: durable log, default flush policy. Tansu 0.6.0: memory "
            f"storage. MB/s counts value bytes (10^6 B).\n\n"
            f"Command: `python bench/broker_throughput.py --brokers {args.brokers} --records {args.records} "
            f"--value-size {args.value_size} --partitions {args.partitions} --repeat {args.repeat} --write-results`\n\n{text}"
        )
        print(f"\nwrote {RESULTS}")
    return 0

def environment() -> str:
    return f"{machine()}; {confluent_versions()}"

def write_results(text: str) -> None:
    write_section("broker_throughput", text)

if __name__ == "__main__":
    raise SystemExit(main())
