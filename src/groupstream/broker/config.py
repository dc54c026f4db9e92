"""Broker configuration under Kafka's own property names, with validation that names what is wrong."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from groupstream.coordinator.config import PROPERTY_NAMES as GROUP_NUMBER_PROPERTY_NAMES
from groupstream.coordinator.config import STRING_PROPERTY_NAMES as GROUP_STRING_PROPERTY_NAMES
from groupstream.coordinator.config import GroupCoordinatorConfig
from groupstream.protocol.framing import DEFAULT_MAX_FRAME
from groupstream.security.config import (
    LISTENER_PROPERTIES,
    ListenerSecurity,
    ListenerSpec,
    SecurityConfigError,
    SecurityProtocol,
    check_property,
    listener_security,
    parse_listeners,
    parse_protocol_map,
)

GROUP_PROPERTY_NAMES = frozenset(GROUP_NUMBER_PROPERTY_NAMES) | frozenset(GROUP_STRING_PROPERTY_NAMES)


class ConfigError(ValueError):
    """A configuration value a user gave is invalid; the message names the property and the value."""


def parse_hostport(text: str, what: str) -> tuple[str, int]:
    host, sep, port_s = text.rpartition(":")
    if not sep or not host:
        raise ConfigError(f"{what} must be HOST:PORT, got {text!r}")
    try:
        port = int(port_s)
    except ValueError:
        raise ConfigError(f"{what} has a port that is not a number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise ConfigError(f"{what} has a port outside 0-65535: {text!r}")
    return host.strip("[]"), port


def _bool(name: str, value: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise ConfigError(f"{name} must be true or false, got {value!r}")


def _int(name: str, value: str, minimum: int | None = None) -> int:
    try:
        n = int(value)
    except ValueError:
        raise ConfigError(f"{name} must be an integer, got {value!r}") from None
    if minimum is not None and n < minimum:
        raise ConfigError(f"{name} must be at least {minimum}, got {n}")
    return n


# Broker-level defaults for topic configs use Kafka's broker names (log.*); they map to topic config names.
_LOG_DEFAULT_NAMES = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.flush.policy": "flush.policy",
    "log.flush.interval.ms": "flush.interval.ms",
    "log.cleanup.policy": "cleanup.policy",
    "message.max.bytes": "max.message.bytes",
    "log.message.timestamp.type": "message.timestamp.type",
}


@dataclass
class ListenerConfig:
    """One listener: where it binds, what it advertises and the security protocol it speaks."""

    name: str
    protocol: SecurityProtocol
    host: str
    port: int
    advertised_host: str | None = None
    advertised_port: int | None = None
    security: ListenerSecurity | None = None

    @property
    def advertised(self) -> tuple[str, int]:
        return (self.advertised_host or self.host, self.advertised_port or self.port)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


@dataclass
class BrokerConfig:
    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 9092
    advertised_host: str | None = None
    advertised_port: int | None = None
    node_id: int = 1
    auto_create_topics: bool = True
    num_partitions: int = 1
    max_frame: int = DEFAULT_MAX_FRAME
    retention_check_interval_ms: int = 60_000
    # acks=all waits for fsync by default: acknowledged records survive power loss, not only kill -9.
    topic_defaults: dict[str, str] = field(default_factory=lambda: {"flush.policy": "always"})
    offsets_topic_num_partitions: int = 50
    offsets_topic_segment_bytes: int = 100 * 1024 * 1024
    # the transaction coordinator (Kafka's names and defaults)
    transaction_state_num_partitions: int = 50
    transaction_state_segment_bytes: int = 100 * 1024 * 1024
    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 7 * 24 * 3600 * 1000
    transaction_cleanup_interval_ms: int = 3600 * 1000
    # the finalized level of Kafka's transaction.version feature, as ApiVersions v3+ advertises it: 2 (KIP-890
    # part 2, what Kafka 4.x finalizes on a new cluster) lets clients end each transaction with an epoch bump
    # and add partitions through Produce; 0 or 1 keeps transaction protocol version 1 for every client
    transaction_version: int = 2
    log_cleaner_enable: bool = True
    log_cleaner_backoff_ms: int = 15_000
    # group.* and offsets.* properties of the coordinator, validated on apply
    group_properties: dict[str, str] = field(default_factory=dict)
    # Connection limits (Kafka's names). None: derived when the broker starts, see `connection_limits`.
    max_connections: int | None = None
    max_connections_per_ip: int | None = None  # None: unlimited
    connections_max_idle_ms: int = 600_000
    queued_max_request_bytes: int | None = None  # None: 2 x socket.request.max.bytes; -1: unbounded
    # Listeners in Kafka's syntax (``--listen``, ``listeners``); None: one PLAINTEXT listener on host:port.
    listener_specs: list[str] | None = None
    listeners_from: str = "listeners"  # where listener_specs came from, for error messages ("--listen")
    advertised_listeners: str | None = None
    protocol_map: str | None = None
    # ssl.*, sasl.enabled.mechanisms, connections.max.reauth.ms and their listener.name.<name>. forms, validated
    # per listener by `resolve_listeners`
    security_properties: dict[str, str] = field(default_factory=dict)
    failed_auth_delay_ms: int = 100  # connection.failed.authentication.delay.ms
    sasl_max_receive_size: int = 524_288  # sasl.server.max.receive.size
    http: tuple[str, int] | None = None  # --http HOST:PORT: /metrics
    # authorizer.class.name (Kafka's StandardAuthorizer or AclAuthorizer turns ACLs on), super.users and
    # allow.everyone.if.no.acl.found
    authorizer_enabled: bool = False
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False
    serving_listener: ListenerConfig | None = field(default=None, repr=False, compare=False)
    """The listener of the request being handled: the server sets it around each handler call (handlers run one
    at a time on the loop, as with ``Broker.current_client_host``), so that `advertised` answers with the address
    of the listener the client came in through, as Kafka's Metadata does."""

    def group_coordinator_config(self) -> GroupCoordinatorConfig:
        return GroupCoordinatorConfig.from_properties(self.group_properties)

    @property
    def partial_request_bytes_limit(self) -> int | None:
        """``queued.max.request.bytes`` as enforced: by default twice ``socket.request.max.bytes`` (one request
        of the largest size fits beside as much again from everyone else); None when set to -1 (unbounded, as
        Kafka's default)."""
        if self.queued_max_request_bytes is None:
            return 2 * self.max_frame
        return None if self.queued_max_request_bytes == -1 else self.queued_max_request_bytes

    @property
    def advertised(self) -> tuple[str, int]:
        """What clients are told to connect to: the advertised address of the listener serving the request
        being handled, else of the first listener."""
        serving = self.serving_listener
        if serving is not None:
            return serving.advertised
        return (self.advertised_host or self.host, self.advertised_port or self.port)

    def resolve_listeners(self) -> list[ListenerConfig]:
        """The listeners with their advertised addresses and security settings (ConfigError names what is
        wrong). The first listener is the one ``host``, ``port`` and ``--advertised`` describe."""
        try:
            protocol_map = parse_protocol_map(self.protocol_map)
            if self.listener_specs is None:
                listeners = [ListenerConfig("PLAINTEXT", SecurityProtocol.PLAINTEXT, self.host, self.port)]
            else:
                specs = parse_listeners(self.listener_specs, protocol_map, self.listeners_from)
                if not specs:
                    raise ConfigError("listeners is empty: give at least one PROTOCOL://HOST:PORT")
                listeners = [ListenerConfig(s.name, s.protocol, s.host, s.port) for s in specs]
            by_name = {lc.name: lc for lc in listeners}
            if self.advertised_listeners:
                for adv in parse_listeners([self.advertised_listeners], protocol_map, "advertised.listeners"):
                    target = by_name.get(adv.name)
                    if target is None:
                        raise ConfigError(
                            f"advertised.listeners names {adv.name}, which is not among the listeners "
                            f"({', '.join(by_name)})"
                        )
                    target.advertised_host = adv.host or None
                    target.advertised_port = adv.port or None
            first = listeners[0]
            if self.advertised_host and not first.advertised_host:
                first.advertised_host = self.advertised_host
            if self.advertised_port and not first.advertised_port:
                first.advertised_port = self.advertised_port
            for lc in listeners:
                lc.security = listener_security(self.security_properties, _spec(lc))
            self._check_prefixes(by_name)
        except SecurityConfigError as e:
            raise ConfigError(str(e)) from None
        return listeners

    def _check_prefixes(self, by_name: Mapping[str, ListenerConfig]) -> None:
        for key in self.security_properties:
            if key.startswith("listener.name."):
                name = key[len("listener.name.") :].partition(".")[0]
                if name.upper() not in by_name:
                    raise ConfigError(f"{key} names listener {name!r}, which is not among the listeners "
                                      f"({', '.join(n.lower() for n in by_name)})")  # fmt: skip

    def apply(self, props: Mapping[str, str]) -> None:
        """Apply Kafka-named broker properties (``--set key=value``)."""
        for name, value in props.items():
            if name == "auto.create.topics.enable":
                self.auto_create_topics = _bool(name, value)
            elif name == "num.partitions":
                self.num_partitions = _int(name, value, 1)
            elif name in ("node.id", "broker.id"):
                self.node_id = _int(name, value, 0)
            elif name == "socket.request.max.bytes":
                self.max_frame = _int(name, value, 1024)
            elif name == "log.retention.check.interval.ms":
                self.retention_check_interval_ms = _int(name, value, 1)
            elif name in _LOG_DEFAULT_NAMES:
                self.topic_defaults[_LOG_DEFAULT_NAMES[name]] = value
            elif name == "offsets.topic.num.partitions":
                self.offsets_topic_num_partitions = _int(name, value, 1)
            elif name == "offsets.topic.segment.bytes":
                self.offsets_topic_segment_bytes = _int(name, value, 1024)
            elif name == "transaction.state.log.num.partitions":
                self.transaction_state_num_partitions = _int(name, value, 1)
            elif name == "transaction.state.log.segment.bytes":
                self.transaction_state_segment_bytes = _int(name, value, 1024)
            elif name == "transaction.max.timeout.ms":
                self.transaction_max_timeout_ms = _int(name, value, 1)
            elif name == "transactional.id.expiration.ms":
                self.transactional_id_expiration_ms = _int(name, value, 1)
            elif name == "transaction.remove.expired.transaction.cleanup.interval.ms":
                self.transaction_cleanup_interval_ms = _int(name, value, 1)
            elif name == "transaction.version":
                self.transaction_version = _int(name, value, 0)
                if self.transaction_version > 2:
                    raise ConfigError(f"{name}: {value} is not a transaction.version this broker supports (0 to 2)")
            elif name == "log.cleaner.enable":
                self.log_cleaner_enable = _bool(name, value)
            elif name == "log.cleaner.backoff.ms":
                self.log_cleaner_backoff_ms = _int(name, value, 1)
            elif name == "max.connections":
                self.max_connections = _int(name, value, 1)
            elif name == "max.connections.per.ip":
                self.max_connections_per_ip = _int(name, value, 1)
            elif name == "connections.max.idle.ms":
                self.connections_max_idle_ms = _int(name, value, 1)
            elif name == "queued.max.request.bytes":
                n = _int(name, value)
                if n != -1 and n < 1:
                    raise ConfigError(f"{name} must be -1 (unbounded) or at least 1, got {n}")
                self.queued_max_request_bytes = n
            elif name == "listeners":
                self.listener_specs = [value]
            elif name == "advertised.listeners":
                self.advertised_listeners = value
            elif name == "listener.security.protocol.map":
                self.protocol_map = value
            elif name == "connection.failed.authentication.delay.ms":
                self.failed_auth_delay_ms = _int(name, value, 0)
            elif name == "sasl.server.max.receive.size":
                self.sasl_max_receive_size = _int(name, value, 1024)
            elif name == "authorizer.class.name":
                self.authorizer_enabled = _authorizer(value)
            elif name == "super.users":
                self.super_users = _principals(name, value)
            elif name == "allow.everyone.if.no.acl.found":
                self.allow_everyone_if_no_acl_found = _bool(name, value)
            elif check_property(name):
                self.security_properties[name] = value
            elif name in GROUP_PROPERTY_NAMES:
                candidate = {**self.group_properties, name: value}
                try:
                    GroupCoordinatorConfig.from_properties(candidate)
                except ValueError as e:
                    raise ConfigError(str(e)) from None
                self.group_properties = candidate
            else:
                raise ConfigError(unknown_property(name))


