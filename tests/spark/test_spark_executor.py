"""A Spark task's read of one offset range, run directly (no Spark): exact ranges, and data lost to retention
failing loudly or skipped with a warning."""

from __future__ import annotations

import logging

import pytest
from spark_kit import fill, new_topic

from groupstream.client.admin import Admin
from groupstream.spark.cluster import DataLossError
from groupstream.spark.executor import ReadSpec, read_range
from groupstream.spark.planning import OffsetRange
from support.brokers import BrokerProcess

pytestmark = pytest.mark.broker_ours


def spec(bootstrap: str, fail_on_data_loss: bool) -> ReadSpec:
    return ReadSpec(bootstrap, (), include_headers=False, fail_on_data_loss=fail_on_data_loss,
                    poll_timeout_ms=30_000)  # fmt: skip


def offsets(batches: list[object]) -> list[int]:
    return [o for b in batches for o in b.column("offset").to_pylist()]  # type: ignore[attr-defined]


def test_a_range_is_read_exactly(broker: BrokerProcess) -> None:
    topic = new_topic(broker.bootstrap, 1)
    fill(broker.bootstrap, topic, 40_000, partition=0)
    batches = list(read_range(spec(broker.bootstrap, True), OffsetRange(topic, 0, 123, 39_001)))
    assert offsets(batches) == list(range(123, 39_001))
    assert len(batches) > 1  # gathered into Arrow batches of bounded size


def test_records_lost_to_retention_fail_or_are_skipped_with_a_warning(
    broker: BrokerProcess, caplog: pytest.LogCaptureFixture
) -> None:
    topic = new_topic(broker.bootstrap, 1)
    fill(broker.bootstrap, topic, 100, partition=0)
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.delete_records({(topic, 0): 70})
    rng = OffsetRange(topic, 0, 10, 100)
    with pytest.raises(DataLossError, match=r"starts at offset 70 now, but offsets 10 to 69 were to be read"):
        list(read_range(spec(broker.bootstrap, True), rng))
    with caplog.at_level(logging.WARNING, logger="groupstream.spark"):
        got = offsets(list(read_range(spec(broker.bootstrap, False), rng)))
    assert got == list(range(70, 100))
    assert any("skipping them (failOnDataLoss=false)" in r.getMessage() for r in caplog.records)
