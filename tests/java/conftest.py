"""The Java client and Kafka's tools against our broker (issue 13, item 2).

The group tests reuse the member subprocesses and the checks of ``tests/compat/groups`` (pytest imports those
modules by their basenames, so that directory is put on ``sys.path`` here). The harness is compiled once per
source (``java_harness.harness_classes``) before the first test that needs it; the Apache Kafka jars come
from ``make kafka-jars``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

_GROUPS = Path(__file__).resolve().parent.parent / "compat" / "groups"
if str(_GROUPS) not in sys.path:
    sys.path.insert(0, str(_GROUPS))

from java_harness import Harness, MixedMembers, harness_classes  # noqa: E402 - needs the path above

from support.apache_kafka import fetch_jars  # noqa: E402
from support.brokers import KIP848_TEST_SETTINGS, BrokerKind, BrokerProcess  # noqa: E402

# Our broker for these tests: classic groups form without the initial delay, `consumer` groups heartbeat every
# 500 ms with 6 s sessions, regular expressions are matched again every second; auto-created topics get 6.
JAVA_TEST_SETTINGS = {**KIP848_TEST_SETTINGS, "num.partitions": "6"}


@pytest.fixture(scope="session")
def java_ready() -> Path:
    """The Kafka jars fetched (at once when `make kafka-jars` has run) and the harness compiled."""
    fetch_jars()
    return harness_classes()


@pytest.fixture(scope="module")
def java_broker(java_ready: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(
        BrokerKind.GROUPSTREAM, tmp_path_factory.mktemp("groupstream"), settings=JAVA_TEST_SETTINGS
    ) as b:
        yield b


@pytest.fixture(scope="module")
def harness(java_ready: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    """One harness JVM per module for Admin calls, produce runs and tools (their start-up paid once)."""
    with Harness(tmp_path_factory.mktemp("harness")) as h:
        yield h


@pytest.fixture
def members(java_ready: Path, tmp_path: Path) -> Iterator[MixedMembers]:
    """Member processes of one test (Java and ours); any still running at the end are killed."""
    ms = MixedMembers(tmp_path / "members")
    try:
        yield ms
    finally:
        ms.teardown()
