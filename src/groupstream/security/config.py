"""Listeners and their security, under Kafka's broker property names.

- A listener is ``NAME://HOST:PORT``; NAME is a security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) or
  a name that ``listener.security.protocol.map`` (``NAME:PROTOCOL,...``) maps to one. A bare ``HOST:PORT`` is
  PLAINTEXT. IPv6 hosts go in brackets.
- ``listener.name.<name>.<property>`` (the name lower-cased) overrides a TLS or SASL property for one listener,
  as in Kafka. As in Kafka since 3.0, ``ssl.client.auth`` applies to SSL listeners only; a SASL_SSL listener asks
  for client certificates only when its listener-prefixed property says so.
- ``sasl.enabled.mechanisms``: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (default: the two SCRAM
  mechanisms; Kafka's default, GSSAPI, needs Kerberos, which we do not offer).
- OAUTHBEARER validates signed JWTs against ``sasl.oauthbearer.jwks.endpoint.url`` (a ``file:`` URL), with
  ``sasl.oauthbearer.expected.issuer``, ``.expected.audience``, ``.clock.skew.seconds``, ``.sub.claim.name`` and
  ``.scope.claim.name``; each may also be given as ``listener.name.<name>.oauthbearer.<property>``, as in Kafka.
  Unsecured tokens (tests only) take Kafka's own switch,
  ``listener.name.<name>.oauthbearer.sasl.server.callback.handler.class=`` its
  ``OAuthBearerUnsecuredValidatorCallbackHandler``, with the ``unsecuredValidator*`` options of
  ``listener.name.<name>.oauthbearer.sasl.jaas.config``. Kafka falls back to that unsecured handler when nothing is
  configured; we refuse to start instead, so that no broker accepts self-made tokens by omission.

Errors are `SecurityConfigError` naming the property.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from groupstream.security.jaas import JaasError, parse_jaas
from groupstream.security.oauthbearer import (
    JwksError,
    JwksValidator,
    TokenValidator,
    UnsecuredValidator,
    load_jwks,
)
from groupstream.security.principal import PrincipalMapper
from groupstream.security.sasl import MECHANISMS
from groupstream.security.tls import CLIENT_AUTH, TlsSettings

__all__ = [
    "GLOBAL_PROPERTIES",
    "LISTENER_PROPERTIES",
    "ListenerSecurity",
    "ListenerSpec",
    "SecurityConfigError",
    "SecurityProtocol",
    "listener_security",
    "parse_listeners",
    "parse_protocol_map",
]


class SecurityConfigError(ValueError):
    pass


class SecurityProtocol(StrEnum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


_SSL_PROPERTIES = (
    "ssl.keystore.location",
    "ssl.keystore.type",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.truststore.location",
    "ssl.truststore.type",
    "ssl.truststore.password",
    "ssl.client.auth",
    "ssl.enabled.protocols",
    "ssl.cipher.suites",
    "ssl.principal.mapping.rules",
)
JWKS_HTTP_PROPERTIES = (
    "sasl.oauthbearer.jwks.endpoint.refresh.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
)
"""These steer Kafka's fetching of an HTTP JWKS endpoint; Kafka reads a ``file:`` JWKS once, as we do, so they are
checked and otherwise unused (a Kafka configuration loads unchanged)."""
OAUTH_PROPERTIES = (
    "sasl.oauthbearer.jwks.endpoint.url",
    "sasl.oauthbearer.expected.issuer",
    "sasl.oauthbearer.expected.audience",
    "sasl.oauthbearer.clock.skew.seconds",
    "sasl.oauthbearer.sub.claim.name",
    "sasl.oauthbearer.scope.claim.name",
    *JWKS_HTTP_PROPERTIES,
)
OAUTH_JAAS = "oauthbearer.sasl.jaas.config"
"""The broker's JAAS entry for OAUTHBEARER (listener-prefixed, as in Kafka): Kafka's ``OAuthBearerLoginModule``, whose
``unsecuredValidator*`` options set the unsecured validator; its other options (the broker's own login) are not
needed here and are ignored."""
LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
OAUTH_HANDLER = "oauthbearer.sasl.server.callback.handler.class"
"""Kafka's switch between its validators; listener-prefixed only (``listener.name.<name>.`` + this), as in Kafka."""
UNSECURED_HANDLER = (
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler"
)
SECURED_HANDLERS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",  # Kafka 3.9+
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",  # Kafka 3.1-3.x
)
LISTENER_PROPERTIES = frozenset(
    {*_SSL_PROPERTIES, *OAUTH_PROPERTIES, "sasl.enabled.mechanisms", "connections.max.reauth.ms"}
)
"""What ``listener.name.<name>.`` may override."""
GLOBAL_PROPERTIES = frozenset(
    {*LISTENER_PROPERTIES, "connection.failed.authentication.delay.ms", "sasl.server.max.receive.size"}
)
SENSITIVE = frozenset({"ssl.keystore.password", "ssl.key.password", "ssl.truststore.password"})

