"""The exactly-once sink's driver side (issue 17, ``spark/kafka_eos.py``) without Spark's scheduler, against our
broker: the decision log's folding (a torn last line, replays, compaction), a writer starting on a checkpoint
whose last batch was decided but not completed commits that batch's prepared transactions before anything else,
and a re-run of a batch already done is aborted, not committed twice (on our broker and on a three-node Apache
Kafka cluster)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.types import BinaryType, StructField, StructType
from spark_kit import new_topic

from groupstream import Consumer, Producer
from groupstream.client.producer.prepared import PreparedTransaction
from groupstream.spark.kafka_eos import (
    DecisionLog,
    ExactlyOnceStreamWriter,
    LogState,
    Prepared,
    is_replay,
    pending_batches,
    read_entries,
)
from support.brokers import BrokerProcess

_T = PreparedTransaction("t-0", 7, 1, (("out", 0),))
_SCHEMA = StructType([StructField("value", BinaryType())])


def test_the_log_folds_decisions_ignores_a_torn_line_and_compacts(tmp_path: Path) -> None:
    lines = [
        json.dumps({"batch": 0, "state": "decided", "txns": [_T.to_json()]}),
        json.dumps({"batch": 0, "state": "done"}),
        json.dumps({"batch": 1, "state": "decided", "txns": [_T.to_json()]}),
        '{"batch": 2, "state": "deci',  # cut short by a crash: never taken
    ]
    state = read_entries(lines)
    assert state.last_done == 0 and state.lines == 3
    assert pending_batches(state) == [(1, [_T])]
    assert is_replay(state, 0) and not is_replay(state, 1) and not is_replay(state, 2)
    decisions = DecisionLog(f"file:{tmp_path}")
    for line in lines[:3]:
        decisions.append(json.loads(line))
    decisions.compact(decisions.read())
    text = decisions.path.read_text().splitlines()
    assert len(text) == 2
    again = decisions.read()
    assert (again.last_done, pending_batches(again)) == (0, [(1, [_T])])
    assert DecisionLog(str(tmp_path / "none")).read() == LogState()


def _prepare(bootstrap: str, tid: str, topic: str, values: list[bytes]) -> PreparedTransaction:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
    try:
        p.init_transactions(60)
        p.begin_transaction()
        for v in values:
            p.produce(topic, v, partition=0)
        return p.prepare_transaction(30)
    finally:
        p.close(10)


def _committed(bootstrap: str, topic: str, settle_s: float) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"eos-drv-{time.monotonic_ns()}",
                  "isolation.level": "read_committed", "enable.auto.commit": False})  # fmt: skip
    got: list[bytes] = []
    try:
        c.assign([(topic, 0)], offsets={(topic, 0): 0})
        end = time.monotonic() + settle_s
        while time.monotonic() < end:
            got.extend(r.value for r in c.poll(0.2))
    finally:
        c.close()
    return got


def test_a_restarted_writer_finishes_the_decided_batch_and_aborts_its_rerun(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    restarted_writer_finishes_the_decided_batch(broker.bootstrap, tmp_path)


@pytest.mark.broker_apache
@pytest.mark.compat
def test_the_same_on_a_three_node_apache_kafka_cluster(apache_cluster: Any, tmp_path: Path) -> None:
    """The transaction coordinator and the output's leader may be different nodes there."""
    restarted_writer_finishes_the_decided_batch(apache_cluster.bootstrap, tmp_path)


@pytest.mark.broker_apache
@pytest.mark.compat
def test_a_batch_write_on_a_three_node_apache_kafka_cluster(spark: Any, apache_cluster: Any) -> None:
    """Spark's tasks write their transactions to partitions led by different nodes; the driver commits them."""
    from test_spark_kafka_eos import batch_write_commits_one_transaction_per_task

    batch_write_commits_one_transaction_per_task(spark, apache_cluster.bootstrap)


def restarted_writer_finishes_the_decided_batch(bs: str, tmp_path: Path) -> None:
    out = new_topic(bs, 1, prefix="eos-drv")
    checkpoint = str(tmp_path / "checkpoint")
    prefix = f"drv-{time.monotonic_ns()}"
    options = {"kafka.bootstrap.servers": bs, "topic": out, "exactlyOnce": "true", "checkpointLocation": checkpoint,
               "transactionalIdPrefix": prefix}  # fmt: skip
    # the driver died after logging batch 5's decision, before committing its transaction
    decided = _prepare(bs, f"{prefix}-0", out, [b"a", b"b"])
    DecisionLog(checkpoint).append({"batch": 5, "state": "decided", "txns": [decided.to_json()]})
    assert _committed(bs, out, 1.0) == []

    writer = ExactlyOnceStreamWriter(options, _SCHEMA)  # the restarted query's writer, before any task
    assert sorted(_committed(bs, out, 1.5)) == [b"a", b"b"]
    state = DecisionLog(checkpoint).read()
    assert (state.last_done, state.pending) == (5, {})

    # Spark re-runs batch 5 (its own commit log never got it): the task writes again, the driver aborts it
    rerun = _prepare(bs, f"{prefix}-0", out, [b"a", b"b"])
    writer.commit([Prepared(2, rerun.to_json())], 5)
    # the next batch is committed
    nxt = _prepare(bs, f"{prefix}-0", out, [b"c"])
    writer.commit([Prepared(1, nxt.to_json()), Prepared(0, None)], 6)
    assert sorted(_committed(bs, out, 1.5)) == [b"a", b"b", b"c"]
    assert DecisionLog(checkpoint).read().last_done == 6
