"""SASL/OAUTHBEARER on the broker, pure, with a manual clock: the client message's grammar (RFC 7628 as Kafka
parses it), the two validators (signed JWTs against a JWKS file; unsecured tokens for tests), the exchange in the
SASL session (RFC 7628's JSON error, then failure on the client's \\x01; the session lifetime bounded by the token),
the broker properties that choose all this, and a fuzz of the parser and the session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oauth_tokens import AUDIENCE, ISSUER, Issuer, unsecured

from groupstream.broker.config import BrokerConfig, ConfigError
from groupstream.security.oauthbearer import (
    InvalidToken,
    JwksError,
    JwksValidator,
    OAuthBearerError,
    UnsecuredValidator,
    ValidToken,
    load_jwks,
    parse_client_response,
)
from groupstream.security.sasl import Admission, Authenticated, AuthFailed, Challenge, SaslSession
from groupstream.security.scram import stand_in_credential

NOW_S = 1_800_000_000
NOW = NOW_S * 1000
UNSECURED_CLASS = "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler"


def message(token: str, authzid: str = "", extensions: str = "") -> bytes:
    a = f"a={authzid}" if authzid else ""
    return f"n,{a},\x01auth=Bearer {token}{extensions}\x01\x01".encode()


# --- the client message ---------------------------------------------------------------------------------------------


def test_parses_the_message_kafka_and_librdkafka_send() -> None:
    r = parse_client_response(b"n,,\x01auth=Bearer abc.def-_~+/.ghi==\x01traceId=42 x\x01\x01")
    assert (r.token, r.authzid, dict(r.extensions)) == ("abc.def-_~+/.ghi==", "", {"traceId": "42 x"})
    assert "abc" not in repr(r), "the token is a credential: repr must not show it"
    r = parse_client_response(b"n,a=al=2Cice=3D,\x01auth=bearer t\x01\x01")
    assert (r.token, r.authzid) == ("t", "al,ice=")


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"", "no GS2 header"),
        (b"y,,\x01auth=Bearer t\x01\x01", "channel binding"),
        (b"p=tls-unique,,\x01auth=Bearer t\x01\x01", "channel binding"),
        (b"x,,\x01auth=Bearer t\x01\x01", "not a GS2 header"),
        (b"n,", "not ended by ','"),
        (b"n,b=x,\x01auth=Bearer t\x01\x01", "authorization id"),
        (b"n,a=,\x01auth=Bearer t\x01\x01", "authorization id"),
        (b"n,,auth=Bearer t\x01\x01", "must follow the GS2 header"),
        (b"n,,\x01auth=Bearer t\x01", "end with"),
        (b"n,,\x01\x01", "end with"),
        (b"n,,\x01auth=Bearer t\x01k1=v\x01\x01", "malformed key/value"),
        (b"n,,\x01auth=Bearer t\x01novalue\x01\x01", "malformed key/value"),
        (b"n,,\x01auth=Bearer t\x01k=\x01\x01", "value of 'k'"),
        (b"n,,\x01auth=Bearer t\x01k=\x00\x01\x01", "value of 'k'"),
        (b"n,,\x01auth=Bearer t\x01auth=Bearer u\x01\x01", "'auth' twice"),
        (b"n,,\x01host=h\x01\x01", "no 'auth'"),
        (b"n,,\x01auth=Basic dXNlcjpwdw==\x01\x01", "scheme 'Basic'"),
        (b"n,,\x01auth=Bearer\x01\x01", "not '<scheme> <token>'"),
        (b"n,,\x01auth=Bearer a b\x01\x01", "not '<scheme> <token>'"),
        ("n,,\x01auth=Bearer tök\x01\x01".encode(), "not ASCII"),
    ],
)
def test_malformed_messages_say_what_is_wrong(data: bytes, why: str) -> None:
    with pytest.raises(OAuthBearerError, match=why):
        parse_client_response(data)


# --- the unsecured validator ----------------------------------------------------------------------------------------


def test_unsecured_token_as_librdkafka_makes_it() -> None:
    token = unsecured({"sub": "alice", "iat": NOW_S - 10, "exp": NOW_S + 3600, "scope": ["a", "b"]})
    valid = UnsecuredValidator().validate(token, NOW)
    assert valid == ValidToken("alice", (NOW_S + 3600) * 1000, frozenset({"a", "b"}), (NOW_S - 10) * 1000)


@pytest.mark.parametrize(
    ("token", "why"),
    [
        (unsecured({"sub": "a", "exp": NOW_S}), "expired at 2027-01-15T08:00:00Z"),
        (unsecured({"sub": "a", "exp": NOW_S - 1}), "expired"),
        (unsecured({"sub": "a"}), "no 'exp' claim"),
        (unsecured({"sub": "a", "exp": "soon"}), "'exp' claim is not a number"),
        (unsecured({"sub": "a", "exp": True}), "'exp' claim is not a number"),
        (unsecured({"sub": "a", "exp": 10**400}), "'exp' claim is out of range"),
        (unsecured({"sub": "a", "exp": 1e300}), "'exp' claim is out of range"),
        (unsecured({"sub": "a", "exp": NOW_S + 60, "iat": -1e300}), "'iat' claim is out of range"),
        (unsecured({"exp": NOW_S + 60}), "no subject: no 'sub' claim"),
        (unsecured({"sub": " ", "exp": NOW_S + 60}), "subject claim 'sub' is not a non-empty string"),
        (unsecured({"sub": 7, "exp": NOW_S + 60}), "subject claim 'sub' is not a non-empty string"),
        (unsecured({"sub": "a", "exp": NOW_S + 60, "iat": NOW_S + 1}), "issued in the future"),
        (unsecured({"sub": "a", "exp": NOW_S + 60, "nbf": NOW_S + 1}), "not valid before"),
        (unsecured({"sub": "a", "exp": NOW_S + 60, "iat": NOW_S - 10, "nbf": NOW_S - 5}) + "x", "empty signature"),
        (unsecured({"sub": "a", "exp": NOW_S + 60}, {"alg": "RS256"}), "must have alg 'none'"),
        ("a.b", "2 dot-separated parts"),
        ("a.b.c.d", "4 dot-separated parts"),
        ("!!.e30.", "header is not base64url"),
        ("e30=x.e30.", "header is not base64url"),
        ("bm90IGpzb24.e30.", "header is not JSON"),
        ("W10.e30.", "header is not a JSON object"),
    ],
)
def test_unsecured_refusals_say_why(token: str, why: str) -> None:
    with pytest.raises(InvalidToken, match=why):
        UnsecuredValidator().validate(token, NOW)


def test_clock_skew_lets_a_just_expired_token_through() -> None:
    token = unsecured({"sub": "a", "exp": NOW_S - 5})
    with pytest.raises(InvalidToken):
        UnsecuredValidator().validate(token, NOW)
    assert UnsecuredValidator(clock_skew_ms=6000).validate(token, NOW).principal_name == "a"


# --- the JWKS validator ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def issuer() -> Issuer:
    return Issuer()


@pytest.fixture(scope="module")
def jwks_url(issuer: Issuer, tmp_path_factory: pytest.TempPathFactory) -> str:
    return issuer.write_jwks(tmp_path_factory.mktemp("jwks") / "jwks.json")


def validator(jwks_url: str, **kw: object) -> JwksValidator:
    return JwksValidator(load_jwks(jwks_url), **{"expected_issuer": ISSUER, "expected_audiences": frozenset({AUDIENCE}),
                                                 **kw})  # type: ignore[arg-type]  # fmt: skip


@pytest.mark.parametrize("key", ["rsa", "ec"])
def test_signed_token_validates(issuer: Issuer, jwks_url: str, key: str) -> None:
    token = issuer.sign(issuer.claims("alice", NOW_S, scope="produce consume"), key)
    valid = validator(jwks_url).validate(token, NOW)
    assert valid == ValidToken("alice", (NOW_S + 3600) * 1000, frozenset({"produce", "consume"}), NOW_S * 1000)


def test_audience_may_be_a_list_and_the_subject_another_claim(issuer: Issuer, jwks_url: str) -> None:
    token = issuer.sign({**issuer.claims("ignored", NOW_S), "aud": ["other", AUDIENCE], "client_id": "svc-1"})
    assert validator(jwks_url, sub_claim="client_id").validate(token, NOW).principal_name == "svc-1"


def test_without_a_kid_every_key_of_the_type_is_tried(issuer: Issuer, jwks_url: str) -> None:
    import jwt

    token = jwt.encode(issuer.claims("alice", NOW_S), issuer.ec, "ES256")
    assert validator(jwks_url).validate(token, NOW).principal_name == "alice"


@pytest.mark.parametrize(
    ("case", "why"),
    [
        ("expired", "the token expired at"),
        ("expired-beyond-skew", "the token expired at"),
        ("future-nbf", "not valid before"),
        ("no-iat", "no 'iat' claim"),
        ("no-exp", "no 'exp' claim"),
        ("no-sub", "no subject"),
        ("wrong-issuer", "issuer 'https://evil.test' is not the expected one 'https://issuer.test'"),
        ("no-issuer", "issuer None is not the expected one"),
        ("wrong-audience", "audience 'somebody-else' includes none of the expected \\['groupstream-test'\\]"),
        ("bad-signature", "signature \\(RS256\\) does not verify with the key 'rsa-1'"),
        ("unknown-kid", "no key in the JWKS file has kid 'nope'"),
        ("tampered", "signature \\(RS256\\) does not verify"),
        ("alg-none", "algorithm 'none' is not accepted"),
        ("hmac", "algorithm 'HS256' is not accepted"),
        ("garbage", "1 dot-separated parts, not 3"),
    ],
)
def test_signed_refusals_say_why(issuer: Issuer, jwks_url: str, case: str, why: str) -> None:
    import jwt

    claims = issuer.claims("alice", NOW_S)
    if case == "expired":
        token = issuer.sign(issuer.claims("alice", NOW_S - 3600, 3600 - 30))
    elif case == "expired-beyond-skew":
        token = issuer.sign(issuer.claims("alice", NOW_S - 3600, 3600 - 31))
    elif case == "future-nbf":
        token = issuer.sign({**claims, "nbf": NOW_S + 31})
    elif case in ("no-iat", "no-exp", "no-sub"):
        token = issuer.sign({k: v for k, v in claims.items() if k != case[3:]})
    elif case == "wrong-issuer":
        token = issuer.sign({**claims, "iss": "https://evil.test"})
    elif case == "no-issuer":
        token = issuer.sign({k: v for k, v in claims.items() if k != "iss"})
    elif case == "wrong-audience":
        token = issuer.sign({**claims, "aud": "somebody-else"})
    elif case == "bad-signature":
        token = issuer.sign(claims, "rogue")
    elif case == "unknown-kid":
        token = issuer.sign(claims, kid="nope")
    elif case == "tampered":
        head, body, sig = issuer.sign(claims).split(".")
        other = issuer.sign({**claims, "sub": "admin"}).split(".")[1]
        token = f"{head}.{other}.{sig}"
        assert body != other
    elif case == "alg-none":
        token = unsecured(claims)
    elif case == "hmac":
        token = jwt.encode(claims, "a shared secret of enough length for HS256!", "HS256")
    else:
        token = "not-a-jwt"
    with pytest.raises(InvalidToken, match=why):
        validator(jwks_url).validate(token, NOW)


def test_skew_30_seconds_by_default(issuer: Issuer, jwks_url: str) -> None:
    token = issuer.sign({**issuer.claims("alice", NOW_S), "nbf": NOW_S + 30})
    assert validator(jwks_url).validate(token, NOW).principal_name == "alice"
    with pytest.raises(InvalidToken, match="not valid before"):
        validator(jwks_url, clock_skew_ms=0).validate(token, NOW)


def test_no_expectations_no_checks_of_iss_and_aud(issuer: Issuer, jwks_url: str) -> None:
    token = issuer.sign({**issuer.claims("alice", NOW_S), "iss": "anyone", "aud": "anything"})
    assert JwksValidator(load_jwks(jwks_url)).validate(token, NOW).principal_name == "alice"


@pytest.mark.parametrize(
    ("content", "url", "why"),
    [
        (None, "https://issuer.test/jwks", "only file: URLs are supported"),
        (None, "file://host/x", "names host 'host'"),
        (None, "file:///does/not/exist.json", "cannot read the JWKS file /does/not/exist.json"),
        ("not json", None, "is not JSON"),
        ('{"keys": []}', None, "has no \"keys\" list"),
        ('{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}', None, "kty 'oct'"),
        ('{"keys": [{"kty": "RSA", "kid": "x"}]}', None, "key x cannot be read"),
        ('{"keys": [{"kty": "EC", "use": "enc"}]}', None, "for use 'enc'"),
    ],
)
def test_jwks_file_errors_name_the_file_and_the_problem(tmp_path: Path, content: str | None, url: str | None,
                                                       why: str) -> None:  # fmt: skip
    if content is not None:
        (tmp_path / "jwks.json").write_text(content)
        url = (tmp_path / "jwks.json").as_uri()
    assert url is not None
    with pytest.raises(JwksError, match=why):
        load_jwks(url)


# --- the exchange in the SASL session -------------------------------------------------------------------------------


class NoCreds:
    def scram_credential(self, user: str, mechanism: object) -> None:
        return None

    def credentials_of(self, user: str) -> list[object]:
        return []


def session(max_reauth_ms: int = 0, validator: object = None) -> SaslSession:
    return SaslSession(["OAUTHBEARER", "PLAIN"], max_reauth_ms, NoCreds(), lambda: "n",  # type: ignore[arg-type]
                       lambda m, u: stand_in_credential(b"k", m, u), validator or UnsecuredValidator())  # type: ignore[arg-type]  # fmt: skip


def login(s: SaslSession, token: str, now: int = NOW, version: int = 1, authzid: str = "") -> object:
    assert s.admit(17, "SaslHandshake", now).admission is Admission.HANDSHAKE
    assert s.handshake("OAUTHBEARER", 1).error_code == 0
    return s.authenticate(message(token, authzid), version, now)


def test_a_valid_token_authenticates_its_subject_for_its_lifetime() -> None:
    s = session()
    done = login(s, unsecured({"sub": "alice", "exp": NOW_S + 60}))
    assert done == Authenticated(b"", "User:alice", 60_000, False)
    assert s.admit(3, "Metadata", NOW + 59_999).admission is Admission.PASS
    verdict = s.admit(3, "Metadata", NOW + 60_000)
    assert verdict.admission is Admission.REJECT and "its token expired" in verdict.reason


@pytest.mark.parametrize(("max_reauth_ms", "lifetime"), [(0, 60_000), (10_000, 10_000), (120_000, 60_000)])
def test_session_lifetime_is_the_sooner_of_token_expiry_and_max_reauth(max_reauth_ms: int, lifetime: int) -> None:
    done = login(session(max_reauth_ms), unsecured({"sub": "alice", "exp": NOW_S + 60}))
    assert isinstance(done, Authenticated) and done.session_lifetime_ms == lifetime


def test_an_invalid_token_gets_the_json_error_then_fails_on_the_clients_ack() -> None:
    s = session()
    challenge = login(s, unsecured({"sub": "alice", "exp": NOW_S - 1}))
    assert isinstance(challenge, Challenge) and json.loads(challenge.token) == {"status": "invalid_token"}
    assert s.admit(36, "SaslAuthenticate", NOW).admission is Admission.AUTHENTICATE
    failed = s.authenticate(b"\x01", 1, NOW)
    assert isinstance(failed, AuthFailed)
    assert failed.client_message.startswith('{"status":"invalid_token"}: the token expired at')
    assert "the token expired" in failed.reason
    assert s.admit(3, "Metadata", NOW).admission is Admission.REJECT


def test_anything_but_the_ack_after_the_error_fails_too() -> None:
    s = session()
    assert isinstance(login(s, unsecured({"exp": NOW_S + 60})), Challenge)
    failed = s.authenticate(message(unsecured({"sub": "alice", "exp": NOW_S + 60})), 1, NOW)
    assert isinstance(failed, AuthFailed) and "no subject" in failed.client_message and "not \\x01" in failed.reason


def test_a_malformed_message_fails_at_once_with_kafkas_generic_answer() -> None:
    failed = login(session(), "x", authzid="")
    assert isinstance(failed, Challenge)  # "x" parses but is no token: the JSON error
    s = session()
    s.handshake("OAUTHBEARER", 1)
    failed = s.authenticate(b"n,,auth=Bearer x", 1, NOW)
    assert isinstance(failed, AuthFailed)
    assert failed.client_message == ("Authentication failed during authentication due to invalid credentials with "
                                     "SASL mechanism OAUTHBEARER")  # fmt: skip
    assert "must follow the GS2 header" in failed.reason


def test_the_authorization_id_must_be_the_tokens_subject() -> None:
    token = unsecured({"sub": "alice", "exp": NOW_S + 60})
    assert isinstance(login(session(), token, authzid="alice"), Authenticated)
    failed = login(session(), token, authzid="admin")
    assert isinstance(failed, AuthFailed)
    assert "authorization id (admin) that is different from the token's principal name (alice)" in failed.client_message


def test_reauthentication_with_a_new_token_of_the_same_subject_extends_the_session() -> None:
    s = session()
    assert isinstance(login(s, unsecured({"sub": "alice", "exp": NOW_S + 60})), Authenticated)
    later = NOW + 50_000
    again = login(s, unsecured({"sub": "alice", "exp": NOW_S + 120}), now=later)
    assert isinstance(again, Authenticated) and again.reauthenticated and again.session_lifetime_ms == 70_000
    assert s.admit(3, "Metadata", NOW + 100_000).admission is Admission.PASS
    other = login(s, unsecured({"sub": "mallory", "exp": NOW_S + 600}), now=NOW + 110_000)
    assert isinstance(other, AuthFailed) and "Cannot change principals" in other.client_message


def test_a_session_needs_a_validator_when_oauthbearer_is_enabled() -> None:
    with pytest.raises(ValueError, match="without a token validator"):
        SaslSession(["OAUTHBEARER"], 0, NoCreds(), lambda: "n", lambda m, u: stand_in_credential(b"k", m, u))  # type: ignore[arg-type]


def test_signed_session_end_to_end(issuer: Issuer, jwks_url: str) -> None:
    s = session(validator=validator(jwks_url))
    done = login(s, issuer.sign(issuer.claims("bob", NOW_S, 600)))
    assert done == Authenticated(b"", "User:bob", 600_000, False)


# --- properties -----------------------------------------------------------------------------------------------------


def listener_security(**props: str) -> object:
    c = BrokerConfig(data_dir=Path("unused"))
    c.apply({"listeners": "SASL_PLAINTEXT://127.0.0.1:9092", "sasl.enabled.mechanisms": "OAUTHBEARER,SCRAM-SHA-256",
             **props})  # fmt: skip
    (listener,) = c.resolve_listeners()
    assert listener.security is not None
    return listener.security.oauth


def test_jwks_properties_build_the_validator(jwks_url: str) -> None:
    v = listener_security(**{
        "sasl.oauthbearer.jwks.endpoint.url": jwks_url,
        "sasl.oauthbearer.expected.issuer": ISSUER,
        "listener.name.sasl_plaintext.sasl.oauthbearer.expected.audience": "a, b",
        "listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.clock.skew.seconds": "5",
        "sasl.oauthbearer.clock.skew.seconds": "99",
        "sasl.oauthbearer.sub.claim.name": "client_id",
        "sasl.oauthbearer.jwks.endpoint.refresh.ms": "3600000",  # Kafka's, for HTTP endpoints: accepted
    })  # fmt: skip
    assert isinstance(v, JwksValidator)
    assert (v.expected_issuer, v.expected_audiences, v.clock_skew_ms, v.sub_claim) == (
        ISSUER, frozenset({"a", "b"}), 5000, "client_id")  # fmt: skip
    assert len(v.keys) == 2


def test_kafkas_unsecured_handler_class_selects_unsecured_tokens() -> None:
    key = "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class"
    assert isinstance(listener_security(**{key: UNSECURED_CLASS}), UnsecuredValidator)
    # a global JWKS URL is for the other listeners
    assert isinstance(listener_security(**{key: UNSECURED_CLASS, "sasl.oauthbearer.jwks.endpoint.url": "file:///x"}),
                      UnsecuredValidator)  # fmt: skip


def test_a_client_that_ignores_the_error_is_closed_saying_why() -> None:
    """aiokafka takes the JSON error for success and sends its next request: the log says which token failed."""
    s = session()
    assert isinstance(login(s, unsecured({"sub": "alice", "exp": NOW_S - 1})), Challenge)
    verdict = s.admit(3, "Metadata", NOW)
    assert verdict.admission is Admission.REJECT
    assert "Metadata during SASL authentication (expected SaslAuthenticate) after its token was refused: the token " \
           "expired at" in verdict.reason  # fmt: skip


@pytest.mark.parametrize(
    ("props", "why"),
    [
        ({}, "OAUTHBEARER on listener SASL_PLAINTEXT needs sasl.oauthbearer.jwks.endpoint.url=file:///"),
        ({"sasl.oauthbearer.jwks.endpoint.url": "https://idp/jwks"}, "only file: URLs are supported"),
        ({"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": "com.example.Mine"},
         "'com.example.Mine' is not a validator this broker has"),
        ({"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": UNSECURED_CLASS,
          "listener.name.sasl_plaintext.sasl.oauthbearer.jwks.endpoint.url": "file:///x"}, "remove one"),
        ({"sasl.oauthbearer.jwks.endpoint.url": "JWKS", "sasl.oauthbearer.clock.skew.seconds": "-1"},
         "clock.skew.seconds must be at least 0"),
        ({"sasl.oauthbearer.jwks.endpoint.url": "JWKS", "sasl.oauthbearer.sub.claim.name": " "}, "is empty"),
        ({"sasl.oauthbearer.jwks.endpoint.url": "JWKS", "sasl.oauthbearer.jwks.endpoint.refresh.ms": "hourly"},
         "sasl.oauthbearer.jwks.endpoint.refresh.ms must be an integer"),
    ],
)  # fmt: skip
def test_property_mistakes_are_named(jwks_url: str, props: dict[str, str], why: str) -> None:
    props = {k: jwks_url if v == "JWKS" else v for k, v in props.items()}
    with pytest.raises(ConfigError, match=why):
        listener_security(**props)


def test_unknown_oauth_property_is_refused() -> None:
    c = BrokerConfig(data_dir=Path("unused"))
    with pytest.raises(ConfigError, match=r"unknown broker property 'sasl\.oauthbearer\.nonsense'"):
        c.apply({"sasl.oauthbearer.nonsense": "1"})


# --- fuzz -----------------------------------------------------------------------------------------------------------

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
VALID = [
    message(unsecured({"sub": "alice", "exp": NOW_S + 60})),
    b"n,a=alice,\x01auth=Bearer a.b.c\x01host=h\x01port=1\x01\x01",
    b"\x01",
]


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(VALID)))
    for _ in range(draw(st.integers(0, 6))):
        op = draw(st.sampled_from(["insert", "delete", "replace"]))
        pos = draw(st.integers(0, len(data)))
        byte = draw(st.sampled_from(b",=\x01\x00\xff .naBe=Aa+/"))
        if op == "insert":
            data.insert(pos, byte)
        elif data:
            pos = min(pos, len(data) - 1)
            if op == "delete":
                del data[pos]
            else:
                data[pos] = byte
    return bytes(data)


messages = st.one_of(st.binary(max_size=200), mutated())


@FUZZ
@given(messages)
def test_parser_raises_only_its_own_error(data: bytes) -> None:
    try:
        r = parse_client_response(data)
    except OAuthBearerError as e:
        assert str(e)
    else:
        assert r.token and "auth" not in r.extensions


@FUZZ
@given(st.one_of(st.text(max_size=120), st.builds(lambda d: d.decode("latin-1"), messages)))
def test_validators_raise_only_invalid_token(token: str) -> None:
    for v in (UnsecuredValidator(),):
        try:
            v.validate(token, NOW)
        except InvalidToken as e:
            assert str(e)


@FUZZ
@given(tokens=st.lists(messages, min_size=1, max_size=3), version=st.integers(0, 2))
def test_session_never_authenticates_garbage(tokens: list[bytes], version: int) -> None:
    s = session()
    s.handshake("OAUTHBEARER", 1)
    for token in tokens:
        outcome = s.authenticate(token, version, NOW)
        if isinstance(outcome, Authenticated):
            # only a well-formed message with a token that validates gets here, as the token's own subject
            valid = UnsecuredValidator().validate(parse_client_response(token).token, NOW)
            assert outcome.principal == f"User:{valid.principal_name}"
            return
        if isinstance(outcome, AuthFailed):
            assert outcome.client_message and outcome.reason
            return
        assert isinstance(outcome, Challenge) and json.loads(outcome.token) == {"status": "invalid_token"}


# --- Kafka's JAAS entry for the unsecured validator -----------------------------------------------------------------

JAAS_KEY = "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config"
HANDLER_KEY = "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class"


def test_jaas_entry_grammar() -> None:
    from groupstream.security.jaas import JaasEntry, parse_jaas

    entry = parse_jaas('org.example.Login  Required a="x y" b=z c="q\\"uote\\\\" ;')
    assert entry == JaasEntry("org.example.Login", "required", {"a": "x y", "b": "z", "c": 'q"uote\\'})
    assert "x y" not in repr(entry), "options may hold secrets"
    assert parse_jaas("m optional;").options == {}


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "must be '<LoginModule class> <flag>"),
        ("m required", "must be '<LoginModule class> <flag>"),
        ("m always;", "'always' after m is not a control flag"),
        ('m required a="x"', "must end with ';'"),
        ('m required a=;', "expected key=\"value\" or ';'"),
        ('m required a "x";', "expected key=\"value\" or ';'"),
        ('m required a="x;', "an unclosed quote"),
        ("m required; n required;", "more than one login module entry"),
    ],
)
def test_jaas_mistakes_are_named(text: str, why: str) -> None:
    from groupstream.security.jaas import JaasError, parse_jaas

    with pytest.raises(JaasError, match=why):
        parse_jaas(text)


def test_unsecured_validator_options_come_from_kafkas_jaas_entry() -> None:
    v = listener_security(**{HANDLER_KEY: UNSECURED_CLASS, JAAS_KEY: (
        'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="admin" '
        'unsecuredValidatorPrincipalClaimName="principal" unsecuredValidatorScopeClaimName="scp" '
        'unsecuredValidatorRequiredScope="LOGIN_TO_KAFKA other" unsecuredValidatorAllowableClockSkewMs="3000";')})  # fmt: skip
    assert v == UnsecuredValidator("principal", "scp", 3000, ("LOGIN_TO_KAFKA", "other"))
    assert listener_security(**{HANDLER_KEY: UNSECURED_CLASS}) == UnsecuredValidator()


@pytest.mark.parametrize(
    ("jaas", "why"),
    [
        ("org.example.Other required;", "names login module org.example.Other"),
        ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
         "unsecuredValidatorAllowableClockSkewMs=\"soon\";", "unsecuredValidatorAllowableClockSkewMs must be an integer"),
        ("OAuthBearerLoginModule", "must be '<LoginModule class> <flag>"),
    ],
)  # fmt: skip
def test_jaas_property_mistakes_are_named(jaas: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        listener_security(**{HANDLER_KEY: UNSECURED_CLASS, JAAS_KEY: jaas})


def test_a_missing_required_scope_answers_insufficient_scope() -> None:
    s = session(validator=UnsecuredValidator(required_scope=("LOGIN_TO_KAFKA",)))
    challenge = login(s, unsecured({"sub": "alice", "exp": NOW_S + 60, "scope": "read"}))
    assert isinstance(challenge, Challenge)
    assert challenge.token == b'{"status":"insufficient_scope", "scope":"[LOGIN_TO_KAFKA]"}'
    failed = s.authenticate(b"\x01", 1, NOW)
    assert isinstance(failed, AuthFailed) and failed.client_message.startswith(
        '{"status":"insufficient_scope", "scope":"[LOGIN_TO_KAFKA]"}: the token\'s scope [\'read\'] lacks \'LOGIN_TO_KAFKA\'')
    ok = login(session(validator=UnsecuredValidator(required_scope=("a",))),
               unsecured({"sub": "alice", "exp": NOW_S + 60, "scope": ["a", "b"]}))  # fmt: skip
    assert isinstance(ok, Authenticated)


@FUZZ
@given(st.one_of(st.text(max_size=120), st.builds(lambda d: d.decode("latin-1"), messages),
                 st.sampled_from(['m required a="x";', 'm required a=b c="d\\"e";']).map(lambda t: t[:-1] + '"')))  # fmt: skip
def test_jaas_parser_raises_only_its_own_error(text: str) -> None:
    from groupstream.security.jaas import JaasError, parse_jaas

    try:
        entry = parse_jaas(text)
    except JaasError as e:
        assert str(e)
    else:
        assert entry.module and entry.flag


claim_values = st.one_of(st.none(), st.booleans(), st.integers(-(10**20), 10**20), st.floats(), st.text(max_size=5),
                         st.lists(st.text(max_size=3), max_size=3), st.dictionaries(st.text(max_size=2), st.integers(),
                                                                                      max_size=2))  # fmt: skip
claim_sets = st.dictionaries(st.sampled_from(["sub", "exp", "iat", "nbf", "scope", "iss", "aud"]), claim_values)


@FUZZ
@given(claims=claim_sets, header=st.dictionaries(st.sampled_from(["alg", "kid", "typ"]), claim_values))
def test_unsecured_validator_on_any_claims(claims: dict[str, object], header: dict[str, object]) -> None:
    try:
        valid = UnsecuredValidator().validate(unsecured(claims, {"alg": "none", **header}), NOW)
    except InvalidToken as e:
        assert str(e)
    else:
        assert header.get("alg", "none") == "none" and valid.principal_name == str(claims["sub"]).strip()
        assert valid.expires_at_ms > NOW


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(claims=claim_sets)
def test_jwks_validator_on_any_signed_claims(issuer: Issuer, jwks_url: str, claims: dict[str, object]) -> None:
    try:
        valid = validator(jwks_url).validate(issuer.sign_any(claims), NOW)
    except InvalidToken as e:
        assert str(e)
    else:
        assert claims["iss"] == ISSUER and valid.expires_at_ms > NOW
