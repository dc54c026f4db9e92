"""SASL/OAUTHBEARER in our own clients (Producer, Consumer in a group, Admin) against our broker's two validators:
the unsecured one (tokens from librdkafka's ``sasl.oauthbearer.config=principal=...`` builder, or Java's
OAuthBearerLoginModule line) and the JWKS one over SASL_SSL (tokens from an ``oauth_cb`` as confluent-kafka
calls it, or from a loopback OAuth token endpoint with ``sasl.oauthbearer.method=oidc``, the client credentials
grant). Then what goes wrong, each said in one line: a token the broker refuses (its reason given), a callback that
fails, a token endpoint that refuses the client's secret, settings that name no token at all. And KIP-368: with
tokens that live 3 to 4 s, the session ends with each token, so the producer re-authenticates with a fresh token
(the callback called again) and every record is delivered."""

from __future__ import annotations

import base64
import json
import logging
import ssl
import threading
import time
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from secure_broker import our_clients_round_trip
from test_oauth_clients import OAuthBroker, oauth  # noqa: F401  (the broker fixture)

from groupstream import Producer
from groupstream.client.admin import Admin
from groupstream.client.errors import ClientConfigError, ClientError
from support.waiting import wait_until

pytestmark = [pytest.mark.broker_ours]

CLIENT_ID, CLIENT_SECRET = "pipeline-7", "s3cret"


def unsecured_conf(o: OAuthBroker, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": f"127.0.0.1:{o.port('unsecured')}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", **extra}  # fmt: skip


def signed_conf(o: OAuthBroker, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": f"127.0.0.1:{o.port('signed')}", "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(o.pki.ca), "sasl.mechanism": "OAUTHBEARER", **extra}  # fmt: skip


class TokenEndpoint:
    """A loopback OAuth 2 token endpoint: the client credentials grant with HTTP basic authentication, answered
    with a JWT signed by the broker's JWKS key for subject ``alice``."""

    def __init__(self, o: OAuthBroker, tls: bool = False) -> None:
        self.issued = 0
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                form = urllib.parse.parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
                expected = base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
                if self.headers.get("Authorization") != f"Basic {expected}":
                    self._answer(401, {"error": "invalid_client"})
                elif form.get("grant_type") != ["client_credentials"] or form.get("scope") != ["kafka"]:
                    self._answer(400, {"error": "invalid_request"})
                else:
                    endpoint.issued += 1
                    token = o.issuer.sign(o.issuer.claims("alice", time.time()))
                    self._answer(200, {"access_token": token, "token_type": "Bearer", "expires_in": 3600})

            def _answer(self, status: int, doc: dict[str, Any]) -> None:
                body = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls:  # the broker's certificate (localhost, 127.0.0.1) serves the endpoint too
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(str(o.pki.broker.pem_keystore))
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        scheme = "https" if tls else "http"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}/oauth2/token"
        self.thread = threading.Thread(target=self.server.serve_forever, name="token-endpoint", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


@pytest.fixture(scope="module")
def token_endpoint(oauth: OAuthBroker) -> Iterator[TokenEndpoint]:  # noqa: F811
    endpoint = TokenEndpoint(oauth)
    try:
        yield endpoint
    finally:
        endpoint.close()


# --- it works -----------------------------------------------------------------------------------------------------


def test_unsecured_tokens_from_librdkafkas_and_javas_settings(oauth: OAuthBroker) -> None:  # noqa: F811
    conf = unsecured_conf(oauth, **{"enable.sasl.oauthbearer.unsecure.jwt": True,
                                    "sasl.oauthbearer.config": "principal=alice lifeSeconds=600"})  # fmt: skip
    our_clients_round_trip(conf, "unsecured", 20, timeout_s=60)
    java = unsecured_conf(oauth, **{"sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer."
                                    'OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="alice";'})  # fmt: skip
    with Admin(java) as admin:
        assert admin.describe_cluster().brokers


def test_signed_tokens_from_an_oauth_cb(oauth: OAuthBroker) -> None:  # noqa: F811
    asked: list[str] = []

    def oauth_cb(config: str) -> tuple[str, float]:
        asked.append(config)
        now = time.time()
        return oauth.issuer.sign(oauth.issuer.claims("alice", now)), now + 3600

    conf = signed_conf(oauth, oauth_cb=oauth_cb, **{"sasl.oauthbearer.config": "scope=kafka"})
    our_clients_round_trip(conf, "oauth_cb", 20, timeout_s=60)
    assert asked and set(asked) == {"scope=kafka"}


def test_oidc_client_credentials_from_a_token_endpoint(oauth: OAuthBroker, token_endpoint: TokenEndpoint) -> None:  # noqa: F811
    conf = signed_conf(oauth, **{"sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": CLIENT_ID,
                                 "sasl.oauthbearer.client.secret": CLIENT_SECRET, "sasl.oauthbearer.scope": "kafka",
                                 "sasl.oauthbearer.token.endpoint.url": token_endpoint.url})  # fmt: skip
    before = token_endpoint.issued
    our_clients_round_trip(conf, "oidc", 20, timeout_s=60)
    assert token_endpoint.issued > before
    refused = {**conf, "sasl.oauthbearer.client.secret": "wrong"}
    with pytest.raises(ClientError) as info:
        Admin(refused)
    text = str(info.value)
    assert f"refused client {CLIENT_ID}: HTTP 401" in text and "invalid_client" in text and "wrong" not in text


def test_oidc_over_https_trusts_https_ca_location(oauth: OAuthBroker) -> None:  # noqa: F811
    endpoint = TokenEndpoint(oauth, tls=True)
    try:
        conf = signed_conf(oauth, **{"sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": CLIENT_ID,
                                     "sasl.oauthbearer.client.secret": CLIENT_SECRET,
                                     "sasl.oauthbearer.scope": "kafka",
                                     "sasl.oauthbearer.token.endpoint.url": endpoint.url})  # fmt: skip
        with Admin({**conf, "https.ca.location": str(oauth.pki.ca)}) as admin:
            assert admin.describe_cluster().brokers
        assert endpoint.issued == 1
        with pytest.raises(ClientError) as info:  # the system's CAs do not know the test's
            Admin({**conf, "request.timeout.ms": 5000})
        assert "cannot be reached" in str(info.value) and "CERTIFICATE_VERIFY_FAILED" in str(info.value)
        with pytest.raises(ClientConfigError, match=r"https\.ca\.location: '/nonexistent' does not exist"):
            Admin({**conf, "https.ca.location": "/nonexistent"})
    finally:
        endpoint.close()


# --- refusals -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("claims", "says"),
    [({"aud": "someone-else"}, "audience"), ({"iss": "https://elsewhere.test"}, "issuer")],
)
def test_a_token_the_broker_refuses_is_a_fatal_error_saying_why(
    oauth: OAuthBroker, claims: dict[str, Any], says: str  # noqa: F811
) -> None:
    def oauth_cb(_config: str) -> tuple[str, float]:
        now = time.time()
        return oauth.issuer.sign({**oauth.issuer.claims("mallory", now), **claims}), now + 3600

    with pytest.raises(ClientError) as info:
        Admin(signed_conf(oauth, oauth_cb=oauth_cb))
    text = str(info.value)
    assert "authentication failed for user mallory with OAUTHBEARER" in text and says in text, text


