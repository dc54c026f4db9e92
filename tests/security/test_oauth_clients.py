"""SASL/OAUTHBEARER with real clients against our broker: confluent-kafka (librdkafka's unsecured JWT builder, and
signed tokens from an ``oauth_cb``), kafka-python and aiokafka (their token providers) create a topic, produce and
consume it back in a consumer group (and kcat, librdkafka 2.0.2, with the unsecured builder), over SASL_PLAINTEXT with unsecured tokens and over SASL_SSL with tokens signed
by a key of the broker's JWKS file. Then refusals (an expired token, the wrong audience, a signature by a key the
JWKS file does not have), which each client sees as an authentication failure saying why, and ACLs: the token's
subject is the principal they apply to.

One broker serves it all: listener UNSECURED (SASL_PLAINTEXT, Kafka's unsecured validator class) and SASL_SSL (the
JWKS file, the expected issuer and audience), with ACLs on and ``User:alice`` a super user."""

from __future__ import annotations

import asyncio
import logging
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from oauth_tokens import AUDIENCE, ISSUER, Issuer, unsecured
from test_peer_clients import confluent_read, confluent_seen
from tls_pki import Pki

from groupstream.broker.node import Broker
from support.inprocess import running_broker
from support.waiting import wait_until

pytestmark = [pytest.mark.compat]

RECORDS = 50
UNSECURED_CLASS = "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler"
MODES = ["unsecured", "signed"]
CLIENTS = ["confluent", "kafka-python", "aiokafka"]


@dataclass
class OAuthBroker:
    broker: Broker
    pki: Pki
    issuer: Issuer

    def port(self, mode: str) -> int:
        name = "UNSECURED" if mode == "unsecured" else "SASL_SSL"
        (listener,) = [lc for lc in self.broker.listeners if lc.name == name]
        return listener.port

    def token(self, mode: str, sub: str = "alice", **claims: Any) -> str:
        now = time.time()
        if mode == "unsecured":
            return unsecured({"sub": sub, "iat": int(now), "exp": int(now + 3600), **claims})
        return self.issuer.sign({**self.issuer.claims(sub, now), **claims})


