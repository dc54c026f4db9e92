"""Brokers for the group tests: ours with ``group.initial.rebalance.delay.ms=0`` (each join completes as soon
as every known member is in, so tests do not wait Kafka's 3 s initial delay), or Tansu (its defaults; it waits
about 3 s before the first rebalance of a group)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from group_harness import Members

from support.brokers import BrokerKind, BrokerProcess

OUR_GROUP_SETTINGS = {"group.initial.rebalance.delay.ms": "0", "num.partitions": "6"}
_MARKS = {BrokerKind.GROUPSTREAM: pytest.mark.broker_ours, BrokerKind.TANSU: pytest.mark.broker_tansu}


def broker_params() -> list[object]:
    """Ours and Tansu, marked like the top-level conftest marks them (so --brokers selects). Apache Kafka runs
    these scenarios with our consumer in tests/apache/test_apache_groups.py, on a 3-node cluster."""
    return [pytest.param(kind, marks=mark, id=str(kind)) for kind, mark in _MARKS.items()]


@pytest.fixture(scope="module", params=broker_params())
def group_broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    kind = BrokerKind(request.param)
    settings = OUR_GROUP_SETTINGS if kind is BrokerKind.GROUPSTREAM else None
    with BrokerProcess(kind, tmp_path_factory.mktemp(str(kind)), settings=settings) as b:
        yield b


@pytest.fixture
def members(tmp_path: Path) -> Iterator[Members]:
    """Member subprocesses of one test; any still running at the end are killed (only these children)."""
    ms = Members(tmp_path / "members")
    try:
        yield ms
    finally:
        ms.teardown()