# The authorizers Kafka ships, by the class names users put in server.properties: either turns ACLs on here.
AUTHORIZER_CLASSES = (
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
)


def _authorizer(value: str) -> bool:
    if not value.strip():
        return False
    if value.strip() not in AUTHORIZER_CLASSES:
        raise ConfigError(f"authorizer.class.name {value!r} is not an authorizer this broker has; use "
                          f"{AUTHORIZER_CLASSES[0]} (ACLs, as Kafka's StandardAuthorizer) or leave it empty")  # fmt: skip
    return True


def _principals(name: str, value: str) -> frozenset[str]:
    """Kafka's super.users: principals separated by semicolons, each ``Type:name``."""
    out = [p.strip() for p in value.split(";") if p.strip()]
    bad = [p for p in out if ":" not in p]
    if bad:
        raise ConfigError(f"{name}: {bad[0]!r} is not a principal (write User:<name>; separate several with ';')")
    return frozenset(out)


def known_properties() -> list[str]:
    """Every broker property ``--set`` accepts, by its Kafka name (``groupstream broker --list-properties``)."""
    return sorted(
        [
            "auto.create.topics.enable",
            "num.partitions",
            "node.id",
            "socket.request.max.bytes",
            "log.retention.check.interval.ms",
            "offsets.topic.num.partitions",
            "offsets.topic.segment.bytes",
            "transaction.state.log.num.partitions",
            "transaction.state.log.segment.bytes",
            "transaction.max.timeout.ms",
            "transactional.id.expiration.ms",
            "transaction.remove.expired.transaction.cleanup.interval.ms",
            "transaction.version",
            "log.cleaner.enable",
            "log.cleaner.backoff.ms",
            "max.connections",
            "max.connections.per.ip",
            "connections.max.idle.ms",
            "queued.max.request.bytes",
            "listeners",
            "advertised.listeners",
            "listener.security.protocol.map",
            "listener.name.<name>.<ssl.* or sasl property>",
            "connection.failed.authentication.delay.ms",
            "sasl.server.max.receive.size",
            "authorizer.class.name",
            "super.users",
            "allow.everyone.if.no.acl.found",
            *sorted(LISTENER_PROPERTIES),
            *GROUP_PROPERTY_NAMES,
            *_LOG_DEFAULT_NAMES,
        ]
    )


def unknown_property(name: str) -> str:
    """The error for a property we do not know: the closest known names first (a typo is the usual cause),
    then all of them."""
    known = known_properties()
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    return f"unknown broker property {name!r}; {hint}known (groupstream broker --list-properties): {', '.join(known)}"


def _spec(lc: ListenerConfig) -> ListenerSpec:
    return ListenerSpec(lc.name, lc.protocol, lc.host, lc.port)
