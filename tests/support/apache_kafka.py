"""Apache Kafka itself, for tests: a single KRaft node or a 3-node cluster run from the Maven jars.

Why: users who outgrow our embedded broker move to Apache Kafka, so our client must be shown to work against
the reference broker, including what one node never shows (partition leaders and group coordinators on
different nodes, leader failover, replication factor 3).

The jars (``org.apache.kafka:kafka_2.13`` and ``kafka-tools`` at the version in ``tests/apache/pom.xml``, with
their runtime dependencies) are copied by Maven into a cache outside the work tree:
``~/.cache/groupstream/apache-kafka-<version>-<pom hash>/`` (``$GROUPSTREAM_CACHE`` moves it; Maven's own cache
is ``~/.m2``). ``make kafka-jars`` runs ``python tests/support/apache_kafka.py fetch``; a fetch that is already
complete returns at once. ``$GROUPSTREAM_KAFKA_LIBS`` points at a directory of jars of one's own instead.

Each node is combined controller+broker on two loopback ports, with its own data directory formatted by
``kafka-storage format`` (``kafka.tools.StorageTool``) and its own log file; it runs as
``java -cp <jars> kafka.Kafka server.properties``. Readiness is a real API probe built by hand (so it does
not depend on the client under test): every node's Metadata answer lists every running node. ``kill9``,
``restart`` and a clean ``stop`` act only on the processes this object started.
"""

from __future__ import annotations

import argparse
import base64
import concurrent.futures
import hashlib
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import TracebackType
from typing import TypeVar

HOST = "127.0.0.1"
_T = TypeVar("_T")
POM = Path(__file__).resolve().parent.parent / "apache" / "pom.xml"
JAVA_CANDIDATES = (
    "/usr/lib/jvm/java-17-openjdk-amd64/bin/java",
    "/usr/lib/jvm/temurin-25-jdk-amd64/bin/java",
)
MIN_JAVA = 17  # Kafka 4.x brokers and tools need Java 17

# What every node of a test cluster is given (on top of its node id, ports, quorum and data directory).
# The replication settings are the production shape a user moves to; the timeouts are shortened so a test sees
# a killed node fenced (and its partitions led elsewhere) in seconds rather than Kafka's 9 s default, and
# `consumer` groups heartbeat every 500 ms with 6 s sessions, as our broker's tests run them. Thread counts
# and the JVM flags below keep three JVMs modest on a 2-core machine shared with other tests.
CLUSTER_SETTINGS: dict[str, str] = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "4000",
    "broker.heartbeat.interval.ms": "500",
    "num.network.threads": "2",
    "num.io.threads": "2",
    "num.recovery.threads.per.data.dir": "1",
    "background.threads": "2",
    "group.coordinator.threads": "1",
    "log.cleaner.dedupe.buffer.size": "8388608",
}
# A single node: the same, with replication factor 1 (there is nobody to replicate to).
SINGLE_NODE_SETTINGS: dict[str, str] = {
    **CLUSTER_SETTINGS,
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
}
JVM_OPTIONS = (
    "-Xms128m",
    "-Xmx512m",
    "-XX:+UseSerialGC",  # one GC thread: small heaps, and the cores are shared
    "-XX:TieredStopAtLevel=1",  # C1 only: 3 nodes start and stop in ~8 s of CPU instead of ~13 s (measured)
    "-Djava.awt.headless=true",
)

# Log4j 2 configuration of every node: INFO to stdout (the node's log file), without the config dumps.
LOG4J2_PROPERTIES = """\
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d{HH:mm:ss,SSS}] %p %m (%c{1})%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = out
logger.config.name = org.apache.kafka.common.config.AbstractConfig
logger.config.level = WARN
logger.appinfo.name = org.apache.kafka.common.utils.AppInfoParser
logger.appinfo.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
logger.log.name = kafka.log
logger.log.level = WARN
logger.storage.name = org.apache.kafka.storage.internals
logger.storage.level = WARN
"""


class KafkaSetupError(RuntimeError):
    """Apache Kafka cannot be run here (no jars, no Java 17+, a node that would not start)."""


# -- the jars ----------------------------------------------------------------------------------------------


def kafka_version(pom: Path = POM) -> str:
    m = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", pom.read_text())
    if m is None:
        raise KafkaSetupError(f"no <kafka.version> in {pom}")
    return m.group(1)


def cache_root() -> Path:
    return Path(os.environ.get("GROUPSTREAM_CACHE") or Path.home() / ".cache" / "groupstream")


