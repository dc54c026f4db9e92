"""One connection's SASL authentication, by the rules of Kafka's broker: pure (times and nonces come in).

The sequence a client follows, and what breaking it does:

- Before authentication only ApiVersions and SaslHandshake are accepted; anything else closes the connection
  (Kafka's ``InvalidRequestException``: a client configured with the wrong security protocol, usually).
- SaslHandshake names a mechanism. One that is not enabled gets UNSUPPORTED_SASL_MECHANISM and the list of
  enabled ones, then the connection closes. At v0 the tokens then travel as bare size-prefixed frames
  (``raw_tokens``), at v1 inside SaslAuthenticate requests.
- SaslAuthenticate carries each client token; only SaslAuthenticate is accepted until the exchange ends. A
  failed exchange answers SASL_AUTHENTICATION_FAILED (after ``connection.failed.authentication.delay.ms``, which
  is the caller's to apply) and the connection closes.
- OAUTHBEARER (`oauthbearer`): a token that does not validate is answered with RFC 7628's JSON error as a
  challenge; the client's ``\\x01`` reply then gets SASL_AUTHENTICATION_FAILED saying why.
- Once authenticated, the session lasts ``connections.max.reauth.ms`` (KIP-368; 0: for ever), and with
  OAUTHBEARER no longer than the token (Kafka's ``min(token expiry - now, connections.max.reauth.ms)``), which the
  SaslAuthenticate v1+ answer tells the client. A client that sent SaslAuthenticate v1 or later may
  re-authenticate by sending SaslHandshake again, with the same mechanism and as the same principal. A request
  other than that SaslHandshake arriving after the session expired closes the connection, as Kafka's broker
  checks on each request received (an idle connection is left to ``connections.max.idle.ms``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from groupstream.protocol.error_codes import ErrorCode
from groupstream.security.oauthbearer import (
    ERROR_ACK,
    GENERIC_FAILURE,
    INVALID_TOKEN_JSON,
    InvalidToken,
    OAuthBearerError,
    TokenValidator,
    parse_client_response,
)
from groupstream.security.plain import PlainError, PlainLogin, parse_plain
from groupstream.security.scram import ScramCredential, ScramError, ScramMechanism, ScramServer

__all__ = [
    "API_VERSIONS",
    "MECHANISMS",
    "SASL_AUTHENTICATE",
    "SASL_HANDSHAKE",
    "Admission",
    "AuthFailed",
    "Authenticated",
    "Challenge",
    "CheckPassword",
    "CredentialSource",
    "HandshakeResult",
    "SaslSession",
    "SaslState",
    "Verdict",
]

API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
"""The mechanisms this broker can enable (``sasl.enabled.mechanisms``)."""


class CredentialSource(Protocol):
    def scram_credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None: ...

    def credentials_of(self, user: str) -> Sequence[tuple[ScramMechanism, ScramCredential]]: ...


class SaslState(Enum):
    INITIAL = "waiting for SaslHandshake"
    AUTHENTICATING = "authenticating"
    CHECKING_PASSWORD = "checking a password"
    AUTHENTICATED = "authenticated"
    FAILED = "failed"


class Admission(Enum):
    PASS = "dispatch to the broker"
    HANDSHAKE = "a SaslHandshake for this session"
    AUTHENTICATE = "a SaslAuthenticate for this session"
    REJECT = "close the connection"


@dataclass(frozen=True, slots=True)
class Verdict:
    admission: Admission
    reason: str = ""


_PASS = Verdict(Admission.PASS)
_HANDSHAKE = Verdict(Admission.HANDSHAKE)
_AUTHENTICATE = Verdict(Admission.AUTHENTICATE)


@dataclass(frozen=True, slots=True)
class HandshakeResult:
    error_code: int
    mechanisms: tuple[str, ...]
    failure: str | None = None
    """Set when the connection must close once the answer is sent (for the log)."""


@dataclass(frozen=True, slots=True)
class Challenge:
    """The exchange goes on: send ``token`` and wait for the client's next one."""

    token: bytes


@dataclass(frozen=True, slots=True)
class Authenticated:
    token: bytes
    principal: str
    session_lifetime_ms: int
    reauthenticated: bool


@dataclass(frozen=True, slots=True)
class AuthFailed:
    client_message: str
    reason: str
    """For the broker's log: which user, what was wrong."""


@dataclass(frozen=True, slots=True)
class CheckPassword:
    """PLAIN: the caller checks ``login`` against ``credentials`` (a PBKDF2, off the event loop), then reports
    the result to `SaslSession.password_checked`."""

    login: PlainLogin
    credentials: Sequence[tuple[ScramMechanism, ScramCredential]]


AuthOutcome = Challenge | Authenticated | AuthFailed | CheckPassword


