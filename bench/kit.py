"""What several benches share, once: the (records, value size) cases, topic creation, confluent-kafka's produce and
fetch loops with the throughput settings, matched producer settings, the broker under test (ours, Tansu or a
single Apache Kafka node run as Kafka's own scripts run it), a deadline wait, and the RESULTS.md helpers.

Every bench puts ``tests/`` on the import path through this module (for ``support.brokers`` and the Apache Kafka
fixtures), so its own imports stay short.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))  # support.brokers, support.apache_kafka

from results import RESULTS, confluent_versions, machine, write_section  # noqa: E402
from support.brokers import BrokerKind, BrokerProcess  # noqa: E402

__all__ = [
    "RESULTS",
    "THROUGHPUT_CONSUMER",
    "THROUGHPUT_PRODUCER",
    "Broker",
    "Case",
    "command_line",
    "confluent_fetch",
    "confluent_produce",
    "create_topic",
    "environment",
    "machine",
    "matched_producer",
    "parse_cases",
    "parse_ints",
    "start_broker",
    "wait_for",
    "write_section",
]

# --- cases ----------------------------------------------------------------------------------------------------


T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Case:
    records: int
    value_size: int

    def __str__(self) -> str:
        size = f"{self.value_size // 1024} KB" if self.value_size % 1024 == 0 else f"{self.value_size} B"
        return f"{self.records:,} x {size}"


def parse_ints(text: str) -> list[int]:
    return [int(x.replace("_", "")) for x in text.split(",") if x.strip()]


def parse_cases(ap: argparse.ArgumentParser, records: str, value_sizes: str) -> list[Case]:
    """One case per value size; ``records`` gives one count for all or one per size."""
    sizes, counts = parse_ints(value_sizes), parse_ints(records)
    if len(counts) == 1:
        counts = counts * len(sizes)
    if len(counts) != len(sizes):
        ap.error("--records takes one value or one per --value-size")
    return [Case(n, s) for n, s in zip(counts, sizes, strict=True)]


def command_line(script: str) -> str:
    """How this run was started, for RESULTS.md: ``python bench/<script> <its arguments>``."""
    return shlex.join(["python", f"bench/{script}", *sys.argv[1:]])


def environment() -> str:
    return f"{machine()}; {confluent_versions()}"


def wait_for(cond: Callable[[], bool], timeout: float, what: str, interval: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} within {timeout:g}s")
        time.sleep(interval)  # poll interval of the wait, bounded by its deadline


# --- confluent-kafka: topics, produce, fetch ------------------------------------------------------------------


def _conf(conf: Mapping[str, Any] | str) -> dict[str, Any]:
    return {"bootstrap.servers": conf} if isinstance(conf, str) else dict(conf)


def create_topic(conf: Mapping[str, Any] | str, topic: str, partitions: int) -> None:
    """Create ``topic`` (replication factor 1) and wait until its metadata lists every partition.

    ``conf``: a bootstrap address, or a whole confluent-kafka configuration (a security protocol, say)."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient(_conf(conf))
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(30)

    def visible() -> bool:
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        return md is not None and md.error is None and len(md.partitions) == partitions

    wait_for(visible, 30, f"topic {topic} with {partitions} partitions", interval=0.05)


def delete_topic(conf: Mapping[str, Any] | str, topic: str) -> None:
    """Delete ``topic`` once its run is measured. A bench that writes gigabytes keeps only the run at hand on
    disk: on this machine, once about 5 GB of earlier runs' files sit in the page cache, the kernel's cost per
    byte written triples (the broker's system time per 600 MB produce goes from 0.4 to 1.35 s), which would
    slow whichever case happens to run late."""
    from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

    admin = AdminClient(_conf(conf))  # held until the answer: a handle that goes away fails its futures
    admin.delete_topics([topic])[topic].result(30)


# The broker benches' client settings: batches form (linger 10 ms, up to 1 MB), every record acknowledged by
# the partition's in-sync replicas, no compression; the consumer fetches large and queues deep.
THROUGHPUT_PRODUCER: dict[str, Any] = {
    "acks": "all",
    "enable.idempotence": False,
    "compression.type": "none",
    "linger.ms": 10,
    "batch.size": 1_000_000,
    "batch.num.messages": 10_000,
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
}
THROUGHPUT_CONSUMER: dict[str, Any] = {
    "enable.auto.commit": False,
    "fetch.max.bytes": 52_428_800,
    "max.partition.fetch.bytes": 10_485_760,
    "queued.max.messages.kbytes": 262_144,
}


def matched_producer(linger_ms: int, batch_size: int) -> dict[str, Any]:
    """The client benches' matched producer settings (confluent-kafka's and our names)."""
    return {"acks": "all", "enable.idempotence": True, "linger.ms": linger_ms, "batch.size": batch_size,
            "compression.type": "none"}  # fmt: skip