def jars_dir(pom: Path = POM) -> Path:
    """Where the jars of this pom live: named by version and by the pom's hash, so an edited pom fetches
    into a new directory instead of mixing two dependency sets."""
    own = os.environ.get("GROUPSTREAM_KAFKA_LIBS")
    if own:
        return Path(own)
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:12]
    return cache_root() / f"apache-kafka-{kafka_version(pom)}-{digest}"


def _complete_marker(libs: Path) -> Path:
    return libs / ".complete"


def jars_ready(pom: Path = POM) -> bool:
    libs = jars_dir(pom)
    if os.environ.get("GROUPSTREAM_KAFKA_LIBS"):
        return any(libs.glob("kafka_2.13-*.jar"))
    return _complete_marker(libs).is_file()


def fetch_jars(pom: Path = POM, *, quiet: bool = True) -> Path:
    """Copy the pom's runtime dependencies from Maven into ``jars_dir()``; at once when already there.

    Maven resolves through ``~/.m2`` (so a second copy directory costs no download); the copy goes into a
    temporary directory renamed into place, so an interrupted fetch never leaves a half-filled cache that
    looks complete.
    """
    libs = jars_dir(pom)
    if jars_ready(pom):
        return libs
    if os.environ.get("GROUPSTREAM_KAFKA_LIBS"):
        raise KafkaSetupError(f"GROUPSTREAM_KAFKA_LIBS={libs} holds no kafka_2.13 jar")
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaSetupError("Maven (mvn) is not installed: `apt-get install maven`, then `make kafka-jars`")
    libs.parent.mkdir(parents=True, exist_ok=True)
    staging = libs.with_name(libs.name + f".partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    cmd = [
        mvn,
        "-B",
        *(["-q"] if quiet else []),
        "-f",
        str(pom),
        "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={staging}",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not any(staging.glob("kafka_2.13-*.jar")):
        shutil.rmtree(staging, ignore_errors=True)
        raise KafkaSetupError(
            f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout[-4000:]}{done.stderr[-4000:]}"
        )
    names = sorted(p.name for p in staging.glob("*.jar"))
    _complete_marker(staging).write_text("\n".join(names) + "\n")
    shutil.rmtree(libs, ignore_errors=True)
    try:
        staging.rename(libs)
    except OSError:
        if not jars_ready(pom):  # not another process's fetch finishing first: a real failure
            raise
        shutil.rmtree(staging, ignore_errors=True)
    return libs


def classpath(pom: Path = POM) -> str:
    libs = jars_dir(pom)
    if not jars_ready(pom):
        raise KafkaSetupError(
            f"the Apache Kafka jars are not in {libs}: run `make kafka-jars` (or "
            f"`python tests/support/apache_kafka.py fetch`), or set GROUPSTREAM_KAFKA_LIBS to a directory of jars"
        )
    return str(libs / "*")


@cache
def java_binary() -> str:
    """A Java 17+ ``java``: ``$GROUPSTREAM_JAVA``, ``$JAVA_HOME``, the machine's JDK 17, then PATH."""
    candidates: list[str] = []
    if os.environ.get("GROUPSTREAM_JAVA"):
        candidates.append(os.environ["GROUPSTREAM_JAVA"])
    if os.environ.get("JAVA_HOME"):
        candidates.append(str(Path(os.environ["JAVA_HOME"]) / "bin" / "java"))
    candidates += JAVA_CANDIDATES
    on_path = shutil.which("java")
    if on_path:
        candidates.append(on_path)
    seen: list[str] = []
    for java in candidates:
        if not Path(java).is_file():
            continue
        version = _java_feature_version(java)
        seen.append(f"{java}: {version}")
        if version is not None and version >= MIN_JAVA:
            return java
    raise KafkaSetupError(f"no Java {MIN_JAVA}+ found for Apache Kafka (tried {seen or candidates})")


def _java_feature_version(java: str) -> int | None:
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        ).stderr
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if m is None:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes in URL-safe base64 without padding (what ``random-uuid`` prints)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


# -- hand-built probes: Metadata v1 and FindCoordinator v1 ------------------------------------------------


@dataclass(frozen=True, slots=True)
class PartitionState:
    partition: int
    error: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class MetadataAnswer:
    brokers: dict[int, tuple[str, int]]
    controller: int
    topics: dict[str, tuple[int, list[PartitionState]]]  # name -> (error code, partitions)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> tuple[int, ...]:
        values = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return values

    def i8(self) -> int:
        return self.take(">b")[0]

    def i16(self) -> int:
        return self.take(">h")[0]

    def i32(self) -> int:
        return self.take(">i")[0]

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        s = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return s

    def int_array(self) -> tuple[int, ...]:
        return tuple(self.i32() for _ in range(self.i32()))