def test_a_failing_callback_and_missing_settings_are_named(oauth: OAuthBroker) -> None:  # noqa: F811
    def broken(_config: str) -> tuple[str, float]:
        raise RuntimeError("vault is sealed")

    with pytest.raises(ClientError) as info:
        Admin({**signed_conf(oauth, oauth_cb=broken), "request.timeout.ms": 5000})
    assert "no token: oauth_cb raised RuntimeError: vault is sealed" in str(info.value)
    for extra, says in [
        ({}, "needs a token: oauth_cb"),
        ({"enable.sasl.oauthbearer.unsecure.jwt": "true", "sasl.oauthbearer.config": "scope=x"}, "needs principal=NAME"),
        ({"sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": "x"},
         "needs sasl.oauthbearer.token.endpoint.url, sasl.oauthbearer.client.secret"),
        ({"oauth_cb": "not a function"}, "oauth_cb must be a function"),
    ]:  # fmt: skip
        with pytest.raises(ClientConfigError) as config_info:
            Admin(unsecured_conf(oauth, **extra))
        assert says in str(config_info.value)


# --- KIP-368: sessions end with their tokens ----------------------------------------------------------------------


def test_the_producer_reauthenticates_with_fresh_tokens(oauth: OAuthBroker, caplog: pytest.LogCaptureFixture) -> None:  # noqa: F811
    caplog.set_level(logging.DEBUG, "groupstream.broker")
    issued: list[float] = []

    def oauth_cb(_config: str) -> tuple[str, int]:
        now = time.time()
        issued.append(now)
        exp = int(now) + 4  # 3 to 4 s left: a re-authentication at 85% has half a second to spare
        return oauth.issuer.sign({**oauth.issuer.claims("alice", now), "exp": exp}), exp

    producer = Producer(signed_conf(oauth, oauth_cb=oauth_cb, **{"linger.ms": 0}))
    handles = []

    def step() -> bool:
        handles.append(producer.produce("oauth-reauth", b"x"))
        producer.flush(10)
        return len(issued) >= 3

    try:
        wait_until(step, 30, "three tokens used (two re-authentications)")
    finally:
        producer.close()
    assert all(h.result().offset >= 0 for h in handles)
    reauthenticated = [r for r in caplog.records if " re-authenticated on " in r.getMessage()]
    assert len(reauthenticated) >= 2
    assert not [r for r in caplog.records if "expired" in r.getMessage()], "a session outlived its token"
