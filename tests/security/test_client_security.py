"""Our own clients (Producer, Consumer in a group, Admin) over TLS and SASL against our broker: SASL_SSL with
SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN, SSL with mutual TLS, SASL_PLAINTEXT; then the refusals, each with the
cause in its text: a wrong password, a CA we do not trust, a certificate for another host name, TLS spoken to a
plaintext port and plaintext spoken to a TLS port. The settings are the ones librdkafka and Java users already
write (``ssl.ca.location`` or ``ssl.truststore.location``, ``sasl.jaas.config``)."""

from __future__ import annotations

import ssl
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from secure_broker import SECURE_SETTINGS, SecureBrokerProcess, our_clients_round_trip
from tls_pki import PASSWORD as STORE_PASSWORD
from tls_pki import Pki

from groupstream import Consumer, Producer
from groupstream.client.admin import Admin, NewTopic
from groupstream.client.errors import ClientConfigError, KafkaConnectionError, KafkaError
from groupstream.protocol.error_codes import ErrorCode
from support.brokers import free_port, groupstream_command
from support.waiting import wait_until

pytestmark = pytest.mark.broker_ours

USER, PASSWORD = "alice", "alice-secret"
RECORDS = 20
MODES = ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN", "mTLS", "SASL_PLAINTEXT"]