@pytest.fixture(scope="module")
def oauth(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[OAuthBroker]:
    workdir = tmp_path_factory.mktemp("oauth-peers")
    issuer = Issuer()
    jwks = issuer.write_jwks(workdir / "jwks.json")
    with running_broker(workdir / "data", **{
        "listeners": "UNSECURED://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "listener.security.protocol.map": "UNSECURED:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.unsecured.oauthbearer.sasl.server.callback.handler.class": UNSECURED_CLASS,
        "listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": jwks,
        "sasl.oauthbearer.expected.issuer": ISSUER,
        "sasl.oauthbearer.expected.audience": AUDIENCE,
        "ssl.keystore.location": str(pki.broker.pem_keystore),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:alice",
        "group.initial.rebalance.delay.ms": "0",
        "num.partitions": "3",
    }) as broker:  # fmt: skip
        yield OAuthBroker(broker, pki, issuer)


# --- each client's settings ---------------------------------------------------------------------------------------


def librdkafka_conf(o: OAuthBroker, mode: str, token: str | None = None) -> dict[str, Any]:
    """Unsecured: librdkafka builds the token itself (``sasl.oauthbearer.config=principal=...``); otherwise the
    ``oauth_cb`` hands it ``token`` (signed by the test, or any given one)."""
    if mode == "unsecured" and token is None:
        return {"bootstrap.servers": f"127.0.0.1:{o.port(mode)}", "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": True,
                "sasl.oauthbearer.config": "principal=alice"}  # fmt: skip
    value = token if token is not None else o.token(mode)
    conf: dict[str, Any] = {
        "bootstrap.servers": f"127.0.0.1:{o.port(mode)}",
        "sasl.mechanism": "OAUTHBEARER",
        "oauth_cb": lambda _config: (value, time.time() + 3600, "alice"),
    }
    if mode == "unsecured":
        return {**conf, "security.protocol": "SASL_PLAINTEXT"}
    return {**conf, "security.protocol": "SASL_SSL", "ssl.ca.location": str(o.pki.ca)}


def python_kwargs(o: OAuthBroker, mode: str, token: str | None = None, aio: bool = False) -> dict[str, Any]:
    value = token if token is not None else o.token(mode)
    kw: dict[str, Any] = {"bootstrap_servers": f"127.0.0.1:{o.port(mode)}", "sasl_mechanism": "OAUTHBEARER"}
    if aio:
        from aiokafka.abc import AbstractTokenProvider as AioProvider
        from aiokafka.helpers import create_ssl_context

        class AioTokens(AioProvider):
            async def token(self) -> str:
                return value

        kw["sasl_oauth_token_provider"] = AioTokens()
        if mode == "signed":
            kw["ssl_context"] = create_ssl_context(cafile=str(o.pki.ca))
    else:
        from kafka.net.sasl.oauth import AbstractTokenProvider

        class Tokens(AbstractTokenProvider):
            def token(self) -> str:
                return value

        kw["sasl_oauth_token_provider"] = Tokens()
        if mode == "signed":
            kw["ssl_cafile"] = str(o.pki.ca)
    kw["security_protocol"] = "SASL_PLAINTEXT" if mode == "unsecured" else "SASL_SSL"
    return kw


# --- produce, consume in a group, admin ---------------------------------------------------------------------------


def run_confluent(o: OAuthBroker, mode: str, topic: str, group: str, values: list[bytes]) -> list[bytes]:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    conf = librdkafka_conf(o, mode)
    admin = AdminClient(conf)
    admin.poll(0)  # serves the oauth_cb
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
    producer = Producer({**conf, "linger.ms": 5})
    producer.poll(0)
    for v in values:
        producer.produce(topic, v)
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    return confluent_read(consumer, len(values))


def run_kafka_python(o: OAuthBroker, mode: str, topic: str, group: str, values: list[bytes]) -> list[bytes]:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import NewTopic

    kw = python_kwargs(o, mode)
    admin = KafkaAdminClient(**kw)
    admin.create_topics([NewTopic(topic, 3, 1)])
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


def run_aiokafka(o: OAuthBroker, mode: str, topic: str, group: str, values: list[bytes]) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    async def main() -> list[bytes]:
        kw = python_kwargs(o, mode, aio=True)
        admin = AIOKafkaAdminClient(**kw)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic, 3, 1)])
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


def run_kcat(o: OAuthBroker, mode: str, topic: str, group: str, values: list[bytes]) -> list[bytes]:
    """kcat (Debian's, librdkafka 2.0.2) with librdkafka's unsecured JWT builder: the produce auto-creates the
    topic, -G consumes in a group."""
    path = shutil.which("kcat")
    assert path is not None, "kcat is not installed: run `make system-deps` (apt-get install kcat)"
    args = [path, "-b", f"127.0.0.1:{o.port(mode)}"]
    for key, value in librdkafka_conf(o, mode).items():
        if key != "bootstrap.servers":
            text = str(value).lower() if isinstance(value, bool) else str(value)
            args += ["-X", f"{'sasl.mechanisms' if key == 'sasl.mechanism' else key}={text}"]
    produced = subprocess.run([*args, "-P", "-t", topic], input=b"\n".join(values) + b"\n", capture_output=True,
                              timeout=60)  # fmt: skip
    assert produced.returncode == 0, produced.stderr.decode(errors="replace")
    consumed = subprocess.run([*args, "-G", group, "-o", "beginning", "-e", "-q", "-f", "%s\n", topic],
                              capture_output=True, timeout=90)  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr.decode(errors="replace")
    return consumed.stdout.splitlines()


RUNNERS = {"confluent": run_confluent, "kafka-python": run_kafka_python, "aiokafka": run_aiokafka, "kcat": run_kcat}


