"""Two-phase commit building blocks (issue 17, ``client/producer/prepared.py``) against our broker and Apache
Kafka: a producer prepares its transaction (every record acknowledged, the transaction left open after the
producer closes), and a separate client completes it from the prepared identity alone; a repeated decision is
answered as done; a newer producer of the same id aborts what was prepared, and a late commit says so."""

from __future__ import annotations

import pytest
from txn_scenarios import confluent_values, make_topic

from groupstream import Producer
from groupstream.client.admin import Admin
from groupstream.client.errors import KafkaError
from groupstream.client.producer.errors import TransactionStateError
from groupstream.client.producer.prepared import (
    PreparedTransaction,
    PreparedTransactionLost,
    complete_transaction,
)
from groupstream.protocol.error_codes import ErrorCode
from support.brokers import BrokerProcess
from support.cluster_topics import unique


def _prepare(bootstrap: str, tid: str, topic: str, tag: str, n: int) -> PreparedTransaction:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
    try:
        p.init_transactions(60)
        p.begin_transaction()
        for i in range(n):
            p.produce(topic, b"%s-%d" % (tag.encode(), i), partition=i % 2)
        prepared = p.prepare_transaction(30)
        with pytest.raises(TransactionStateError, match="after prepare_transaction"):
            p.produce(topic, b"late", partition=0)
    finally:
        p.close(10)  # must not end the transaction
    return prepared


def prepared_transactions_complete_from_their_identity(bootstrap: str) -> None:
    topic = unique("prep")
    make_topic(bootstrap, topic, 2)
    config = {"bootstrap.servers": bootstrap, "transactional.id": "ignored", "acks": "all"}

    # prepared, the producer closed: open on the coordinator, its records on the log, invisible to read_committed
    tid_c = unique("tid-c")
    committed = _prepare(bootstrap, tid_c, topic, "c", 20)
    assert committed.transactional_id == tid_c and committed.producer_id >= 0 and committed.producer_epoch >= 0
    assert committed.partitions == ((topic, 0), (topic, 1))
    assert PreparedTransaction.from_json(committed.to_json()) == committed
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        assert admin.describe_transactions([tid_c])[tid_c].state == "Ongoing"
    assert len(confluent_values(bootstrap, topic, "read_uncommitted", 20, partitions=2)) == 20

    # aborted from its identity, twice (the retry of the same decision is done), a commit then refused
    aborted = _prepare(bootstrap, unique("tid-a"), topic, "a", 10)
    complete_transaction(config, aborted, commit=False)
    complete_transaction(config, aborted, commit=False)
    with pytest.raises(KafkaError) as refused:
        complete_transaction(config, aborted, commit=True)
    assert refused.value.code == ErrorCode.INVALID_TXN_STATE

    # committed from its identity, twice; an abort after it is refused
    complete_transaction(config, committed, commit=True)
    complete_transaction(config, committed, commit=True)
    with pytest.raises(KafkaError) as refused:
        complete_transaction(config, committed, commit=False)
    assert refused.value.code == ErrorCode.INVALID_TXN_STATE

    # a retried task: a newer producer of the same id aborts the prepared transaction; a commit comes too late,
    # an abort is already done
    tid_z = unique("tid-z")
    zombie = _prepare(bootstrap, tid_z, topic, "z", 10)
    newer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid_z})
    try:
        newer.init_transactions(60)
        newer.begin_transaction()
        empty = newer.prepare_transaction(30)
        assert empty.empty and empty.partitions == ()
        complete_transaction(config, empty, commit=True)  # nothing open: nothing to do
    finally:
        newer.close(10)
    with pytest.raises(PreparedTransactionLost, match="aborted before its commit"):
        complete_transaction(config, zombie, commit=True)
    complete_transaction(config, zombie, commit=False)

    values = confluent_values(bootstrap, topic, "read_committed", 20, partitions=2)
    assert sorted(values) == sorted(b"c-%d" % i for i in range(20))


@pytest.mark.broker_ours
def test_prepared_transactions_on_our_broker(groupstream_broker: BrokerProcess) -> None:
    prepared_transactions_complete_from_their_identity(groupstream_broker.bootstrap)


@pytest.mark.broker_apache
@pytest.mark.compat
def test_prepared_transactions_on_apache_kafka(apache_node: object) -> None:
    prepared_transactions_complete_from_their_identity(apache_node.bootstrap)  # type: ignore[attr-defined]
