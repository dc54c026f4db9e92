"""How a node of the test's Apache Kafka is configured: its ``server.properties``, its JVM command line, and
the ``kafka-storage format`` of its data directory.

Each node is combined controller+broker on two loopback ports (a static quorum: the voters are configured),
with its own data directory and log; it runs as ``java -cp <jars> kafka.Kafka server.properties``.
"""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from support.brokers import HOST
from support.kafka_jars import classpath, java_binary

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
# What Kafka's own start scripts give a broker (kafka-server-start.sh's heap, kafka-run-class.sh's performance
# options): the benchmarks run the broker this way, as a user would, instead of the tests' small JVM.
KAFKA_SERVER_JVM_OPTIONS = (
    "-Xmx1G",
    "-Xms1G",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15",
    "-Djava.awt.headless=true",
)


def log4j2_console(level: str, *, stderr: bool = False, quiet: Mapping[str, str] | None = None) -> str:
    """A Log4j 2 configuration: ``level`` and above to stdout (or stderr) in one line per event; the loggers
    in ``quiet`` (short name -> logger) at WARN only."""
    out = "err" if stderr else "out"
    lines = [
        "status = warn",
        f"appender.{out}.type = Console",
        f"appender.{out}.name = {out}",
        *([f"appender.{out}.target = SYSTEM_ERR"] if stderr else []),
        f"appender.{out}.layout.type = PatternLayout",
        f"appender.{out}.layout.pattern = [%d{{HH:mm:ss,SSS}}] %p %m (%c{{1}})%n",
        f"rootLogger.level = {level}",
        f"rootLogger.appenderRef.{out}.ref = {out}",
    ]
    for short, logger in (quiet or {}).items():
        lines += [f"logger.{short}.name = {logger}", f"logger.{short}.level = WARN"]
    return "".join(f"{line}\n" for line in lines)


# Every node's: INFO to stdout (the node's log file), without the config dumps.
LOG4J2_PROPERTIES = log4j2_console(
    "INFO",
    quiet={
        "config": "org.apache.kafka.common.config.AbstractConfig",
        "appinfo": "org.apache.kafka.common.utils.AppInfoParser",
        "state": "state.change.logger",
        "log": "kafka.log",
        "storage": "org.apache.kafka.storage.internals",
    },
)


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes in URL-safe base64 without padding (what ``random-uuid`` prints).
    Like Kafka's ``Uuid.randomUuid``, never one that starts with ``-``, which ``kafka-storage format -t`` would
    take for an option (one start in 64 failed so)."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def node_properties(
    node_id: int, *, port: int, controller_port: int, voters: str, data_dir: Path, settings: Mapping[str, str]
) -> dict[str, str]:
    """``server.properties`` of one combined node: its id, listeners and data directory, then ``settings``."""
    props = {
        "process.roles": "broker,controller",
        "node.id": str(node_id),
        "controller.quorum.voters": voters,
        "listeners": f"PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(data_dir),
    }
    props.update(settings)
    return props


def write_properties(path: Path, props: Mapping[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{k}={v}\n" for k, v in sorted(props.items())))


def jvm_command(
    main: str, *args: str, log4j2: Path, classes: Path | None = None, options: Sequence[str] = JVM_OPTIONS
) -> list[str]:
    """``java <options> -cp [<classes>:]<Kafka jars> main args`` with ``log4j2`` as the log configuration."""
    cp = classpath() if classes is None else f"{classes}{os.pathsep}{classpath()}"
    return [java_binary(), *options, f"-Dlog4j2.configurationFile={log4j2}", "-cp", cp, main, *args]


def storage_format_command(properties: Path, cluster_id: str, log4j2: Path) -> list[str]:
    """``kafka-storage format`` of the data directory named in ``properties``."""
    return jvm_command(
        "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(properties), log4j2=log4j2
    )
