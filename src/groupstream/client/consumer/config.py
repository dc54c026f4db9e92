"""Consumer configuration under the Java client's property names, checked once at construction.

Defaults are Kafka 4's. ``group.protocol`` is ``classic`` (JoinGroup/SyncGroup, client-side assignors) unless
set to ``consumer`` (KIP-848: the broker assigns). ``partition.assignment.strategy`` takes assignor names
(``range``, ``roundrobin``, ``sticky``, ``cooperative-sticky``, comma separated, in preference order) or
assignor objects; Kafka 4's default is ``range, cooperative-sticky``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from groupstream.client.errors import ClientConfigError
from groupstream.client.net.config import NETWORK_PROPERTIES, NetworkConfig, PropertyReader

__all__ = ["CONSUMER_PROPERTIES", "ConsumerConfig"]

Deserializer = Callable[[bytes | None], Any]

CONSUMER_PROPERTIES = (
    *NETWORK_PROPERTIES,
    "group.id",
    "group.instance.id",
    "group.protocol",
    "group.remote.assignor",
    "partition.assignment.strategy",
    "client.rack",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "max.poll.interval.ms",
    "max.poll.records",
    "enable.auto.commit",
    "auto.commit.interval.ms",
    "auto.offset.reset",
    "fetch.min.bytes",
    "fetch.max.bytes",
    "fetch.max.wait.ms",
    "max.partition.fetch.bytes",
    "isolation.level",
    "default.api.timeout.ms",
    "check.crcs",
    "key.deserializer",
    "value.deserializer",
)

_PROTOCOLS = {"classic": "classic", "consumer": "consumer"}
_RESETS = {"earliest": "earliest", "latest": "latest", "none": "none", "smallest": "earliest", "largest": "latest"}
_ISOLATION = {"read_uncommitted": 0, "read_committed": 1}
_DEFAULT_STRATEGY = "range,cooperative-sticky"


@dataclass(frozen=True)
class ConsumerConfig:
    network: NetworkConfig
    group_id: str | None = None
    group_instance_id: str | None = None
    group_protocol: str = "classic"
    group_remote_assignor: str | None = None
    assignors: tuple[Any, ...] = ("range", "cooperative-sticky")
    client_rack: str | None = None
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 3_000
    max_poll_interval_ms: int = 300_000
    max_poll_records: int = 500
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5_000
    auto_offset_reset: str = "latest"
    fetch_min_bytes: int = 1
    fetch_max_bytes: int = 52_428_800
    fetch_max_wait_ms: int = 500
    max_partition_fetch_bytes: int = 1_048_576
    isolation_level: int = 0
    default_api_timeout_ms: int = 60_000
    check_crcs: bool = True
    key_deserializer: Deserializer | None = None
    value_deserializer: Deserializer | None = None

    @classmethod
    def from_mapping(cls, props: Mapping[str, Any] | None) -> ConsumerConfig:
        r = PropertyReader(props, CONSUMER_PROPERTIES)
        network = NetworkConfig.read(r, "groupstream-consumer")
        group_id = r.raw("group.id")
        if group_id is not None and (not isinstance(group_id, str) or not group_id):
            raise ClientConfigError(f"group.id must be a non-empty string, got {group_id!r}")
        instance = r.raw("group.instance.id")
        if instance is not None and (not isinstance(instance, str) or not instance):
            raise ClientConfigError(f"group.instance.id must be a non-empty string, got {instance!r}")
        protocol = r.choice("group.protocol", "classic", _PROTOCOLS)
        session = r.int_("session.timeout.ms", cls.session_timeout_ms, minimum=1)
        heartbeat = r.int_("heartbeat.interval.ms", cls.heartbeat_interval_ms, minimum=1)
        if protocol == "classic" and heartbeat >= session:
            raise ClientConfigError(
                f"heartbeat.interval.ms ({heartbeat}) must be lower than session.timeout.ms ({session})"
            )
        if protocol == "consumer":
            for name in ("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy"):
                if r.has(name):
                    raise ClientConfigError(
                        f"{name} is not used with group.protocol=consumer: the broker decides it "
                        "(group.consumer.* broker properties; group.remote.assignor picks the assignor)"
                    )
        fetch_min = r.int_("fetch.min.bytes", cls.fetch_min_bytes, minimum=0)
        fetch_max = r.int_("fetch.max.bytes", cls.fetch_max_bytes, minimum=1)
        return cls(
            network=network,
            group_id=group_id,
            group_instance_id=instance,
            group_protocol=protocol,
            group_remote_assignor=r.raw("group.remote.assignor"),
            assignors=_strategy(r.raw("partition.assignment.strategy", _DEFAULT_STRATEGY)),
            client_rack=r.raw("client.rack"),
            session_timeout_ms=session,
            heartbeat_interval_ms=heartbeat,
            max_poll_interval_ms=r.int_("max.poll.interval.ms", cls.max_poll_interval_ms, minimum=1),
            max_poll_records=r.int_("max.poll.records", cls.max_poll_records, minimum=1),
            enable_auto_commit=r.bool_("enable.auto.commit", group_id is not None),
            auto_commit_interval_ms=r.int_("auto.commit.interval.ms", cls.auto_commit_interval_ms, minimum=0),
            auto_offset_reset=r.choice("auto.offset.reset", "latest", _RESETS),
            fetch_min_bytes=fetch_min,
            fetch_max_bytes=fetch_max,
            fetch_max_wait_ms=r.int_("fetch.max.wait.ms", cls.fetch_max_wait_ms, minimum=0),
            max_partition_fetch_bytes=r.int_("max.partition.fetch.bytes", cls.max_partition_fetch_bytes, minimum=1),
            isolation_level=r.choice("isolation.level", "read_uncommitted", _ISOLATION),
            default_api_timeout_ms=r.int_("default.api.timeout.ms", cls.default_api_timeout_ms, minimum=1),
            check_crcs=r.bool_("check.crcs", True),
            key_deserializer=r.callable_("key.deserializer"),
            value_deserializer=r.callable_("value.deserializer"),
        )


def _strategy(raw: Any) -> tuple[Any, ...]:
    """Names (a comma-separated string or a list) and assignor objects, checked against the registry."""
    from groupstream.assignment.base import ConsumerPartitionAssignor
    from groupstream.assignment.registry import CLIENT_ASSIGNORS

    items: Sequence[Any] = [s.strip() for s in raw.split(",") if s.strip()] if isinstance(raw, str) else list(raw)
    if not items:
        raise ClientConfigError("partition.assignment.strategy names no assignor")
    out = []
    for item in items:
        if isinstance(item, str):
            if item not in CLIENT_ASSIGNORS:
                raise ClientConfigError(
                    f"partition.assignment.strategy: unknown assignor {item!r} (range, roundrobin, sticky, "
                    "cooperative-sticky, or an assignor object)"
                )
            out.append(CLIENT_ASSIGNORS[item])
        elif isinstance(item, ConsumerPartitionAssignor):
            out.append(item)
        else:
            raise ClientConfigError(
                f"partition.assignment.strategy: {item!r} is not an assignor (subclass "
                "groupstream.assignment.base.ConsumerPartitionAssignor)"
            )
    return tuple(out)
