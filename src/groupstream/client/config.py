"""Client configuration under Kafka's dotted names, with Python keyword aliases (``bootstrap_servers``).

Unknown names are refused rather than ignored: a misspelt ``bootstrap.server`` that silently falls back to a
default is a worse failure than an error naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from groupstream.client.errors import ClientConfigError
from groupstream.client.net.config import NetworkConfig, parse_bootstrap

_KNOWN = ("bootstrap.servers", "client.id", "request.timeout.ms", "socket.connection.setup.timeout.ms")


@dataclass(frozen=True)
class AdminConfig:
    bootstrap_servers: list[tuple[str, int]]
    client_id: str = "groupstream-admin"
    request_timeout_ms: int = 30_000
    connection_setup_timeout_ms: int = 10_000

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any] | None, aliases: Mapping[str, Any]) -> AdminConfig:
        props: dict[str, Any] = {}
        for source in (config or {}, aliases):
            for name, value in source.items():
                dotted = name.replace("_", ".")
                if dotted not in _KNOWN:
                    raise ClientConfigError(f"unknown admin property {name!r}; known: {', '.join(_KNOWN)}")
                props[dotted] = value
        if "bootstrap.servers" not in props:
            raise ClientConfigError("bootstrap.servers is required (HOST:PORT[,HOST:PORT...])")
        try:
            servers = parse_bootstrap(str(props["bootstrap.servers"]))
        except ValueError as e:
            raise ClientConfigError(f"bootstrap.servers: {e}") from None
        return cls(
            bootstrap_servers=servers,
            client_id=str(props.get("client.id", cls.client_id)),
            request_timeout_ms=_positive_int(props, "request.timeout.ms", cls.request_timeout_ms),
            connection_setup_timeout_ms=_positive_int(
                props, "socket.connection.setup.timeout.ms", cls.connection_setup_timeout_ms
            ),
        )


    def network(self) -> NetworkConfig:
        """The network core's settings for these (the Java client's defaults for the rest)."""
        return NetworkConfig(
            bootstrap_servers=tuple(self.bootstrap_servers),
            client_id=self.client_id,
            request_timeout_ms=self.request_timeout_ms,
            connection_setup_timeout_ms=self.connection_setup_timeout_ms,
        )


def _positive_int(props: Mapping[str, Any], name: str, default: int) -> int:
    raw = props.get(name, default)
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise ClientConfigError(f"{name} must be an integer, got {raw!r}") from None
    if value <= 0:
        raise ClientConfigError(f"{name} must be positive, got {value}")
    return value