def _string(s: str) -> bytes:
    raw = s.encode()
    return struct.pack(">h", len(raw)) + raw


def _call(host: str, port: int, api_key: int, version: int, body: bytes, timeout: float) -> _Reader:
    corr = 0x4B41
    header = struct.pack(">hhi", api_key, version, corr) + _string("groupstream-kafka-probe")
    frame = header + body
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(struct.pack(">i", len(frame)) + frame)
        (size,) = struct.unpack(">i", _recv_exact(s, 4))
        if size < 4 or size > 64 << 20:
            raise ConnectionError(f"implausible response size {size}")
        reader = _Reader(_recv_exact(s, size))
    if reader.i32() != corr:
        raise ConnectionError("correlation id mismatch")
    return reader


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed before the whole response arrived")
        buf += chunk
    return bytes(buf)


def metadata(host: str, port: int, topics: Sequence[str] = (), timeout: float = 5.0) -> MetadataAnswer:
    """Metadata v1 for ``topics`` (none: only brokers and controller). Raises OSError when unreachable."""
    body = struct.pack(">i", len(topics)) + b"".join(_string(t) for t in topics)
    r = _call(host, port, 3, 1, body, timeout)
    brokers: dict[int, tuple[str, int]] = {}
    for _ in range(r.i32()):
        node, h, p = r.i32(), r.string(), r.i32()
        r.string()  # rack
        brokers[node] = (h or "", p)
    controller = r.i32()
    out: dict[str, tuple[int, list[PartitionState]]] = {}
    for _ in range(r.i32()):
        err, name = r.i16(), r.string()
        r.i8()  # is_internal
        parts = []
        for _ in range(r.i32()):
            perr, pid, leader = r.i16(), r.i32(), r.i32()
            parts.append(PartitionState(pid, perr, leader, r.int_array(), r.int_array()))
        out[name or ""] = (err, sorted(parts, key=lambda ps: ps.partition))
    return MetadataAnswer(brokers, controller, out)


def find_group_coordinator(host: str, port: int, group: str, timeout: float = 5.0) -> tuple[int, int]:
    """FindCoordinator v1 for a group: (error code, coordinator node id)."""
    r = _call(host, port, 10, 1, _string(group) + struct.pack(">b", 0), timeout)
    r.i32()  # throttle
    err = r.i16()
    r.string()  # error message
    return err, r.i32()


# -- one node ----------------------------------------------------------------------------------------------


class KafkaNode:
    """One combined controller+broker JVM: its ports, data directory, properties and log."""

    def __init__(
        self,
        node_id: int,
        workdir: Path,
        *,
        port: int,
        controller_port: int,
        voters: str,
        settings: Mapping[str, str],
        stop_timeout: float = 30.0,
    ) -> None:
        self.node_id = node_id
        self.workdir = workdir
        self.port = port
        self.controller_port = controller_port
        self.voters = voters
        self.settings = dict(settings)
        self.stop_timeout = stop_timeout
        self.data_dir = workdir / "data"
        self.properties_path = workdir / "server.properties"
        self.log_path = workdir / f"kafka-{node_id}-{port}.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def host(self) -> str:
        return HOST

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def properties(self) -> dict[str, str]:
        props = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": self.voters,
            "listeners": f"PLAINTEXT://{HOST}:{self.port},CONTROLLER://{HOST}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{HOST}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir),
        }
        props.update(self.settings)
        return props

    def write_properties(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        lines = [f"{k}={v}" for k, v in sorted(self.properties().items())]
        self.properties_path.write_text("\n".join(lines) + "\n")

    def _java(self, main: str, *args: str) -> list[str]:
        log4j = self.workdir.parent / "log4j2.properties"
        return [
            java_binary(),
            *JVM_OPTIONS,
            f"-Dlog4j2.configurationFile={log4j}",
            "-cp",
            classpath(),
            main,
            *args,
        ]

    def format_command(self, cluster_id: str) -> list[str]:
        return self._java(
            "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(self.properties_path)
        )

    def format(self, cluster_id: str) -> None:
        """``kafka-storage format`` of this node's data directory (static quorum: the voters are configured)."""
        self.write_properties()
        cmd = self.format_command(cluster_id)
        with open(self.log_path, "ab") as log:
            log.write(f"=== format: {' '.join(cmd)}\n".encode())
            log.flush()
            code = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, check=False,
                                  timeout=120).returncode  # fmt: skip
        if code != 0:
            raise KafkaSetupError(
                f"kafka-storage format of node {self.node_id} exited {code}\n{self.log_tail()}"
            )

    def launch(self) -> None:
        """Start the JVM without waiting for it (the cluster waits for all of its nodes at once)."""
        if self.running:
            raise RuntimeError(f"Kafka node {self.node_id} already running (pid {self.pid})")
        cmd = self._java("kafka.Kafka", str(self.properties_path))
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"=== start {self.starts}: {' '.join(cmd)}\n".encode())
            log.flush()
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                start_new_session=True,  # a terminal's ^C does not reach it; we signal it ourselves
            )

    def check_alive(self) -> None:
        """Raise (with the log's tail) when the JVM this object started has exited."""
        proc = self._proc
        if proc is not None and proc.poll() is not None:
            code = proc.returncode
            self._proc = None
            raise KafkaSetupError(f"Kafka node {self.node_id} exited with code {code}\n{self.log_tail()}")

    def probe(self, timeout: float = 2.0) -> MetadataAnswer | None:
        try:
            return metadata(HOST, self.port, timeout=timeout)
        except (OSError, struct.error):
            return None

    def stop(self) -> int | None:
        """SIGTERM (a controlled shutdown: leadership moves away first), SIGKILL after ``stop_timeout``."""
        proc = self._proc
        if proc is None:
            return None
        self._proc = None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                return proc.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                self._note(f"SIGKILL after SIGTERM was not obeyed for {self.stop_timeout}s")
        return proc.wait(timeout=self.stop_timeout)

    def kill9(self) -> None:
        proc = self._proc
        if proc is None:
            return
        self._proc = None
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=self.stop_timeout)
        self._note("killed with SIGKILL by the test")

    def _note(self, text: str) -> None:
        with open(self.log_path, "ab") as log:
            log.write(f"=== {text}\n".encode())

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 60) -> str:
        text = self.log_text().splitlines()[-lines:]
        return f"--- last {len(text)} lines of {self.log_path} ---\n" + "\n".join(text)

    def __repr__(self) -> str:
        return f"KafkaNode({self.node_id}, port={self.port}, pid={self.pid})"


