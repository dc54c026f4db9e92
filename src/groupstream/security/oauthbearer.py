"""SASL/OAUTHBEARER (RFC 7628, Kafka's KIP-255) on the broker side: pure (the clock comes in; keys are loaded once
by `load_jwks`).

The exchange, as Kafka's ``OAuthBearerSaslServer`` runs it:

- The client's one message is ``n,[a=<authzid>],\\x01auth=Bearer <token>\\x01[key=value\\x01...]\\x01`` (a GS2
  header, then key/value pairs). A message that does not parse fails at once with Kafka's generic
  "invalid credentials" answer.
- A token that fails validation is answered with a *challenge*, RFC 7628's JSON error
  (``{"status":"invalid_token"}``); the client must reply ``\\x01``, and only then does the exchange fail. Kafka puts
  the JSON itself in the SASL_AUTHENTICATION_FAILED message; we put it first and say after it what was wrong
  (expired, wrong audience, bad signature...): the token is the client's own, and the one thing its operator needs.
- A valid token authenticates ``User:<the subject claim>``; a client-given authorization id must be that name.
  The session lasts until the token expires (and no longer than ``connections.max.reauth.ms``), as Kafka computes
  it (KIP-368): the caller reads `ValidToken.expires_at_ms`.

Two validators, as Kafka's two callback handlers:

- `JwksValidator` (``OAuthBearerValidatorCallbackHandler``): a signed JWT whose signature verifies with a key of a
  JWKS file (``sasl.oauthbearer.jwks.endpoint.url=file:...``), ``exp`` and ``iat`` present, ``exp``/``nbf`` checked
  with ``sasl.oauthbearer.clock.skew.seconds``, ``iss`` and ``aud`` when ``sasl.oauthbearer.expected.issuer`` /
  ``.expected.audience`` are set. Signatures are checked by PyJWT (and ``cryptography``); ``alg: none`` and the
  HMAC algorithms (which would need the key to be a shared secret) are refused.
- `UnsecuredValidator` (``OAuthBearerUnsecuredValidatorCallbackHandler``), for tests only: an unsigned JWT
  (``alg: none``, empty signature) with a subject and an ``exp``, as librdkafka's
  ``sasl.oauthbearer.config=principal=...`` and Kafka's unsecured login module make them.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote, urlparse

__all__ = [
    "ERROR_ACK",
    "GENERIC_FAILURE",
    "INVALID_TOKEN_JSON",
    "ClientResponse",
    "InvalidToken",
    "JwksError",
    "JwksValidator",
    "OAuthBearerError",
    "TokenValidator",
    "UnsecuredValidator",
    "ValidToken",
    "load_jwks",
    "parse_client_response",
]

ERROR_ACK = b"\x01"
"""The client's answer to the server's JSON error (RFC 7628 section 3.2.3)."""

INVALID_TOKEN_JSON = '{"status":"invalid_token"}'
"""RFC 7628's error for a token that did not validate, in Kafka's spelling (no spaces)."""

GENERIC_FAILURE = "Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER"
"""What Kafka tells a client whose message did not parse (the parser's reason stays in the broker's log)."""

# Kafka's OAuthBearerClientInitialResponse grammar (RFC 7628 section 3.1, with Kafka's token characters)
_SEP = "\x01"
_SASLNAME = re.compile(r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+")
_KEY = re.compile(r"[A-Za-z]+")
_VALUE = re.compile(r"[\x21-\x7e \t\r\n]+")
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)", re.ASCII)


class OAuthBearerError(Exception):
    """A client message that does not follow RFC 7628; the message says what is wrong (for the broker's log)."""


@dataclass(frozen=True, slots=True)
class ClientResponse:
    token: str
    authzid: str
    extensions: Mapping[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:  # the token is a credential: never print it
        return f"ClientResponse(authzid={self.authzid!r}, extensions={sorted(self.extensions)!r})"


def parse_client_response(message: bytes) -> ClientResponse:
    """The client's initial response: the GS2 header, then ``key=value`` pairs each ended by ``\\x01``, then one
    more ``\\x01``. ``auth`` must be ``Bearer <token>``; the other keys are SASL extensions (KIP-342), which must
    follow RFC 7628's syntax and may not repeat."""
    try:
        text = message.decode("ascii")
    except UnicodeDecodeError:
        raise OAuthBearerError("the OAUTHBEARER message is not ASCII") from None
    flag, sep, rest = text.partition(",")
    if not sep:
        raise OAuthBearerError("the OAUTHBEARER message has no GS2 header (it must start with 'n,,')")
    if flag != "n":
        if flag == "y" or flag.startswith("p="):
            raise OAuthBearerError(f"the OAUTHBEARER message asks for channel binding ({flag!r}), which OAUTHBEARER "
                                   f"does not offer (the GS2 header must start with 'n,')")  # fmt: skip
        raise OAuthBearerError(f"the OAUTHBEARER message starts with {flag!r}, not a GS2 header ('n,,')")
    authz, sep, body = rest.partition(",")
    if not sep:
        raise OAuthBearerError("the OAUTHBEARER message's GS2 header is not ended by ','")
    authzid = ""
    if authz:
        if not authz.startswith("a=") or not _SASLNAME.fullmatch(authz[2:]):
            raise OAuthBearerError(f"the OAUTHBEARER message's GS2 header has a malformed authorization id {authz!r}")
        authzid = authz[2:].replace("=2C", ",").replace("=3D", "=")
    if not body.startswith(_SEP) or not body.endswith(_SEP + _SEP) or len(body) < 3:
        raise OAuthBearerError("the OAUTHBEARER message's key/value pairs must follow the GS2 header after \\x01 "
                               "and end with \\x01\\x01")  # fmt: skip
    pairs: dict[str, str] = {}
    for item in body[1:-2].split(_SEP):
        key, eq, value = item.partition("=")
        if not eq or not _KEY.fullmatch(key):
            raise OAuthBearerError(f"the OAUTHBEARER message has a malformed key/value pair {item[:40]!r} (keys are "
                                   f"letters, followed by '=')")  # fmt: skip
        if not _VALUE.fullmatch(value):
            raise OAuthBearerError(f"the OAUTHBEARER message's value of {key!r} is empty or has control characters")
        if key in pairs:
            raise OAuthBearerError(f"the OAUTHBEARER message has {key!r} twice")
        pairs[key] = value
    auth = pairs.pop("auth", None)
    if auth is None:
        raise OAuthBearerError("the OAUTHBEARER message has no 'auth' key (auth=Bearer <token>)")
    m = _AUTH.fullmatch(auth)
    if m is None:
        raise OAuthBearerError("the OAUTHBEARER message's 'auth' is not '<scheme> <token>' with a base64url token")
    if m["scheme"].lower() != "bearer":
        raise OAuthBearerError(f"the OAUTHBEARER message's 'auth' has scheme {m['scheme']!r}, not Bearer")
    return ClientResponse(m["token"], authzid, pairs)


# --- tokens ------------------------------------------------------------------------------------------------------


class InvalidToken(Exception):
    """The token did not validate; the message says why (it is told to the client after the JSON error).
    ``status`` and ``scope`` are RFC 7628's error fields (``insufficient_scope`` names the scope required)."""

    def __init__(self, reason: str, status: str = "invalid_token", scope: Sequence[str] | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.scope = scope

    def error_json(self) -> str:
        """RFC 7628's error, as Kafka's OAuthBearerSaslServer writes it."""
        text = f'{{"status":"{self.status}"'
        if self.scope is not None:
            text += f', "scope":"[{", ".join(self.scope)}]"'
        return text + "}"


@dataclass(frozen=True, slots=True)
class ValidToken:
    principal_name: str
    expires_at_ms: int
    scope: frozenset[str] = frozenset()
    issued_at_ms: int | None = None


class TokenValidator(Protocol):
    """What a listener's OAUTHBEARER validates tokens with (Kafka's validator callback handler)."""

    def validate(self, token: str, now_ms: int) -> ValidToken: ...


def _b64url(part: str, what: str) -> bytes:
    if "=" in part.rstrip("=") or "+" in part or "/" in part:
        raise InvalidToken(f"the token's {what} is not base64url")
    try:
        return base64.b64decode(part.rstrip("=") + "=" * (-len(part.rstrip("=")) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise InvalidToken(f"the token's {what} is not base64url") from None


def _json_object(part: str, what: str) -> dict[str, Any]:
    raw = _b64url(part, what)
    try:
        value = json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise InvalidToken(f"the token's {what} is not JSON") from None
    if not isinstance(value, dict):
        raise InvalidToken(f"the token's {what} is not a JSON object")
    return value


def _split(token: str) -> tuple[str, str, str]:
    parts = token.split(".")
    if len(parts) != 3:
        raise InvalidToken(f"the token is not a JWS in compact form (it has {len(parts)} dot-separated parts, not 3)")
    return parts[0], parts[1], parts[2]


def _number(claims: Mapping[str, Any], name: str, required: bool) -> float | None:
    value = claims.get(name)
    if value is None:
        if required:
            raise InvalidToken(f"the token has no '{name}' claim")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidToken(f"the token's '{name}' claim is not a number of seconds: {value!r}")
    try:
        seconds = float(value)
    except OverflowError:
        seconds = math.inf
    if not math.isfinite(seconds) or abs(seconds) > _MAX_SECONDS:
        raise InvalidToken(f"the token's '{name}' claim is out of range: {str(value)[:40]}")
    return seconds


_MAX_SECONDS = 2**53 / 1000
"""Times beyond this many seconds (about 285,000 years) are refused: their milliseconds would not fit the int64
fields (SaslAuthenticate's session lifetime) they end up in."""


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def _subject(claims: Mapping[str, Any], claim: str) -> str:
    value = claims.get(claim)
    if value is None:
        raise InvalidToken(f"the token has no subject: no '{claim}' claim (sasl.oauthbearer.sub.claim.name)")
    if not isinstance(value, str) or not value.strip():
        raise InvalidToken(f"the token's subject claim '{claim}' is not a non-empty string: {value!r}")
    return value.strip()


def _scope(claims: Mapping[str, Any], claim: str) -> frozenset[str]:
    value = claims.get(claim)
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list):
        return frozenset(s.strip() for s in value if isinstance(s, str) and s.strip())
    return frozenset()


def _when(ms: float) -> str:
    try:
        return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return f"{ms:.0f} ms"


def _check_times(claims: Mapping[str, Any], now_ms: int, skew_ms: int, require_iat: bool) -> tuple[int, int | None]:
    """``exp`` (required), ``iat`` and ``nbf``, each against ``now_ms`` with ``skew_ms`` of leeway; returns the
    expiry and the issue time in milliseconds."""
    exp = _number(claims, "exp", True)
    assert exp is not None
    iat = _number(claims, "iat", require_iat)
    nbf = _number(claims, "nbf", False)
    exp_ms = _ms(exp)
    if now_ms - skew_ms >= exp_ms:
        raise InvalidToken(f"the token expired at {_when(exp_ms)} (exp); it is now {_when(now_ms)}, allowing "
                           f"{skew_ms // 1000} s of clock skew")  # fmt: skip
    if nbf is not None and _ms(nbf) > now_ms + skew_ms:
        raise InvalidToken(f"the token is not valid before {_when(_ms(nbf))} (nbf); it is now {_when(now_ms)}, "
                           f"allowing {skew_ms // 1000} s of clock skew")  # fmt: skip
    if iat is not None and _ms(iat) > now_ms + skew_ms:
        raise InvalidToken(f"the token was issued in the future, at {_when(_ms(iat))} (iat); it is now "
                           f"{_when(now_ms)}, allowing {skew_ms // 1000} s of clock skew")  # fmt: skip
    if iat is not None and exp <= iat:
        raise InvalidToken(f"the token expires (exp {exp}) no later than it was issued (iat {iat})")
    return exp_ms, None if iat is None else _ms(iat)


@dataclass(frozen=True, slots=True)
class UnsecuredValidator:
    """Kafka's ``OAuthBearerUnsecuredValidatorCallbackHandler``: unsigned tokens, for tests and development only
    (anyone can write one naming any principal). ``exp`` is required; ``iat`` and ``nbf`` are checked when present."""

    sub_claim: str = "sub"
    scope_claim: str = "scope"
    clock_skew_ms: int = 0
    required_scope: tuple[str, ...] = ()

    def validate(self, token: str, now_ms: int) -> ValidToken:
        head, body, signature = _split(token)
        header = _json_object(head, "header")
        if header.get("alg") != "none":
            raise InvalidToken(f"an unsecured token must have alg 'none', this one has {header.get('alg')!r} (this "
                               f"listener validates unsecured tokens only)")  # fmt: skip
        if signature:
            raise InvalidToken("an unsecured token (alg 'none') must have an empty signature")
        claims = _json_object(body, "claims")
        expires, issued = _check_times(claims, now_ms, self.clock_skew_ms, require_iat=False)
        valid = ValidToken(_subject(claims, self.sub_claim), expires, _scope(claims, self.scope_claim), issued)
        missing = [s for s in self.required_scope if s not in valid.scope]
        if missing:
            raise InvalidToken(f"the token's scope {sorted(valid.scope)} lacks {missing[0]!r} (required: "
                               f"{' '.join(self.required_scope)})", "insufficient_scope", self.required_scope)  # fmt: skip
        return valid


# --- JWKS ---------------------------------------------------------------------------------------------------------

SIGNATURE_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
"""The public-key algorithms a token may be signed with (what jose4j accepts under Kafka, less none and HMAC)."""


class JwksError(ValueError):
    """The JWKS file cannot be used; the message names the file and what is wrong."""


def jwks_path(url: str) -> Path:
    """The file a ``file:`` URL names (``file:/abs``, ``file:///abs``; Kafka reads JWKS files from such URLs)."""
    parsed = urlparse(url)
    if parsed.scheme != "file":
        raise JwksError(f"sasl.oauthbearer.jwks.endpoint.url {url!r}: only file: URLs are supported (this broker does "
                        f"not fetch keys over the network); save the provider's JWKS to a file and give file:///path")  # fmt: skip
    if parsed.netloc not in ("", "localhost"):
        raise JwksError(f"sasl.oauthbearer.jwks.endpoint.url {url!r} names host {parsed.netloc!r}: a file URL is "
                        f"file:///absolute/path")  # fmt: skip
    path = unquote(parsed.path)
    if not path:
        raise JwksError(f"sasl.oauthbearer.jwks.endpoint.url {url!r} has no path")
    return Path(path)


def load_jwks(url: str) -> tuple[dict[str, Any], ...]:
    """The public keys of the JWKS file ``url`` names, each checked to be usable (RSA, EC or OKP; no private
    parts needed)."""
    path = jwks_path(url)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise JwksError(f"cannot read the JWKS file {path} (sasl.oauthbearer.jwks.endpoint.url): {e.strerror or e}") from None
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise JwksError(f"the JWKS file {path} is not JSON: {e}") from None
    keys = doc.get("keys") if isinstance(doc, dict) else None
    if not isinstance(keys, list) or not keys:
        raise JwksError(f"the JWKS file {path} has no \"keys\" list (a JWK Set, RFC 7517 section 5)")
    usable: list[dict[str, Any]] = []
    problems: list[str] = []
    for i, jwk in enumerate(keys):
        name = jwk.get("kid", f"#{i}") if isinstance(jwk, dict) else f"#{i}"
        if not isinstance(jwk, dict):
            problems.append(f"key {name} is not an object")
        elif jwk.get("kty") not in ("RSA", "EC", "OKP"):
            problems.append(f"key {name} has kty {jwk.get('kty')!r} (RSA, EC or OKP public keys only)")
        elif jwk.get("use") not in (None, "sig"):
            problems.append(f"key {name} is for use {jwk.get('use')!r}, not sig")
        else:
            try:
                _pyjwk(jwk, None)
            except Exception as e:  # PyJWT's key errors
                problems.append(f"key {name} cannot be read: {e}")
            else:
                usable.append(jwk)
    if not usable:
        raise JwksError(f"the JWKS file {path} has no usable signature key: {'; '.join(problems)}")
    return tuple(usable)


def _pyjwk(jwk: Mapping[str, Any], algorithm: str | None) -> Any:
    try:
        import jwt
    except ImportError:
        raise JwksError("OAUTHBEARER with a JWKS file needs PyJWT: pip install 'groupstream[security]'") from None
    return jwt.PyJWK(dict(jwk), algorithm)


_KTY = {"RS": "RSA", "PS": "RSA", "ES": "EC", "Ed": "OKP"}


@dataclass
class JwksValidator:
    """Kafka's ``OAuthBearerValidatorCallbackHandler`` (its ``BrokerJwtValidator``) with a JWKS file."""

    keys: Sequence[Mapping[str, Any]]
    expected_issuer: str | None = None
    expected_audiences: frozenset[str] = frozenset()
    clock_skew_ms: int = 30_000
    sub_claim: str = "sub"
    scope_claim: str = "scope"
    source: str = "the JWKS file"
    _cache: dict[tuple[int, str], Any] = field(default_factory=dict, repr=False)

    def validate(self, token: str, now_ms: int) -> ValidToken:
        head, _, _ = _split(token)
        header = _json_object(head, "header")
        alg = header.get("alg")
        if alg not in SIGNATURE_ALGORITHMS:
            raise InvalidToken(f"the token's algorithm {alg!r} is not accepted (a signed token: "
                               f"{', '.join(SIGNATURE_ALGORITHMS)})")  # fmt: skip
        assert isinstance(alg, str)
        payload = self._verify(token, header, alg)
        try:
            claims = json.loads(payload)
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise InvalidToken("the token's claims are not JSON") from None
        if not isinstance(claims, dict):
            raise InvalidToken("the token's claims are not a JSON object")
        expires, issued = _check_times(claims, now_ms, self.clock_skew_ms, require_iat=True)
        if self.expected_issuer is not None and claims.get("iss") != self.expected_issuer:
            raise InvalidToken(f"the token's issuer {claims.get('iss')!r} is not the expected one "
                               f"{self.expected_issuer!r} (sasl.oauthbearer.expected.issuer)")  # fmt: skip
        if self.expected_audiences:
            aud = claims.get("aud")
            auds = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
            if not any(isinstance(a, str) and a in self.expected_audiences for a in auds):
                raise InvalidToken(f"the token's audience {aud!r} includes none of the expected "
                                   f"{sorted(self.expected_audiences)} (sasl.oauthbearer.expected.audience)")  # fmt: skip
        return ValidToken(_subject(claims, self.sub_claim), expires, _scope(claims, self.scope_claim), issued)

    def _verify(self, token: str, header: Mapping[str, Any], alg: str) -> bytes:
        import jwt

        kid = header.get("kid")
        kty = _KTY[alg[:2]]
        candidates = [
            (i, k) for i, k in enumerate(self.keys)
            if k.get("kty") == kty and (kid is None or k.get("kid") == kid) and k.get("alg") in (None, alg)
        ]  # fmt: skip
        if not candidates:
            kids = sorted(str(k.get("kid")) for k in self.keys)
            which = f"kid {kid!r} and " if kid is not None else ""
            raise InvalidToken(f"no key in {self.source} has {which}type {kty} for algorithm {alg} (its keys: "
                               f"{', '.join(kids)})")  # fmt: skip
        for i, jwk in candidates:
            key = self._cache.get((i, alg))
            if key is None:
                try:
                    key = self._cache[(i, alg)] = _pyjwk(jwk, alg)
                except Exception:  # PyJWT's key errors: this key cannot do this algorithm (an EC curve mismatch)
                    continue
            try:
                decoded = jwt.PyJWS().decode_complete(token, key=key, algorithms=[alg])
            except jwt.InvalidSignatureError:
                continue
            except jwt.DecodeError as e:
                raise InvalidToken(f"the token cannot be decoded: {e}") from None
            payload = decoded["payload"]
            assert isinstance(payload, bytes)
            return payload
        which = f"the key {kid!r}" if kid is not None else f"any {kty} key"
        raise InvalidToken(f"the token's signature ({alg}) does not verify with {which} of {self.source}")