@dataclass
class Secure:
    process: SecureBrokerProcess
    pki: Pki
    sasl_ssl: int
    mtls: int
    sasl_plaintext: int

    @property
    def plaintext(self) -> int:
        return self.process.port

    def conf(self, mode: str, **extra: Any) -> dict[str, Any]:
        if mode == "mTLS":
            conf: dict[str, Any] = {
                "bootstrap.servers": f"127.0.0.1:{self.mtls}", "security.protocol": "SSL",
                "ssl.ca.location": str(self.pki.ca), "ssl.certificate.location": str(self.pki.client.cert),
                "ssl.key.location": str(self.pki.client.key),
            }  # fmt: skip
        elif mode == "SASL_PLAINTEXT":
            conf = {"bootstrap.servers": f"127.0.0.1:{self.sasl_plaintext}", "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": USER, "sasl.password": PASSWORD}  # fmt: skip
        else:
            conf = {"bootstrap.servers": f"127.0.0.1:{self.sasl_ssl}", "security.protocol": "SASL_SSL",
                    "ssl.ca.location": str(self.pki.ca), "sasl.mechanism": mode, "sasl.username": USER,
                    "sasl.password": PASSWORD}  # fmt: skip
        conf.update(extra)
        return conf


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[Secure]:
    workdir = tmp_path_factory.mktemp("secure-own-client")
    sasl_ssl, mtls, sasl_plaintext = free_port(), free_port(), free_port()
    settings = {**SECURE_SETTINGS, "ssl.keystore.location": str(pki.broker.pem_keystore),
                "ssl.truststore.location": str(pki.ca)}  # fmt: skip
    listeners = [f"SASL_SSL://127.0.0.1:{sasl_ssl}", f"SSL://127.0.0.1:{mtls}",
                 f"SASL_PLAINTEXT://127.0.0.1:{sasl_plaintext}"]  # fmt: skip
    process = SecureBrokerProcess(workdir, listeners, settings=settings)
    added = subprocess.run([*groupstream_command(), "users", "add", "--data-dir", str(process.data_dir), "--user", USER,
                            "--password", PASSWORD], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert added.returncode == 0, added.stderr  # both SCRAM mechanisms; PLAIN checks against them
    with process:
        yield Secure(process, pki, sasl_ssl, mtls, sasl_plaintext)


# --- it works -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_produce_consume_in_a_group_and_admin(secure: Secure, mode: str) -> None:
    conf = secure.conf(mode)
    our_clients_round_trip(conf, mode, RECORDS, timeout_s=60)


def test_java_names_truststore_and_jaas_config(secure: Secure) -> None:
    conf = {
        "bootstrap.servers": f"127.0.0.1:{secure.sasl_ssl}", "security.protocol": "SASL_SSL",
        "ssl.truststore.location": str(secure.pki.ca), "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{USER}" '
                            f'password="{PASSWORD}";',
    }  # fmt: skip
    with Admin(conf) as admin:
        assert admin.describe_cluster().brokers


def test_hostname_verification_can_be_turned_off(secure: Secure) -> None:
    # 127.1 is 127.0.0.1 to the resolver, but a DNS name to the certificate check, which lists localhost only
    conf = secure.conf("PLAIN", **{"bootstrap.servers": f"127.1:{secure.sasl_ssl}",
                                   "ssl.endpoint.identification.algorithm": ""})  # fmt: skip
    with Admin(conf) as admin:
        assert admin.describe_cluster().brokers


# --- refusals -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "PLAIN"])
def test_wrong_password_is_a_fatal_error_naming_user_and_mechanism(secure: Secure, mechanism: str) -> None:
    conf = secure.conf(mechanism, **{"sasl.password": "wrong"})
    started = time.monotonic()
    with pytest.raises(KafkaError) as info:  # the Admin connects as it is made
        Admin(conf)
    assert info.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert f"authentication failed for user {USER} with {mechanism}: " in str(info.value)
    assert time.monotonic() - started < 10  # refused once, not retried until a timeout


def test_wrong_password_fails_producer_deliveries_and_consumer_poll(secure: Secure) -> None:
    conf = secure.conf("SCRAM-SHA-256", **{"sasl.password": "wrong"})
    producer = Producer(conf)
    handle = producer.produce("anything", b"v")
    producer.flush(30)
    with pytest.raises(KafkaError) as info:
        handle.result()
    assert f"authentication failed for user {USER} with SCRAM-SHA-256" in str(info.value)
    producer.close(5)
    consumer = Consumer({**conf, "group.id": "never"})
    consumer.subscribe(["anything"])
    with pytest.raises(KafkaError) as info:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            consumer.poll(0.5)
    assert f"authentication failed for user {USER} with SCRAM-SHA-256" in str(info.value)
    consumer.close()


def test_untrusted_ca(secure: Secure) -> None:
    conf = secure.conf("PLAIN", **{"ssl.ca.location": str(secure.pki.rogue_ca)})
    with pytest.raises(KafkaConnectionError) as info:
        Admin(conf)
    assert "TLS handshake failed: certificate not trusted" in str(info.value)


def test_hostname_mismatch(secure: Secure) -> None:
    conf = secure.conf("PLAIN", **{"bootstrap.servers": f"127.1:{secure.sasl_ssl}"})
    with pytest.raises(KafkaConnectionError) as info:
        Admin(conf)
    assert "TLS handshake failed: hostname mismatch" in str(info.value)
    assert "127.1" in str(info.value)


def test_plaintext_client_on_a_tls_port(secure: Secure) -> None:
    conf = {"bootstrap.servers": f"127.0.0.1:{secure.mtls}", "request.timeout.ms": 5000}
    with pytest.raises(KafkaConnectionError) as info:
        Admin(conf)
    assert f"127.0.0.1:{secure.mtls}" in str(info.value)
    assert "closed the connection before answering ApiVersions (security.protocol=PLAINTEXT)" in str(info.value)


def test_tls_client_on_a_plaintext_port(secure: Secure) -> None:
    conf = secure.conf("mTLS", **{"bootstrap.servers": f"127.0.0.1:{secure.plaintext}"})
    with pytest.raises(KafkaConnectionError) as info:
        Admin(conf)
    assert "closed the connection during the TLS handshake (security.protocol=SSL)" in str(info.value)


def test_unknown_security_protocol_names_the_choices() -> None:
    with pytest.raises(ClientConfigError) as info:
        Admin({"bootstrap.servers": "127.0.0.1:9", "security.protocol": "TLS"})
    assert "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL" in str(info.value)


def test_cli_with_a_command_config_file(secure: Secure, tmp_path: Any) -> None:
    """Kafka's tools' way: the security settings in a properties file given with --command-config."""
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    props = tmp_path / "client.properties"
    props.write_text(
        "security.protocol=SASL_SSL\n"
        f"ssl.truststore.location={secure.pki.ca}\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        f'    username="{USER}" password="{PASSWORD}";\n'
    )
    base = [*groupstream_command(), "topics"]
    server = ["--bootstrap-server", f"127.0.0.1:{secure.sasl_ssl}", "--command-config", str(props)]
    created = subprocess.run([*base, "create", topic, *server], capture_output=True, text=True, timeout=60)
    assert created.returncode == 0, created.stderr
    listed = subprocess.run([*base, "list", *server], capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert topic in listed.stdout.split()
    props.write_text(props.read_text().replace(PASSWORD, "wrong"))
    refused = subprocess.run([*base, "list", *server], capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0
    assert f"authentication failed for user {USER} with SCRAM-SHA-512" in refused.stderr
    assert "Traceback" not in refused.stderr


# --- Java's keystore and truststore files, protocols and cipher suites --------------------------------------------


def test_pkcs12_truststore_and_keystore_for_mutual_tls(secure: Secure) -> None:
    """Java's names and files: a PKCS12 truststore and a PKCS12 keystore (type declared, or recognised)."""
    conf = {
        "bootstrap.servers": f"127.0.0.1:{secure.mtls}", "security.protocol": "SSL",
        "ssl.truststore.location": str(secure.pki.ca_p12), "ssl.truststore.type": "PKCS12",
        "ssl.truststore.password": STORE_PASSWORD, "ssl.keystore.location": str(secure.pki.client.p12),
        "ssl.keystore.password": STORE_PASSWORD,
    }  # fmt: skip
    with Admin(conf) as admin:
        assert admin.describe_cluster().brokers
    without_keystore = {k: v for k, v in conf.items() if not k.startswith("ssl.keystore")}
    with pytest.raises(KafkaConnectionError):  # the broker requires a client certificate
        Admin({**without_keystore, "request.timeout.ms": 5000})


def test_keystore_mistakes_name_the_cause(secure: Secure, tmp_path: Any) -> None:
    base = {"bootstrap.servers": f"127.0.0.1:{secure.mtls}", "security.protocol": "SSL",
            "ssl.ca.location": str(secure.pki.ca)}  # fmt: skip
    with pytest.raises(ClientConfigError) as info:
        Admin({**base, "ssl.keystore.location": str(secure.pki.client.p12), "ssl.keystore.password": "wrong"})
    assert "ssl.keystore.location" in str(info.value) and "wrong password" in str(info.value)
    jks = tmp_path / "client.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed" + bytes(60))
    with pytest.raises(ClientConfigError) as info:
        Admin({**base, "ssl.keystore.location": str(jks)})
    assert "Java KeyStore (JKS)" in str(info.value) and "keytool -importkeystore" in str(info.value)
    with pytest.raises(ClientConfigError) as info:
        Admin({"bootstrap.servers": base["bootstrap.servers"], "security.protocol": "SSL",
               "ssl.truststore.location": str(secure.pki.ca_p12), "ssl.truststore.type": "JKS"})  # fmt: skip
    assert "deststoretype PKCS12" in str(info.value)


def test_enabled_protocols_and_cipher_suites(secure: Secure) -> None:
    conf = secure.conf("PLAIN", **{"ssl.enabled.protocols": "TLSv1.2",
                                   "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"})  # fmt: skip
    with Admin(conf) as admin:
        assert admin.describe_cluster().brokers
        context = admin.config.security.ssl_context
        assert context is not None and context.maximum_version == ssl.TLSVersion.TLSv1_2
        assert [c["name"] for c in context.get_ciphers() if c["protocol"] == "TLSv1.2"] == ["ECDHE-ECDSA-AES128-GCM-SHA256"]
    # a TLS 1.2 cipher the broker's EC certificate cannot serve: no handshake, and the reason is given
    conf["ssl.cipher.suites"] = "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
    with pytest.raises(KafkaConnectionError) as refused:
        Admin({**conf, "request.timeout.ms": 5000})
    assert "TLS handshake failed" in str(refused.value)
    for name, value, says in [
        ("ssl.cipher.suites", "TLS_NO_SUCH_CIPHER", "'TLS_NO_SUCH_CIPHER' is not a cipher this OpenSSL offers"),
        ("ssl.enabled.protocols", "TLSv1.2,SSLv3", "unknown protocol 'SSLv3'"),
    ]:
        with pytest.raises(ClientConfigError) as info:
            Admin(secure.conf("PLAIN", **{name: value}))
        assert says in str(info.value)


def test_large_fetches_read_the_same_bytes_on_tls_sasl_and_plaintext_listeners(secure: Secure) -> None:
    """Issue 13's zero-copy Fetch: the PLAINTEXT listener sends ranges of 32 KiB and more from the segment files
    with sendfile, TLS and SASL listeners copy them (TLS has to encrypt them). One topic of 3,000 values of 2 KB
    read through each listener gives the same values in the same order."""
    topic = f"big-{uuid.uuid4().hex[:8]}"
    plain = {"bootstrap.servers": f"127.0.0.1:{secure.plaintext}"}
    with Admin(plain) as admin:
        admin.create_topics([NewTopic(topic, 1)])
    values = [i.to_bytes(4, "big") * 512 for i in range(3000)]
    with Producer({**plain, "linger.ms": 20}) as producer:
        for v in values:
            producer.produce(topic, v)
        assert producer.flush(60) == 0
    for mode in ("PLAINTEXT", "mTLS", "SASL_PLAINTEXT"):
        conf = plain if mode == "PLAINTEXT" else secure.conf(mode)
        assert _read_topic(conf, topic, len(values), mode) == values, mode


def _read_topic(conf: dict[str, Any], topic: str, count: int, label: str) -> list[bytes]:
    got: list[bytes] = []
    with Consumer({**conf, "group.id": f"big-{label}-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest"}) as c:
        c.subscribe([topic])

        def read_all() -> bool:
            got.extend(r.value for r in c.poll(0.5))
            return len(got) >= count

        wait_until(read_all, 60, f"{count} values through {label}", interval_s=0)
    return got