@pytest.mark.parametrize(("client", "mode"), [(c, m) for c in CLIENTS for m in MODES] + [("kcat", "unsecured")])
def test_produce_consume_in_a_group_and_admin(oauth: OAuthBroker, client: str, mode: str,
                                              caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    caplog.set_level(logging.DEBUG, "groupstream.broker.auth")
    tag = f"{client}-{mode}-{uuid.uuid4().hex[:6]}"
    values = [f"{tag}-{i}".encode() for i in range(RECORDS)]
    got = RUNNERS[client](oauth, mode, f"t-{tag}", f"g-{tag}", values)
    assert sorted(got) == sorted(values), f"{client} over {mode}: {len(got)} of {len(values)} records back"
    listener = "UNSECURED" if mode == "unsecured" else "SASL_SSL"
    assert any(f" authenticated on {listener}://" in r.getMessage() and "as User:alice with OAUTHBEARER" in
               r.getMessage() for r in caplog.records), "the broker did not log alice's OAUTHBEARER login"  # fmt: skip


# --- refusals -------------------------------------------------------------------------------------------------------

REFUSALS = {
    "expired": "the token expired at",
    "wrong-audience": "includes none of the expected ['groupstream-test']",
    "bad-signature": "signature (RS256) does not verify with the key 'rsa-1'",
}


def refused_token(o: OAuthBroker, case: str) -> str:
    now = time.time()
    if case == "expired":
        return o.issuer.sign(o.issuer.claims("alice", now - 7200, 3600))
    if case == "wrong-audience":
        return o.issuer.sign({**o.issuer.claims("alice", now), "aud": "somebody-else"})
    return o.issuer.sign(o.issuer.claims("alice", now), "rogue")


def refused_kafka_python(o: OAuthBroker, token: str, caplog: pytest.LogCaptureFixture) -> str:
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    with pytest.raises(KafkaError) as e:
        KafkaAdminClient(bootstrap_timeout_ms=3000, request_timeout_ms=3000, **python_kwargs(o, "signed", token))
    return "\n".join([str(e.value), *(r.getMessage() for r in caplog.records)])


def refused_aiokafka(o: OAuthBroker, token: str, caplog: pytest.LogCaptureFixture) -> str:
    """aiokafka takes RFC 7628's JSON error for success and sends its next request, which the broker answers by
    closing the connection (as Kafka's does): the client sees a connection error, the broker's log says why."""
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.errors import KafkaConnectionError

    async def main() -> None:
        admin = AIOKafkaAdminClient(request_timeout_ms=3000, **python_kwargs(o, "signed", token, aio=True))
        try:
            await admin.start()
        finally:
            await admin.close()

    with pytest.raises(KafkaConnectionError) as e:
        asyncio.run(main())
    return "\n".join([repr(e.value), *(r.getMessage() for r in caplog.records)])


@pytest.mark.parametrize("case", list(REFUSALS))
@pytest.mark.parametrize("client", CLIENTS)
def test_refused_tokens_are_seen_for_what_they_are(oauth: OAuthBroker, client: str, case: str,
                                                   caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    caplog.set_level(logging.DEBUG)
    token = refused_token(oauth, case)
    started = time.monotonic()
    if client == "confluent":
        seen = confluent_seen(librdkafka_conf(oauth, "signed", token), REFUSALS[case])
        assert "SASL authentication error: {\"status\":\"invalid_token\"}: " in seen, seen[-2000:]
    elif client == "kafka-python":
        seen = refused_kafka_python(oauth, token, caplog)
        assert "SaslAuthenticationFailed" in seen and REFUSALS[case] in seen, seen[-3000:]
    else:
        seen = refused_aiokafka(oauth, token, caplog)
        assert "after its token was refused: the token" in seen and REFUSALS[case] in seen, seen[-3000:]
    assert time.monotonic() - started < 30, "the refusal took too long to reach the client"


def test_an_unsecured_token_is_refused_where_tokens_must_be_signed(oauth: OAuthBroker) -> None:
    conf = librdkafka_conf(oauth, "signed", oauth.token("unsecured"))
    confluent_seen(conf, "algorithm 'none' is not accepted")


# --- ACLs apply to the token's subject ------------------------------------------------------------------------------


def test_acls_apply_to_the_tokens_subject(oauth: OAuthBroker) -> None:
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

    topic = f"acl-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(librdkafka_conf(oauth, "signed"))  # alice, a super user
    admin.poll(0)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)

    bob = librdkafka_conf(oauth, "signed", oauth.token("signed", sub="bob"))

    def produce_as_bob() -> KafkaError | None:
        errors: list[KafkaError | None] = []
        producer = Producer({**bob, "message.timeout.ms": 10_000})
        producer.poll(0)
        producer.produce(topic, b"from bob", on_delivery=lambda err, _msg: errors.append(err))
        producer.flush(30)
        assert len(errors) == 1
        return errors[0]

    refused = produce_as_bob()
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, refused
    binding = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:bob", "*", AclOperation.WRITE,
                         AclPermissionType.ALLOW)  # fmt: skip
    for future in admin.create_acls([binding]).values():
        try:
            future.result(30)
        except KafkaException as e:  # pragma: no cover - the message says why
            raise AssertionError(f"alice could not grant bob WRITE: {e}") from None
    assert produce_as_bob() is None


