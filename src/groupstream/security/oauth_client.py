"""SASL/OAUTHBEARER on the client side (RFC 7628, Kafka's KIP-255): where tokens come from, and the one message
that carries them.

Three sources, as librdkafka (and so confluent-kafka) offers them:

- ``oauth_cb``: the application's function, called with ``sasl.oauthbearer.config`` and returning
  ``(token, expiry_epoch_seconds)`` or ``(token, expiry, principal[, extensions])``, as confluent-kafka calls it;
- ``sasl.oauthbearer.method=oidc``: the OAuth 2 client credentials grant (RFC 6749 section 4.4) against
  ``sasl.oauthbearer.token.endpoint.url`` with ``sasl.oauthbearer.client.id``/``.client.secret`` (HTTP basic
  authentication) and ``sasl.oauthbearer.scope``, answered with ``access_token`` and ``expires_in``;
- the unsecured builder (``enable.sasl.oauthbearer.unsecure.jwt=true`` with ``sasl.oauthbearer.config``
  ``principal=NAME [scope=A,B] [lifeSeconds=N] [extension_K=V]...``), an unsigned JWT for brokers that run Kafka's
  unsecured validator: tests only.

A `TokenCache` keeps the current token and asks its source again once 80% of the token's lifetime has passed
(librdkafka's rule), so a re-authentication (KIP-368: the broker ends the session when the token expires, and the
connection re-authenticates at 85% of it) always presents a fresh token. Getting a token may do I/O (the
application's function, an HTTP request); it happens when a connection authenticates, on the network thread, as
librdkafka's does. The parts that do not (`unsecured_token`, `client_message`, `token_subject`,
`parse_token_response`, the cache's rule) are pure and take the time as an argument.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CallbackSource",
    "OAuthConfigError",
    "OAuthToken",
    "OAuthTokenError",
    "OidcSource",
    "TokenCache",
    "UnsecuredSource",
    "client_message",
    "parse_token_response",
    "parse_unsecured_config",
    "token_subject",
    "unsecured_token",
]

REFRESH_AT = 0.8
"""The share of a token's lifetime after which the next authentication gets a new one."""
_EXTENSION_KEY = re.compile(r"[A-Za-z]+")
_EXTENSION_VALUE = re.compile(r"[\x21-\x7E \t\r\n]+")


class OAuthConfigError(ValueError):
    """A ``sasl.oauthbearer.*`` setting is wrong; the message names it."""


class OAuthTokenError(Exception):
    """No token could be had (the callback failed or returned nonsense, the token endpoint refused)."""


@dataclass(frozen=True)
class OAuthToken:
    value: str
    expires_at_ms: int
    principal: str
    extensions: Mapping[str, str] = field(default_factory=dict)
    issued_at_ms: int = 0

    def __repr__(self) -> str:  # never print the token
        return f"OAuthToken(principal={self.principal!r}, expires_at_ms={self.expires_at_ms})"

    def due_for_refresh(self, now_ms: int) -> bool:
        start = self.issued_at_ms or now_ms
        return now_ms >= start + (self.expires_at_ms - start) * REFRESH_AT


def client_message(token: OAuthToken) -> bytes:
    """The client's one OAUTHBEARER message: ``n,,\\x01auth=Bearer <token>\\x01[key=value\\x01...]\\x01``."""
    pairs = [f"auth=Bearer {token.value}", *(f"{k}={v}" for k, v in sorted(token.extensions.items()))]
    return ("n,,\x01" + "".join(p + "\x01" for p in pairs) + "\x01").encode("ascii")