class SaslSession:
    def __init__(
        self,
        enabled: Sequence[str],
        max_reauth_ms: int,
        credentials: CredentialSource,
        new_nonce: Callable[[], str],
        unknown_user: Callable[[ScramMechanism, str], ScramCredential],
        oauth: TokenValidator | None = None,
    ) -> None:
        """``oauth``: how OAUTHBEARER tokens are validated (required when OAUTHBEARER is enabled)."""
        unknown = [m for m in enabled if m not in MECHANISMS]
        if unknown or not enabled:
            raise ValueError(f"unsupported SASL mechanisms {unknown} (supported: {', '.join(MECHANISMS)})")
        if "OAUTHBEARER" in enabled and oauth is None:
            raise ValueError("OAUTHBEARER is enabled without a token validator")
        self._oauth = oauth
        self._oauth_error: str | None = None  # why the token failed, once the JSON error was sent
        self._oauth_json = INVALID_TOKEN_JSON
        self._expiry_cause = ""
        self.enabled = tuple(enabled)
        self.max_reauth_ms = max_reauth_ms
        self._credentials = credentials
        self._new_nonce = new_nonce
        self._unknown_user = unknown_user
        self.state = SaslState.INITIAL
        self.mechanism: str | None = None
        self.principal: str | None = None
        self.user: str | None = None
        """The user named in the exchange under way or done (for log lines)."""
        self.expires_at_ms: int | None = None
        self.raw_tokens = False
        self.supports_reauth = False
        self.reauthenticating = False
        self._scram: ScramServer | None = None
        self._bad_reauth: str | None = None

    @property
    def authenticated(self) -> bool:
        """The connection may send any request (re-authenticating included: it was authenticated before)."""
        return self.state is SaslState.AUTHENTICATED

    def _what(self) -> str:
        return "re-authentication" if self.reauthenticating else "authentication"

    # --- what may arrive when -----------------------------------------------------------------------------

    def admit(self, api_key: int, api_name: str, now_ms: int) -> Verdict:
        state = self.state
        if state is SaslState.AUTHENTICATED:
            if api_key == SASL_HANDSHAKE and self.supports_reauth:
                return _HANDSHAKE
            if self.expires_at_ms is not None and now_ms >= self.expires_at_ms:
                return Verdict(
                    Admission.REJECT,
                    f"{api_name} after the SASL session of {self.principal} expired ({self._expiry_cause}) without "
                    f"re-authentication",
                )
            return _PASS
        if state is SaslState.INITIAL:
            if api_key == API_VERSIONS:
                return _PASS
            if api_key == SASL_HANDSHAKE:
                return _HANDSHAKE
            if api_key == SASL_AUTHENTICATE:
                return Verdict(Admission.REJECT, "SaslAuthenticate before SaslHandshake")
            return Verdict(
                Admission.REJECT,
                f"{api_name} before SASL authentication (only ApiVersions, SaslHandshake and SaslAuthenticate are "
                f"answered first: is the client configured with security.protocol=SASL_PLAINTEXT or SASL_SSL?)",
            )
        if state is SaslState.AUTHENTICATING:
            if api_key == SASL_AUTHENTICATE and not self.raw_tokens:
                return _AUTHENTICATE
            refused = "" if self._oauth_error is None else f" after its token was refused: {self._oauth_error}"
            return Verdict(
                Admission.REJECT, f"{api_name} during SASL {self._what()} (expected SaslAuthenticate){refused}"
            )
        if state is SaslState.CHECKING_PASSWORD:
            return Verdict(Admission.REJECT, f"{api_name} before SASL {self._what()} finished")
        return Verdict(Admission.REJECT, f"{api_name} after SASL {self._what()} failed")

    # --- the handshake ------------------------------------------------------------------------------------

    def handshake(self, mechanism: str, version: int) -> HandshakeResult:
        """Answer a SaslHandshake that `admit` let through."""
        if self.state not in (SaslState.INITIAL, SaslState.AUTHENTICATED):
            raise RuntimeError(f"SaslHandshake in state {self.state.name}")
        reauth = self.state is SaslState.AUTHENTICATED
        if mechanism not in self.enabled:
            self.state = SaslState.FAILED
            return HandshakeResult(
                ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                self.enabled,
                f"SASL mechanism {mechanism!r} is not enabled on this listener (enabled: {', '.join(self.enabled)})",
            )
        if reauth and version == 0:
            self.state = SaslState.FAILED
            return HandshakeResult(
                ErrorCode.ILLEGAL_SASL_STATE, self.enabled, "SaslHandshake v0 (bare tokens) to re-authenticate"
            )
        self.reauthenticating = reauth
        self._bad_reauth = None
        if reauth and mechanism != self.mechanism:
            self._bad_reauth = (
                f"SASL mechanism '{mechanism}' requested by client is not supported for re-authentication of "
                f"mechanism '{self.mechanism}'"
            )
        else:
            self.mechanism = mechanism
        self.raw_tokens = version == 0
        self._oauth_error = None
        scram = ScramMechanism.from_name(mechanism)
        self._scram = (
            None
            if scram is None
            else ScramServer(
                scram,
                lambda user: self._credentials.scram_credential(user, scram),
                self._new_nonce(),
                lambda user: self._unknown_user(scram, user),
            )
        )
        self.state = SaslState.AUTHENTICATING
        return HandshakeResult(ErrorCode.NONE, self.enabled)

    # --- the exchange -------------------------------------------------------------------------------------

    def authenticate(self, token: bytes, version: int, now_ms: int) -> AuthOutcome:
        """One client token (a SaslAuthenticate's bytes, or a bare frame after a v0 handshake)."""
        if self.state is not SaslState.AUTHENTICATING:
            raise RuntimeError(f"SASL token in state {self.state.name}")
        if version >= 1:
            self.supports_reauth = True  # Kafka: any SaslAuthenticate of v1 or later says so
        if self._bad_reauth is not None:
            return self._fail(self._bad_reauth, self._bad_reauth)
        scram = self._scram
        if scram is not None:
            try:
                reply = scram.step(token)
            except ScramError as e:
                self.user = scram.username
                return self._fail(
                    f"Authentication failed during {self._what()} due to invalid credentials with SASL mechanism "
                    f"{self.mechanism}",
                    str(e),
                )
            self.user = scram.username
            if scram.complete:
                assert scram.username is not None
                return self._complete(reply, scram.username, now_ms)
            return Challenge(reply)
        if self.mechanism == "OAUTHBEARER":
            return self._oauthbearer(token, now_ms)
        try:
            login = parse_plain(token)
        except PlainError as e:
            return self._fail(e.client_message, str(e))
        self.user = login.username
        self.state = SaslState.CHECKING_PASSWORD
        return CheckPassword(login, self._credentials.credentials_of(login.username))

    def _oauthbearer(self, token: bytes, now_ms: int) -> Challenge | Authenticated | AuthFailed:
        """RFC 7628 as Kafka's OAuthBearerSaslServer: one message with the token; a token that fails gets the
        JSON error as a challenge, and the exchange fails on the client's ``\\x01`` reply to it."""
        failed = self._oauth_error
        if failed is not None:
            self._oauth_error = None
            if token == ERROR_ACK:
                return self._fail(f"{self._oauth_json}: {failed}", f"invalid token: {failed}")
            return self._fail(
                f"{self._oauth_json}: {failed}",
                f"invalid token: {failed} (and the client answered the error with {len(token)} bytes, not \\x01)",
            )
        generic = GENERIC_FAILURE.replace("during authentication", f"during {self._what()}")
        try:
            response = parse_client_response(token)
        except OAuthBearerError as e:
            return self._fail(generic, str(e))
        assert self._oauth is not None
        try:
            valid = self._oauth.validate(response.token, now_ms)
        except InvalidToken as e:
            self._oauth_error = str(e)
            self._oauth_json = e.error_json()
            return Challenge(self._oauth_json.encode())
        self.user = valid.principal_name
        if response.authzid and response.authzid != valid.principal_name:
            message = (
                f"Authentication failed: Client requested an authorization id ({response.authzid}) that is "
                f"different from the token's principal name ({valid.principal_name})"
            )
            return self._fail(message, message)
        return self._complete(b"", valid.principal_name, now_ms, valid.expires_at_ms)

    def password_checked(self, ok: bool, now_ms: int) -> Authenticated | AuthFailed:
        if self.state is not SaslState.CHECKING_PASSWORD:
            raise RuntimeError(f"password check reported in state {self.state.name}")
        user = self.user
        assert user is not None
        if not ok:
            return self._fail(
                "Authentication failed: Invalid username or password",
                f"wrong password or unknown user {user!r}",
            )
        return self._complete(b"", user, now_ms)

    def _complete(
        self, token: bytes, user: str, now_ms: int, credential_expires_ms: int | None = None
    ) -> Authenticated | AuthFailed:
        """``credential_expires_ms``: when the credential itself expires (an OAUTHBEARER token); the session
        then ends no later, whatever ``connections.max.reauth.ms`` says (Kafka's SaslServerAuthenticator)."""
        principal = f"User:{user}"
        if self.reauthenticating and principal != self.principal:
            message = f"Cannot change principals during re-authentication from {self.principal}: {principal}"
            return self._fail(message, message)
        lifetime = max(0, self.max_reauth_ms)
        self.expires_at_ms = now_ms + lifetime if lifetime else None
        self._expiry_cause = f"connections.max.reauth.ms={self.max_reauth_ms}"
        if credential_expires_ms is not None:
            to_expiry = max(0, credential_expires_ms - now_ms)
            if not lifetime or to_expiry < lifetime:
                lifetime = to_expiry
                self._expiry_cause = "its token expired"
            self.expires_at_ms = now_ms + lifetime
        self.principal = principal
        self.state = SaslState.AUTHENTICATED
        self._scram = None
        return Authenticated(token, principal, lifetime, self.reauthenticating)

    def _fail(self, client_message: str, reason: str) -> AuthFailed:
        self.state = SaslState.FAILED
        self._scram = None
        return AuthFailed(client_message, reason)