DEFAULT_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True, slots=True)
class ListenerSpec:
    name: str
    protocol: SecurityProtocol
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


def parse_protocol_map(text: str | None) -> dict[str, SecurityProtocol]:
    """``listener.security.protocol.map``; each protocol also maps to itself."""
    out = {p.value: p for p in SecurityProtocol}
    if not text or not text.strip():
        return out
    for item in text.split(","):
        name, sep, proto = item.strip().partition(":")
        name, proto = name.strip().upper(), proto.strip().upper()
        if not sep or not name:
            raise SecurityConfigError(f"listener.security.protocol.map entries are NAME:PROTOCOL, got {item.strip()!r}")
        try:
            protocol = SecurityProtocol(proto)
        except ValueError:
            raise SecurityConfigError(
                f"listener.security.protocol.map: {proto!r} is not a security protocol "
                f"({', '.join(p.value for p in SecurityProtocol)})"
            ) from None
        if name in out and name in SecurityProtocol.__members__ and out[name] is not protocol:
            raise SecurityConfigError(f"listener.security.protocol.map cannot map {name} to {proto}")
        out[name] = protocol
    return out


def _hostport(text: str, what: str) -> tuple[str, int]:
    host, sep, port_s = text.rpartition(":")
    if not sep:
        raise SecurityConfigError(f"{what} must be HOST:PORT or PROTOCOL://HOST:PORT, got {text!r}")
    try:
        port = int(port_s)
    except ValueError:
        raise SecurityConfigError(f"{what} has a port that is not a number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise SecurityConfigError(f"{what} has a port outside 0-65535: {text!r}")
    return host.strip("[]"), port


def parse_listeners(items: Sequence[str], protocol_map: Mapping[str, SecurityProtocol], what: str) -> list[ListenerSpec]:
    """``items`` are single listeners or comma-separated lists of them; each name at most once."""
    specs: list[ListenerSpec] = []
    for item in items:
        for text in item.split(","):
            text = text.strip()
            if not text:
                continue
            name, sep, rest = text.partition("://")
            if not sep:
                name, rest = SecurityProtocol.PLAINTEXT.value, text
            name = name.upper()
            protocol = protocol_map.get(name)
            if protocol is None:
                raise SecurityConfigError(
                    f"{what}: listener name {name!r} is neither a security protocol "
                    f"({', '.join(p.value for p in SecurityProtocol)}) nor in listener.security.protocol.map"
                )
            host, port = _hostport(rest, what)
            if not host and what != "advertised.listeners":
                host = "0.0.0.0"
            specs.append(ListenerSpec(name, protocol, host, port))
    seen: set[str] = set()
    for s in specs:
        if s.name in seen:
            raise SecurityConfigError(
                f"{what} names listener {s.name} twice: give each one its own name with listener.security.protocol.map"
            )
        seen.add(s.name)
    return specs


# --- per-listener security -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    protocol: SecurityProtocol
    tls: TlsSettings | None
    mechanisms: tuple[str, ...]
    max_reauth_ms: int
    principal_mapper: PrincipalMapper
    oauth: TokenValidator | None = None
    """How OAUTHBEARER tokens are validated, when the listener enables OAUTHBEARER."""


def _int(name: str, value: str, minimum: int) -> int:
    try:
        n = int(value)
    except ValueError:
        raise SecurityConfigError(f"{name} must be an integer, got {value!r}") from None
    if n < minimum:
        raise SecurityConfigError(f"{name} must be at least {minimum}, got {n}")
    return n


def _list(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def listener_security(props: Mapping[str, str], spec: ListenerSpec) -> ListenerSecurity:
    """The TLS and SASL settings of one listener: its ``listener.name.<name>.`` properties over the global ones."""
    prefix = f"listener.name.{spec.name.lower()}."

    def get(key: str, default: str | None = None) -> str | None:
        if prefix + key in props:
            return props[prefix + key]
        return props.get(key, default)

    mechanisms: tuple[str, ...] = ()
    if spec.protocol.sasl:
        raw = get("sasl.enabled.mechanisms")
        mechanisms = DEFAULT_MECHANISMS if raw is None else tuple(m.upper() for m in _list(raw))
        if not mechanisms:
            raise SecurityConfigError(f"sasl.enabled.mechanisms is empty for listener {spec.name}")
        unsupported = [m for m in mechanisms if m not in MECHANISMS]
        if unsupported:
            raise SecurityConfigError(
                f"sasl.enabled.mechanisms: {', '.join(unsupported)} not supported (supported: {', '.join(MECHANISMS)}; "
                f"GSSAPI is not offered)"
            )
    max_reauth_ms = _int("connections.max.reauth.ms", get("connections.max.reauth.ms", "0") or "0", 0)
    oauth = _oauth_validator(props, spec) if "OAUTHBEARER" in mechanisms else None
    tls: TlsSettings | None = None
    if spec.protocol.tls:
        if spec.protocol is SecurityProtocol.SASL_SSL:
            client_auth = props.get(prefix + "ssl.client.auth", "none")
        else:
            client_auth = get("ssl.client.auth", "none") or "none"
        client_auth = client_auth.strip().lower()
        if client_auth not in CLIENT_AUTH:
            raise SecurityConfigError(f"ssl.client.auth must be one of {', '.join(CLIENT_AUTH)}, got {client_auth!r}")
        cipher_suites = get("ssl.cipher.suites")
        tls = TlsSettings(
            keystore_location=get("ssl.keystore.location"),
            keystore_type=get("ssl.keystore.type"),
            keystore_password=get("ssl.keystore.password"),
            key_password=get("ssl.key.password"),
            truststore_location=get("ssl.truststore.location"),
            truststore_type=get("ssl.truststore.type"),
            truststore_password=get("ssl.truststore.password"),
            client_auth=client_auth,
            enabled_protocols=_list(get("ssl.enabled.protocols", "TLSv1.2,TLSv1.3") or ""),
            cipher_suites=_list(cipher_suites) if cipher_suites else (),
        )
        if not tls.keystore_location:
            raise SecurityConfigError(
                f"listener {spec} needs ssl.keystore.location (the broker's certificate chain and private key)"
            )
    try:
        mapper = PrincipalMapper(get("ssl.principal.mapping.rules"))
    except ValueError as e:
        raise SecurityConfigError(str(e)) from None
    return ListenerSecurity(spec.protocol, tls, mechanisms, max_reauth_ms, mapper, oauth)


def _oauth_validator(props: Mapping[str, str], spec: ListenerSpec) -> TokenValidator:
    """The listener's OAUTHBEARER validator: Kafka's properties, each looked up mechanism-prefixed, then
    listener-prefixed, then global (Kafka's order)."""
    prefix = f"listener.name.{spec.name.lower()}."

    def get(key: str) -> tuple[str, str] | None:
        for name in (f"{prefix}oauthbearer.{key}", prefix + key, key):
            if name in props:
                return name, props[name].strip()
        return None

    handler_key = prefix + OAUTH_HANDLER
    handler = props.get(handler_key, "").strip()
    jwks = get("sasl.oauthbearer.jwks.endpoint.url")
    jaas = _login_options(props, prefix + OAUTH_JAAS)
    if handler == UNSECURED_HANDLER:
        if jwks is not None and jwks[0].startswith(prefix):
            raise SecurityConfigError(
                f"{handler_key} selects unsecured tokens, but {jwks[0]} is set too: remove one (unsecured tokens are "
                f"for tests only; a global sasl.oauthbearer.jwks.endpoint.url is left to the other listeners)"
            )
        return _unsecured(jaas, prefix + OAUTH_JAAS)
    if handler and handler not in SECURED_HANDLERS:
        raise SecurityConfigError(
            f"{handler_key} {handler!r} is not a validator this broker has: use {SECURED_HANDLERS[0]} (signed tokens, "
            f"with sasl.oauthbearer.jwks.endpoint.url) or, for tests only, {UNSECURED_HANDLER}"
        )
    if jwks is None:
        raise SecurityConfigError(
            f"OAUTHBEARER on listener {spec.name} needs sasl.oauthbearer.jwks.endpoint.url=file:///path/to/jwks.json "
            f"(the public keys its tokens are signed with) or, for tests only, {handler_key}={UNSECURED_HANDLER}"
        )
    try:
        keys = load_jwks(jwks[1])
    except JwksError as e:
        raise SecurityConfigError(str(e)) from None
    for name in JWKS_HTTP_PROPERTIES:
        given = get(name)
        if given is not None:
            _int(given[0], given[1], 0)
    skew = get("sasl.oauthbearer.clock.skew.seconds")
    issuer = get("sasl.oauthbearer.expected.issuer")
    audience = get("sasl.oauthbearer.expected.audience")
    sub = get("sasl.oauthbearer.sub.claim.name")
    scope = get("sasl.oauthbearer.scope.claim.name")
    for claim in (sub, scope):
        if claim is not None and not claim[1]:
            raise SecurityConfigError(f"{claim[0]} is empty: name the claim")
    return JwksValidator(
        keys,
        expected_issuer=issuer[1] if issuer is not None and issuer[1] else None,
        expected_audiences=frozenset(_list(audience[1])) if audience is not None else frozenset(),
        clock_skew_ms=1000 * (_int(skew[0], skew[1], 0) if skew is not None else 30),
        sub_claim=sub[1] if sub is not None else "sub",
        scope_claim=scope[1] if scope is not None else "scope",
        source=f"the JWKS file {jwks[1]}",
    )


def _login_options(props: Mapping[str, str], key: str) -> dict[str, str]:
    if key not in props:
        return {}
    try:
        entry = parse_jaas(props[key])
    except JaasError as e:
        raise SecurityConfigError(f"{key}: {e}") from None
    if entry.module != LOGIN_MODULE:
        raise SecurityConfigError(f"{key} names login module {entry.module}; OAUTHBEARER's is {LOGIN_MODULE}")
    return entry.options


def _unsecured(options: Mapping[str, str], key: str) -> UnsecuredValidator:
    """Kafka's unsecured validator options, from the JAAS entry (their defaults are Kafka's: ``sub``, ``scope``,
    no required scope, no clock skew)."""
    skew = options.get("unsecuredValidatorAllowableClockSkewMs", "").strip()
    return UnsecuredValidator(
        sub_claim=options.get("unsecuredValidatorPrincipalClaimName", "").strip() or "sub",
        scope_claim=options.get("unsecuredValidatorScopeClaimName", "").strip() or "scope",
        clock_skew_ms=_int(f"{key} unsecuredValidatorAllowableClockSkewMs", skew, 0) if skew else 0,
        required_scope=tuple(options.get("unsecuredValidatorRequiredScope", "").split()),
    )


def check_property(name: str) -> bool:
    """Whether ``name`` is a security property this module reads (prefixed ones included)."""
    if name in GLOBAL_PROPERTIES or name in ("listeners", "advertised.listeners", "listener.security.protocol.map"):
        return True
    if name.startswith("listener.name."):
        rest = name[len("listener.name.") :]
        _, dot, key = rest.partition(".")
        if key in (OAUTH_HANDLER, OAUTH_JAAS) or (
            key.startswith("oauthbearer.") and key[len("oauthbearer.") :] in OAUTH_PROPERTIES
        ):
            return True
        return bool(dot) and key in LISTENER_PROPERTIES
    return False
