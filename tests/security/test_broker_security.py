"""Our broker's listeners, TLS and SASL, in this process over 127.0.0.1 with a client of our own codec: the rules a
client must follow, what each mistake does to its connection (closed, with one clear log line) and to the others
(nothing), mutual TLS principals, re-authentication with a manual clock, and the SCRAM credential admin APIs."""

from __future__ import annotations

import logging
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka_wire import HOST, WireClient, client_tls
from tls_pki import PASSWORD, Pki

from groupstream.broker.node import Broker
from groupstream.protocol.error_codes import ErrorCode
from groupstream.security.credentials import CredentialStore
from groupstream.security.scram import ScramClient, ScramMechanism, make_credential, salt_password
from support.inprocess import running_broker
from support.waiting import wait_until

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
FAILED_DELAY_MS = 200
MAX_RECEIVE = 4096
REAUTH_MS = 1000


def add_users(data_dir: Path) -> None:
    store = CredentialStore(data_dir)
    store.save(store.changed(upserts=[
        ("alice", SHA256, make_credential(SHA256, "alice-pw", b"a" * 32, 4096)),
        ("alice", SHA512, make_credential(SHA512, "alice-pw", b"b" * 32, 4096)),
        ("bob", SHA512, make_credential(SHA512, "bob-pw", b"c" * 32, 8192)),
    ]))  # fmt: skip


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[Broker]:
    data_dir = tmp_path_factory.mktemp("secure-broker")
    add_users(data_dir)
    props = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0,"
                     "MTLS://127.0.0.1:0",
        "listener.security.protocol.map": "MTLS:SSL",
        "advertised.listeners": "SASL_SSL://localhost:0",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "ssl.keystore.location": str(pki.broker.pem_keystore),
        "ssl.truststore.location": str(pki.ca),
        "listener.name.ssl.ssl.client.auth": "requested",
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.principal.mapping.rules": "RULE:^CN=([^,]*),OU=eng,.*$/$1/,DEFAULT",
        "listener.name.sasl_plaintext.connections.max.reauth.ms": str(REAUTH_MS),
        "connection.failed.authentication.delay.ms": str(FAILED_DELAY_MS),
        "sasl.server.max.receive.size": str(MAX_RECEIVE),
    }  # fmt: skip
    with running_broker(data_dir, **props) as b:
        yield b


def port(broker: Broker, name: str) -> int:
    return next(lc.port for lc in broker.listeners if lc.name == name)


def principals(broker: Broker) -> list[str]:
    return [c.principal for c in broker.connections if c.listener is not None and c.listener.name != "PLAINTEXT"]


@pytest.fixture
def tls(pki: Pki) -> ssl.SSLContext:
    return client_tls(str(pki.ca))


# --- listeners ------------------------------------------------------------------------------------------------


def test_api_versions_lists_the_security_apis(broker: Broker) -> None:
    with WireClient(port(broker, "PLAINTEXT")) as c:
        keys = {k.api_key: (k.min_version, k.max_version) for k in c.request("ApiVersions", 3).api_keys}
    assert keys[17] == (0, 1) and keys[36] == (0, 2) and keys[50] == (0, 0) and keys[51] == (0, 0)


def test_metadata_advertises_the_listener_the_client_came_in_on(broker: Broker, tls: ssl.SSLContext) -> None:
    with WireClient(port(broker, "PLAINTEXT")) as c:
        (b,) = c.metadata().brokers
        assert (b.host, b.port) == (HOST, port(broker, "PLAINTEXT"))
    with WireClient(port(broker, "SASL_SSL"), tls) as c:
        assert c.scram("alice", "alice-pw").error_code == 0
        (b,) = c.metadata().brokers
        assert (b.host, b.port) == ("localhost", port(broker, "SASL_SSL"))  # advertised.listeners, bound port
        coordinator = c.request("FindCoordinator", 3, key="g", key_type=0)
        assert (coordinator.host, coordinator.port) == ("localhost", port(broker, "SASL_SSL"))


