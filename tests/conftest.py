"""Shared fixtures: real broker processes (ours and Tansu), and their logs on failure.

Tests that run against a broker are marked with the broker they target: ``broker_ours`` (our broker, required
in ``make test``) or ``broker_tansu`` (Tansu: a self-check of the harness). ``--brokers=groupstream`` runs only
ours; the default runs both.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from support.brokers import (
    TANSU_AUTO_CREATE_PARTITIONS,
    AutoCreateBroker,
    BrokerFactory,
    BrokerKind,
    BrokerProcess,
)
from support.capture import CaptureProxy, canonical_api_versions

MARK_FOR_KIND = {BrokerKind.GROUPSTREAM: "broker_ours", BrokerKind.TANSU: "broker_tansu"}
KIND_FOR_MARK = {mark: kind for kind, mark in MARK_FOR_KIND.items()}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--brokers",
        default="groupstream,tansu",
        help="comma-separated brokers to run broker tests against: groupstream, tansu (default: both)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "broker_ours: runs against our broker (groupstream broker)")
    config.addinivalue_line("markers", "broker_tansu: runs against Tansu (a self-check of the test harness)")


def _selected_kinds(config: pytest.Config) -> set[BrokerKind]:
    raw = str(config.getoption("--brokers"))
    return {BrokerKind(k.strip()) for k in raw.split(",") if k.strip()}


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


# -- broker logs on failure, and per-client timings ---------------------------------------------------------


def _brokers_of(item: pytest.Item) -> list[BrokerProcess]:
    found: list[BrokerProcess] = []
    for value in getattr(item, "funcargs", {}).values():
        if isinstance(value, BrokerProcess):
            found.append(value)
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
            return str(KIND_FOR_MARK[m.name])
    return "-"


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _durations:
        terminalreporter.section("compat test time per client and broker")
        for group, seconds in sorted(_durations.items()):
            terminalreporter.write_line(f"{seconds:8.1f} s  {group}")
