"""Broker throughput: our broker against Tansu and a single-node Apache Kafka, with confluent-kafka and Kafka's
own perf-test tools as the clients, in one run.

For each (records, value size) case, on a fresh topic with 6 partitions per broker and run:
- produce: keyless values, acks=all, linger.ms=10 so batches form (up to 1 MB), no compression, idempotence off;
  confluent-kafka is timed from the first produce() to the end of flush() (every record acknowledged);
  ``kafka-producer-perf-test`` (``ProducerPerformance``, the same settings as producer properties) reports its
  own records/s over the same span;
- fetch: confluent-kafka in assign mode reads every partition from offset 0, touching every value (their
  lengths summed and checked), timed from assign() until the last record; ``kafka-consumer-perf-test``
  (``ConsumerPerformance``, a subscribing consumer that sums the values' lengths) reports fetch records/s, which
  leaves out its group join.
Prints records/s and MB/s (10^6 bytes of values per second) for each broker, and the ratios ours/Tansu and
ours/Kafka. All the brokers run at once (idle but for the one measured) and take turns within each round, so
load from elsewhere on the machine hits them alike; the fastest of ``--repeat`` rounds counts, and each round's
topic is fetched ``--reads`` times (the fastest counts: a fetch is short, so one read is easily caught by a
burst of other work on the machine).

``--flush`` (one or more, each a set of runs): ``default`` is each broker's own (ours: fsync before an acks=all
answer; Kafka: the page cache, no fsync; Tansu: memory); ``os`` is no fsync on both ours
(``log.flush.policy=os``) and Kafka (its default); ``fsync`` is an fsync before the answer on both (ours by
default; Kafka ``log.flush.interval.messages=1``). Kafka runs as its start scripts run it (1 GB heap, G1) with
its default thread counts; Tansu with its default (memory) storage.

    .venv/bin/python bench/broker_throughput.py [--brokers tansu,groupstream,apache] [--records 500000,200000]
        [--value-size 100,1024] [--partitions 6] [--repeat 3] [--reads 3] [--flush default|os|fsync,...]
        [--clients confluent,perf-test] [--write-results]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kit import (
    APACHE,
    RESULTS,
    THROUGHPUT_PRODUCER,
    Broker,
    Case,
    broker_names,
    confluent_fetch,
    confluent_produce,
    create_topic,
    environment,
    kafka_tool_command,
    os_load,
    parse_cases,
    write_section,
)
from support.brokers import BrokerKind

FLUSH_SETTINGS: dict[str, dict[str, dict[str, str]]] = {
    "default": {},
    "os": {BrokerKind.GROUPSTREAM.value: {"log.flush.policy": "os"}},
    "fsync": {APACHE: {"log.flush.interval.messages": "1"}},
}
CLIENTS = ("confluent", "perf-test")
PERF_PRODUCER = {k: v for k, v in THROUGHPUT_PRODUCER.items() if k in ("acks", "linger.ms", "batch.size")} | {
    "enable.idempotence": "false", "compression.type": "none", "buffer.memory": 268_435_456,
}  # fmt: skip
PERF_CONSUMER = {"fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 10_485_760}
ORDER = (BrokerKind.TANSU.value, BrokerKind.GROUPSTREAM.value, APACHE)
LABEL = {BrokerKind.TANSU.value: "tansu", BrokerKind.GROUPSTREAM.value: "groupstream", APACHE: "Apache Kafka"}


@dataclass(frozen=True, slots=True)
class Measurement:
    broker: str
    flush: str
    client: str
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


# --- Kafka's perf-test tools ----------------------------------------------------------------------------------


def _tool(main: str, args: list[str]) -> str:
    done = subprocess.run(kafka_tool_command(main, *args), capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{main} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return done.stdout


def perf_produce(bootstrap: str, topic: str, case: Case) -> float:
    """``kafka-producer-perf-test``: its records/s turned back into seconds (its last line: "N records sent,
    X records/sec (...)"); it fails unless every record is acknowledged."""
    props = [f"{k}={v}" for k, v in PERF_PRODUCER.items()]
    out = _tool("org.apache.kafka.tools.ProducerPerformance", [
        "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(case.records),
        "--record-size", str(case.value_size), "--throughput", "-1", "--producer-props", *props])  # fmt: skip
    last = [line for line in out.splitlines() if "records sent" in line][-1]
    sent, rate = int(last.split()[0]), float(last.split(",")[1].split()[0])
    if sent != case.records:
        raise RuntimeError(f"perf-test producer sent {sent} of {case.records}: {last}")
    return case.records / rate


def perf_fetch(bootstrap: str, topic: str, case: Case, group: str) -> float:
    """``kafka-consumer-perf-test``: fetch records/s (from the first record, the group join left out) turned
    back into seconds; the records and bytes it counted must be the topic's."""
    props = [a for k, v in PERF_CONSUMER.items() for a in ("--command-property", f"{k}={v}")]
    out = _tool("org.apache.kafka.tools.ConsumerPerformance", [
        "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(case.records),
        "--timeout", "120000", "--group", group, *props])  # fmt: skip
    lines = [line for line in out.splitlines() if line.strip()]
    header = [h.strip() for h in lines[-2].split(",")]
    row = dict(zip(header, (v.strip() for v in lines[-1].split(",")), strict=True))
    got, mb = int(row["data.consumed.in.nMsg"]), float(row["data.consumed.in.MB"])
    want_mb = case.records * case.value_size / (1024 * 1024)
    if got != case.records or abs(mb - want_mb) > 0.01 * want_mb + 0.01:
        raise RuntimeError(f"perf-test consumer read {got} records ({mb} MB) of {case.records}: {row}")
    return case.records / float(row["fetch.nMsg.sec"])


# --- the run --------------------------------------------------------------------------------------------------


def clients_of(broker: str, clients: list[str]) -> list[str]:
    """The clients run against ``broker``: not Kafka's perf-test against Tansu, where the Java producer stalls."""
    return [c for c in clients if not (broker == BrokerKind.TANSU and c == "perf-test")]


def run_flush(
    flush: str, names: list[str], clients: list[str], cases: list[Case], partitions: int, repeat: int, reads: int,
    workdir: Path,
) -> list[Measurement]:
    """Every broker started with this flush setting; each case ``repeat`` rounds in which the brokers (and the
    clients) take turns on fresh topics; the fastest produce and the fastest fetch of each are kept. Each
    round's topic is read ``reads`` times (a fresh consumer, or a fresh group for perf-test, each time): a
    fetch of 200 MB takes well under a second, so one read is at the mercy of whatever else the two cores
    are doing at that moment."""
    out = []
    brokers = [Broker(n, workdir / flush, FLUSH_SETTINGS[flush].get(n)) for n in names]
    started: list[Broker] = []
    try:
        for b in brokers:
            started.append(b.__enter__())
        for n, case in enumerate(cases):
            runs: dict[tuple[str, str], list[tuple[float, float]]] = {}
            for r in range(repeat):
                for b in brokers:
                    for client in clients_of(b.name, clients):
                        topic = f"bench-{flush}-{n}-{case.value_size}-{client}-{r}"
                        create_topic(b.bootstrap, topic, partitions)
                        if client == "confluent":
                            value = os.urandom(case.value_size)
                            p = confluent_produce(b.bootstrap, topic, case.records, value)
                            f = min(confluent_fetch(b.bootstrap, topic, case, partitions) for _ in range(reads))
                        else:
                            p = perf_produce(b.bootstrap, topic, case)
                            f = min(perf_fetch(b.bootstrap, topic, case, f"{topic}-perf-{i}") for i in range(reads))
                        runs.setdefault((b.name, client), []).append((p, f))
            for b in brokers:
                for client in clients_of(b.name, clients):
                    got = runs[(b.name, client)]
                    m = Measurement(b.name, flush, client, case, min(p for p, _ in got), min(f for _, f in got))
                    out.append(m)
                    print(
                        f"  {flush:<7} {client:<9} {b.name:<11} {case!s:<16} produce {m.produce_rps:>10,.0f} rec/s "
                        f"{m.produce_mbps:7.1f} MB/s   fetch {m.fetch_rps:>10,.0f} rec/s {m.fetch_mbps:7.1f} MB/s",
                        flush=True,
                    )
    finally:
        for b in started:
            b.__exit__(None, None, None)
    return out


def table(results: list[Measurement], cases: list[Case], partitions: int) -> str:
    """The single-client, default-flush table of before when that is all that ran; else flush and client
    columns, and a ratio row against each peer."""
    flushes = list(dict.fromkeys(m.flush for m in results))
    clients = list(dict.fromkeys(m.client for m in results))
    plain = flushes == ["default"] and clients == ["confluent"]
    head = "" if plain else "flush | client | "
    lines = [
        f"| case ({partitions} partitions) | {head}broker | produce rec/s | produce MB/s | fetch rec/s | fetch MB/s |",
        "|---|" + ("---|---|" if not plain else "") + "---|---:|---:|---:|---:|",
    ]
    for flush in flushes:
        for client in clients:
            for case in cases:
                row = {m.broker: m for m in results if (m.case, m.flush, m.client) == (case, flush, client)}
                lead = f"| {case} | " + ("" if plain else f"{flush} | {client} | ")
                for kind in ORDER:
                    if kind in row:
                        m = row[kind]
                        name = kind if plain else LABEL[kind]
                        lines.append(f"{lead}{name} | {m.produce_rps:,.0f} | {m.produce_mbps:.1f} | "
                                     f"{m.fetch_rps:,.0f} | {m.fetch_mbps:.1f} |")  # fmt: skip
                ours = row.get(BrokerKind.GROUPSTREAM.value)
                for peer, label in ((BrokerKind.TANSU.value, "Tansu"), (APACHE, "Kafka")):
                    if ours is not None and peer in row:
                        lines.append(f"{lead}**ours/{label}** | {ours.produce_rps / row[peer].produce_rps:.2f}x | | "
                                     f"{ours.fetch_rps / row[peer].fetch_rps:.2f}x | |")  # fmt: skip
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brokers", default="tansu,groupstream", help="comma-separated: tansu, groupstream, apache")
    ap.add_argument("--records", default="500000,200000", help="records per case (one value, or one per size)")
    ap.add_argument("--value-size", default="100,1024", help="value sizes in bytes, one case each")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=3, help="runs per case; the fastest is reported")
    ap.add_argument("--reads", type=int, default=3, help="fetches of each round's topic; the fastest counts")
    ap.add_argument("--flush", default="default", help="comma-separated: default, os, fsync (see above)")
    ap.add_argument("--clients", default="confluent", help="comma-separated: confluent, perf-test")
    ap.add_argument("--write-results", action="store_true", help=f"update the section in {RESULTS}")
    args = ap.parse_args()

    names = broker_names(args.brokers, ap)
    cases = parse_cases(ap, args.records, args.value_size)
    flushes = [f.strip() for f in args.flush.split(",") if f.strip()]
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    if set(flushes) - FLUSH_SETTINGS.keys() or set(clients) - set(CLIENTS):
        ap.error(f"--flush takes {', '.join(FLUSH_SETTINGS)}; --clients takes {', '.join(CLIENTS)}")

    env = environment()
    load = os_load()
    print(f"broker throughput: {env}; load average {load}")
    results: list[Measurement] = []
    with tempfile.TemporaryDirectory(prefix="bench-brokers-") as tmp:
        for flush in flushes:
            results += run_flush(flush, names, clients, cases, args.partitions, args.repeat, args.reads, Path(tmp))
    text = table(results, cases, args.partitions)
    print()
    print(text)
    if args.write_results:
        kafka = ""
        if APACHE in names:
            from support.kafka_jars import kafka_version

            kafka = (
                f" Apache Kafka {kafka_version()}: one combined KRaft node, run as its start scripts run it (1 GB "
                "heap, G1), its default thread counts, replication factor 1. Flush: `default` is each broker's own "
                "(ours fsyncs before an acks=all answer, Kafka leaves it to the page cache), `os` is no fsync on "
                "both (ours log.flush.policy=os), `fsync` an fsync before the answer on both (Kafka "
                "log.flush.interval.messages=1). perf-test: Kafka's ProducerPerformance/ConsumerPerformance with the "
                "same producer settings (and buffer.memory=256 MB), fetch records/s as the tool reports them (its "
                "group join left out)."
            )
        extra = "" if args.flush == "default" and args.clients == "confluent" else (
            f" --flush {args.flush} --clients {args.clients}")  # fmt: skip
        write_section(
            "broker_throughput",
            "## Broker throughput (`bench/broker_throughput.py`)\n\n"
            f"{env}; load average {load} at the start. Client: confluent-kafka; produce acks=all, linger.ms=10, "
            "no compression, keyless; fetch in assign mode from offset 0, every value touched. All brokers run at "
            "once and take turns in each round; the fastest of the rounds (fetch: of every read, each round's topic "
            f"read {args.reads} times). Our broker: durable log. Tansu 0.6.0: "
            f"memory storage.{kafka} MB/s counts value bytes (10^6 B).\n\n"
            f"Command: `python bench/broker_throughput.py --brokers {args.brokers} --records {args.records} "
            f"--value-size {args.value_size} --partitions {args.partitions} --repeat {args.repeat} --reads {args.reads}{extra} "
            f"--write-results`\n\n{text}",
        )
        print(f"\nwrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
