"""Real clients against our broker over SASL_SSL (SCRAM-SHA-256, SCRAM-SHA-512, PLAIN) and mutual TLS:
confluent-kafka, kafka-python, aiokafka and kcat (Debian's, librdkafka 2.0.2) each create a topic where they have
an admin API, produce, and consume everything back in a consumer group. Then the refusals, which every client must
see as what they are, quickly: a wrong password, a broker certificate it does not trust, plaintext spoken to a TLS
listener, an untrusted client certificate. Users are made with ``groupstream users add`` before the broker starts,
and one online with confluent-kafka's AlterUserScramCredentials."""

from __future__ import annotations

import asyncio
import logging
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from secure_broker import SECURE_SETTINGS, SecureBrokerProcess
from tls_pki import Pki

from support.brokers import free_port, groupstream_command
from support.waiting import wait_until

pytestmark = [pytest.mark.compat, pytest.mark.broker_ours]

RECORDS = 100
MODES = ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN", "mTLS"]
CLIENTS = ["confluent", "kafka-python", "aiokafka", "kcat"]
USER, PASSWORD = "alice", "alice-secret"


@dataclass
class Secure:
    process: SecureBrokerProcess
    pki: Pki
    sasl_ssl: int
    mtls: int

    def bootstrap(self, mode: str) -> str:
        return f"127.0.0.1:{self.mtls if mode == 'mTLS' else self.sasl_ssl}"


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[Secure]:
    workdir = tmp_path_factory.mktemp("secure-peers")
    sasl_ssl, mtls = free_port(), free_port()
    settings = {**SECURE_SETTINGS, "ssl.keystore.location": str(pki.broker.pem_keystore),
                "ssl.truststore.location": str(pki.ca)}  # fmt: skip
    process = SecureBrokerProcess(workdir, [f"SASL_SSL://127.0.0.1:{sasl_ssl}", f"SSL://127.0.0.1:{mtls}"],
                                  settings=settings)  # fmt: skip
    added = subprocess.run([*groupstream_command(), "users", "add", "--data-dir", str(process.data_dir), "--user", USER,
                            "--password", PASSWORD], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert added.returncode == 0, added.stderr
    with process:
        yield Secure(process, pki, sasl_ssl, mtls)


# --- each client's settings ---------------------------------------------------------------------------------------


def librdkafka_conf(s: Secure, mode: str, *, password: str = PASSWORD, ca: Path | None = None,
                    protocol: str | None = None, client_cert: tuple[Path, Path] | None = None) -> dict[str, str]:  # fmt: skip
    conf = {"bootstrap.servers": s.bootstrap(mode), "ssl.ca.location": str(ca or s.pki.ca)}
    if mode == "mTLS":
        cert, key = client_cert or (s.pki.client.cert, s.pki.client.key)
        conf.update({"security.protocol": "SSL", "ssl.certificate.location": str(cert), "ssl.key.location": str(key)})
    else:
        conf.update({"security.protocol": "SASL_SSL", "sasl.mechanism": mode, "sasl.username": USER,
                     "sasl.password": password})  # fmt: skip
    if protocol is not None:
        conf = {"bootstrap.servers": conf["bootstrap.servers"], "security.protocol": protocol}
    return conf


def python_kwargs(s: Secure, mode: str, *, password: str = PASSWORD, ca: Path | None = None,
                  protocol: str | None = None, aio: bool = False) -> dict[str, Any]:  # fmt: skip
    """kafka-python's and aiokafka's names (aiokafka takes an SSLContext)."""
    kw: dict[str, Any] = {"bootstrap_servers": s.bootstrap(mode)}
    if protocol is not None:
        return {**kw, "security_protocol": protocol}
    cafile = str(ca or s.pki.ca)
    certfile = keyfile = None
    if mode == "mTLS":
        kw["security_protocol"] = "SSL"
        certfile, keyfile = str(s.pki.client.cert), str(s.pki.client.key)
    else:
        kw.update(security_protocol="SASL_SSL", sasl_mechanism=mode, sasl_plain_username=USER,
                  sasl_plain_password=password)  # fmt: skip
    if aio:
        from aiokafka.helpers import create_ssl_context

        kw["ssl_context"] = create_ssl_context(cafile=cafile, certfile=certfile, keyfile=keyfile)
    else:
        kw.update(ssl_cafile=cafile, ssl_certfile=certfile, ssl_keyfile=keyfile)
    return kw


def kcat_args(conf: dict[str, str]) -> list[str]:
    path = shutil.which("kcat")
    assert path is not None, "kcat is not installed: run `make system-deps` (apt-get install kcat)"
    args = [path, "-b", conf["bootstrap.servers"]]
    for key, value in conf.items():
        if key != "bootstrap.servers":
            args += ["-X", f"{'sasl.mechanisms' if key == 'sasl.mechanism' else key}={value}"]
    return args


# --- produce, consume in a group, admin ---------------------------------------------------------------------------


def run_confluent(s: Secure, mode: str, topic: str, group: str, values: list[bytes]) -> list[bytes]:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    conf = librdkafka_conf(s, mode)
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
    assert topic in admin.list_topics(timeout=30).topics
    producer = Producer({**conf, "linger.ms": 5})
    for v in values:
        producer.produce(topic, v)
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    return confluent_read(consumer, len(values))


def confluent_read(consumer: Any, want: int, timeout_s: float = 60) -> list[bytes]:
    """The values a confluent-kafka consumer reads until it has ``want`` (or ``timeout_s`` ends); closes it."""
    got: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < want and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.close()
    return got


def run_kafka_python(s: Secure, mode: str, topic: str, group: str, values: list[bytes]) -> list[bytes]:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import NewTopic

    kw = python_kwargs(s, mode)
    admin = KafkaAdminClient(**kw)
    admin.create_topics([NewTopic(topic, 3, 1)])
    assert topic in admin.list_topics()
    admin.close()
    producer = KafkaProducer(linger_ms=5, **kw)
    for v in values:
        producer.send(topic, v)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", **kw)
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < len(values) and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got += [r.value for r in records]
    consumer.close()
    return got


def run_aiokafka(s: Secure, mode: str, topic: str, group: str, values: list[bytes]) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    async def main() -> list[bytes]:
        kw = python_kwargs(s, mode, aio=True)
        admin = AIOKafkaAdminClient(**kw)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic, 3, 1)])
            assert topic in await admin.list_topics()
        finally:
            await admin.close()
        producer = AIOKafkaProducer(linger_ms=5, **kw)
        await producer.start()
        try:
            await asyncio.gather(*[await producer.send(topic, v) for v in values])
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", **kw)
        await consumer.start()
        got: list[bytes] = []
        try:
            deadline = time.monotonic() + 60
            while len(got) < len(values) and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    got += [r.value for r in records]
        finally:
            await consumer.stop()
        return got

    return asyncio.run(main())


