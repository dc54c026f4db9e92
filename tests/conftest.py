"""Shared fixtures: real broker processes (ours, Tansu and Apache Kafka), and their logs on failure.

Tests that run against a broker are marked with the broker they target: ``broker_ours`` (our broker, required
in ``make test``), ``broker_tansu`` (Tansu: a self-check of the harness) or ``broker_apache`` (Apache Kafka
4.x from the Maven jars: a 3-node KRaft cluster, or one node; ``make test`` runs these too).
``--brokers=groupstream`` runs only ours; the default runs all three. ``--kafka-bootstrap=HOST:PORT,...`` (or
``$GROUPSTREAM_KAFKA_BOOTSTRAP``) runs the ``broker_apache`` tests against a cluster of one's own instead of
starting one; the tests that kill nodes are skipped then.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from support.apache_kafka import ApacheBroker, ApacheKafkaCluster, ExternalKafkaCluster, KafkaNode, fetch_jars
from support.brokers import (
    TANSU_AUTO_CREATE_PARTITIONS,
    AutoCreateBroker,
    BrokerFactory,
    BrokerKind,
    BrokerProcess,
)
from support.capture import CaptureProxy, canonical_api_versions

MARK_FOR_KIND = {BrokerKind.GROUPSTREAM: "broker_ours", BrokerKind.TANSU: "broker_tansu", BrokerKind.APACHE: "broker_apache"}
KIND_FOR_MARK: dict[str, str] = {mark: str(kind) for kind, mark in MARK_FOR_KIND.items()}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--brokers",
        default="groupstream,tansu,apache",
        help="comma-separated brokers to run broker tests against: groupstream, tansu, apache (default: all)",
    )
    parser.addoption(
        "--kafka-bootstrap",
        default=os.environ.get("GROUPSTREAM_KAFKA_BOOTSTRAP", ""),
        help="run the Apache Kafka tests against this cluster (HOST:PORT,...; at least 3 brokers) instead of "
        "starting one from the Maven jars; tests that kill nodes are skipped (env GROUPSTREAM_KAFKA_BOOTSTRAP)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "broker_ours: runs against our broker (groupstream broker)")
    config.addinivalue_line("markers", "broker_tansu: runs against Tansu (a self-check of the test harness)")
    config.addinivalue_line("markers", "broker_apache: runs against Apache Kafka (support.apache_kafka)")


def _selected_kinds(config: pytest.Config) -> set[str]:
    raw = str(config.getoption("--brokers"))
    kinds = {k.strip() for k in raw.split(",") if k.strip()}
    unknown = kinds - set(KIND_FOR_MARK.values())
    if unknown:
        raise pytest.UsageError(f"--brokers: unknown {sorted(unknown)}; known: {sorted(KIND_FOR_MARK.values())}")
    return kinds


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    selected = _selected_kinds(config)
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        kinds = {KIND_FOR_MARK[m.name] for m in item.iter_markers() if m.name in KIND_FOR_MARK}
        (drop if kinds and not kinds & selected else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def broker_params() -> list[Any]:
    """Parameters for a fixture that runs a test against each broker, marked with the broker it targets."""
    return [pytest.param(kind, marks=getattr(pytest.mark, MARK_FOR_KIND[kind]), id=str(kind)) for kind in BrokerKind]


# The single Apache Kafka node that broker-parametrized tests share: auto-created topics get as many
# partitions as our test broker gives them, and groups start at once, as they do on ours in these tests.
APACHE_BROKER_SETTINGS = {"num.partitions": "6", "group.initial.rebalance.delay.ms": "0"}
APACHE_AUTO_CREATE_PARTITIONS = 6


@pytest.fixture(scope="session")
def apache_broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ApacheBroker]:
    """One Apache Kafka node for the whole session (its JVM starts once), as the ``apache`` kind of ``broker``;
    or the ``--kafka-bootstrap`` cluster."""
    external = _kafka_bootstrap(request.config)
    if external:
        yield ApacheBroker(ExternalKafkaCluster(external))
        return
    fetch_jars()
    with ApacheKafkaCluster(tmp_path_factory.mktemp("apache-broker"), 1, settings=APACHE_BROKER_SETTINGS) as cluster:
        yield ApacheBroker(cluster)


# -- fixtures ----------------------------------------------------------------------------------------------


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[BrokerFactory]:
    factory = BrokerFactory(tmp_path)
    try:
        yield factory
    finally:
        factory.stop_all()


@pytest.fixture(scope="module")
def groupstream_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(BrokerKind.GROUPSTREAM, tmp_path_factory.mktemp("groupstream")) as b:
        yield b


@pytest.fixture(scope="module")
def tansu_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(BrokerKind.TANSU, tmp_path_factory.mktemp("tansu")) as b:
        yield b


@pytest.fixture(scope="module", params=broker_params())
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker per test module and broker kind (tests use their own topics)."""
    kind = BrokerKind(request.param)
    if kind is BrokerKind.APACHE:
        yield request.getfixturevalue("apache_broker")
        return
    with BrokerProcess(kind, tmp_path_factory.mktemp(str(kind))) as b:
        yield b