def token_subject(token: str) -> str | None:
    """The ``sub`` claim of a JWT, read without checking anything (for messages only: the broker validates)."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, binascii.Error):
        return None
    sub = claims.get("sub") if isinstance(claims, dict) else None
    return sub if isinstance(sub, str) else None


def _check_extensions(extensions: Mapping[str, str], where: str) -> dict[str, str]:
    for k, v in extensions.items():
        if k == "auth" or not _EXTENSION_KEY.fullmatch(k) or not _EXTENSION_VALUE.fullmatch(v):
            raise OAuthConfigError(f"{where}: SASL extension {k!r}={v!r} is not allowed (keys are letters, not "
                                   f"'auth'; values printable)")  # fmt: skip
    return dict(extensions)


# --- the unsecured builder (tests) ----------------------------------------------------------------------------


@dataclass(frozen=True)
class UnsecuredConfig:
    principal: str
    principal_claim: str = "sub"
    scope: tuple[str, ...] = ()
    scope_claim: str = "scope"
    life_s: int = 3600
    extensions: Mapping[str, str] = field(default_factory=dict)


def parse_unsecured_config(text: str) -> UnsecuredConfig:
    """librdkafka's ``sasl.oauthbearer.config`` for its unsecured builder: space-separated ``key=value``."""
    values: dict[str, str] = {}
    extensions: dict[str, str] = {}
    for item in text.split():
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise OAuthConfigError(f"sasl.oauthbearer.config: expected key=value, got {item!r}")
        if key.startswith("extension_"):
            extensions[key.removeprefix("extension_")] = value
        elif key in ("principal", "principalClaimName", "scope", "scopeClaimName", "lifeSeconds"):
            values[key] = value
        else:
            raise OAuthConfigError(f"sasl.oauthbearer.config: unknown key {key!r} (principal, principalClaimName, "
                                   f"scope, scopeClaimName, lifeSeconds, extension_NAME)")  # fmt: skip
    if not values.get("principal"):
        raise OAuthConfigError("sasl.oauthbearer.config needs principal=NAME for the unsecured token")
    try:
        life = int(values.get("lifeSeconds", "3600"))
    except ValueError:
        raise OAuthConfigError(f"sasl.oauthbearer.config: lifeSeconds must be a number, got {values['lifeSeconds']!r}") from None
    if life <= 0:
        raise OAuthConfigError(f"sasl.oauthbearer.config: lifeSeconds must be positive, got {life}")
    return UnsecuredConfig(
        principal=values["principal"],
        principal_claim=values.get("principalClaimName", "sub"),
        scope=tuple(s for s in values.get("scope", "").split(",") if s),
        scope_claim=values.get("scopeClaimName", "scope"),
        life_s=life,
        extensions=_check_extensions(extensions, "sasl.oauthbearer.config"),
    )


def _b64(data: Mapping[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode()).rstrip(b"=").decode()


def unsecured_token(config: UnsecuredConfig, now_ms: int) -> OAuthToken:
    """An unsigned JWT (``alg: none``) as librdkafka's unsecured builder makes it."""
    iat = now_ms // 1000
    claims: dict[str, Any] = {config.principal_claim: config.principal, "iat": iat, "exp": iat + config.life_s}
    if config.scope:
        claims[config.scope_claim] = list(config.scope)
    value = f"{_b64({'alg': 'none'})}.{_b64(claims)}."
    return OAuthToken(value, (iat + config.life_s) * 1000, config.principal, config.extensions, iat * 1000)


# --- sources --------------------------------------------------------------------------------------------------

TokenSource = Callable[[int], OAuthToken]
"""Gives a new token; takes the wall-clock time in milliseconds."""


@dataclass(frozen=True)
class UnsecuredSource:
    config: UnsecuredConfig

    def __call__(self, now_ms: int) -> OAuthToken:
        return unsecured_token(self.config, now_ms)


@dataclass(frozen=True)
class CallbackSource:
    """The application's ``oauth_cb(sasl.oauthbearer.config)``, answered as confluent-kafka's is."""

    callback: Callable[[str], Any]
    config: str = ""

    def __call__(self, now_ms: int) -> OAuthToken:
        try:
            answer = self.callback(self.config)
        except Exception as e:  # the application's own failure, reported as the reason there is no token
            raise OAuthTokenError(f"oauth_cb raised {type(e).__name__}: {e}") from e
        if not isinstance(answer, tuple) or not 2 <= len(answer) <= 4:
            raise OAuthTokenError(
                f"oauth_cb must return (token, expiry_epoch_seconds[, principal[, extensions]]), got {type(answer).__name__}"
            )
        token, expiry, *rest = answer
        if not isinstance(token, str) or not token:
            raise OAuthTokenError("oauth_cb returned an empty token or one that is not a string")
        try:
            expires_at_ms = int(float(expiry) * 1000)
        except (TypeError, ValueError):
            raise OAuthTokenError(f"oauth_cb's expiry must be epoch seconds, got {expiry!r}") from None
        if expires_at_ms <= now_ms:
            raise OAuthTokenError("oauth_cb returned a token that has already expired")
        principal = rest[0] if rest and rest[0] else (token_subject(token) or "(the token's subject)")
        try:
            extensions = _check_extensions(dict(rest[1]) if len(rest) > 1 and rest[1] else {}, "oauth_cb")
        except OAuthConfigError as e:
            raise OAuthTokenError(str(e)) from None
        return OAuthToken(token, expires_at_ms, str(principal), extensions, now_ms)


def parse_token_response(body: bytes, now_ms: int, extensions: Mapping[str, str]) -> OAuthToken:
    """A token endpoint's JSON answer (RFC 6749 section 5.1) as a token; its ``sub`` claim names the principal."""
    try:
        doc = json.loads(body)
    except ValueError:
        raise OAuthTokenError(f"the token endpoint did not answer JSON: {body[:80]!r}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("access_token"), str) or not doc["access_token"]:
        raise OAuthTokenError("the token endpoint's answer has no access_token")
    token = doc["access_token"]
    expires_in = doc.get("expires_in")
    if isinstance(expires_in, int | float) and expires_in > 0:
        expires_at_ms = now_ms + int(expires_in * 1000)
    else:  # no expires_in: the JWT's own exp
        try:
            part = token.split(".")[1]
            exp = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))["exp"]
            expires_at_ms = int(exp) * 1000
        except (IndexError, KeyError, TypeError, ValueError, binascii.Error):
            raise OAuthTokenError("the token endpoint's answer has neither expires_in nor a JWT with exp") from None
    return OAuthToken(token, expires_at_ms, token_subject(token) or "(the token's subject)", dict(extensions), now_ms)


