"""What the Admin client takes and returns, the constants of the admin APIs, and small parsers."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from groupstream.protocol.consumer_protocol import (
    ConsumerAssignment,
    ConsumerSubscription,
)
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.errors import PeerProtocolError

_T = TypeVar("_T")

# ListOffsets' special timestamps
LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
_OFFSET_SPECS = {"latest": LATEST, "earliest": EARLIEST, "max-timestamp": MAX_TIMESTAMP}

_TOPIC_RESOURCE = 2
# Kafka's DescribeConfigsResponse.ConfigSource, by id
CONFIG_SOURCES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG",
    8: "GROUP_CONFIG",
}
_DEFAULT_CONFIG = 5


@dataclass(frozen=True)
class NewTopic:
    """What to create; -1 means the broker's default (``num.partitions``, ``default.replication.factor``)."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    config: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CreatedTopic:
    name: str
    topic_id: uuid.UUID | None
    num_partitions: int
    replication_factor: int


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: str
    is_default: bool
    read_only: bool
    is_sensitive: bool


@dataclass(frozen=True)
class ListedOffset:
    """``offset`` is -1 when no record matches (a timestamp after the last record)."""

    offset: int
    timestamp: int
    leader_epoch: int = -1


@dataclass(frozen=True)
class OffsetAndMetadata:
    """A committed position: the offset of the next record to consume, and the committer's metadata string."""

    offset: int
    metadata: str | None = ""
    leader_epoch: int = -1


@dataclass(frozen=True)
class PartitionLag:
    """A group's position in one partition: ``log_end`` None when the partition no longer exists."""

    committed: int
    log_end: int | None

    @property
    def lag(self) -> int | None:
        return None if self.log_end is None else max(self.log_end - self.committed, 0)


@dataclass(frozen=True)
class ListedGroup:
    """One row of ListGroups. ``state`` and ``group_type`` are None when the broker's version lacks them."""

    group_id: str
    protocol_type: str
    state: str | None = None
    group_type: str | None = None


