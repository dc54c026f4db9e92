"""The client's ``security.protocol``, TLS and SASL settings (Kafka's, librdkafka's and Java's names), and the
client side of the SASL mechanisms as pure token exchanges.

`SecurityConfig.read` builds the ``ssl.SSLContext`` once (it reads the PEM or PKCS12 files, so a missing or bad
file fails at construction with the property named); the connections only wrap it around memory BIOs
(`TlsSession`), so the connection state machine stays free of I/O. `SaslExchange` turns server tokens into client
tokens and holds no socket and no clock; the SCRAM nonce is drawn by the caller, and OAUTHBEARER's token comes from
the settings' `TokenCache` (``oauth_cb``, ``sasl.oauthbearer.method=oidc`` or the unsecured builder, see
`groupstream.security.oauth_client`), built here once per client and shared by its connections.
"""

from __future__ import annotations

import os
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol
from urllib.parse import urlparse

from groupstream.client.errors import ClientConfigError
from groupstream.security.jaas import JaasEntry, JaasError, parse_jaas
from groupstream.security.oauth_client import (
    CallbackSource,
    OAuthConfigError,
    OAuthToken,
    OAuthTokenError,
    OidcSource,
    TokenCache,
    UnsecuredConfig,
    UnsecuredSource,
    client_message,
    parse_unsecured_config,
)
from groupstream.security.scram import ScramClient, ScramError, ScramMechanism
from groupstream.security.tls import TlsConfigError, TlsSettings, client_context, store_type

SECURITY_PROPERTIES = (
    "security.protocol",
    "ssl.ca.location",
    "ssl.truststore.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.key.password",
    "ssl.truststore.type",
    "ssl.truststore.password",
    "ssl.keystore.location",
    "ssl.keystore.type",
    "ssl.keystore.password",
    "ssl.enabled.protocols",
    "ssl.cipher.suites",
    "ssl.endpoint.identification.algorithm",
    "sasl.mechanism",
    "sasl.username",
    "sasl.password",
    "sasl.jaas.config",
    "oauth.cb",  # confluent-kafka's oauth_cb (underscores read as dots)
    "sasl.oauthbearer.config",
    "enable.sasl.oauthbearer.unsecure.jwt",
    "sasl.oauthbearer.method",
    "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.token.endpoint.url",
    "sasl.oauthbearer.scope",
    "sasl.oauthbearer.extensions",
    "https.ca.location",
)

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
_OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
_LOGIN_MODULES = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": ("PLAIN",),
    "org.apache.kafka.common.security.scram.ScramLoginModule": ("SCRAM-SHA-256", "SCRAM-SHA-512"),
    _OAUTH_MODULE: ("OAUTHBEARER",),
}


class SecurityProtocol(Enum):
    PLAINTEXT = ("PLAINTEXT", False, False)
    SSL = ("SSL", True, False)
    SASL_PLAINTEXT = ("SASL_PLAINTEXT", False, True)
    SASL_SSL = ("SASL_SSL", True, True)

    def __init__(self, text: str, tls: bool, sasl: bool) -> None:
        self.text = text
        self.tls = tls
        self.sasl = sasl


@dataclass(frozen=True)
class SaslSettings:
    mechanism: str
    username: str
    password: str
    tokens: TokenCache | None = field(default=None, compare=False)
    """OAUTHBEARER: where the tokens come from (``username`` is then the principal, when known before a token)."""

    def __repr__(self) -> str:  # never print the password
        return f"SaslSettings(mechanism={self.mechanism!r}, username={self.username!r})"


@dataclass(frozen=True)
class SecurityConfig:
    protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    ssl_context: ssl.SSLContext | None = None
    check_hostname: bool = True
    sasl: SaslSettings | None = None

    @classmethod
    def read(cls, r: _Reader) -> SecurityConfig:
        text = str(r.raw("security.protocol", "PLAINTEXT")).strip().upper()
        try:
            protocol = next(p for p in SecurityProtocol if p.text == text)
        except StopIteration:
            raise ClientConfigError(
                f"security.protocol must be one of {', '.join(p.text for p in SecurityProtocol)}, "
                f"got {r.raw('security.protocol')!r}"
            ) from None
        context: ssl.SSLContext | None = None
        check_hostname = True
        if protocol.tls:
            algorithm = r.str_("ssl.endpoint.identification.algorithm", "https").strip().lower()
            if algorithm not in ("https", ""):
                raise ClientConfigError(
                    f"ssl.endpoint.identification.algorithm must be 'https' (verify the broker's host name) or "
                    f"empty (do not), got {algorithm!r}"
                )
            check_hostname = algorithm == "https"
            context = _ssl_context(r, check_hostname)
        sasl = _sasl_settings(r, protocol) if protocol.sasl else None
        return cls(protocol, context, check_hostname, sasl)