@dataclass(frozen=True)
class OidcSource:
    """The client credentials grant against the token endpoint (``sasl.oauthbearer.method=oidc``)."""

    endpoint: str
    client_id: str
    client_secret: str
    scope: str = ""
    extensions: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 10.0
    ssl_context: Any = None

    def __repr__(self) -> str:  # never print the secret
        return f"OidcSource(endpoint={self.endpoint!r}, client_id={self.client_id!r})"

    def __call__(self, now_ms: int) -> OAuthToken:
        form = {"grant_type": "client_credentials", **({"scope": self.scope} if self.scope else {})}
        basic = base64.b64encode(
            f"{urllib.parse.quote(self.client_id)}:{urllib.parse.quote(self.client_secret)}".encode()
        ).decode()
        request = urllib.request.Request(
            self.endpoint, data=urllib.parse.urlencode(form).encode(), method="POST",
            headers={"Authorization": f"Basic {basic}", "Content-Type": "application/x-www-form-urlencoded",
                     "Accept": "application/json"},
        )  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s, context=self.ssl_context) as answer:
                body = answer.read()
        except urllib.error.HTTPError as e:
            detail = e.read()[:200].decode("utf-8", "replace")
            raise OAuthTokenError(f"the token endpoint {self.endpoint} refused client {self.client_id}: HTTP "
                                  f"{e.code} {detail}") from None  # fmt: skip
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", None) or e
            raise OAuthTokenError(f"the token endpoint {self.endpoint} cannot be reached: {reason}") from None
        return parse_token_response(body, now_ms, self.extensions)


class TokenCache:
    """The current token of one client, shared by its connections; a new one from the source once 80% of its
    lifetime has passed. Thread-safe (the network thread and the application may both authenticate)."""

    def __init__(self, source: TokenSource, clock_ms: Callable[[], int]) -> None:
        self.source = source
        self._clock_ms = clock_ms
        self._token: OAuthToken | None = None
        self._lock = threading.Lock()
        self.fetched = 0

    def __repr__(self) -> str:
        return f"TokenCache({self.source!r})"

    def current(self) -> OAuthToken:
        with self._lock:
            now = self._clock_ms()
            if self._token is None or self._token.due_for_refresh(now):
                self._token = self.source(now)
                self.fetched += 1
            return self._token