def test_sasl_requests_on_a_listener_without_sasl_get_illegal_sasl_state(broker: Broker) -> None:
    with WireClient(port(broker, "PLAINTEXT")) as c:
        assert c.request("SaslHandshake", 1, mechanism="PLAIN").error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert c.request("SaslAuthenticate", 2, auth_bytes=b"x").error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert c.metadata().brokers  # and the connection stays usable, as in Kafka


# --- SASL ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", [SHA256, SHA512], ids=lambda m: m.mechanism_name)
def test_scram_over_sasl_ssl(broker: Broker, tls: ssl.SSLContext, mechanism: ScramMechanism) -> None:
    with WireClient(port(broker, "SASL_SSL"), tls) as c:
        assert c.request("ApiVersions", 3).error_code == 0  # answered before authentication
        done = c.scram("alice", "alice-pw", mechanism)
        assert done.error_code == 0 and done.session_lifetime_ms == 0
        assert c.metadata().brokers
        assert "User:alice" in principals(broker)


def test_plain_over_sasl_plaintext_is_checked_against_scram_credentials(broker: Broker) -> None:
    with WireClient(port(broker, "SASL_PLAINTEXT")) as c:
        done = c.plain("bob", "bob-pw")
        assert done.error_code == 0 and done.session_lifetime_ms == REAUTH_MS
        assert c.metadata().brokers