PLAINTEXT = SecurityConfig()


class _Reader(Protocol):  # the part of PropertyReader used here (config.py imports this module)
    def raw(self, name: str, default: object = None) -> object: ...
    def str_(self, name: str, default: str) -> str: ...
    def has(self, name: str) -> bool: ...


def _ssl_context(r: _Reader, check_hostname: bool) -> ssl.SSLContext:
    """librdkafka's names (``ssl.ca.location``, ``ssl.certificate.location``/``ssl.key.location``, PEM) and
    Java's (``ssl.truststore.*``, ``ssl.keystore.*``: PEM or PKCS12, JKS refused with how to convert it), with
    ``ssl.enabled.protocols`` and ``ssl.cipher.suites`` as the broker reads them (`security.tls`)."""
    ca_name = "ssl.ca.location" if r.has("ssl.ca.location") else "ssl.truststore.location"
    ca = r.str_(ca_name, "") if r.has(ca_name) else None
    trust_type = r.str_("ssl.truststore.type", "").strip() or None if ca_name == "ssl.truststore.location" else "PEM"
    if ca is not None and trust_type is None and os.path.isfile(ca):
        try:
            trust_type = store_type(ca, None, ca_name)
        except TlsConfigError as e:
            raise ClientConfigError(str(e)) from None
    pem_ca = ca if ca is not None and (trust_type or "PEM").upper() == "PEM" else None
    if r.has("ssl.keystore.location") and r.has("ssl.certificate.location"):
        raise ClientConfigError("set ssl.keystore.location or ssl.certificate.location/ssl.key.location, not both")
    settings = TlsSettings(
        keystore_location=r.str_("ssl.keystore.location", "") or None,
        keystore_type=r.str_("ssl.keystore.type", "").strip() or None,
        keystore_password=r.str_("ssl.keystore.password", "") or None,
        key_password=r.str_("ssl.key.password", "") or None,
        truststore_location=ca if ca is not None and pem_ca is None else None,
        truststore_type=trust_type,
        truststore_password=r.str_("ssl.truststore.password", "") or None,
        enabled_protocols=_names(r.str_("ssl.enabled.protocols", "TLSv1.2,TLSv1.3")),
        cipher_suites=_names(r.str_("ssl.cipher.suites", "")),
    )
    try:
        context = client_context(settings, check_hostname, system_cas=ca is None)
    except TlsConfigError as e:
        raise ClientConfigError(str(e)) from None
    if pem_ca is not None:
        try:
            context.load_verify_locations(cafile=pem_ca)
        except (OSError, ssl.SSLError) as e:
            raise ClientConfigError(f"{ca_name}: cannot read CA certificates from {pem_ca!r}: {_why(e)}") from None
    if r.has("ssl.certificate.location") or r.has("ssl.key.location"):
        if not r.has("ssl.certificate.location"):
            raise ClientConfigError("ssl.key.location is set without ssl.certificate.location")
        cert = r.str_("ssl.certificate.location", "")
        key = r.str_("ssl.key.location", "") or None
        password = r.str_("ssl.key.password", "") or None
        try:
            context.load_cert_chain(cert, key, password)
        except (OSError, ssl.SSLError) as e:
            raise ClientConfigError(
                f"ssl.certificate.location/ssl.key.location: cannot load the client certificate {cert!r}"
                f"{f' and key {key!r}' if key else ''}: {_why(e)}"
                f"{' (is ssl.key.password right?)' if 'decrypt' in _why(e) or 'password' in _why(e) else ''}"
            ) from None
    return context


def _names(text: str) -> tuple[str, ...]:
    """A list property: Java separates by commas, librdkafka's cipher list by colons."""
    return tuple(n.strip() for n in text.replace(":", ",").split(",") if n.strip())


def _why(e: OSError | ssl.SSLError) -> str:
    if isinstance(e, ssl.SSLError) and getattr(e, "reason", None):
        return str(e.reason).replace("_", " ").lower()
    return e.strerror or str(e)


