"""Broker configuration under Kafka's own property names, with validation that names what is wrong."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from groupstream.coordinator.config import PROPERTY_NAMES as GROUP_PROPERTY_NAMES
from groupstream.coordinator.config import GroupCoordinatorConfig
from groupstream.protocol.framing import DEFAULT_MAX_FRAME


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
    log_cleaner_enable: bool = True
    log_cleaner_backoff_ms: int = 15_000
    # group.* and offsets.* properties of the coordinator, validated on apply
    group_properties: dict[str, str] = field(default_factory=dict)
    # Connection limits (Kafka's names). None: derived when the broker starts, see `connection_limits`.
    max_connections: int | None = None
    max_connections_per_ip: int | None = None  # None: unlimited
    connections_max_idle_ms: int = 600_000
    queued_max_request_bytes: int | None = None  # None: 2 x socket.request.max.bytes; -1: unbounded

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
        return (self.advertised_host or self.host, self.advertised_port or self.port)

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
            elif name in GROUP_PROPERTY_NAMES:
                candidate = {**self.group_properties, name: value}
                try:
                    GroupCoordinatorConfig.from_properties(candidate)
                except ValueError as e:
                    raise ConfigError(str(e)) from None
                self.group_properties = candidate
            else:
                known = sorted(
                    [
                        "auto.create.topics.enable",
                        "num.partitions",
                        "node.id",
                        "socket.request.max.bytes",
                        "log.retention.check.interval.ms",
                        "offsets.topic.num.partitions",
                        "offsets.topic.segment.bytes",
                        "log.cleaner.enable",
                        "log.cleaner.backoff.ms",
                        "max.connections",
                        "max.connections.per.ip",
                        "connections.max.idle.ms",
                        "queued.max.request.bytes",
                        *GROUP_PROPERTY_NAMES,
                        *_LOG_DEFAULT_NAMES,
                    ]
                )
                raise ConfigError(f"unknown broker property {name!r}; known: {', '.join(known)}")