def test_wrong_password_is_answered_after_the_delay_then_closed(broker: Broker, tls: ssl.SSLContext,
                                                                caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    caplog.set_level(logging.INFO, "groupstream.broker.server")
    with WireClient(port(broker, "SASL_SSL"), tls) as c:
        c.request("SaslHandshake", 1, mechanism="SCRAM-SHA-512")
        client = ScramClient(SHA512, "alice", "not-her-password", "n1")
        first = c.request("SaslAuthenticate", 1, auth_bytes=client.first_message())
        started = time.monotonic()
        failed = c.request("SaslAuthenticate", 1, auth_bytes=client.final_message(first.auth_bytes))
        waited = time.monotonic() - started
        assert failed.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert failed.error_message == (
            "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"
        )
        assert waited >= FAILED_DELAY_MS / 1000 * 0.9
        assert c.closed_by_broker()
    assert any("SCRAM-SHA-512 authentication" in r.message and "wrong password for user 'alice'" in r.message
               for r in caplog.records)  # fmt: skip


def test_wrong_plain_password(broker: Broker) -> None:
    with WireClient(port(broker, "SASL_PLAINTEXT")) as c:
        failed = c.plain("bob", "guess")
        assert failed.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert failed.error_message == "Authentication failed: Invalid username or password"
        assert c.closed_by_broker()


def test_unknown_user_fails_like_a_wrong_password(broker: Broker) -> None:
    with WireClient(port(broker, "SASL_PLAINTEXT")) as c:
        failed = c.scram("mallory", "x")
        assert failed.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert "invalid credentials with SASL mechanism SCRAM-SHA-256" in failed.error_message


def test_unsupported_mechanism_is_answered_then_closed(broker: Broker) -> None:
    with WireClient(port(broker, "SASL_PLAINTEXT")) as c:
        hs = c.request("SaslHandshake", 1, mechanism="GSSAPI")
        assert hs.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert hs.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert c.closed_by_broker()


@pytest.mark.parametrize(
    ("steps", "logged"),
    [
        ([("Metadata", 12, {"topics": []})], "Metadata before SASL authentication"),
        ([("SaslAuthenticate", 1, {"auth_bytes": b"n,,n=alice,r=x"})], "SaslAuthenticate before SaslHandshake"),
        ([("SaslHandshake", 1, {"mechanism": "SCRAM-SHA-256"}), ("Metadata", 12, {"topics": []})],
         "Metadata during SASL authentication"),
        ([("SaslHandshake", 1, {"mechanism": "SCRAM-SHA-256"}),
          ("SaslAuthenticate", 1, {"auth_bytes": b"x" * (MAX_RECEIVE * 2)})], "over sasl.server.max.receive.size"),
        ([("SaslHandshake", 1, {"mechanism": "SCRAM-SHA-256"}),
          ("SaslAuthenticate", 1, {"auth_bytes": b"n,,n=alice,r=x"}),
          ("SaslAuthenticate", 1, {"auth_bytes": b"c=biws,r=x,p=AAAA"})], "SCRAM-SHA-256 authentication"),
    ],
    ids=["request-before-auth", "authenticate-before-handshake", "request-during-auth", "oversized-token",
         "wrong-proof"],
)  # fmt: skip
def test_each_mistake_closes_only_its_own_connection(
    broker: Broker, steps: list[tuple[str, int, dict[str, object]]], logged: str, caplog: pytest.LogCaptureFixture,
    clock: list[int],
) -> None:
    """(The SASL clock stands still: the bystander's session on this listener must not expire meanwhile.)"""
    caplog.set_level(logging.INFO, "groupstream.broker.server")
    bystander = WireClient(port(broker, "SASL_PLAINTEXT"))
    assert bystander.scram("alice", "alice-pw").error_code == 0
    with WireClient(port(broker, "SASL_PLAINTEXT")) as c:
        for api, version, fields in steps:
            c.send(api, version, **fields)
        assert c.closed_by_broker()
    wait_until(lambda: any(logged in r.message for r in caplog.records), 10, f"a log line with {logged!r}")
    assert not any(r.exc_info for r in caplog.records), "a traceback was logged"
    assert bystander.metadata().brokers  # the other connection did not notice
    bystander.close()


def test_handshake_v0_then_bare_tokens(broker: Broker) -> None:
    with WireClient(port(broker, "SASL_PLAINTEXT")) as c:
        assert c.request("SaslHandshake", 0, mechanism="SCRAM-SHA-512").error_code == 0
        client = ScramClient(SHA512, "bob", "bob-pw", "rawnonce")
        c.send_token(client.first_message())
        c.send_token(client.final_message(c.receive_token()))
        client.check_server_final(c.receive_token())
        assert c.metadata().brokers


def test_handshake_v0_plain_is_answered_with_an_empty_token(broker: Broker) -> None:
    """As Kafka's PLAIN does without SaslAuthenticate: the empty reply comes once the password is checked."""
    with WireClient(port(broker, "SASL_PLAINTEXT")) as c:
        c.request("SaslHandshake", 0, mechanism="PLAIN")
        c.send_token(b"\0bob\0bob-pw")
        assert c.receive_token() == b""
        assert c.metadata().brokers


def test_handshake_v0_with_a_wrong_password_just_closes(broker: Broker) -> None:
    with WireClient(port(broker, "SASL_PLAINTEXT")) as c:
        c.request("SaslHandshake", 0, mechanism="PLAIN")
        c.send_token(b"\0bob\0wrong")
        assert c.closed_by_broker()


# --- re-authentication (KIP-368) --------------------------------------------------------------------------------


@pytest.fixture
def clock(broker: Broker) -> Iterator[list[int]]:
    """The broker's SASL clock, moved by hand."""
    now = [1_000_000]
    broker.auth_clock = lambda: now[0]
    try:
        yield now
    finally:
        broker.auth_clock = lambda: time.time_ns() // 1_000_000


def test_expired_session_closes_the_connection_on_its_next_request(broker: Broker, clock: list[int],
                                                                  caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    caplog.set_level(logging.INFO, "groupstream.broker.server")
    with WireClient(port(broker, "SASL_PLAINTEXT")) as c:
        assert c.scram("alice", "alice-pw").session_lifetime_ms == REAUTH_MS
        clock[0] += REAUTH_MS - 1
        assert c.metadata().brokers
        clock[0] += 1
        c.send("Metadata", 12, topics=[])
        assert c.closed_by_broker()
    wait_until(lambda: any("expired (connections.max.reauth.ms=1000) without re-authentication" in r.message
                           for r in caplog.records), 10, "the expiry log line")  # fmt: skip


def test_reauthentication_renews_the_session(broker: Broker, clock: list[int]) -> None:
    with WireClient(port(broker, "SASL_PLAINTEXT")) as c:
        assert c.scram("alice", "alice-pw").error_code == 0
        clock[0] += 900
        again = c.scram("alice", "alice-pw")
        assert again.error_code == 0 and again.session_lifetime_ms == REAUTH_MS
        clock[0] += 900  # 1800 ms after the first login, 900 after the second
        assert c.metadata().brokers


def test_reauthentication_as_someone_else_is_refused(broker: Broker, clock: list[int]) -> None:
    with WireClient(port(broker, "SASL_PLAINTEXT")) as c:
        assert c.scram("alice", "alice-pw", SHA512).error_code == 0
        other = c.scram("bob", "bob-pw", SHA512)
        assert other.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert "Cannot change principals" in other.error_message
        assert c.closed_by_broker()


# --- TLS ---------------------------------------------------------------------------------------------------------


def test_plaintext_kafka_client_on_a_tls_listener(broker: Broker, tls: ssl.SSLContext,
                                                  caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    caplog.set_level(logging.INFO, "groupstream.broker.server")
    bystander = WireClient(port(broker, "SASL_SSL"), tls)
    assert bystander.scram("alice", "alice-pw").error_code == 0
    with WireClient(port(broker, "SASL_SSL")) as c:
        c.send("ApiVersions", 3, client_software_name="x", client_software_version="1")
        assert c.closed_by_broker()
    wait_until(lambda: any("the client sent a plaintext Kafka request" in r.message for r in caplog.records), 10,
               "the plaintext hint in the log")  # fmt: skip
    assert bystander.metadata().brokers
    bystander.close()


@pytest.mark.parametrize("garbage", [b"\x16\x03\x01\x00\x10" + b"\xff" * 16, b"GET / HTTP/1.1\r\n\r\n", b"\x00" * 64],
                         ids=["broken-client-hello", "http", "zeros"])  # fmt: skip
def test_garbage_during_the_tls_handshake(broker: Broker, garbage: bytes, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "groupstream.broker.server")
    with socket.create_connection((HOST, port(broker, "SSL")), timeout=10) as s:
        s.sendall(garbage)
        s.settimeout(10)
        try:
            while s.recv(4096):
                pass
        except ConnectionResetError:
            pass
    wait_until(lambda: any("TLS handshake failed on SSL://" in r.message for r in caplog.records), 10,
               "the handshake failure in the log")  # fmt: skip
    assert not any(r.exc_info for r in caplog.records)


def test_mutual_tls_principals(broker: Broker, pki: Pki) -> None:
    mtls = port(broker, "MTLS")
    with WireClient(mtls, client_tls(str(pki.ca), str(pki.client.cert), str(pki.client.key))) as c:
        assert c.metadata().brokers
        assert "User:alice" in principals(broker)  # CN=alice,OU=eng,... mapped by the listener's rule
    with WireClient(mtls, client_tls(str(pki.ca), str(pki.other_client.cert), str(pki.other_client.key))) as c:
        assert c.metadata().brokers
        assert "User:CN=bob,O=other" in principals(broker)  # DEFAULT: the RFC 2253 name
    with WireClient(port(broker, "SSL"), client_tls(str(pki.ca))) as c:
        assert c.metadata().brokers  # ssl.client.auth=requested: no certificate is fine
        assert "User:ANONYMOUS" in principals(broker)


@pytest.mark.parametrize("who", ["no-certificate", "untrusted-certificate"])
def test_mutual_tls_refusals(broker: Broker, pki: Pki, who: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "groupstream.broker.server")
    ctx = client_tls(str(pki.ca)) if who == "no-certificate" else client_tls(
        str(pki.ca), str(pki.rogue_client.cert), str(pki.rogue_client.key))  # fmt: skip
    with pytest.raises((ssl.SSLError, ConnectionError)) as refused, WireClient(port(broker, "MTLS"), ctx) as c:
        c.metadata()  # TLS 1.3: the client learns of the refusal at its first read
    assert "alert" in str(refused.value) or "closed" in str(refused.value)
    expected = "peer did not return a certificate" if who == "no-certificate" else "certificate verify failed"
    wait_until(lambda: any(expected in r.message for r in caplog.records), 10, f"{expected!r} in the log")


def test_client_refuses_a_broker_it_does_not_trust(broker: Broker, pki: Pki) -> None:
    with pytest.raises(ssl.SSLCertVerificationError):
        WireClient(port(broker, "SASL_SSL"), client_tls(str(pki.rogue_ca)))


# --- SCRAM credentials online ----------------------------------------------------------------------------------------


def test_alter_and_describe_user_scram_credentials(broker: Broker, tmp_path: Path) -> None:
    salt = b"carol-salt-00000"
    with WireClient(port(broker, "SASL_PLAINTEXT")) as admin:
        assert admin.scram("alice", "alice-pw").error_code == 0
        R = admin.conn._apis[51].Request
        up = R.ScramCredentialUpsertion
        result = admin.request("AlterUserScramCredentials", 0, deletions=[], upsertions=[
            up(name="carol", mechanism=1, iterations=4096, salt=salt,
               salted_password=salt_password(SHA256, "carol-pw", salt, 4096)),
            up(name="dave", mechanism=1, iterations=100, salt=salt, salted_password=b"x" * 32),
            up(name="erin", mechanism=9, iterations=4096, salt=salt, salted_password=b"x" * 32),
        ])  # fmt: skip
        codes = {r.user: r.error_code for r in result.results}
        assert codes == {"carol": 0, "dave": ErrorCode.UNACCEPTABLE_CREDENTIAL,
                         "erin": ErrorCode.UNSUPPORTED_SASL_MECHANISM}  # fmt: skip
        dup = admin.request("AlterUserScramCredentials", 0, upsertions=[], deletions=[
            R.ScramCredentialDeletion(name="nobody", mechanism=1),
            R.ScramCredentialDeletion(name="carol", mechanism=1), R.ScramCredentialDeletion(name="carol", mechanism=1),
        ])  # fmt: skip
        assert {r.user: r.error_code for r in dup.results} == {
            "nobody": ErrorCode.RESOURCE_NOT_FOUND, "carol": ErrorCode.DUPLICATE_RESOURCE}  # fmt: skip

        described = admin.request("DescribeUserScramCredentials", 0, users=None)
        assert {r.user: [(i.mechanism, i.iterations) for i in r.credential_infos] for r in described.results} == {
            "alice": [(1, 4096), (2, 4096)], "bob": [(2, 8192)], "carol": [(1, 4096)]}  # fmt: skip
        DU = admin.conn._apis[50].Request.UserName
        some = admin.request("DescribeUserScramCredentials", 0, users=[DU(name="carol"), DU(name="zed")])
        assert [(r.user, r.error_code) for r in some.results] == [("carol", 0), ("zed", ErrorCode.RESOURCE_NOT_FOUND)]

    with WireClient(port(broker, "SASL_PLAINTEXT")) as c:  # the new user logs in at once, with either mechanism
        assert c.scram("carol", "carol-pw").error_code == 0
    with WireClient(port(broker, "SASL_PLAINTEXT")) as c:
        assert c.plain("carol", "carol-pw").error_code == 0
    reloaded = CredentialStore(broker.config.data_dir)  # and it is on disk
    assert reloaded.scram_credential("carol", SHA256) is not None


def test_pkcs12_keystore(tmp_path: Path, pki: Pki) -> None:
    props = {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": str(pki.broker.p12),
             "ssl.keystore.password": PASSWORD, "ssl.keystore.type": "PKCS12"}  # fmt: skip
    with running_broker(tmp_path, **props) as b, WireClient(b.listeners[0].port, client_tls(str(pki.ca))) as c:
        assert c.metadata().brokers