def _sasl_settings(r: _Reader, protocol: SecurityProtocol) -> SaslSettings:
    mechanism = r.str_("sasl.mechanism", "GSSAPI").strip().upper()
    if mechanism not in SASL_MECHANISMS:
        raise ClientConfigError(
            f"sasl.mechanism must be one of {', '.join(SASL_MECHANISMS)} with security.protocol={protocol.text}, "
            f"got {r.raw('sasl.mechanism', 'GSSAPI (the default, not supported)')!r}"
        )
    username = r.str_("sasl.username", "") if r.has("sasl.username") else None
    password = r.str_("sasl.password", "") if r.has("sasl.password") else None
    entry: JaasEntry | None = None
    if r.has("sasl.jaas.config"):
        try:
            entry = parse_jaas(r.str_("sasl.jaas.config", ""))
        except JaasError as e:
            raise ClientConfigError(str(e)) from None
    if mechanism == "OAUTHBEARER":
        if entry is not None and entry.module not in _LOGIN_MODULES:
            raise ClientConfigError(f"sasl.jaas.config: login module {entry.module} is not supported; use {_OAUTH_MODULE}")
        if entry is not None and entry.module != _OAUTH_MODULE:
            raise ClientConfigError(f"sasl.jaas.config: {entry.module} does not serve sasl.mechanism=OAUTHBEARER")
        return _oauth_settings(r, entry)
    if entry is not None:
        allowed = _LOGIN_MODULES.get(entry.module)
        if allowed is None:
            raise ClientConfigError(
                f"sasl.jaas.config: login module {entry.module} is not supported; use one of "
                f"{', '.join(_LOGIN_MODULES)}"
            )
        if mechanism not in allowed:
            raise ClientConfigError(f"sasl.jaas.config: {entry.module} does not serve sasl.mechanism={mechanism}")
        username = entry.options.get("username", username)
        password = entry.options.get("password", password)
    if not username or password is None:
        raise ClientConfigError(
            f"sasl.mechanism={mechanism} needs sasl.username and sasl.password (or sasl.jaas.config with "
            f'username="..." password="...")'
        )
    return SaslSettings(mechanism, username, password)


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


def _oauth_settings(r: _Reader, entry: JaasEntry | None) -> SaslSettings:
    """Where OAUTHBEARER tokens come from: ``oauth_cb``, ``sasl.oauthbearer.method=oidc``, or the unsecured
    builder (librdkafka's ``sasl.oauthbearer.config``, or Java's OAuthBearerLoginModule with
    ``unsecuredLoginStringClaim_sub``); exactly one."""
    options = entry.options if entry is not None else {}
    callback = r.raw("oauth.cb", None)
    method = r.str_("sasl.oauthbearer.method", "default").strip().lower()
    if method not in ("default", "oidc"):
        raise ClientConfigError(f"sasl.oauthbearer.method must be 'default' or 'oidc', got {method!r}")
    config_text = r.str_("sasl.oauthbearer.config", "")
    try:
        extensions = _extensions(r.str_("sasl.oauthbearer.extensions", ""))
        if method == "oidc" or "clientId" in options:
            if callback is not None:
                raise ClientConfigError("oauth_cb and sasl.oauthbearer.method=oidc exclude each other")
            endpoint = r.str_("sasl.oauthbearer.token.endpoint.url", "")
            client_id = r.str_("sasl.oauthbearer.client.id", options.get("clientId", ""))
            secret = r.str_("sasl.oauthbearer.client.secret", options.get("clientSecret", ""))
            missing = [n for n, v in (("sasl.oauthbearer.token.endpoint.url", endpoint),
                                      ("sasl.oauthbearer.client.id", client_id),
                                      ("sasl.oauthbearer.client.secret", secret)) if not v]  # fmt: skip
            if missing:
                raise ClientConfigError(f"sasl.oauthbearer.method=oidc needs {', '.join(missing)}")
            if urlparse(endpoint).scheme not in ("http", "https"):
                raise ClientConfigError(f"sasl.oauthbearer.token.endpoint.url must be an http(s) URL, got {endpoint!r}")
            scope = r.str_("sasl.oauthbearer.scope", options.get("scope", ""))
            source: Callable[[int], OAuthToken] = OidcSource(
                endpoint, client_id, secret, scope, extensions, ssl_context=_https_context(r)
            )
            who = client_id
        elif callback is not None:
            if not callable(callback):
                raise ClientConfigError(f"oauth_cb must be a function, got {type(callback).__name__}")
            source = CallbackSource(callback, config_text)
            who = "(the token's subject)"
        elif "unsecuredLoginStringClaim_sub" in options:
            unsecured = UnsecuredConfig(
                principal=options["unsecuredLoginStringClaim_sub"],
                life_s=int(options.get("unsecuredLoginLifetimeSeconds", "3600")),
                extensions={k.removeprefix("unsecuredLoginExtension_"): v for k, v in options.items()
                            if k.startswith("unsecuredLoginExtension_")},
            )  # fmt: skip
            source, who = UnsecuredSource(unsecured), unsecured.principal
        else:
            if not _true(r.raw("enable.sasl.oauthbearer.unsecure.jwt", False)):
                raise ClientConfigError(
                    "sasl.mechanism=OAUTHBEARER needs a token: oauth_cb (a function returning (token, expiry)), "
                    "sasl.oauthbearer.method=oidc with client.id, client.secret and token.endpoint.url, or, for "
                    "tests, enable.sasl.oauthbearer.unsecure.jwt=true with sasl.oauthbearer.config=principal=NAME"
                )
            unsecured = parse_unsecured_config(config_text)
            source, who = UnsecuredSource(unsecured), unsecured.principal
    except OAuthConfigError as e:
        raise ClientConfigError(str(e)) from None
    except ValueError as e:
        raise ClientConfigError(f"sasl.jaas.config: {e}") from None
    return SaslSettings("OAUTHBEARER", who, "", TokenCache(source, _wall_clock_ms))