# --- tokens that expire: the clients re-authenticate with fresh ones (KIP-368) ---------------------------------------

TOKEN_LIFETIME_S = 8
"""Clients re-authenticate at about 80-90% of a session's lifetime, so a lifetime of 4 s left librdkafka a few
hundred ms, which a busy full-suite run once missed; 8 s leaves it about a second."""


def fresh_token(o: OAuthBroker) -> tuple[str, int]:
    """A token and its expiry (whole seconds, as in the token: a client told a later expiry than the token's
    would refresh it too late)."""
    claims = o.issuer.claims("alice", time.time(), TOKEN_LIFETIME_S)
    return o.issuer.sign(claims), claims["exp"]


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_clients_reauthenticate_with_fresh_tokens_before_theirs_expire(oauth: OAuthBroker, client: str,
                                                                       caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    """The session lasts as long as the token (connections.max.reauth.ms is not set): each client learns that from
    SaslAuthenticate, fetches a new token and re-authenticates in time, and keeps producing over the same
    connection for several token lifetimes; the broker never closes one for an expired session."""
    caplog.set_level(logging.DEBUG, "groupstream.broker")
    topic = f"reauth-{client}-{uuid.uuid4().hex[:6]}"
    span = 2.5 * TOKEN_LIFETIME_S  # two re-authentications at least
    if client == "confluent":
        from confluent_kafka import Producer

        acked: list[bool] = []
        conf = {**librdkafka_conf(oauth, "signed"), "linger.ms": 0,
                "oauth_cb": lambda _config: (*fresh_token(oauth), "alice")}  # fmt: skip
        producer = Producer(conf)
        started = time.monotonic()

        def step() -> bool:
            producer.produce(topic, b"x", on_delivery=lambda err, _msg: acked.append(err is None))
            producer.poll(0.05)
            return time.monotonic() - started > span

        wait_until(step, 60, f"{span} s of traffic")
        assert producer.flush(10) == 0
        assert len(acked) > 20 and all(acked), f"{acked.count(False)} of {len(acked)} records failed"
    else:
        from kafka import KafkaProducer
        from kafka.net.sasl.oauth import AbstractTokenProvider

        class Fresh(AbstractTokenProvider):
            def token(self) -> str:
                return fresh_token(oauth)[0]

        kw = {**python_kwargs(oauth, "signed"), "sasl_oauth_token_provider": Fresh()}
        producer = KafkaProducer(**kw)
        sent = 0
        try:
            deadline = time.monotonic() + span
            while time.monotonic() < deadline:  # steady traffic across more than two token lifetimes
                producer.send(topic, b"x").get(timeout=10)
                sent += 1
                time.sleep(0.05)  # the traffic's pace, not a wait for a condition
        finally:
            producer.close()
        assert sent > 20
    messages = [r.getMessage() for r in caplog.records]
    assert sum(" re-authenticated on SASL_SSL://" in m for m in messages) >= 2, "fewer than two re-authentications"
    assert not [m for m in messages if "expired" in m], "the broker closed a connection for an expired session"