@dataclass(frozen=True)
class GroupMember:
    """A member as DescribeGroups shows it. For protocol type ``consumer`` the raw metadata and assignment
    bytes are decoded too (None when they do not decode: another protocol mislabelled, or a member of a group
    still rebalancing)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment_bytes: bytes
    subscription: ConsumerSubscription | None = None
    assignment: ConsumerAssignment | None = None

    @property
    def assigned_partitions(self) -> tuple[tuple[str, int], ...]:
        return self.assignment.partitions if self.assignment is not None else ()


@dataclass(frozen=True)
class GroupDescription:
    """A group as its coordinator describes it. A group the coordinator does not know is state ``Dead`` with
    no members (what DescribeGroups v0-v5 answer; v6's GROUP_ID_NOT_FOUND is folded into the same form)."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[GroupMember, ...]
    coordinator_id: int = -1
    coordinator: str = ""

    @property
    def exists(self) -> bool:
        return self.state != "Dead"

    def owners(self) -> dict[tuple[str, int], GroupMember]:
        """Which member is assigned each (topic, partition)."""
        return {tp: m for m in self.members for tp in m.assigned_partitions}


TopicPart = tuple[str, int]

# ConsumerGroupDescribe v1's member type, by id (-1: not reported, as v0 never does)
MEMBER_TYPES = {0: "classic", 1: "consumer"}
# Group types (ListGroups v5), by lower-case name
GROUP_TYPES = {t.lower(): t for t in ("classic", "consumer")}


@dataclass(frozen=True)
class ConsumerGroupMember:
    """A member of a ``consumer`` (KIP-848) group as ConsumerGroupDescribe shows it.

    ``assignment`` is what the member owns now (acknowledged at ``member_epoch``), ``target_assignment`` what the
    group's assignor gave it at the group's assignment epoch, both as sorted (topic, partition) pairs; the
    response names each topic by id and by name, and ``topic_ids`` keeps the ids (a topic the coordinator
    could not name appears under its id as a string). ``state`` is ``stable`` when the member is at the
    group's assignment epoch and owns exactly its target, else ``reconciling`` (it still has to revoke or to
    receive partitions). ``member_type`` is ``consumer`` or ``classic`` when the broker reports it (v1), else
    None.
    """

    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: tuple[TopicPart, ...]
    target_assignment: tuple[TopicPart, ...]
    state: str
    member_type: str | None = None
    topic_ids: Mapping[str, uuid.UUID] = field(default_factory=dict)

    @property
    def reconciling(self) -> bool:
        return self.state != "stable"


@dataclass(frozen=True)
class ConsumerGroupDescription:
    """A ``consumer`` (KIP-848) group as its coordinator describes it: ``group_epoch`` counts the changes of
    its members and subscriptions, ``assignment_epoch`` is the group epoch its target assignment was computed
    at (it trails while the group is ``Assigning``), ``assignor_name`` the server-side assignor in use."""

    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: tuple[ConsumerGroupMember, ...]
    coordinator_id: int = -1
    coordinator: str = ""

    @property
    def stable(self) -> bool:
        """Every member owns its target at the current epochs (nothing left to assign or reconcile)."""
        return self.state == "Stable"

    def owners(self) -> dict[TopicPart, ConsumerGroupMember]:
        """Which member owns each (topic, partition) now."""
        return {tp: m for m in self.members for tp in m.assignment}

    def targets(self) -> dict[TopicPart, ConsumerGroupMember]:
        """Which member each (topic, partition) is assigned to in the target assignment."""
        return {tp: m for m in self.members for tp in m.target_assignment}


# The group states Kafka names, by lower-case name, so a user's "stable" filters like "Stable".
GROUP_STATES = {
    s.lower(): s
    for s in (
        "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Assigning", "Reconciling",
        "NotReady",
    )
}  # fmt: skip
_COORDINATOR_ERRORS = frozenset(
    {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
)
_GROUP_KEY = 0  # FindCoordinator key type of a consumer group
# OffsetCommit/OffsetFetch v10 name topics by id; the admin names them, so it stops at v9.
_MAX_OFFSET_API_VERSION = 9


class _Retry(Exception):
    """The coordinator moved, is not there yet, or is still loading: find it again and retry."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def parse_group_state(text: str) -> str:
    """A user's state name (any case) as Kafka spells it; raises ValueError listing the known ones."""
    found = GROUP_STATES.get(text.strip().lower())
    if found is None:
        raise ValueError(f"unknown group state {text!r}; known: {', '.join(GROUP_STATES.values())}")
    return found


def parse_group_type(text: str) -> str:
    """A user's group type name (any case) as Kafka spells it; raises ValueError listing the known ones."""
    found = GROUP_TYPES.get(text.strip().lower())
    if found is None:
        raise ValueError(f"unknown group type {text!r}; known: {', '.join(GROUP_TYPES.values())}")
    return found


def parse_offset_spec(spec: str | int) -> int:
    """ "earliest", "latest", "max-timestamp" or a timestamp in ms (>= 0) to ListOffsets' timestamp field."""
    if isinstance(spec, bool):
        raise ValueError(f"offset spec must be earliest, latest, max-timestamp or a timestamp, got {spec!r}")
    if isinstance(spec, int):
        if spec < MAX_TIMESTAMP:
            raise ValueError(f"timestamp must be >= 0 (or -1 latest, -2 earliest, -3 max), got {spec}")
        return spec
    key = spec.strip().lower().replace("_", "-")
    if key in _OFFSET_SPECS:
        return _OFFSET_SPECS[key]
    if key.isdigit():
        return int(key)
    raise ValueError(
        f"offset spec must be earliest, latest, max-timestamp or a timestamp in ms, got {spec!r}"
    )


def _by_topic(pairs: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, partition in sorted(set(pairs)):
        out.setdefault(topic, []).append(partition)
    return out


def _decoded(decode: Callable[[bytes], _T], raw: bytes | memoryview) -> _T | None:
    """Decode consumer-protocol bytes, or None when they are not (the group only claims protocol "consumer")."""
    try:
        return decode(bytes(raw))
    except PeerProtocolError:
        return None