def _https_context(r: _Reader) -> ssl.SSLContext | None:
    """librdkafka's ``https.ca.location``: the CAs an https token endpoint's certificate must chain to (the
    system's when unset)."""
    if not r.has("https.ca.location"):
        return None
    ca = r.str_("https.ca.location", "")
    if not os.path.exists(ca):
        raise ClientConfigError(f"https.ca.location: {ca!r} does not exist")
    try:
        return ssl.create_default_context(cafile=ca if os.path.isfile(ca) else None, capath=ca if os.path.isdir(ca) else None)
    except (OSError, ssl.SSLError) as e:
        raise ClientConfigError(f"https.ca.location: cannot read CA certificates from {ca!r}: {_why(e)}") from None


def _extensions(text: str) -> dict[str, str]:
    """``sasl.oauthbearer.extensions``: comma-separated ``key=value``."""
    out: dict[str, str] = {}
    for item in (i.strip() for i in text.split(",")):
        if item:
            key, eq, value = item.partition("=")
            if not eq:
                raise OAuthConfigError(f"sasl.oauthbearer.extensions: expected key=value, got {item!r}")
            out[key.strip()] = value.strip()
    return out


def _true(value: object) -> bool:
    return value is True or str(value).strip().lower() == "true"


class SaslAuthenticationError(Exception):
    """The client side of the exchange refused the server's answer (a SCRAM server that proved nothing)."""


class SaslExchange:
    """One SASL exchange, client side: ``first_token()``, then ``next_token(server_token)`` for each server
    token until it returns None (the exchange is complete). Pure but for OAUTHBEARER's token, which comes from
    the settings' `TokenCache` (as the SCRAM nonce from ``nonce``): a failure to get one is a
    `SaslAuthenticationError` from the constructor."""

    def __init__(self, settings: SaslSettings, nonce: Callable[[], str]) -> None:
        self.settings = settings
        self.user = settings.username
        self._scram: ScramClient | None = None
        self._token: OAuthToken | None = None
        self._step = 0
        self.server_error: str | None = None
        """OAUTHBEARER: the broker's RFC 7628 error (JSON), before it fails the exchange."""
        if settings.tokens is not None:
            try:
                self._token = settings.tokens.current()
            except OAuthTokenError as e:
                raise SaslAuthenticationError(f"no token: {e}") from None
            self.user = self._token.principal
            return
        scram = ScramMechanism.from_name(settings.mechanism)
        if scram is not None:
            self._scram = ScramClient(scram, settings.username, settings.password, nonce())

    def first_token(self) -> bytes:
        self._step = 1
        if self._token is not None:
            return client_message(self._token)
        if self._scram is None:
            return f"\0{self.settings.username}\0{self.settings.password}".encode()
        return self._scram.first_message()

    def next_token(self, server_token: bytes) -> bytes | None:
        step, self._step = self._step, self._step + 1
        if self._token is not None:
            if step == 1 and server_token:
                # RFC 7628: the broker's error comes as a challenge; acknowledging it ends the exchange (failed)
                self.server_error = server_token.decode("utf-8", "replace")
                return b"\x01"
            return None
        if self._scram is None:
            return None  # PLAIN: one round
        try:
            if step == 1:
                return self._scram.final_message(server_token)
            self._scram.check_server_final(server_token)
        except ScramError as e:
            raise SaslAuthenticationError(str(e)) from None
        return None
