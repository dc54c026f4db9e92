"""Reading a client's property dict, and the network settings every threaded client shares.

`PropertyReader` refuses names it was not told about and converts each value once, with an error that names
the property, so a typo fails at construction rather than silently falling back to a default. `NetworkConfig`
holds the settings the network core needs (connections, timeouts, backoff, metadata age): all the Admin reads,
while the producer and the consumer each read their own settings on top with the same reader.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from groupstream.client.errors import ClientConfigError
from groupstream.client.net.security import PLAINTEXT, SECURITY_PROPERTIES, SecurityConfig

_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})


def unknown_name(what: str, name: str, dotted: str, known: frozenset[str]) -> str:
    """The error for a property we do not know: the closest known names first (a typo is the usual cause),
    then all of them."""
    close = difflib.get_close_matches(dotted, known, n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    return f"unknown {what} {name!r}; {hint}known: {', '.join(sorted(known))}"


class PropertyReader:
    """Typed access to a property dict under Kafka's dotted names (``bootstrap_servers`` is accepted as an
    alias of ``bootstrap.servers``). ``check_unknown`` raises for any name no getter was prepared for."""

    def __init__(self, props: Mapping[str, Any] | None, known: Iterable[str], *, what: str = "property") -> None:
        self._known = frozenset(known)
        self._props: dict[str, Any] = {}
        for name, value in (props or {}).items():
            if not isinstance(name, str):
                raise ClientConfigError(f"property names must be strings, got {name!r}")
            dotted = name.replace("_", ".")
            if dotted not in self._known:
                raise ClientConfigError(unknown_name(what, name, dotted, self._known))
            self._props[dotted] = value

    def has(self, name: str) -> bool:
        """Whether the user set ``name`` (some defaults depend on what else was set explicitly)."""
        return name in self._props

    def raw(self, name: str, default: Any = None) -> Any:
        return self._props.get(name, default)

    def int_(self, name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
        raw = self._props.get(name, default)
        if isinstance(raw, bool):
            raise ClientConfigError(f"{name} must be an integer, got {raw!r}")
        try:
            value = int(raw)
        except (TypeError, ValueError):
            raise ClientConfigError(f"{name} must be an integer, got {raw!r}") from None
        if minimum is not None and value < minimum:
            raise ClientConfigError(f"{name} must be at least {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise ClientConfigError(f"{name} must be at most {maximum}, got {value}")
        return value

    def bool_(self, name: str, default: bool) -> bool:
        raw = self._props.get(name, default)
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise ClientConfigError(f"{name} must be true or false, got {raw!r}")

    def str_(self, name: str, default: str) -> str:
        raw = self._props.get(name, default)
        if not isinstance(raw, str):
            raise ClientConfigError(f"{name} must be a string, got {raw!r}")
        return raw

    def choice(self, name: str, default: str, choices: Mapping[str, Any]) -> Any:
        """The value ``choices`` maps the (case-insensitive) text to."""
        raw = self._props.get(name, default)
        key = str(raw).strip().lower()
        if key not in choices:
            raise ClientConfigError(f"{name} must be one of {', '.join(choices)}, got {raw!r}")
        return choices[key]

    def callable_(self, name: str) -> Callable[..., Any] | None:
        raw = self._props.get(name)
        if raw is None:
            return None
        if not callable(raw):
            raise ClientConfigError(f"{name} must be a callable, got {raw!r}")
        return raw  # type: ignore[no-any-return]


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    """``host:port[,host:port...]`` (IPv6 hosts in brackets) into pairs; raises ValueError naming the bad one."""
    out: list[tuple[str, int]] = []
    for item in servers.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, port_s = item.rpartition(":")
        if not sep or not host or not port_s.isdigit() or not 0 < int(port_s) < 65536:
            raise ValueError(f"bootstrap server {item!r} is not HOST:PORT")
        out.append((host.strip("[]"), int(port_s)))
    if not out:
        raise ValueError("no bootstrap servers given")
    return out


NETWORK_PROPERTIES = (
    "bootstrap.servers",
    "client.id",
    "request.timeout.ms",
    "reconnect.backoff.ms",
    "reconnect.backoff.max.ms",
    "socket.connection.setup.timeout.ms",
    "metadata.max.age.ms",
    "retry.backoff.ms",
    "retry.backoff.max.ms",
    "max.in.flight.requests.per.connection",
    "receive.message.max.bytes",
    *SECURITY_PROPERTIES,
)


@dataclass(frozen=True)
class NetworkConfig:
    """What the network client and its connections need; defaults are the Java client's."""

    bootstrap_servers: tuple[tuple[str, int], ...]
    client_id: str = "groupstream"
    request_timeout_ms: int = 30_000
    reconnect_backoff_ms: int = 50
    reconnect_backoff_max_ms: int = 1_000
    connection_setup_timeout_ms: int = 10_000
    metadata_max_age_ms: int = 300_000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1_000
    max_in_flight: int = 5
    max_response_bytes: int = 100 * 1024 * 1024
    security: SecurityConfig = PLAINTEXT

    @classmethod
    def read(cls, r: PropertyReader, default_client_id: str) -> NetworkConfig:
        if not r.has("bootstrap.servers"):
            raise ClientConfigError("bootstrap.servers is required (HOST:PORT[,HOST:PORT...])")
        try:
            servers = tuple(parse_bootstrap(str(r.raw("bootstrap.servers"))))
        except ValueError as e:
            raise ClientConfigError(f"bootstrap.servers: {e}") from None
        backoff = r.int_("reconnect.backoff.ms", cls.reconnect_backoff_ms, minimum=0)
        backoff_max = r.int_("reconnect.backoff.max.ms", cls.reconnect_backoff_max_ms, minimum=0)
        retry = r.int_("retry.backoff.ms", cls.retry_backoff_ms, minimum=0)
        retry_max = r.int_("retry.backoff.max.ms", cls.retry_backoff_max_ms, minimum=0)
        return cls(
            bootstrap_servers=servers,
            client_id=r.str_("client.id", default_client_id),
            request_timeout_ms=r.int_("request.timeout.ms", cls.request_timeout_ms, minimum=1),
            reconnect_backoff_ms=backoff,
            # Java: a maximum below the initial backoff is raised to it rather than refused
            reconnect_backoff_max_ms=max(backoff, backoff_max),
            connection_setup_timeout_ms=r.int_(
                "socket.connection.setup.timeout.ms", cls.connection_setup_timeout_ms, minimum=1
            ),
            metadata_max_age_ms=r.int_("metadata.max.age.ms", cls.metadata_max_age_ms, minimum=0),
            retry_backoff_ms=retry,
            retry_backoff_max_ms=max(retry, retry_max),
            max_in_flight=r.int_("max.in.flight.requests.per.connection", cls.max_in_flight, minimum=1),
            max_response_bytes=r.int_("receive.message.max.bytes", cls.max_response_bytes, minimum=1024),
            security=SecurityConfig.read(r),
        )


def exponential_backoff_ms(initial_ms: int, max_ms: int, attempts: int, jitter: float = 1.0) -> int:
    """``initial * 2**(attempts-1)`` capped at ``max``, scaled by a jitter factor the caller draws (the pure
    layers take no randomness of their own); attempts counts from 1."""
    if attempts <= 0 or initial_ms <= 0:
        return 0
    base = initial_ms * (1 << min(attempts - 1, 30))
    return int(min(base, max_ms) * jitter)