def confluent_produce(
    conf: Mapping[str, Any] | str,
    topic: str,
    records: int,
    value: bytes,
    *,
    settings: Mapping[str, Any] = THROUGHPUT_PRODUCER,
    keys: Sequence[bytes] | None = None,
    count_acks: bool = True,
    connect_first: bool = False,
    warm_up: bool = False,
) -> float:
    """Seconds from the first produce() of ``records`` ``value``s to the end of the flush that waits for the last
    acknowledgement. ``keys``: 1,024 keys taken in turn (keyless without); ``count_acks``: a delivery callback
    counts acknowledgements and every record must have one (without it, the flush must leave none behind);
    ``connect_first``: metadata fetched (connected, authenticated) before the clock starts; ``warm_up``: one
    record produced and acknowledged before it (not counted)."""
    from confluent_kafka import KafkaError, Message, Producer

    acked = 0
    errors: list[str] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        nonlocal acked
        if err is None:
            acked += 1
        else:
            errors.append(str(err))

    producer = Producer({**_conf(conf), **settings})
    if connect_first:
        producer.list_topics(topic, timeout=10)
    if warm_up:
        producer.produce(topic, b"warm-up", keys[0] if keys else None)
        if producer.flush(30):
            raise RuntimeError("confluent: the warm-up record was not delivered")
    produce_one = producer.produce
    extra: dict[str, Any] = {"on_delivery": on_delivery} if count_acks else {}
    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                if keys is None:
                    produce_one(topic, value, **extra)
                else:
                    produce_one(topic, value, keys[i & 1023], **extra)
                break
            except BufferError:  # its queue is full: serve delivery reports, try again
                producer.poll(0.01)
        if i & 0x3FFF == 0:
            producer.poll(0)
    left = producer.flush(300)
    elapsed = time.perf_counter() - start
    if left or errors or (count_acks and acked != records):
        raise RuntimeError(f"produce: {acked} acked, {left} left, errors {errors[:3]}")
    return elapsed


def confluent_fetch(conf: Mapping[str, Any] | str, topic: str, case: Case, partitions: int) -> float:
    """Seconds from assign() (every partition from offset 0) until every record has been read, each value
    touched (its length summed and checked against what was produced)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**_conf(conf), "group.id": f"{topic}-bench", **THROUGHPUT_CONSUMER})
    try:
        consumer.list_topics(topic, timeout=10)  # connect and learn the leaders before the clock starts
        got = touched = 0
        start = time.perf_counter()
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + 600
        while got < case.records:
            # no more than are left: consume() waits out its timeout for the number asked
            for m in consumer.consume(num_messages=min(10_000, case.records - got), timeout=1.0):
                if m.error() is not None:
                    raise RuntimeError(f"fetch error: {m.error()}")
                touched += len(m.value() or b"")
                got += 1
            if time.monotonic() > deadline:
                raise RuntimeError(f"fetch stalled at {got} of {case.records}")
        elapsed = time.perf_counter() - start
    finally:
        consumer.close()
    if got != case.records or touched != case.records * case.value_size:
        raise RuntimeError(f"fetch: {got} records, {touched} value bytes; expected {case.records}")
    return elapsed


# --- the broker under test ------------------------------------------------------------------------------------

APACHE = "apache"  # a single Apache Kafka node, beside BrokerKind's groupstream and tansu
BROKER_NAMES = (BrokerKind.TANSU.value, BrokerKind.GROUPSTREAM.value, APACHE)

# Apache Kafka's own defaults for what the test fixtures turn down to share two cores with other tests (the
# benchmarks run the broker as a user would); replication factor 1, as one node must.
APACHE_DEFAULTS: dict[str, str] = {
    "num.network.threads": "3",
    "num.io.threads": "8",
    "background.threads": "10",
    "group.coordinator.threads": "4",
    "num.recovery.threads.per.data.dir": "2",
    "log.cleaner.dedupe.buffer.size": "134217728",
}


def _exit_on_sigterm() -> None:
    """SIGTERM ends the bench through SystemExit, so its ``with`` blocks stop the brokers it started (they run in
    sessions of their own, which a signal to the bench does not reach)."""
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


class Broker:
    """One broker process for a bench: ours or Tansu (``support.brokers.BrokerProcess``), or a single Apache
    Kafka node (``support.apache_kafka``) with Kafka's start-script JVM options and thread counts."""

    def __init__(
        self, name: str, workdir: Path, settings: Mapping[str, str] | None = None, start_timeout: float = 60
    ) -> None:
        self.name = name
        self._proc: Any
        _exit_on_sigterm()
        if name == APACHE:
            from support.apache_kafka import ApacheKafkaCluster, fetch_jars
            from support.kafka_config import KAFKA_SERVER_JVM_OPTIONS

            fetch_jars()
            self._proc = ApacheKafkaCluster(
                workdir / name, 1, settings={**APACHE_DEFAULTS, **(settings or {})},
                start_timeout=max(start_timeout, 120), jvm_options=KAFKA_SERVER_JVM_OPTIONS,
            )  # fmt: skip
        else:
            self._proc = BrokerProcess(BrokerKind(name), workdir / name, settings=settings, start_timeout=start_timeout)

    @property
    def bootstrap(self) -> str:
        return str(self._proc.bootstrap)

    @property
    def version(self) -> str:
        if self.name == APACHE:
            return f"Apache Kafka {self._proc.version}"
        return self.name

    def __enter__(self) -> Broker:
        self._proc.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._proc.stop()