def run_kcat(s: Secure, mode: str, topic: str, group: str, values: list[bytes]) -> list[bytes]:
    """kcat has no admin API: the produce auto-creates the topic; -L shows it; -G consumes in a group."""
    args = kcat_args(librdkafka_conf(s, mode))
    produced = subprocess.run([*args, "-P", "-t", topic], input=b"\n".join(values) + b"\n", capture_output=True,
                              timeout=60)  # fmt: skip
    assert produced.returncode == 0, produced.stderr.decode(errors="replace")
    listed = subprocess.run([*args, "-L", "-t", topic], capture_output=True, timeout=60, text=True)
    assert f'topic "{topic}" with 3 partitions' in listed.stdout, listed.stdout + listed.stderr
    consumed = subprocess.run([*args, "-G", group, "-o", "beginning", "-e", "-q", "-f", "%s\n", topic],
                              capture_output=True, timeout=90)  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr.decode(errors="replace")
    return consumed.stdout.splitlines()


RUNNERS: dict[str, Callable[[Secure, str, str, str, list[bytes]], list[bytes]]] = {
    "confluent": run_confluent, "kafka-python": run_kafka_python, "aiokafka": run_aiokafka, "kcat": run_kcat,
}  # fmt: skip


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("client", CLIENTS)
def test_produce_consume_in_a_group_and_admin(secure: Secure, client: str, mode: str) -> None:
    tag = f"{client}-{mode}-{uuid.uuid4().hex[:6]}".lower()
    values = [f"{tag}-{i}".encode() for i in range(RECORDS)]
    got = RUNNERS[client](secure, mode, f"t-{tag}", f"g-{tag}", values)
    assert sorted(got) == sorted(values), f"{client} over {mode}: {len(got)} of {len(values)} records back"


