"""Transactions under ACLs on our broker (issue 17), as Kafka's authorization table has them, driven by
confluent-kafka over SASL_PLAINTEXT/SCRAM: a transactional producer needs DESCRIBE (FindCoordinator) and WRITE
(InitProducerId, AddPartitionsToTxn, EndTxn, Produce) on its transactional id besides WRITE on its topics;
DescribeTransactions answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED for ids the principal may not describe and
ListTransactions leaves them out."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka_wire import WireClient
from secure_broker import SecureBrokerProcess

from support.brokers import free_port, groupstream_command

pytestmark = [pytest.mark.compat, pytest.mark.broker_ours]

PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret"}
LIT = ResourcePatternType.LITERAL


class Broker:
    def __init__(self, process: SecureBrokerProcess, port: int) -> None:
        self.process = process
        self.port = port
        self.admin = AdminClient(self.conf("admin"))

    def conf(self, user: str) -> dict[str, Any]:
        return {"bootstrap.servers": f"127.0.0.1:{self.port}", "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user, "sasl.password": PASSWORDS[user]}  # fmt: skip


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    workdir = tmp_path_factory.mktemp("txn-acl-broker")
    port = free_port()
    settings = {"sasl.enabled.mechanisms": "SCRAM-SHA-256",
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "super.users": "User:admin", "auto.create.topics.enable": "false"}  # fmt: skip
    process = SecureBrokerProcess(workdir, [f"SASL_PLAINTEXT://127.0.0.1:{port}"], settings=settings)
    for user, password in PASSWORDS.items():
        added = subprocess.run([*groupstream_command(), "users", "add", "--data-dir", str(process.data_dir), "--user",
                                user, "--password", password], capture_output=True, text=True, timeout=60)  # fmt: skip
        assert added.returncode == 0, added.stderr
    with process:
        yield Broker(process, port)


def allow(rtype: ResourceType, name: str, op: AclOperation) -> AclBinding:
    return AclBinding(rtype, name, LIT, "User:alice", "*", op, AclPermissionType.ALLOW)


def grant(b: Broker, *bindings: AclBinding) -> None:
    for future in b.admin.create_acls(list(bindings)).values():
        future.result(30)


def test_a_transactional_producer_needs_its_transactional_id(broker: Broker) -> None:
    b = broker
    suffix = uuid.uuid4().hex[:8]
    topic, tid = f"txn-acl-{suffix}", f"tid-{suffix}"
    b.admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    grant(b, allow(ResourceType.TOPIC, topic, AclOperation.WRITE))

    def init() -> Producer:
        p = Producer({**b.conf("alice"), "transactional.id": tid})
        p.init_transactions(20)
        return p

    with pytest.raises(KafkaException) as e:
        init()
    assert e.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    grant(b, allow(ResourceType.TRANSACTIONAL_ID, tid, AclOperation.DESCRIBE))  # finds its coordinator, no more
    with pytest.raises(KafkaException) as e:
        init()
    assert e.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    grant(b, allow(ResourceType.TRANSACTIONAL_ID, tid, AclOperation.WRITE))
    p = init()
    p.begin_transaction()
    p.produce(topic, b"authorized")
    p.commit_transaction(30)

    with WireClient(b.port) as wire:
        assert wire.scram("alice", PASSWORDS["alice"]).error_code == 0
        other = f"not-alices-{suffix}"
        described = wire.request("DescribeTransactions", 0, transactional_ids=[tid, other]).transaction_states
        # the commit was answered once PrepareCommit was durable; its markers may still be on their way
        assert [(s.transactional_id, s.error_code, s.transaction_state in ("PrepareCommit", "CompleteCommit"))
                for s in described] == [
            (tid, 0, True), (other, KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, False)]  # fmt: skip
    admin_producer = Producer({**b.conf("admin"), "transactional.id": other})
    admin_producer.init_transactions(20)
    with WireClient(b.port) as wire:
        assert wire.scram("alice", PASSWORDS["alice"]).error_code == 0
        listed = wire.request("ListTransactions", 1, state_filters=[], producer_id_filters=[], duration_filter=-1)
        names = {s.transactional_id for s in listed.transaction_states}
        assert tid in names and other not in names
