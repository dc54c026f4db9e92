"""Timer keys of a coordinator shard: strings the runtime treats as opaque, that the shard parses back.

Kafka builds its keys as ``"heartbeat-" + group + "-" + member``, which is ambiguous when ids contain dashes.
Ours carry the group id's length, so any group or member id (dashes, colons, empty) round-trips exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = [
    "RETENTION_KEY",
    "TimerKey",
    "TimerKind",
    "classic_rebalance_key",
    "consumer_join_key",
    "consumer_rebalance_key",
    "consumer_session_key",
    "consumer_sync_key",
    "heartbeat_key",
    "join_key",
    "parse_key",
    "sync_key",
    "takeover_key",
]


class TimerKind(Enum):
    HEARTBEAT = "heartbeat"
    """A member's session (or a new/pending member's join) deadline."""
    JOIN = "join"
    """A group's rebalance timeout, or a step of its initial rebalance delay."""
    SYNC = "sync"
    """How long a group waits for every member's SyncGroup after the join phase."""
    TAKEOVER = "takeover"
    """When a newcomer may take a static member's instance id if that member stays silent; ``member_id`` of
    its key is the instance id."""
    CONSUMER_SESSION = "consumer-session"
    """A ``consumer`` group member's session: it is fenced when no heartbeat renews it."""
    CONSUMER_REBALANCE = "consumer-rebalance"
    """How long a ``consumer`` group member may take to revoke partitions before it is fenced."""
    CONSUMER_JOIN = "consumer-join"
    """How long a classic member of a ``consumer`` group, told to rejoin, may take to send its JoinGroup."""
    CONSUMER_SYNC = "consumer-sync"
    """How long a classic member of a ``consumer`` group may take from its JoinGroup to its SyncGroup."""
    CLASSIC_REBALANCE = "classic-rebalance"
    """A consumer group just became a classic group (online downgrade): rebalance it, once replayed."""
    RETENTION = "offsets-retention"
    """The shard-wide periodic offsets expiry check."""


RETENTION_KEY = TimerKind.RETENTION.value
_MEMBER_KINDS = frozenset({TimerKind.HEARTBEAT, TimerKind.TAKEOVER, TimerKind.CONSUMER_SESSION,
                           TimerKind.CONSUMER_REBALANCE, TimerKind.CONSUMER_JOIN, TimerKind.CONSUMER_SYNC})  # fmt: skip


@dataclass(frozen=True, slots=True)
class TimerKey:
    kind: TimerKind
    group_id: str = ""
    member_id: str = ""


_VALUE = {kind: kind.value for kind in TimerKind}  # an Enum's .value is a descriptor call: heartbeats are hot


def _group_key(kind: TimerKind, group_id: str) -> str:
    return f"{_VALUE[kind]}:{len(group_id)}:{group_id}"


def heartbeat_key(group_id: str, member_id: str) -> str:
    return f"{_group_key(TimerKind.HEARTBEAT, group_id)}:{member_id}"


def takeover_key(group_id: str, instance_id: str) -> str:
    return f"{_group_key(TimerKind.TAKEOVER, group_id)}:{instance_id}"


def consumer_session_key(group_id: str, member_id: str) -> str:
    return f"{_group_key(TimerKind.CONSUMER_SESSION, group_id)}:{member_id}"


def consumer_rebalance_key(group_id: str, member_id: str) -> str:
    return f"{_group_key(TimerKind.CONSUMER_REBALANCE, group_id)}:{member_id}"


def consumer_join_key(group_id: str, member_id: str) -> str:
    return f"{_group_key(TimerKind.CONSUMER_JOIN, group_id)}:{member_id}"


def consumer_sync_key(group_id: str, member_id: str) -> str:
    return f"{_group_key(TimerKind.CONSUMER_SYNC, group_id)}:{member_id}"


def join_key(group_id: str) -> str:
    return _group_key(TimerKind.JOIN, group_id)


def classic_rebalance_key(group_id: str) -> str:
    return _group_key(TimerKind.CLASSIC_REBALANCE, group_id)


def sync_key(group_id: str) -> str:
    return _group_key(TimerKind.SYNC, group_id)


def parse_key(key: str) -> TimerKey | None:
    """The key's meaning, or None for a key this shard never made (the runtime may share a timer wheel)."""
    if key == RETENTION_KEY:
        return TimerKey(TimerKind.RETENTION)
    kind_text, sep, rest = key.partition(":")
    try:
        kind = TimerKind(kind_text)
    except ValueError:
        return None
    length_text, sep2, rest = rest.partition(":")
    if not sep or not sep2 or not length_text.isdigit():
        return None
    length = int(length_text)
    if len(rest) < length:
        return None
    group_id, tail = rest[:length], rest[length:]
    if kind in _MEMBER_KINDS:
        if not tail.startswith(":"):
            return None
        return TimerKey(kind, group_id, tail[1:])
    if tail or kind is TimerKind.RETENTION:
        return None
    return TimerKey(kind, group_id)