def start_broker(name: str, workdir: Path, settings: Mapping[str, str] | None = None) -> Broker:
    return Broker(name, workdir, settings)


def broker_names(text: str, ap: argparse.ArgumentParser, allowed: Sequence[str] = BROKER_NAMES) -> list[str]:
    names = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [n for n in names if n not in allowed]
    if unknown:
        ap.error(f"unknown brokers {unknown}: choose from {', '.join(allowed)}")
    return names


def kafka_tool_command(main: str, *args: str, heap: str = "-Xmx512M") -> list[str]:
    """A Kafka tool as its script runs it (``kafka-producer-perf-test.sh`` and the consumer's set a 512 MB heap,
    ``kafka-run-class.sh`` the G1 options) with the Kafka jars on the class path; logs to stderr at WARN."""
    from support.apache_kafka import fetch_jars
    from support.kafka_config import KAFKA_SERVER_JVM_OPTIONS, jvm_command

    fetch_jars()
    log4j2 = _tools_log4j2()
    options = [heap, *(o for o in KAFKA_SERVER_JVM_OPTIONS if not o.startswith("-Xm"))]
    return list[str](jvm_command(main, *args, log4j2=log4j2, options=options))


def _tools_log4j2() -> Path:
    """The Java tools' and client's log configuration: WARN and above, to stderr (stdout carries results)."""
    from support.kafka_config import log4j2_console
    from support.kafka_jars import cache_root

    path = cache_root() / "bench-tools-log4j2.properties"
    text = log4j2_console("WARN", stderr=True)
    if not path.is_file() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return path


def rotated(items: Sequence[T], r: int) -> list[T]:
    """``items`` in round ``r``'s order: each takes each place in turn, so that none always runs right after
    the same other (or first, or last) when a bench times them in rounds."""
    k = r % len(items)
    return [*items[k:], *items[:k]]


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime (fields 14, 15)


def os_load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


# --- the Java client (bench/java/ClientBench.java, compiled at run time) ------------------------------------

JAVA_BENCH = Path(__file__).resolve().parent / "java" / "ClientBench.java"


def java_bench_classes() -> Path:
    """``ClientBench`` compiled with ``javac`` against the Kafka jars into ``~/.cache/groupstream/bench-java-<hash>``
    (the hash covers the source and the jar directory); at once when that source already was."""
    import hashlib
    import shutil

    from support.apache_kafka import fetch_jars
    from support.kafka_jars import cache_root, classpath, jars_dir, java_binary

    fetch_jars()
    digest = hashlib.sha256(JAVA_BENCH.read_bytes() + str(jars_dir()).encode() + java_binary().encode())
    out = cache_root() / f"bench-java-{digest.hexdigest()[:12]}"
    if (out / "ClientBench.class").is_file():
        return out
    staging = out.with_name(f"{out.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    javac = str(Path(java_binary()).with_name("javac"))
    cmd = [javac, "-Xlint:all", "-d", str(staging), "-cp", classpath(), str(JAVA_BENCH)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=300)
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise RuntimeError(f"javac failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    try:
        staging.rename(out)
    except OSError:  # compiled by another process meanwhile
        shutil.rmtree(staging, ignore_errors=True)
    return out


def java_client(
    mode: str, bootstrap: str, topic: str, partitions: int, records: int, value_size: int, props: Mapping[str, Any]
) -> float:
    """One ``ClientBench`` run (``produce`` or ``consume``) in a fresh JVM with the JVM's own defaults; the seconds
    it timed itself (start-up and the warm-up record are not in them)."""
    import json

    from support.kafka_config import jvm_command

    classes = java_bench_classes()
    log4j2 = _tools_log4j2()
    args = [mode, bootstrap, topic, str(partitions), str(records), str(value_size), *(f"{k}={v}" for k, v in props.items())]
    cmd = jvm_command("ClientBench", *args, log4j2=log4j2, classes=classes, options=())
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"java {mode} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return float(json.loads(done.stdout.strip().splitlines()[-1])["seconds"])
