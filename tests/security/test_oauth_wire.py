"""OAUTHBEARER on the wire, against our broker in this process with its SASL clock moved by hand: the bytes and
codes of RFC 7628's exchange as Kafka's broker sends them (the JSON error as a challenge, SASL_AUTHENTICATION_FAILED
on the client's \\x01 after connection.failed.authentication.delay.ms, then the close), the session lifetime that
SaslAuthenticate v1+ reports (the sooner of the token's expiry and connections.max.reauth.ms, KIP-368), the
connection closed once the token has expired, and the same exchange in bare tokens after a SaslHandshake v0."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest
from kafka_wire import WireClient
from oauth_tokens import unsecured

from groupstream.broker.node import Broker
from groupstream.protocol.error_codes import ErrorCode
from support.inprocess import running_broker
from support.waiting import wait_until

UNSECURED_CLASS = "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler"
FAILED_DELAY_MS = 300
REAUTH_MS = 60_000
NOW_S = 1_800_000_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    props = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0,CAPPED://127.0.0.1:0",
        "listener.security.protocol.map": "CAPPED:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": UNSECURED_CLASS,
        "listener.name.capped.oauthbearer.sasl.server.callback.handler.class": UNSECURED_CLASS,
        "listener.name.capped.connections.max.reauth.ms": str(REAUTH_MS),
        "connection.failed.authentication.delay.ms": str(FAILED_DELAY_MS),
    }
    with running_broker(tmp_path_factory.mktemp("oauth-wire"), **props) as b:
        yield b


@pytest.fixture
def clock(broker: Broker) -> Iterator[list[int]]:
    now = [NOW_S * 1000]
    broker.auth_clock = lambda: now[0]
    try:
        yield now
    finally:
        broker.auth_clock = lambda: time.time_ns() // 1_000_000


def port(broker: Broker, name: str) -> int:
    return next(lc.port for lc in broker.listeners if lc.name == name)


def message(claims: dict[str, object]) -> bytes:
    return f"n,,\x01auth=Bearer {unsecured(claims)}\x01\x01".encode()


@pytest.mark.parametrize(("listener", "lifetime"), [("SASL_PLAINTEXT", 120_000), ("CAPPED", REAUTH_MS)])
def test_session_lifetime_is_the_sooner_of_token_expiry_and_max_reauth(broker: Broker, clock: list[int],
                                                                       listener: str, lifetime: int) -> None:  # fmt: skip
    with WireClient(port(broker, listener)) as c:
        assert c.request("SaslHandshake", 1, mechanism="OAUTHBEARER").error_code == 0
        done = c.request("SaslAuthenticate", 2, auth_bytes=message({"sub": "alice", "exp": NOW_S + 120}))
        assert (done.error_code, done.auth_bytes, done.session_lifetime_ms) == (0, b"", lifetime)
        assert c.metadata().brokers
        assert [x.principal for x in broker.connections if x.listener is not None] == ["User:alice"]


def test_the_connection_closes_once_the_token_expired(broker: Broker, clock: list[int],
                                                      caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    caplog.set_level(logging.INFO, "groupstream.broker.server")
    with WireClient(port(broker, "SASL_PLAINTEXT")) as c:
        c.request("SaslHandshake", 1, mechanism="OAUTHBEARER")
        assert c.request("SaslAuthenticate", 1, auth_bytes=message({"sub": "alice", "exp": NOW_S + 10})).error_code == 0
        clock[0] += 9_999
        assert c.metadata().brokers
        clock[0] += 1
        c.send("Metadata", 12, topics=[])
        assert c.closed_by_broker()
    wait_until(lambda: any("session of User:alice expired (its token expired) without re-authentication" in r.message
                           for r in caplog.records), 10, "the expiry log line")  # fmt: skip


def test_an_invalid_token_gets_the_json_error_then_the_failure_after_the_delay(broker: Broker, clock: list[int],
                                                                               caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    caplog.set_level(logging.INFO, "groupstream.broker.server")
    with WireClient(port(broker, "SASL_PLAINTEXT")) as c:
        c.request("SaslHandshake", 1, mechanism="OAUTHBEARER")
        challenge = c.request("SaslAuthenticate", 2, auth_bytes=message({"sub": "alice", "exp": NOW_S - 60}))
        assert (challenge.error_code, challenge.auth_bytes) == (0, b'{"status":"invalid_token"}')
        started = time.monotonic()
        failed = c.request("SaslAuthenticate", 2, auth_bytes=b"\x01")
        assert time.monotonic() - started >= FAILED_DELAY_MS / 1000 * 0.9
        assert failed.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert failed.error_message.startswith('{"status":"invalid_token"}: the token expired at 2027-01-15T07:59:00Z')
        assert c.closed_by_broker()
    wait_until(lambda: any("SASL OAUTHBEARER authentication on SASL_PLAINTEXT://" in r.message
                           and "failed: invalid token: the token expired" in r.message for r in caplog.records),
               10, "the failure's log line")  # fmt: skip


def test_a_malformed_message_fails_at_once(broker: Broker) -> None:
    with WireClient(port(broker, "SASL_PLAINTEXT")) as c:
        c.request("SaslHandshake", 1, mechanism="OAUTHBEARER")
        failed = c.request("SaslAuthenticate", 1, auth_bytes=b"n,,auth=Bearer x")
        assert failed.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert failed.error_message == ("Authentication failed during authentication due to invalid credentials with "
                                        "SASL mechanism OAUTHBEARER")  # fmt: skip
        assert c.closed_by_broker()


def test_handshake_v0_then_bare_tokens(broker: Broker, clock: list[int]) -> None:
    with WireClient(port(broker, "SASL_PLAINTEXT")) as c:
        assert c.request("SaslHandshake", 0, mechanism="OAUTHBEARER").error_code == 0
        c.send_token(message({"sub": "bob", "exp": NOW_S + 60}))
        assert c.receive_token() == b""
        assert c.metadata().brokers
    with WireClient(port(broker, "SASL_PLAINTEXT")) as c:
        c.request("SaslHandshake", 0, mechanism="OAUTHBEARER")
        c.send_token(message({"sub": "bob", "exp": NOW_S - 60}))
        assert c.receive_token() == b'{"status":"invalid_token"}'
        c.send_token(b"\x01")
        assert c.closed_by_broker()
