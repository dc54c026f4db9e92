"""A Spark task's read of one offset range, run directly (no Spark): exact ranges in Spark's Arrow schema, one
consumer lent to the tasks of a worker in turn, and data lost to retention failing loudly or skipped with a
warning."""

from __future__ import annotations

import logging

import pytest
from spark_kit import fill, new_topic

from groupstream.client.admin import Admin
from groupstream.spark.cluster import DataLossError
from groupstream.spark.executor import CONSUMERS, ReadSpec, arrow_schema, read_range
from groupstream.spark.planning import OffsetRange
from support.brokers import BrokerProcess

pytestmark = pytest.mark.broker_ours


def spec(bootstrap: str, fail_on_data_loss: bool, include_headers: bool = False) -> ReadSpec:
    return ReadSpec(bootstrap, (), include_headers=include_headers, fail_on_data_loss=fail_on_data_loss,
                    poll_timeout_ms=30_000)  # fmt: skip


def offsets(batches: list[object]) -> list[int]:
    return [o for b in batches for o in b.column("offset").to_pylist()]  # type: ignore[attr-defined]


def test_a_range_is_read_exactly(broker: BrokerProcess) -> None:
    topic = new_topic(broker.bootstrap, 1)
    fill(broker.bootstrap, topic, 40_000, partition=0)
    batches = list(read_range(spec(broker.bootstrap, True), OffsetRange(topic, 0, 123, 39_001)))
    assert offsets(batches) == list(range(123, 39_001))
    assert len(batches) > 1  # gathered into Arrow batches of bounded size


def test_batches_have_sparks_schema_with_or_without_headers(broker: BrokerProcess) -> None:
    """Spark refuses a batch whose Arrow schema is not exactly the one it expects."""
    topic = new_topic(broker.bootstrap, 1)
    fill(broker.bootstrap, topic, 10, partition=0)
    for headers in (False, True):
        (batch,) = read_range(spec(broker.bootstrap, True, headers), OffsetRange(topic, 0, 2, 5))
        assert batch.schema.equals(arrow_schema(headers))
        assert batch.column("key").to_pylist() == [b"k2", b"k3", b"k4"]
        if headers:
            assert batch.column("headers").to_pylist()[0] == [{"key": "i", "value": b"2"}]


def test_the_tasks_of_a_worker_take_turns_with_one_consumer(broker: BrokerProcess) -> None:
    topic = new_topic(broker.bootstrap, 2)
    fill(broker.bootstrap, topic, 1000, partition=0)
    fill(broker.bootstrap, topic, 1000, partition=1)
    s = spec(broker.bootstrap, True)
    assert offsets(list(read_range(s, OffsetRange(topic, 0, 0, 1000)))) == list(range(1000))
    idle, lent = CONSUMERS.idle, CONSUMERS.lent
    assert idle >= 1 and lent == 0
    early = read_range(s, OffsetRange(topic, 1, 0, 1000))
    next(early)
    assert (CONSUMERS.idle, CONSUMERS.lent) == (idle - 1, 1)
    early.close()  # Spark stopped reading (a limit): the consumer goes back, and the next task starts clean
    assert offsets(list(read_range(s, OffsetRange(topic, 1, 500, 1000)))) == list(range(500, 1000))
    assert (CONSUMERS.idle, CONSUMERS.lent) == (idle, 0)


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
