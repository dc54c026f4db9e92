"""KIP-368 with real clients: with ``connections.max.reauth.ms`` set, kafka-python and confluent-kafka learn the
session lifetime from SaslAuthenticate, re-authenticate on their own before it ends, and keep producing over the
same connections for several lifetimes; the broker never has to close one for an expired session."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest
from tls_pki import Pki

from groupstream.broker.node import Broker
from groupstream.security.credentials import CredentialStore
from groupstream.security.scram import ScramMechanism, make_credential
from support.inprocess import running_broker
from support.waiting import wait_until

pytestmark = [pytest.mark.compat]

LIFETIME_MS = 1500
USER, PASSWORD = "alice", "alice-pw"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[Broker]:
    data_dir = tmp_path_factory.mktemp("reauth")
    store = CredentialStore(data_dir)
    store.save(store.changed(upserts=[(USER, m, make_credential(m, PASSWORD, b"s" * 32, 4096)) for m in ScramMechanism]))
    with running_broker(data_dir, listeners="SASL_SSL://127.0.0.1:0", **{
        "ssl.keystore.location": str(pki.broker.pem_keystore),
        "connections.max.reauth.ms": str(LIFETIME_MS),
    }) as b:  # fmt: skip
        yield b


def bootstrap(broker: Broker) -> str:
    return f"127.0.0.1:{broker.listeners[0].port}"


def count(caplog: pytest.LogCaptureFixture, text: str) -> int:
    return sum(text in r.getMessage() for r in caplog.records)


def check_broker_side(caplog: pytest.LogCaptureFixture) -> None:
    assert count(caplog, " re-authenticated on SASL_SSL://") >= 2, "the client re-authenticated fewer than twice"
    assert count(caplog, "expired") == 0, "the broker closed a connection for an expired session"


def test_kafka_python_reauthenticates(broker: Broker, pki: Pki, caplog: pytest.LogCaptureFixture) -> None:
    from kafka import KafkaProducer

    caplog.set_level(logging.DEBUG, "groupstream.broker")
    producer = KafkaProducer(bootstrap_servers=bootstrap(broker), security_protocol="SASL_SSL",
                             sasl_mechanism="SCRAM-SHA-512", sasl_plain_username=USER, sasl_plain_password=PASSWORD,
                             ssl_cafile=str(pki.ca))  # fmt: skip
    try:
        sent = 0
        deadline = time.monotonic() + 3.5 * LIFETIME_MS / 1000
        while time.monotonic() < deadline:  # steady traffic across more than three session lifetimes
            producer.send("reauth-kafka-python", b"x").get(timeout=10)
            sent += 1
            time.sleep(0.05)  # the traffic's pace, not a wait for a condition
    finally:
        producer.close()
    assert sent > 20
    check_broker_side(caplog)


def test_confluent_reauthenticates(broker: Broker, pki: Pki, caplog: pytest.LogCaptureFixture) -> None:
    from confluent_kafka import Producer

    caplog.set_level(logging.DEBUG, "groupstream.broker")
    acked: list[bool] = []
    producer = Producer({"bootstrap.servers": bootstrap(broker), "security.protocol": "SASL_SSL",
                         "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": USER, "sasl.password": PASSWORD,
                         "ssl.ca.location": str(pki.ca), "linger.ms": 0})  # fmt: skip
    started = time.monotonic()

    def step() -> bool:
        producer.produce("reauth-confluent", b"x", on_delivery=lambda err, msg: acked.append(err is None))
        producer.poll(0.05)
        return time.monotonic() - started > 3.5 * LIFETIME_MS / 1000

    wait_until(step, 30, "3.5 session lifetimes of traffic")
    assert producer.flush(10) == 0
    assert acked and all(acked), f"{acked.count(False)} of {len(acked)} records failed"
    check_broker_side(caplog)


def test_our_producer_and_admin_reauthenticate(broker: Broker, pki: Pki, caplog: pytest.LogCaptureFixture) -> None:
    from groupstream import Producer
    from groupstream.client.admin import Admin

    caplog.set_level(logging.DEBUG, "groupstream.broker")
    conf = {"bootstrap.servers": bootstrap(broker), "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": USER, "sasl.password": PASSWORD, "ssl.ca.location": str(pki.ca)}  # fmt: skip
    producer = Producer({**conf, "linger.ms": 0})
    handles = []
    started = time.monotonic()

    def step() -> bool:
        handles.append(producer.produce("reauth-ours", b"x"))
        producer.flush(10)
        return time.monotonic() - started > 3.5 * LIFETIME_MS / 1000

    try:
        wait_until(step, 30, "3.5 session lifetimes of traffic")
    finally:
        producer.close()
    assert len(handles) > 20
    assert all(h.result().offset >= 0 for h in handles)
    check_broker_side(caplog)
    with Admin(conf) as admin:  # an Admin idle past its session's re-authentication time carries on
        assert admin.describe_cluster().brokers
        before = count(caplog, " re-authenticated on SASL_SSL://")
        wait_until(lambda: bool(admin.list_topics()) and count(caplog, " re-authenticated on SASL_SSL://") > before,
                   10, "the Admin re-authenticated")  # fmt: skip
        assert count(caplog, "expired") == 0
