"""The consumer protocol's embedded formats: the Subscription a member sends in JoinGroup and the Assignment
its leader hands out through SyncGroup.

The classic group coordinator carries these bytes through untouched (protocol type ``consumer``); admin
tools decode them to show who owns which partition (DescribeGroups carries them in ``member_metadata`` and
``member_assignment``). Each is an int16 version followed by a non-flexible struct:

- Subscription v0: topics, user data; v1 adds owned partitions (cooperative rebalancing, KIP-429); v2 the
  generation the owned partitions belong to (KIP-792); v3 the rack id (KIP-881).
- Assignment v0: assigned partitions, user data; v1-v3 have the same layout (their numbers only track the
  subscription's).

Kafka's published rule for both: a newer version only appends fields, so a reader decodes a version above
the highest it knows with the highest layout it knows and ignores the rest. Bytes that are empty (a member
of a group still rebalancing has no assignment yet) decode to an empty value rather than an error.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from groupstream.protocol import primitives as P
from groupstream.protocol.compiler import CompiledStruct
from groupstream.protocol.errors import PeerProtocolError
from groupstream.protocol.schema import NULL, Array, Field, Struct

__all__ = [
    "CONSUMER_PROTOCOL_TYPE",
    "ConsumerAssignment",
    "ConsumerSubscription",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
]

CONSUMER_PROTOCOL_TYPE = "consumer"
SUBSCRIPTION_MAX_VERSION = 3
ASSIGNMENT_MAX_VERSION = 3

_SUBSCRIPTION = CompiledStruct(
    "ConsumerProtocolSubscription",
    Struct(
        "ConsumerProtocolSubscription",
        Field("topics", Array("string")),
        Field("user_data", "bytes", nullable="0+", default=NULL),
        Field(
            "owned_partitions",
            Array(
                Struct(
                    "TopicPartition",
                    Field("topic", "string", versions="1+"),
                    Field("partitions", Array("int32"), versions="1+"),
                )
            ),
            versions="1+",
            ignorable=True,
        ),
        Field("generation_id", "int32", versions="2+", default=-1, ignorable=True),
        Field("rack_id", "string", versions="3+", nullable="3+", default=NULL, ignorable=True),
    ),
    valid=f"0-{SUBSCRIPTION_MAX_VERSION}",
)

_ASSIGNMENT = CompiledStruct(
    "ConsumerProtocolAssignment",
    Struct(
        "ConsumerProtocolAssignment",
        Field(
            "assigned_partitions",
            Array(
                Struct(
                    "TopicPartition",
                    Field("topic", "string"),
                    Field("partitions", Array("int32")),
                )
            ),
        ),
        Field("user_data", "bytes", nullable="0+", default=NULL),
    ),
    valid=f"0-{ASSIGNMENT_MAX_VERSION}",
)

TopicPartitions = tuple[tuple[str, int], ...]


def _flatten(items: Iterable[object]) -> TopicPartitions:
    """(topic, [partitions]) structs to sorted (topic, partition) pairs: the form callers compare."""
    return tuple(sorted((it.topic, int(p)) for it in items for p in it.partitions))  # type: ignore[attr-defined]


def _group(pairs: Iterable[tuple[str, int]]) -> list[tuple[str, list[int]]]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(set(pairs)):
        by_topic.setdefault(topic, []).append(partition)
    return list(by_topic.items())


@dataclass(frozen=True, slots=True)
class ConsumerSubscription:
    """What a member subscribes to; ``version`` is the one it was encoded at (as sent, before capping)."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: TopicPartitions = ()
    generation_id: int = -1
    rack_id: str | None = None
    version: int = SUBSCRIPTION_MAX_VERSION


@dataclass(frozen=True, slots=True)
class ConsumerAssignment:
    """The partitions a member was given, as sorted (topic, partition) pairs."""

    partitions: TopicPartitions
    user_data: bytes | None = None
    version: int = 0

    def by_topic(self) -> Mapping[str, tuple[int, ...]]:
        return {t: tuple(ps) for t, ps in _group(self.partitions)}


def _read_version(buf: bytes | memoryview, what: str) -> int:
    if len(buf) < 2:
        raise PeerProtocolError(f"{what} of {len(buf)} bytes has no version")
    (version,) = P.I16.unpack_from(buf, 0)
    if version < 0:
        raise PeerProtocolError(f"{what} has negative version {version}")
    return int(version)


def decode_subscription(buf: bytes | memoryview) -> ConsumerSubscription:
    """Decode JoinGroup/DescribeGroups member metadata of protocol type ``consumer``."""
    version = _read_version(buf, "consumer subscription")
    msg, _ = _SUBSCRIPTION.decode(buf, min(version, SUBSCRIPTION_MAX_VERSION), 2)
    user_data = None if msg.user_data is None else bytes(msg.user_data)
    return ConsumerSubscription(
        topics=tuple(msg.topics),
        user_data=user_data,
        owned_partitions=_flatten(msg.owned_partitions),
        generation_id=msg.generation_id,
        rack_id=msg.rack_id,
        version=version,
    )


def decode_assignment(buf: bytes | memoryview) -> ConsumerAssignment:
    """Decode SyncGroup/DescribeGroups member assignment bytes; empty bytes are an empty assignment."""
    if len(buf) == 0:
        return ConsumerAssignment(())
    version = _read_version(buf, "consumer assignment")
    msg, _ = _ASSIGNMENT.decode(buf, min(version, ASSIGNMENT_MAX_VERSION), 2)
    user_data = None if msg.user_data is None else bytes(msg.user_data)
    return ConsumerAssignment(_flatten(msg.assigned_partitions), user_data, version)


def encode_subscription(sub: ConsumerSubscription, version: int | None = None) -> bytes:
    """Encode at ``version`` (default: ``sub.version``); fields the version lacks must keep their defaults."""
    v = sub.version if version is None else version
    S = _SUBSCRIPTION.Type
    owned = [S.TopicPartition(topic=t, partitions=ps) for t, ps in _group(sub.owned_partitions)]
    if v < 1:
        # ignorable in Kafka's schema: an older version simply does not carry it
        owned = []
    msg = S(
        topics=list(sub.topics),
        user_data=sub.user_data,
        owned_partitions=owned,
        generation_id=sub.generation_id,
        rack_id=sub.rack_id if v >= 3 else None,
    )
    return P.I16.pack(v) + _SUBSCRIPTION.encode(msg, v)


def encode_assignment(assignment: ConsumerAssignment, version: int | None = None) -> bytes:
    v = assignment.version if version is None else version
    A = _ASSIGNMENT.Type
    parts = [A.TopicPartition(topic=t, partitions=ps) for t, ps in _group(assignment.partitions)]
    return P.I16.pack(v) + _ASSIGNMENT.encode(A(assigned_partitions=parts, user_data=assignment.user_data), v)
