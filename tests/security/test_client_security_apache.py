"""Our own clients against Apache Kafka itself over SASL_SSL, with the settings that work against our broker
(test_client_security.py): one KRaft node with a SASL_SSL listener beside the PLAINTEXT one the fixture probes,
Kafka's SCRAM credentials made online (confluent-kafka's AlterUserScramCredentials on the PLAINTEXT listener) and
PLAIN users in the listener's JAAS entry. Our Admin creates a topic and lists groups, our Producer produces, our
Consumer consumes in a group; a wrong password is refused with Apache Kafka's own message in our error."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from secure_broker import our_clients_round_trip
from tls_pki import PASSWORD as STORE_PASSWORD
from tls_pki import Pki

from groupstream.client.admin import Admin, NewTopic
from groupstream.client.errors import KafkaError
from groupstream.protocol.error_codes import ErrorCode
from support.apache_kafka import ApacheKafkaCluster
from support.brokers import HOST, free_port
from support.waiting import wait_until

pytestmark = pytest.mark.broker_apache

USER, PASSWORD = "alice", "alice-secret"
RECORDS = 20
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


class SaslCluster:
    def __init__(self, cluster: ApacheKafkaCluster, sasl_port: int, pki: Pki) -> None:
        self.cluster = cluster
        self.sasl_port = sasl_port
        self.pki = pki

    def conf(self, mechanism: str, **extra: Any) -> dict[str, Any]:
        return {"bootstrap.servers": f"{HOST}:{self.sasl_port}", "security.protocol": "SASL_SSL",
                "ssl.ca.location": str(self.pki.ca), "sasl.mechanism": mechanism, "sasl.username": USER,
                "sasl.password": PASSWORD, **extra}  # fmt: skip


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[SaslCluster]:
    cluster = ApacheKafkaCluster(Path(tmp_path_factory.mktemp("apache-sasl")), size=1)
    node = cluster.nodes[0]
    sasl_port = free_port()
    node.settings.update({
        "listeners": f"PLAINTEXT://{HOST}:{node.port},CONTROLLER://{HOST}:{node.controller_port},"
                     f"SASL_SSL://{HOST}:{sasl_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{node.port},SASL_SSL://{HOST}:{sasl_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": _SCRAM_MODULE,
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": _SCRAM_MODULE,
        "listener.name.sasl_ssl.plain.sasl.jaas.config":
            f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{USER}="{PASSWORD}";',
        "ssl.keystore.location": str(pki.broker.p12),
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.password": STORE_PASSWORD,
        "ssl.key.password": STORE_PASSWORD,
    })  # fmt: skip
    with cluster:
        from confluent_kafka.admin import (
            AdminClient,
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialUpsertion,
        )

        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):  # one per request (Kafka)
            upsert = UserScramCredentialUpsertion(USER, ScramCredentialInfo(mechanism, 4096), PASSWORD.encode())
            for future in admin.alter_user_scram_credentials([upsert]).values():
                future.result(30)
        k = SaslCluster(cluster, sasl_port, pki)

        def authenticates() -> bool:
            try:
                with Admin(k.conf("SCRAM-SHA-512")):
                    return True
            except KafkaError:
                return False  # the credential is not applied yet

        wait_until(authenticates, 30, "the SCRAM credentials to be usable on Apache Kafka")
        yield k


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
def test_produce_consume_in_a_group_and_admin(kafka: SaslCluster, mechanism: str) -> None:
    conf = kafka.conf(mechanism)
    our_clients_round_trip(conf, mechanism, RECORDS, timeout_s=90)


def test_wrong_password_is_refused_with_kafkas_message(kafka: SaslCluster) -> None:
    with pytest.raises(KafkaError) as info:
        Admin(kafka.conf("SCRAM-SHA-256", **{"sasl.password": "wrong"}))
    assert info.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert f"authentication failed for user {USER} with SCRAM-SHA-256: Authentication failed" in str(info.value)


# --- the Spark sink and source with kafka.-prefixed security options ---------------------------------------------


@pytest.fixture(scope="module")
def spark() -> Any:
    """Spark local[2] with the settings of tests/spark/conftest.py's session, left running on purpose: a later
    ``getOrCreate`` there gets this session back, so the JVM starts once per test run."""
    import os
    import sys

    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("groupstream-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


def test_spark_sink_and_source_over_sasl_ssl(kafka: SaslCluster, spark: Any) -> None:
    """The options a Spark user copies from Kafka's documentation (``kafka.security.protocol``,
    ``kafka.sasl.jaas.config``, ``kafka.ssl.truststore.location`` with a PKCS12 truststore) reach the sink's
    producers and the source's consumers on the executors; without them the read is refused."""
    topic = f"spark-sasl-{uuid.uuid4().hex[:8]}"
    with Admin(kafka.conf("SCRAM-SHA-512")) as admin:
        admin.create_topics([NewTopic(topic, 2)])
    options = {
        "kafka.bootstrap.servers": f"{HOST}:{kafka.sasl_port}",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.ssl.truststore.location": str(kafka.pki.ca_p12),
        "kafka.ssl.truststore.type": "PKCS12",
        "kafka.ssl.truststore.password": STORE_PASSWORD,
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": f"org.apache.kafka.common.security.scram.ScramLoginModule required "
                                  f'username="{USER}" password="{PASSWORD}";',
    }  # fmt: skip
    rows = [(f"k{i}", f"v{i}", i % 2) for i in range(200)]
    writer = spark.createDataFrame(rows, "key string, value string, partition int").write.format("groupstream")
    writer.options(**options).option("topic", topic).mode("append").save()
    back = spark.read.format("groupstream").options(**options).option("subscribe", topic).load().collect()
    assert sorted((bytes(r.key).decode(), bytes(r.value).decode(), r.partition) for r in back) == sorted(rows)
    wrong = {**options, "kafka.sasl.jaas.config": options["kafka.sasl.jaas.config"].replace(PASSWORD, "wrong")}
    with pytest.raises(Exception, match="authentication failed for user alice with SCRAM-SHA-512"):
        spark.read.format("groupstream").options(**wrong).option("subscribe", topic).load().collect()
