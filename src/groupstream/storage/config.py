"""Per-topic log configuration, whose external form is Kafka's topic config names.

Admin clients send ``segment.bytes=...`` in CreateTopics and read them back through DescribeConfigs, so the
property names are the contract; the dataclass fields are only their Python spelling.

``flush.policy`` is ours (Kafka expresses the same with ``flush.messages``/``flush.ms``):

- ``always``: every acknowledged ``acks=all`` produce is on disk. The broker holds the response until the
  partition's ``flushed_offset`` passes the batch (flushes are grouped, one fsync for many appends).
- ``interval``: a background flusher fsyncs dirty partitions every ``flush.interval.ms``; a power loss may
  lose up to that much acknowledged data, a killed process loses nothing (writes never sit in a user buffer).
- ``os``: never fsync except on roll, close and shutdown; the kernel decides, as with Kafka's defaults.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


class FlushPolicy(StrEnum):
    ALWAYS = "always"
    INTERVAL = "interval"
    OS = "os"


class TimestampType(StrEnum):
    CREATE_TIME = "CreateTime"
    LOG_APPEND_TIME = "LogAppendTime"


class CleanupPolicy(StrEnum):
    DELETE = "delete"
    COMPACT = "compact"


# Kafka topic configs we accept, store and echo back but do not act on (yet). Accepting them keeps
# `kafka-topics --config min.insync.replicas=1` and similar admin calls working.
PASSTHROUGH_PROPERTIES = frozenset(
    {
        "compression.type",
        "delete.retention.ms",
        "file.delete.delay.ms",
        "flush.messages",
        "flush.ms",
        "follower.replication.throttled.replicas",
        "leader.replication.throttled.replicas",
        "local.retention.bytes",
        "local.retention.ms",
        "max.compaction.lag.ms",
        "message.downconversion.enable",
        "message.format.version",
        "message.timestamp.after.max.ms",
        "message.timestamp.before.max.ms",
        "message.timestamp.difference.max.ms",
        "min.cleanable.dirty.ratio",
        "min.compaction.lag.ms",
        "min.insync.replicas",
        "preallocate",
        "remote.storage.enable",
        "segment.jitter.ms",
        "unclean.leader.election.enable",
    }
)

# The topic configs Kafka types as LIST (comma-separated): the only ones IncrementalAlterConfigs may APPEND to
# or SUBTRACT from.
LIST_PROPERTIES = frozenset(
    {"cleanup.policy", "follower.replication.throttled.replicas", "leader.replication.throttled.replicas"}
)


def _bad(name: str, value: object, why: str) -> ValueError:
    return ValueError(f"invalid value {value!r} for configuration {name}: {why}")


def _int_at_least(minimum: int, maximum: int = INT64_MAX) -> Callable[[str, str], int]:
    def parse(name: str, text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise _bad(name, text, "not an integer") from None
        _check_int(name, value, minimum, maximum, shown=text)
        return value

    return parse


def _check_int(name: str, value: object, minimum: int, maximum: int, shown: object = None) -> None:
    shown = value if shown is None else shown
    if not isinstance(value, int) or isinstance(value, bool):
        raise _bad(name, shown, "not an integer")
    if value < minimum or value > maximum:
        raise _bad(name, shown, f"must be in [{minimum}, {maximum}]")


def _enum(kind: type[StrEnum]) -> Callable[[str, str], StrEnum]:
    def parse(name: str, text: str) -> StrEnum:
        try:
            return kind(text.strip())
        except ValueError:
            allowed = ", ".join(m.value for m in kind)
            raise _bad(name, text, f"must be one of {allowed}") from None

    return parse


def _cleanup(name: str, text: str) -> tuple[CleanupPolicy, ...]:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise _bad(name, text, "must list delete and/or compact")
    out: list[CleanupPolicy] = []
    for p in parts:
        try:
            policy = CleanupPolicy(p)
        except ValueError:
            raise _bad(name, text, f"{p!r} is not delete or compact") from None
        if policy not in out:
            out.append(policy)
    return tuple(sorted(out))


def _ratio(name: str, text: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise _bad(name, text, "not a number") from None
    if not 0.0 <= value <= 1.0:
        raise _bad(name, text, "must be in [0, 1]")
    return value


# Stored as passthrough text (the cleaner reads them back), but checked like the properties above.
_PASSTHROUGH_CHECKS: dict[str, Callable[[str, str], object]] = {
    "delete.retention.ms": _int_at_least(0),
    "min.compaction.lag.ms": _int_at_least(0),
    "min.cleanable.dirty.ratio": _ratio,
}


@dataclass(frozen=True, slots=True)
class _Prop:
    field: str
    parse: Callable[[str, str], Any]
    render: Callable[[Any], str]
    minimum: int = 0
    maximum: int = INT64_MAX


_PROPS: dict[str, _Prop] = {
    "segment.bytes": _Prop("segment_bytes", _int_at_least(14, INT32_MAX), str, 14, INT32_MAX),
    "segment.ms": _Prop("segment_ms", _int_at_least(1), str, 1),
    "retention.ms": _Prop("retention_ms", _int_at_least(-1), str, -1),
    "retention.bytes": _Prop("retention_bytes", _int_at_least(-1), str, -1),
    "segment.index.bytes": _Prop("segment_index_bytes", _int_at_least(12, INT32_MAX), str, 12, INT32_MAX),
    "index.interval.bytes": _Prop("index_interval_bytes", _int_at_least(0, INT32_MAX), str, 0, INT32_MAX),
    "cleanup.policy": _Prop("cleanup_policy", _cleanup, lambda v: ",".join(p.value for p in v)),
    "flush.policy": _Prop("flush_policy", _enum(FlushPolicy), lambda v: v.value),
    "flush.interval.ms": _Prop("flush_interval_ms", _int_at_least(1), str, 1),
    "max.message.bytes": _Prop("max_message_bytes", _int_at_least(0, INT32_MAX), str, 0, INT32_MAX),
    "message.timestamp.type": _Prop("message_timestamp_type", _enum(TimestampType), lambda v: v.value),
}


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Validated on construction, so a LogConfig in hand is always usable."""

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    cleanup_policy: tuple[CleanupPolicy, ...] = (CleanupPolicy.DELETE,)
    flush_policy: FlushPolicy = FlushPolicy.INTERVAL
    flush_interval_ms: int = 1000
    max_message_bytes: int = 1048588
    message_timestamp_type: TimestampType = TimestampType.CREATE_TIME
    passthrough: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        for name, prop in _PROPS.items():
            value = getattr(self, prop.field)
            if prop.render is str:
                _check_int(name, value, prop.minimum, prop.maximum)
        if not isinstance(self.flush_policy, FlushPolicy):
            raise _bad("flush.policy", self.flush_policy, "not a FlushPolicy")
        if not isinstance(self.message_timestamp_type, TimestampType):
            raise _bad("message.timestamp.type", self.message_timestamp_type, "not a TimestampType")
        if not self.cleanup_policy or not all(isinstance(p, CleanupPolicy) for p in self.cleanup_policy):
            raise _bad("cleanup.policy", self.cleanup_policy, "must list delete and/or compact")
        for key, _ in self.passthrough:
            if key not in PASSTHROUGH_PROPERTIES:
                raise ValueError(f"unknown configuration {key}")

    @classmethod
    def from_properties(cls, props: Mapping[str, str], base: LogConfig | None = None) -> LogConfig:
        """Kafka property names to a config; unset names keep ``base`` (the broker defaults)."""
        return (base or cls()).with_overrides(props)

    def with_overrides(self, props: Mapping[str, str]) -> LogConfig:
        changes: dict[str, Any] = {}
        extra = dict(self.passthrough)
        for name, text in props.items():
            if not isinstance(text, str):
                raise _bad(name, text, "property values are strings")
            prop = _PROPS.get(name)
            if prop is not None:
                changes[prop.field] = prop.parse(name, text)
            elif name in PASSTHROUGH_PROPERTIES:
                check = _PASSTHROUGH_CHECKS.get(name)
                if check is not None:
                    check(name, text)
                extra[name] = text
            else:
                raise ValueError(f"unknown configuration {name} (value {text!r})")
        changes["passthrough"] = tuple(sorted(extra.items()))
        return replace(self, **changes)

    def to_properties(self) -> dict[str, str]:
        out = {name: prop.render(getattr(self, prop.field)) for name, prop in _PROPS.items()}
        out.update(self.passthrough)
        return out

    @property
    def deletes(self) -> bool:
        """Whether time and size retention apply (Kafka skips them for compact-only topics)."""
        return CleanupPolicy.DELETE in self.cleanup_policy


PROPERTY_NAMES = frozenset(_PROPS) | PASSTHROUGH_PROPERTIES