# -- a cluster ---------------------------------------------------------------------------------------------


class ApacheKafkaCluster:
    """``size`` combined nodes (node ids 1..size) forming one KRaft quorum on loopback ports."""

    def __init__(
        self,
        workdir: Path,
        size: int = 3,
        *,
        settings: Mapping[str, str] | None = None,
        start_timeout: float = 120.0,
    ) -> None:
        from support.brokers import free_port

        self.workdir = Path(workdir)
        self.size = size
        base = CLUSTER_SETTINGS if size >= 3 else SINGLE_NODE_SETTINGS
        self.settings = {**base, **(settings or {})}
        self.start_timeout = start_timeout
        self.cluster_id = new_cluster_id()
        ports = [(free_port(), free_port()) for _ in range(size)]
        voters = ",".join(f"{i + 1}@{HOST}:{cport}" for i, (_p, cport) in enumerate(ports))
        self.nodes = [
            KafkaNode(
                i + 1,
                self.workdir / f"node{i + 1}",
                port=p,
                controller_port=c,
                voters=voters,
                settings=self.settings,
            )
            for i, (p, c) in enumerate(ports)
        ]
        self.startup_s: float | None = None

    @property
    def version(self) -> str:
        return kafka_version()

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes)

    def node(self, node_id: int) -> KafkaNode:
        return self.nodes[node_id - 1]

    def running_nodes(self) -> list[KafkaNode]:
        return [n for n in self.nodes if n.running]

    # -- lifecycle -------------------------------------------------------------------------------------------

    def start(self) -> ApacheKafkaCluster:
        t0 = time.monotonic()
        classpath()  # fail early, naming the fetch, when the jars are missing
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "log4j2.properties").write_text(LOG4J2_PROPERTIES)
        with concurrent.futures.ThreadPoolExecutor(self.size) as pool:
            list(pool.map(lambda n: n.format(self.cluster_id), self.nodes))
        for n in self.nodes:
            n.launch()
        try:
            self.wait_ready(self.nodes)
        except BaseException:
            self.kill_all()
            raise
        self.startup_s = time.monotonic() - t0
        return self

    def wait_ready(self, nodes: Iterable[KafkaNode], timeout: float | None = None) -> None:
        """Until every running node's Metadata lists every running node (each registered and unfenced);
        KafkaSetupError at once when one of ``nodes`` exits, or after the timeout."""
        # imported here, as support.brokers is: `python tests/support/apache_kafka.py fetch` runs without them
        from support.waiting import wait_until

        expected_new = list(nodes)
        seen: dict[int, list[int] | None] = {}  # what each node's Metadata listed last

        def all_listed() -> bool:
            for n in expected_new:
                n.check_alive()
            running = self.running_nodes()
            want = {n.node_id for n in running}
            answers = {n.node_id: n.probe() for n in running}
            seen.clear()
            seen.update({i: sorted(a.brokers) if a else None for i, a in answers.items()})
            return all(
                a is not None and set(a.brokers) == want and a.controller in want for a in answers.values()
            )

        wait_until(
            all_listed,
            timeout or self.start_timeout,
            f"every running Kafka node to list nodes {sorted(n.node_id for n in self.running_nodes())}",
            interval_s=0.1,
            explain=lambda: (
                f"each node's Metadata lists {seen}\n" + "\n".join(n.log_tail(40) for n in expected_new)
            ),
            error=KafkaSetupError,
        )

    def stop(self) -> None:
        """Clean shutdown of every node, all at once (each moves its leaderships away while others remain)."""
        with concurrent.futures.ThreadPoolExecutor(max(1, self.size)) as pool:
            list(pool.map(lambda n: n.stop(), self.nodes))

    def kill_all(self) -> None:
        for n in self.nodes:
            n.kill9()

    def kill9(self, node: KafkaNode | int) -> KafkaNode:
        n = self.node(node) if isinstance(node, int) else node
        n.kill9()
        return n

    def restart(
        self, node: KafkaNode | int, *, kill: bool = False, timeout: float | None = None
    ) -> KafkaNode:
        """Stop (or kill -9) one node, start it again on its ports and data directory, and wait until every
        running node lists it again."""
        n = self.node(node) if isinstance(node, int) else node
        if kill:
            n.kill9()
        else:
            n.stop()
        return self.start_node(n, timeout=timeout)

    def start_node(self, node: KafkaNode | int, *, timeout: float | None = None) -> KafkaNode:
        n = self.node(node) if isinstance(node, int) else node
        n.launch()
        self.wait_ready([n], timeout)
        return n

    # -- what the cluster says (hand-built requests, independent of our client) ----------------------------

    def _ask(self, call: Callable[[int], _T], what: str) -> _T:
        """``call(port)`` on the first running node that answers."""
        last: BaseException | None = None
        for n in self.running_nodes():
            try:
                return call(n.port)
            except (OSError, struct.error) as e:
                last = e
        raise KafkaSetupError(f"no running Kafka node answered {what}: {last}")

    def partitions(self, topic: str) -> list[PartitionState]:
        answer = self._ask(lambda port: metadata(HOST, port, [topic]), f"Metadata for {topic}")
        err, parts = answer.topics.get(topic, (3, []))
        return parts if err == 0 else []

    def leader_of(self, topic: str, partition: int) -> int:
        for ps in self.partitions(topic):
            if ps.partition == partition:
                return ps.leader
        return -1

    def group_coordinator(self, group: str) -> int:
        """The node id of the group's coordinator, or -1 while none is available."""
        err, node = self._ask(
            lambda port: find_group_coordinator(HOST, port, group), f"FindCoordinator {group}"
        )
        return node if err == 0 else -1

    def fully_replicated(self, topic: str, partitions: int) -> bool:
        """Every partition has a leader and its whole replica set in sync."""
        parts = self.partitions(topic)
        return len(parts) == partitions and all(
            ps.error == 0 and ps.leader >= 0 and set(ps.isr) == set(ps.replicas) for ps in parts
        )

    # -- diagnostics -------------------------------------------------------------------------------------------

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(n.log_tail(lines) for n in self.nodes)

    def __enter__(self) -> ApacheKafkaCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"ApacheKafkaCluster({kafka_version()}, nodes={self.nodes})"


@dataclass(frozen=True)
class ExternalKafkaCluster:
    """A cluster of one's own (``--kafka-bootstrap``): tests that need no process control run against it."""

    bootstrap: str

    @property
    def version(self) -> str:
        return "external"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("fetch", help="copy the Apache Kafka jars into the cache (at once when already there)")
    sub.add_parser("where", help="print the jar directory")
    args = parser.parse_args(argv)
    if args.cmd == "where":
        print(jars_dir())
        return 0
    t0 = time.monotonic()
    cached = jars_ready()
    try:
        libs = fetch_jars()
        java_binary()
    except KafkaSetupError as e:
        print(e, file=sys.stderr)
        return 1
    how = "already cached" if cached else "fetched"
    print(f"Apache Kafka {kafka_version()}: {len(list(libs.glob('*.jar')))} jars in {libs} ({how}, "
          f"{time.monotonic() - t0:.1f} s)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `support.brokers`, as under pytest
    raise SystemExit(main())