@pytest.fixture(scope="module", params=broker_params())
def autocreate_broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AutoCreateBroker]:
    """For clients without an admin API (kcat): our broker with ``num.partitions=6``; or Tansu behind a proxy
    that drops the default-valued tagged fields of its ApiVersions v3 answer, which Debian's kcat
    (librdkafka 2.0.2) cannot read."""
    kind = BrokerKind(request.param)
    if kind is BrokerKind.APACHE:
        yield AutoCreateBroker(request.getfixturevalue("apache_broker"), APACHE_AUTO_CREATE_PARTITIONS)
        return
    workdir = tmp_path_factory.mktemp(str(kind))
    if kind is BrokerKind.GROUPSTREAM:
        with BrokerProcess(kind, workdir, settings={"num.partitions": "6"}) as b:
            yield AutoCreateBroker(b, 6)
        return
    with CaptureProxy(rewrite_response=canonical_api_versions) as proxy:
        b = BrokerProcess(kind, workdir, advertised_port=proxy.port)
        with b:
            proxy.start(b.host, b.port)
            yield AutoCreateBroker(b, TANSU_AUTO_CREATE_PARTITIONS, proxy)


def _kafka_bootstrap(config: pytest.Config) -> str:
    return str(config.getoption("--kafka-bootstrap")).strip()


@pytest.fixture(scope="module")
def apache_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ApacheKafkaCluster | ExternalKafkaCluster]:
    """A 3-node Apache Kafka KRaft cluster per test module (the JVMs start once, about 8 s), or the cluster
    given by ``--kafka-bootstrap``. Tests that kill nodes ask for ``apache_nodes`` instead."""
    external = _kafka_bootstrap(request.config)
    if external:
        yield ExternalKafkaCluster(external)
        return
    fetch_jars()  # at once when `make kafka-jars` has run
    with ApacheKafkaCluster(tmp_path_factory.mktemp("apache-kafka"), 3) as cluster:
        yield cluster


@pytest.fixture
def apache_nodes(apache_cluster: ApacheKafkaCluster | ExternalKafkaCluster) -> Iterator[ApacheKafkaCluster]:
    """The module's cluster with every node running when the test starts (a node a failed test left down is
    started again), for tests that kill and restart nodes; skipped against a cluster of one's own."""
    if not isinstance(apache_cluster, ApacheKafkaCluster):
        pytest.skip("kills Kafka nodes: needs the cluster the tests start, not --kafka-bootstrap")
    down = [n for n in apache_cluster.nodes if not n.running]
    for n in down:
        apache_cluster.start_node(n)
    yield apache_cluster


@pytest.fixture(scope="module")
def apache_node(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ApacheKafkaCluster | ExternalKafkaCluster]:
    """A single Apache Kafka node (replication factor 1) per test module, or the ``--kafka-bootstrap``
    cluster."""
    external = _kafka_bootstrap(request.config)
    if external:
        yield ExternalKafkaCluster(external)
        return
    fetch_jars()
    with ApacheKafkaCluster(tmp_path_factory.mktemp("apache-kafka-1"), 1) as cluster:
        yield cluster


# -- broker logs on failure, and per-client timings ---------------------------------------------------------


def _brokers_of(item: pytest.Item) -> list[BrokerProcess | KafkaNode | ApacheBroker]:
    found: list[BrokerProcess | KafkaNode | ApacheBroker] = []
    for value in getattr(item, "funcargs", {}).values():
        if isinstance(value, BrokerProcess | ApacheBroker):
            found.append(value)
        elif isinstance(value, ApacheKafkaCluster):
            found.extend(n for n in value.nodes if n not in found)  # apache_nodes is apache_cluster too
        elif isinstance(value, BrokerFactory):
            found.extend(value.started)
        elif isinstance(value, AutoCreateBroker):
            found.append(value.process)
    return found


_durations: dict[str, float] = defaultdict(float)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        for b in _brokers_of(item):
            report.sections.append((f"log of {b!r}", b.log_tail(120)))
    if "compat" in item.keywords:
        group = f"{item.path.name} [{_kind_of(item)}]"
        _durations[group] += report.duration
    return report


def _kind_of(item: pytest.Item) -> str:
    for m in item.iter_markers():
        if m.name in KIND_FOR_MARK:
            return KIND_FOR_MARK[m.name]
    return "-"


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _durations:
        terminalreporter.section("compat test time per client and broker")
        for group, seconds in sorted(_durations.items()):
            terminalreporter.write_line(f"{seconds:8.1f} s  {group}")
