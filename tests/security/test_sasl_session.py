"""The per-connection SASL rules of Kafka's broker, with a manual clock: what is admitted when, handshakes,
failures, session lifetimes and re-authentication (KIP-368)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from groupstream.protocol.error_codes import ErrorCode
from groupstream.security.plain import check_password
from groupstream.security.sasl import (
    Admission,
    Authenticated,
    AuthFailed,
    Challenge,
    CheckPassword,
    SaslSession,
    SaslState,
)
from groupstream.security.scram import (
    ScramClient,
    ScramCredential,
    ScramMechanism,
    make_credential,
    stand_in_credential,
)

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
API_VERSIONS, HANDSHAKE, AUTHENTICATE, METADATA, PRODUCE = 18, 17, 36, 3, 0


class Creds:
    def __init__(self) -> None:
        self.users = {
            "alice": {SHA256: make_credential(SHA256, "alice-pw", b"a" * 16, 4096),
                      SHA512: make_credential(SHA512, "alice-pw", b"b" * 16, 4096)},
            "bob": {SHA256: make_credential(SHA256, "bob-pw", b"c" * 16, 4096)},
        }  # fmt: skip

    def scram_credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return self.users.get(user, {}).get(mechanism)

    def credentials_of(self, user: str) -> Sequence[tuple[ScramMechanism, ScramCredential]]:
        return sorted(self.users.get(user, {}).items(), key=lambda kv: kv[0].type_id)


def session(max_reauth_ms: int = 0, mechanisms: Sequence[str] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")) -> SaslSession:
    return SaslSession(mechanisms, max_reauth_ms, Creds(), lambda: "servernonce",
                       lambda m, u: stand_in_credential(b"secret", m, u))  # fmt: skip


def scram_login(s: SaslSession, user: str, password: str, now: int, version: int = 1,
                mechanism: ScramMechanism = SHA256) -> Authenticated | AuthFailed:  # fmt: skip
    assert s.admit(HANDSHAKE, "SaslHandshake", now).admission is Admission.HANDSHAKE
    assert s.handshake(mechanism.mechanism_name, 1).error_code == 0
    client = ScramClient(mechanism, user, password, "clientnonce")
    first = s.authenticate(client.first_message(), version, now)
    assert isinstance(first, Challenge)
    assert s.admit(AUTHENTICATE, "SaslAuthenticate", now).admission is Admission.AUTHENTICATE
    done = s.authenticate(client.final_message(first.token), version, now)
    assert isinstance(done, Authenticated | AuthFailed)
    if isinstance(done, Authenticated):
        client.check_server_final(done.token)
    return done


@pytest.mark.parametrize(
    ("api_key", "admission"),
    [(API_VERSIONS, Admission.PASS), (HANDSHAKE, Admission.HANDSHAKE), (AUTHENTICATE, Admission.REJECT),
     (METADATA, Admission.REJECT), (PRODUCE, Admission.REJECT)],
)  # fmt: skip
def test_before_authentication_only_api_versions_and_the_handshake(api_key: int, admission: Admission) -> None:
    verdict = session().admit(api_key, "X", 0)
    assert verdict.admission is admission
    if admission is Admission.REJECT:
        assert "before SaslHandshake" in verdict.reason or "before SASL authentication" in verdict.reason


def test_metadata_before_authentication_names_the_likely_mistake() -> None:
    reason = session().admit(METADATA, "Metadata", 0).reason
    assert "Metadata before SASL authentication" in reason and "security.protocol" in reason


def test_unsupported_mechanism_is_answered_then_fatal() -> None:
    s = session(mechanisms=("SCRAM-SHA-512",))
    result = s.handshake("PLAIN", 1)
    assert result.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert result.mechanisms == ("SCRAM-SHA-512",)
    assert result.failure and "'PLAIN' is not enabled" in result.failure
    assert s.state is SaslState.FAILED
    assert s.admit(API_VERSIONS, "ApiVersions", 0).admission is Admission.REJECT


def test_only_sasl_authenticate_during_the_exchange() -> None:
    s = session()
    s.handshake("SCRAM-SHA-256", 1)
    assert s.admit(METADATA, "Metadata", 0).admission is Admission.REJECT
    assert s.admit(HANDSHAKE, "SaslHandshake", 0).admission is Admission.REJECT
    assert s.admit(AUTHENTICATE, "SaslAuthenticate", 0).admission is Admission.AUTHENTICATE


def test_scram_login_gives_the_principal_and_admits_everything() -> None:
    s = session()
    done = scram_login(s, "alice", "alice-pw", 1000)
    assert isinstance(done, Authenticated)
    assert done.principal == "User:alice" and done.session_lifetime_ms == 0 and not done.reauthenticated
    assert s.authenticated and s.principal == "User:alice"
    for key in (METADATA, PRODUCE, API_VERSIONS):
        assert s.admit(key, "X", 10**12).admission is Admission.PASS  # no lifetime: never expires


def test_wrong_password_fails_with_kafkas_message_and_a_precise_reason() -> None:
    s = session()
    done = scram_login(s, "alice", "nope", 0, mechanism=SHA512)
    assert isinstance(done, AuthFailed)
    assert done.client_message == (
        "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"
    )
    assert "wrong password for user 'alice'" in done.reason
    assert s.state is SaslState.FAILED and s.user == "alice"
    assert s.admit(METADATA, "Metadata", 0).admission is Admission.REJECT


def test_plain_is_checked_against_the_scram_credentials() -> None:
    s = session()
    s.handshake("PLAIN", 1)
    outcome = s.authenticate(b"\x00bob\x00bob-pw", 1, 0)
    assert isinstance(outcome, CheckPassword)
    assert s.admit(METADATA, "Metadata", 0).admission is Admission.REJECT  # nothing while the check runs
    ok = check_password(outcome.login, outcome.credentials)
    assert ok
    done = s.password_checked(ok, 0)
    assert isinstance(done, Authenticated) and done.principal == "User:bob"


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (b"\x00bob\x00wrong", "Invalid username or password"),
        (b"\x00nobody\x00pw", "Invalid username or password"),
        (b"carol\x00bob\x00bob-pw", "authorization id that is different from username"),
        (b"bob\x00bob-pw", "expected 3 tokens, got 2"),
        (b"\x00\x00pw", "username not specified"),
        (b"\x00bob\x00", "password not specified"),
    ],
)
def test_plain_failures(token: bytes, message: str) -> None:
    s = session()
    s.handshake("PLAIN", 1)
    outcome = s.authenticate(token, 1, 0)
    if isinstance(outcome, CheckPassword):
        outcome = s.password_checked(check_password(outcome.login, outcome.credentials), 0)
    assert isinstance(outcome, AuthFailed) and message in outcome.client_message
    assert "pw" not in outcome.reason  # never a password in a log line


def test_handshake_v0_means_bare_tokens() -> None:
    s = session()
    s.handshake("SCRAM-SHA-256", 0)
    assert s.raw_tokens
    # bare tokens do not come as SaslAuthenticate requests
    assert s.admit(AUTHENTICATE, "SaslAuthenticate", 0).admission is Admission.REJECT


def test_session_lifetime_and_expiry() -> None:
    s = session(max_reauth_ms=1000)
    done = scram_login(s, "alice", "alice-pw", 5000)
    assert isinstance(done, Authenticated) and done.session_lifetime_ms == 1000
    assert s.expires_at_ms == 6000
    assert s.admit(METADATA, "Metadata", 5999).admission is Admission.PASS
    verdict = s.admit(METADATA, "Metadata", 6000)
    assert verdict.admission is Admission.REJECT
    assert "session of User:alice expired" in verdict.reason and "connections.max.reauth.ms=1000" in verdict.reason
    # a client able to re-authenticate may still do so after expiry
    assert s.admit(HANDSHAKE, "SaslHandshake", 7000).admission is Admission.HANDSHAKE


def test_reauthentication_renews_the_session() -> None:
    s = session(max_reauth_ms=1000)
    assert isinstance(scram_login(s, "alice", "alice-pw", 0), Authenticated)
    again = scram_login(s, "alice", "alice-pw", 900)
    assert isinstance(again, Authenticated) and again.reauthenticated
    assert s.expires_at_ms == 1900
    assert s.admit(METADATA, "Metadata", 1500).admission is Admission.PASS


def test_reauthentication_cannot_change_the_principal() -> None:
    s = session(max_reauth_ms=1000)
    scram_login(s, "alice", "alice-pw", 0)
    other = scram_login(s, "bob", "bob-pw", 10)
    assert isinstance(other, AuthFailed)
    assert "Cannot change principals during re-authentication from User:alice: User:bob" in other.client_message


def test_reauthentication_cannot_change_the_mechanism() -> None:
    s = session(max_reauth_ms=1000)
    scram_login(s, "alice", "alice-pw", 0)
    assert s.handshake("SCRAM-SHA-512", 1).error_code == 0  # Kafka answers the handshake, then fails
    failed = s.authenticate(b"n,,n=alice,r=x", 1, 10)
    assert isinstance(failed, AuthFailed) and "not supported for re-authentication" in failed.client_message


def test_a_client_that_used_saslauthenticate_v0_cannot_reauthenticate() -> None:
    """KIP-368: support is known from a SaslAuthenticate of v1 or later; a v0 client's SaslHandshake after
    authentication goes to the broker, which answers ILLEGAL_SASL_STATE."""
    s = session(max_reauth_ms=1000)
    scram_login(s, "alice", "alice-pw", 0, version=0)
    assert not s.supports_reauth
    assert s.admit(HANDSHAKE, "SaslHandshake", 10).admission is Admission.PASS
    assert s.admit(METADATA, "Metadata", 2000).admission is Admission.REJECT  # it still expires, as in Kafka


def test_unknown_mechanisms_are_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="GSSAPI"):
        session(mechanisms=("GSSAPI",))
