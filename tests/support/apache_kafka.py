"""Apache Kafka itself, for tests: a single KRaft node or a 3-node cluster run from the Maven jars.

Why: users who outgrow our embedded broker move to Apache Kafka, so our client must be shown to work against
the reference broker, including what one node never shows (partition leaders and group coordinators on
different nodes, leader failover, replication factor 3).

- ``support.kafka_jars``: the jars (``make kafka-jars`` runs ``python tests/support/apache_kafka.py fetch``)
  and a Java 17+;
- ``support.kafka_config``: each node's settings, ``server.properties``, JVM command and storage format;
- ``support.kafka_probes``: the Metadata and FindCoordinator requests built by hand;
- here: the node processes and the cluster. Readiness is a real API probe (so it does not depend on the
  client under test): every node's Metadata answer lists every running node. ``kill9``, ``restart`` and a
  clean ``stop`` act only on the processes this object started.
"""

from __future__ import annotations

import concurrent.futures
import struct
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TypeVar

if __name__ == "__main__":  # `make kafka-jars`: import the `support` package as pytest does
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pytest

from support.brokers import HOST, BrokerKind, free_port
from support.kafka_config import (
    CLUSTER_SETTINGS,
    JVM_OPTIONS,
    LOG4J2_PROPERTIES,
    SINGLE_NODE_SETTINGS,
    jvm_command,
    new_cluster_id,
    node_properties,
    storage_format_command,
    write_properties,
)
from support.kafka_jars import KafkaSetupError, classpath, fetch_jars, kafka_version, main
from support.kafka_probes import MetadataAnswer, PartitionState, find_group_coordinator, metadata
from support.process import LoggedProcess
from support.waiting import wait_until

# What tests import from here (the rest is imported from the modules above).
__all__ = ["ApacheKafkaCluster", "ExternalKafkaCluster", "KafkaNode", "KafkaSetupError", "fetch_jars"]

_T = TypeVar("_T")


class KafkaNode(LoggedProcess):
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
        jvm_options: Sequence[str] = JVM_OPTIONS,
    ) -> None:
        super().__init__(workdir / f"kafka-{node_id}-{port}.log", stop_timeout=stop_timeout)
        self.node_id = node_id
        self.workdir = workdir
        self.port = port
        self.controller_port = controller_port
        self.voters = voters
        self.settings = dict(settings)
        self.jvm_options = tuple(jvm_options)
        self.data_dir = workdir / "data"
        self.properties_path = workdir / "server.properties"
        self.log4j2 = workdir.parent / "log4j2.properties"  # the cluster's, one for all of its nodes

    @property
    def host(self) -> str:
        return HOST

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    def properties(self) -> dict[str, str]:
        return node_properties(
            self.node_id,
            port=self.port,
            controller_port=self.controller_port,
            voters=self.voters,
            data_dir=self.data_dir,
            settings=self.settings,
        )

    def format(self, cluster_id: str) -> None:
        """``kafka-storage format`` of this node's data directory (static quorum: the voters are configured)."""
        write_properties(self.properties_path, self.properties())
        cmd = storage_format_command(self.properties_path, cluster_id, self.log4j2)
        code = self.run_to_end("format", cmd, timeout=120)
        if code != 0:
            raise KafkaSetupError(
                f"kafka-storage format of node {self.node_id} exited {code}\n{self.log_tail()}"
            )

    def launch(self) -> None:
        """Start the JVM without waiting for it (the cluster waits for all of its nodes at once)."""
        self.spawn(
            jvm_command("kafka.Kafka", str(self.properties_path), log4j2=self.log4j2, options=self.jvm_options),
            cwd=self.workdir,
        )

    def check_alive(self) -> None:
        """Raise (with the log's tail) when the JVM this object started has exited."""
        code = self.exit_code()
        if code is not None:
            raise KafkaSetupError(f"Kafka node {self.node_id} exited with code {code}\n{self.log_tail()}")

    def probe(self, timeout: float = 2.0) -> MetadataAnswer | None:
        try:
            return metadata(HOST, self.port, timeout=timeout)
        except (OSError, struct.error):
            return None

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
        jvm_options: Sequence[str] = JVM_OPTIONS,
    ) -> None:
        """``jvm_options``: the tests' small JVM by default; the benchmarks give Kafka's own start-script options."""
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
                jvm_options=jvm_options,
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


class ApacheBroker:
    """A single Apache Kafka node as the broker-parametrized tests see a `BrokerProcess`: address, kind, restart
    and log; or a ``--kafka-bootstrap`` cluster, which cannot be restarted."""

    kind = BrokerKind.APACHE

    def __init__(self, cluster: ApacheKafkaCluster | ExternalKafkaCluster) -> None:
        self.cluster = cluster

    @property
    def _node(self) -> KafkaNode:
        if not isinstance(self.cluster, ApacheKafkaCluster):
            raise RuntimeError("a --kafka-bootstrap cluster has no node this test can control")
        return self.cluster.nodes[0]

    @property
    def host(self) -> str:
        return self.bootstrap.split(",")[0].rsplit(":", 1)[0]

    @property
    def port(self) -> int:
        return int(self.bootstrap.split(",")[0].rsplit(":", 1)[1])

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    def restart(self, *, kill: bool = False) -> ApacheBroker:
        if not isinstance(self.cluster, ApacheKafkaCluster):
            pytest.skip("restarts the broker: needs the node the tests start, not --kafka-bootstrap")
        self.cluster.restart(self._node, kill=kill)
        return self

    def log_tail(self, lines: int = 60) -> str:
        return self._node.log_tail(lines) if isinstance(self.cluster, ApacheKafkaCluster) else ""

    def __repr__(self) -> str:
        return f"ApacheBroker({self.bootstrap})"


@dataclass(frozen=True)
class ExternalKafkaCluster:
    """A cluster of one's own (``--kafka-bootstrap``): tests that need no process control run against it."""

    bootstrap: str

    @property
    def version(self) -> str:
        return "external"


if __name__ == "__main__":
    raise SystemExit(main())
