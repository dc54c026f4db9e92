"""``kafka-transactions describe-producers`` (Kafka 4.4's TransactionsCommand) against our broker (issue 17): the
tool asks DescribeProducers for a partition and prints each active producer, with the start offset of its open
transaction, which is how an operator finds the transaction holding a partition's last stable offset back."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from java_harness import run_tool

from support.brokers import BrokerProcess

pytestmark = [pytest.mark.compat, pytest.mark.broker_ours]

TOOL = "org.apache.kafka.tools.TransactionsCommand"


def test_describe_producers_shows_the_open_transactions_start_offset(java_broker: BrokerProcess) -> None:
    bootstrap = java_broker.bootstrap
    topic = f"producers-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    assert admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30) is None
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-txn", "linger.ms": 0})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, b"committed-%d" % i)
    p.commit_transaction(30)  # offsets 0-2, marker 3
    p.begin_transaction()
    p.produce(topic, b"open")
    assert p.flush(30) == 0  # offset 4, the transaction left open
    try:
        run = run_tool(TOOL, ["--bootstrap-server", bootstrap, "describe-producers", "--topic", topic,
                              "--partition", "0"]).check()  # fmt: skip
        header, *rows = [line.split() for line in run.out.splitlines() if line.strip()]
        assert header == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                          "CurrentTransactionStartOffset"], run.out  # fmt: skip
        (row,) = rows
        assert int(row[0]) >= 0 and int(row[1]) >= 0, run.out
        assert row[3] == "3" and int(row[4]) > 0, run.out  # four records: sequences 0..3
        assert row[5] == "4", run.out
    finally:
        p.abort_transaction(30)
