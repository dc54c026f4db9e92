"""Security costs on our broker, in one run: throughput over TLS against plaintext, and connection set-up time.

One broker with four listeners (PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL with SCRAM-SHA-256/512 users made by
``groupstream users add``), certificates made on the spot (EC P-256, as tests/security/tls_pki.py makes them).

- Throughput: confluent-kafka produces (acks=all, linger.ms=10, no compression, keyless) then fetches in assign
  mode from offset 0, as bench/broker_throughput.py does, on fresh topics, ``--repeat`` rounds in which the
  listeners take turns; the median of the rounds and the best, and the ratio of the medians of TLS (SSL, and
  SASL_SSL with SCRAM-SHA-256) to PLAINTEXT. Medians, because on a machine shared with other work a single lucky
  or unlucky run moves a best-of ratio by half.
- Our own Producer (``--ours``, the 1 KB case): the same produce over the same listeners, so that our client's TLS
  path (records gathered into 16 KB TLS records, one encryption call per request) is measured too; librdkafka
  writes a TLS record per buffer (about 2 KB in a 1 KB produce), which costs the broker's OpenSSL a record's
  overhead each.
- Connection set-up: a blocking client of our own codec opens a connection and is ready to send requests
  (TCP connect, TLS handshake where there is one, ApiVersions, SaslHandshake and the SCRAM exchange where there is
  one), ``--connections`` times per case; median and 95th percentile. The SCRAM client's PBKDF2 (4096 iterations)
  is part of what a client pays, so it is in the figures; the broker's share is a few HMACs.

    .venv/bin/python bench/security.py [--records 500000,200000] [--value-size 100,1024] [--partitions 6]
        [--repeat 3] [--connections 200] [--ours] [--write-results]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kit import (
    ROOT,
    Case,
    confluent_fetch,
    confluent_produce,
    create_topic,
    delete_topic,
    environment,
    os_load,
    parse_cases,
    process_cpu,
    rotated,
    write_section,
)

sys.path.insert(0, str(ROOT / "tests" / "security"))  # tls_pki, kafka_wire

from kafka_wire import WireClient, client_tls
from tls_pki import Pki, make_pki

from groupstream.security.scram import ScramMechanism
from support.brokers import BrokerKind, BrokerProcess, free_port, groupstream_command

USER, PASSWORD = "bench", "bench-password"


class Broker(BrokerProcess):
    def __init__(self, workdir: Path, pki: Pki) -> None:
        self.ports = {"SSL": free_port(), "SASL_PLAINTEXT": free_port(), "SASL_SSL": free_port()}
        settings = {
            "ssl.keystore.location": str(pki.broker.pem_keystore),
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        }
        super().__init__(BrokerKind.GROUPSTREAM, workdir, settings=settings, start_timeout=60)
        self.ports["PLAINTEXT"] = self.port

    def command(self) -> list[str]:
        cmd = super().command()
        for name in ("SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            cmd += ["--listen", f"{name}://127.0.0.1:{self.ports[name]}"]
        return cmd


def client_conf(broker: Broker, pki: Pki, listener: str) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": f"127.0.0.1:{broker.ports[listener]}", "security.protocol": listener}
    if "SSL" in listener:
        conf["ssl.ca.location"] = str(pki.ca)
    if listener.startswith("SASL"):
        conf.update({"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": USER, "sasl.password": PASSWORD})
    return conf


# --- throughput (bench/broker_throughput.py's client settings, with a security configuration) -------------------


def produce(conf: dict[str, Any], topic: str, case: Case) -> float:
    value = bytes(range(256)) * (case.value_size // 256) + bytes(case.value_size % 256)
    return confluent_produce(conf, topic, case.records, value, connect_first=True)  # connected (and authenticated)


THROUGHPUT_LISTENERS = ["PLAINTEXT", "SSL", "SASL_SSL"]


def ours_produce(conf: dict[str, Any], topic: str, case: Case) -> float:
    """Our Producer with the settings of confluent-kafka's here (acks=all, linger.ms=10, no compression):
    seconds from the first produce() to the end of the flush, connected and authenticated before."""
    from groupstream import Producer

    value = bytes(range(256)) * (case.value_size // 256) + bytes(case.value_size % 256)
    settings = {"acks": "all", "linger.ms": 10, "compression.type": "none", "batch.size": 1_000_000}
    with Producer({**conf, **settings}) as producer:
        producer.produce(topic, b"warm-up").result(30)
        produce = producer.produce
        start = time.perf_counter()
        last = None
        for _ in range(case.records):
            last = produce(topic, value)
        left = producer.flush(300)
        elapsed = time.perf_counter() - start
        assert last is not None and last.result(0).offset >= 0
    if left:
        raise RuntimeError(f"ours: {left} records not delivered")
    return elapsed


def ours_throughput(broker: Broker, pki: Pki, case: Case, partitions: int, repeat: int) -> dict[str, list[float]]:
    """Produce seconds of our Producer per listener, the listeners taking turns within a round."""
    runs: dict[str, list[float]] = {}
    for r in range(repeat):
        for listener in rotated(THROUGHPUT_LISTENERS, r):
            conf = client_conf(broker, pki, listener)
            topic = f"ours-{listener.lower()}-{r}"
            create_topic(conf, topic, partitions)
            runs.setdefault(listener, []).append(ours_produce(conf, topic, case))
            delete_topic(conf, topic)
            print(f"  ours {case!s:<16} {listener:<10} run {r + 1}: produce "
                  f"{case.records / runs[listener][-1]:>10,.0f} rec/s", flush=True)  # fmt: skip
    return runs


def ours_table(runs: dict[str, list[float]], case: Case) -> str:
    base = statistics.median(runs["PLAINTEXT"])
    lines = ["| our Producer, " + f"{case} | produce rec/s median (best) | produce MB/s | vs plaintext |",
             "|---|---:|---:|---:|"]  # fmt: skip
    for listener in THROUGHPUT_LISTENERS:
        med = statistics.median(runs[listener])
        name = "SASL_SSL (SCRAM-SHA-256)" if listener == "SASL_SSL" else listener
        ratio = "" if listener == "PLAINTEXT" else f"**{base / med:.2f}x**"
        lines.append(f"| {name} | {case.records / med:,.0f} ({case.records / min(runs[listener]):,.0f}) | "
                     f"{case.records * case.value_size / 1e6 / med:.1f} | {ratio} |")  # fmt: skip
    return "\n".join(lines)


Runs = dict[tuple[str, Case], list[tuple[float, float, float, float]]]


def throughput(broker: Broker, pki: Pki, cases: list[Case], partitions: int, repeat: int) -> Runs:
    """(produce s, fetch s, broker and client CPU s of the produce) of every run per listener and case. The
    listeners take turns within a round, so that a noisy neighbour slows them alike, in an order that rotates
    from round to round (`rotated`), and each run's topic is deleted once it is measured (`delete_topic`
    says why)."""
    runs: Runs = {}
    pid = broker.pid
    assert pid is not None, "the broker is running"
    for n, case in enumerate(cases):
        for r in range(repeat):
            for listener in rotated(THROUGHPUT_LISTENERS, r):
                conf = client_conf(broker, pki, listener)
                topic = f"sec-{n}-{listener.lower()}-{r}"
                create_topic(conf, topic, partitions)
                broker_cpu, client_cpu = process_cpu(pid), process_cpu(os.getpid())
                p = produce(conf, topic, case)
                broker_cpu, client_cpu = process_cpu(pid) - broker_cpu, process_cpu(os.getpid()) - client_cpu
                f = confluent_fetch(conf, topic, case, partitions)
                delete_topic(conf, topic)
                runs.setdefault((listener, case), []).append((p, f, broker_cpu, client_cpu))
                print(f"  {case!s:<16} {listener:<10} run {r + 1}: produce {case.records / p:>10,.0f} rec/s   "
                      f"fetch {case.records / f:>10,.0f} rec/s", flush=True)  # fmt: skip
    return runs


def throughput_table(runs: Runs, cases: list[Case], partitions: int) -> str:
    lines = [
        f"| case ({partitions} partitions) | listener | produce rec/s median (best) | produce MB/s | "
        "fetch rec/s median (best) | fetch MB/s | produce vs plaintext | fetch vs plaintext | "
        "produce CPU s: broker + client (median) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for case in cases:
        mb = case.records * case.value_size / 1e6

        def med(listener: str, i: int, case: Case = case) -> float:
            return statistics.median(run[i] for run in runs[(listener, case)])

        def best(listener: str, i: int, case: Case = case) -> float:
            return min(run[i] for run in runs[(listener, case)])

        for listener in THROUGHPUT_LISTENERS:
            p, f = med(listener, 0), med(listener, 1)
            name = "SASL_SSL (SCRAM-SHA-256)" if listener == "SASL_SSL" else listener
            ratio_p = "" if listener == "PLAINTEXT" else f"**{med('PLAINTEXT', 0) / p:.2f}x**"
            ratio_f = "" if listener == "PLAINTEXT" else f"**{med('PLAINTEXT', 1) / f:.2f}x**"
            cpu = f"{med(listener, 2):.2f} + {med(listener, 3):.2f}"
            lines.append(
                f"| {case} | {name} | {case.records / p:,.0f} ({case.records / best(listener, 0):,.0f}) | {mb / p:.1f} | "
                f"{case.records / f:,.0f} ({case.records / best(listener, 1):,.0f}) | {mb / f:.1f} | {ratio_p} | {ratio_f} | "
                f"{cpu} |"
            )  # fmt: skip
    return "\n".join(lines)


# --- connection set-up ----------------------------------------------------------------------------------------


def setup_cases(broker: Broker, pki: Pki) -> dict[str, Callable[[], None]]:
    tls = client_tls(str(pki.ca))

    def connect(listener: str, mechanism: ScramMechanism | None = None) -> Callable[[], None]:
        port = broker.ports[listener]

        def once() -> None:
            with WireClient(port, tls if "SSL" in listener else None) as c:
                assert c.request("ApiVersions", 3, client_software_name="bench", client_software_version="1").error_code == 0
                if mechanism is not None:
                    assert c.scram(USER, PASSWORD, mechanism).error_code == 0

        return once

    return {
        "PLAINTEXT": connect("PLAINTEXT"),
        "SSL (TLS 1.3 handshake)": connect("SSL"),
        "SASL_PLAINTEXT, SCRAM-SHA-256": connect("SASL_PLAINTEXT", ScramMechanism.SCRAM_SHA_256),
        "SASL_PLAINTEXT, SCRAM-SHA-512": connect("SASL_PLAINTEXT", ScramMechanism.SCRAM_SHA_512),
        "SASL_SSL, SCRAM-SHA-256": connect("SASL_SSL", ScramMechanism.SCRAM_SHA_256),
        "SASL_SSL, SCRAM-SHA-512": connect("SASL_SSL", ScramMechanism.SCRAM_SHA_512),
    }


def pbkdf2_ms() -> dict[str, float]:
    """The client's own share of a SCRAM login: one PBKDF2 of the password (4096 iterations)."""
    from groupstream.security.scram import salt_password

    out = {}
    for m in ScramMechanism:
        times = []
        for _ in range(21):
            start = time.perf_counter()
            salt_password(m, PASSWORD, b"s" * 32, 4096)
            times.append((time.perf_counter() - start) * 1000)
        out[m.mechanism_name] = statistics.median(times)
    return out