def test_online_user_management_with_confluent_admin(secure: Secure) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient(librdkafka_conf(secure, "SCRAM-SHA-256"))
    upsert = UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                          b"carol-pw")  # fmt: skip
    for fut in admin.alter_user_scram_credentials([upsert]).values():
        fut.result(30)
    described = {u: f.result(30) for u, f in admin.describe_user_scram_credentials(["carol"]).items()}
    (info,) = described["carol"].scram_credential_infos
    assert (info.mechanism, info.iterations) == (ScramMechanism.SCRAM_SHA_512, 8192)

    carol = {**librdkafka_conf(secure, "SCRAM-SHA-512"), "sasl.username": "carol", "sasl.password": "carol-pw"}
    listed = subprocess.run([*kcat_args(carol), "-L"], capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0 and "1 brokers" in listed.stdout, listed.stderr

    for fut in admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_512)]
    ).values():
        fut.result(30)
    refused = subprocess.run([*kcat_args(carol), "-L", "-m", "2"], capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "Authentication failed" in refused.stderr


# --- refusals -------------------------------------------------------------------------------------------------------

REFUSALS = {
    "wrong-password": {"confluent": "Authentication failed during authentication due to invalid credentials",
                       "kafka-python": "SaslAuthenticationFailed", "aiokafka": "SaslAuthenticationFailed",
                       "kcat": "Authentication failed during authentication due to invalid credentials"},
    "untrusted-broker": {"confluent": "certificate verify failed", "kafka-python": "CERTIFICATE_VERIFY_FAILED",
                         "aiokafka": "CERTIFICATE_VERIFY_FAILED", "kcat": "certificate verify failed"},
    # librdkafka 2.16 no longer adds 2.0's hint; it names the state the connection was closed in
    "plaintext-client": {"confluent": "connection closed by peer: receive 0 after POLLIN (after 0ms in state APIVERSION_QUERY",
                         "kafka-python": "socket disconnected", "aiokafka": "KafkaConnectionError",
                         "kcat": "incorrect security.protocol configuration (connecting to a SSL listener?)"},
}  # fmt: skip


def refusal_settings(s: Secure, case: str) -> dict[str, Any]:
    if case == "wrong-password":
        return {"password": "not-her-password"}
    if case == "untrusted-broker":
        return {"ca": s.pki.rogue_ca}
    return {"protocol": "PLAINTEXT"}


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def confluent_seen(conf: dict[str, Any], expected: str) -> str:
    """What librdkafka tells the application, through the error callback and its log, until ``expected`` shows
    (its descriptive reasons are log lines; the error callback may only say the brokers are down)."""
    from confluent_kafka.admin import AdminClient

    lines = _Lines()
    logger = logging.getLogger(f"librdkafka-{uuid.uuid4().hex[:6]}")
    logger.addHandler(lines)
    logger.propagate = False
    admin = AdminClient({**conf, "error_cb": lambda e: lines.lines.append(str(e)), "logger": logger})

    def seen() -> bool:
        admin.poll(0.1)
        return any(expected in line for line in lines.lines)

    try:
        wait_until(seen, 20, f"{expected!r} from librdkafka", explain=lambda: "\n".join(lines.lines[-20:]))
    finally:
        logger.removeHandler(lines)
    return "\n".join(lines.lines)


def refused_confluent(s: Secure, case: str) -> str:
    conf = librdkafka_conf(s, "SCRAM-SHA-256", **refusal_settings(s, case))
    return confluent_seen(conf, REFUSALS[case]["confluent"])


def refused_kafka_python(s: Secure, case: str, caplog: pytest.LogCaptureFixture) -> str:
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    with pytest.raises(KafkaError):
        KafkaAdminClient(bootstrap_timeout_ms=3000, request_timeout_ms=3000,
                         **python_kwargs(s, "SCRAM-SHA-256", **refusal_settings(s, case)))  # fmt: skip
    return "\n".join(r.getMessage() for r in caplog.records)


def refused_aiokafka(s: Secure, case: str, caplog: pytest.LogCaptureFixture) -> str:
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.errors import KafkaConnectionError

    async def main() -> None:
        admin = AIOKafkaAdminClient(request_timeout_ms=3000,
                                    **python_kwargs(s, "SCRAM-SHA-256", aio=True, **refusal_settings(s, case)))  # fmt: skip
        try:
            await admin.start()
        finally:
            await admin.close()

    with pytest.raises(KafkaConnectionError) as e:
        asyncio.run(main())
    return "\n".join([repr(e.value), *(r.getMessage() for r in caplog.records)])


def refused_kcat(s: Secure, case: str) -> str:
    conf = librdkafka_conf(s, "SCRAM-SHA-256", **refusal_settings(s, case))
    r = subprocess.run([*kcat_args(conf), "-L", "-m", "2"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    return r.stderr


@pytest.mark.parametrize("case", list(REFUSALS))
@pytest.mark.parametrize("client", CLIENTS)
def test_refusals_are_seen_for_what_they_are(secure: Secure, client: str, case: str,
                                             caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    caplog.set_level(logging.DEBUG)
    started = time.monotonic()
    if client == "confluent":
        seen = refused_confluent(secure, case)
    elif client == "kafka-python":
        seen = refused_kafka_python(secure, case, caplog)
    elif client == "aiokafka":
        seen = refused_aiokafka(secure, case, caplog)
    else:
        seen = refused_kcat(secure, case)
    assert REFUSALS[case][client] in seen, f"{client}, {case}: {seen[-3000:]}"
    assert time.monotonic() - started < 30, "the refusal took too long to reach the client"


@pytest.mark.parametrize("client", ["confluent", "kcat"])
def test_untrusted_client_certificate_is_refused(secure: Secure, client: str) -> None:
    conf = librdkafka_conf(secure, "mTLS", client_cert=(secure.pki.rogue_client.cert, secure.pki.rogue_client.key))
    if client == "kcat":
        r = subprocess.run([*kcat_args(conf), "-L", "-m", "2"], capture_output=True, text=True, timeout=60)
        assert r.returncode != 0 and "alert" in r.stderr, r.stderr
    else:
        confluent_seen(conf, "alert")
    assert "certificate verify failed" in secure.process.log_text()


def test_no_traceback_in_the_broker_log(secure: Secure) -> None:
    """Runs last in this module: every refusal above was logged as a line, never as a traceback."""
    log = secure.process.log_text()
    assert "Traceback" not in log, log[-3000:]


@pytest.mark.parametrize("mode", ["SCRAM-SHA-256", "mTLS"])
def test_large_requests_over_tls_arrive_whole_and_in_order(secure: Secure, mode: str) -> None:
    """Produce requests of up to a megabyte, which librdkafka cuts into TLS records of about 2 KB: the broker
    decrypts them straight into its request buffers (a large request into a buffer of its own), so records cut
    across requests and requests across reads must still come out whole and in order."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    conf = librdkafka_conf(secure, mode)
    topic = f"large-{mode}-{uuid.uuid4().hex[:6]}".lower()
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    values = [i.to_bytes(4, "big") * 500 for i in range(4000)]  # 2 KB each, 8 MB in all
    producer = Producer({**conf, "linger.ms": 20, "batch.size": 1_000_000})
    for v in values:
        producer.produce(topic, v, partition=0)
    assert producer.flush(60) == 0
    consumer = Consumer({**conf, "group.id": f"g-{topic}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = confluent_read(consumer, len(values))
    first_wrong = next((i for i, (a, b) in enumerate(zip(got, values, strict=False)) if a != b), len(got))
    assert got == values, f"{len(got)} of {len(values)} records back, the first difference at {first_wrong}"