def setup_times(broker: Broker, pki: Pki, connections: int) -> dict[str, list[float]]:
    cases = setup_cases(broker, pki)
    times: dict[str, list[float]] = {name: [] for name in cases}
    for once in cases.values():  # warm-up
        once()
    for _ in range(connections):
        for name, once in cases.items():  # interleaved, so that load elsewhere hits every case alike
            start = time.perf_counter()
            once()
            times[name].append((time.perf_counter() - start) * 1000)
    return times


def setup_table(times: dict[str, list[float]], pbkdf2: dict[str, float]) -> str:
    base = statistics.median(times["PLAINTEXT"])
    lines = ["| connection | median ms | p95 ms | vs plaintext |", "|---|---:|---:|---:|"]
    for name, ms in times.items():
        ms = sorted(ms)
        p95 = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
        med = statistics.median(ms)
        lines.append(f"| {name} | {med:.2f} | {p95:.2f} | {med / base:.1f}x |")
    lines.append("")
    lines.append("Of which the client's PBKDF2 (4096 iterations, hashlib, median): " +
                 ", ".join(f"{k} {v:.2f} ms" for k, v in pbkdf2.items()) + ".")  # fmt: skip
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", default="500000,200000", help="records per case (one value, or one per size)")
    ap.add_argument("--value-size", default="100,1024", help="value sizes in bytes, one case each")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=3, help="runs per case and listener; the fastest is reported")
    ap.add_argument("--connections", type=int, default=200, help="connections timed per set-up case")
    ap.add_argument("--ours", action="store_true", help="also our Producer over each listener (the largest case)")
    ap.add_argument("--write-results", action="store_true", help="update the security section of bench/RESULTS.md")
    args = ap.parse_args()
    cases = parse_cases(ap, args.records, args.value_size)
    env = environment()
    load = os_load()
    print(f"security bench: {env}")
    with tempfile.TemporaryDirectory(prefix="bench-security-") as tmp:
        pki = make_pki(Path(tmp) / "pki")
        broker = Broker(Path(tmp) / "broker", pki)
        added = subprocess.run([*groupstream_command(), "users", "add", "--data-dir", str(broker.data_dir), "--user",
                                USER, "--password", PASSWORD], capture_output=True, text=True)  # fmt: skip
        if added.returncode != 0:
            raise SystemExit(added.stderr)
        with broker:
            times = setup_times(broker, pki, args.connections)
            pbkdf2 = pbkdf2_ms()
            setup = setup_table(times, pbkdf2)
            print(setup, flush=True)
            runs = throughput(broker, pki, cases, args.partitions, args.repeat)
            largest = max(cases, key=lambda c: c.value_size)
            ours = ours_throughput(broker, pki, largest, args.partitions, args.repeat) if args.ours else None
    tput = throughput_table(runs, cases, args.partitions)
    if ours is not None:
        tput += "\n\n" + ours_table(ours, largest)
    print()
    print(tput)
    if args.write_results:
        write_section(
            "security",
            "## Security: TLS and SCRAM (`bench/security.py`)\n\n"
            f"{env}. One broker with PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL listeners (EC P-256 certificates; "
            "TLS 1.3, TLS_AES_256_GCM_SHA384 negotiated by librdkafka and Python alike). Throughput: confluent-kafka, "
            "produce acks=all, linger.ms=10, no compression, keyless; fetch in assign mode from offset 0; "
            f"{args.repeat} rounds in which the listeners take turns; medians of the rounds (best in brackets), ratios "
            f"of the medians. MB/s counts value bytes (10^6 B), at the median. CPU: the seconds the produce cost "
            "the broker's process (from /proc) and the bench's own (librdkafka's threads and the calling one), "
            "medians; client and broker share the two cores, so a ratio near the ratio of the CPU sums says the "
            "cores, not a wait, set the rate. Load average at the start "
            f"{load}: the two cores are shared with other work, which is why the figures are medians.\n\n"
            f"Command: `python bench/security.py --records {args.records} --value-size {args.value_size} "
            f"--partitions {args.partitions} --repeat {args.repeat} --connections {args.connections}"
            f"{' --ours' if args.ours else ''} --write-results`\n\n{tput}\n\n"
            f"Connection set-up, from connect() until the connection may send requests (a blocking client of our "
            f"codec, {args.connections} connections per case, cases interleaved):\n\n{setup}",
        )
        print("\nwrote bench/RESULTS.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
