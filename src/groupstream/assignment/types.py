"""The values every assignor reads and returns: partitions, member subscriptions, the cluster view and the
group assignment.

Assignors run on the group leader (classic protocol) and in the coordinator (KIP-848); both must reach the
same answer from the same inputs whatever order the inputs arrived in. So every value here is frozen,
normalised on construction (topics and owned partitions sorted and de-duplicated) and iterated in a sorted
order, and nothing depends on dict insertion order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from operator import attrgetter
from types import MappingProxyType

from groupstream.protocol.topic_partition import TopicPartition

__all__ = [
    "ClusterView",
    "GroupAssignment",
    "RebalanceProtocol",
    "Subscription",
    "TopicPartition",
    "partition_order",
]

_NO_USER_DATA: Mapping[str, bytes | None] = MappingProxyType({})


partition_order: Callable[[TopicPartition], tuple[str, int]] = attrgetter("topic", "partition")
"""The sort key of TopicPartition's own order: the same order as ``sorted(partitions)`` (kept for the
assignors that sort by an explicit key; TopicPartition, a NamedTuple, compares as its tuple does)."""


class RebalanceProtocol(IntEnum):
    """KIP-429 rebalance protocols; a higher value is preferred when every assignor supports it."""

    EAGER = 0
    COOPERATIVE = 1


@dataclass(frozen=True, slots=True)
class Subscription:
    """What one member told the coordinator in JoinGroup, decoded (ConsumerProtocolSubscription v0-v3).

    ``generation_id`` is ``None`` when the subscription is older than v2 and carried no generation, which is
    different from the explicit default -1: the cooperative assignor then falls back to its user data.
    """

    member_id: str
    topics: tuple[str, ...]
    owned_partitions: tuple[TopicPartition, ...] = ()
    user_data: bytes | None = None
    group_instance_id: str | None = None
    rack_id: str | None = None
    generation_id: int | None = None

    def __post_init__(self) -> None:
        # Sorted and de-duplicated so that two members listing the same topics in another order compare equal.
        object.__setattr__(self, "topics", tuple(sorted(set(self.topics))))
        object.__setattr__(self, "owned_partitions", tuple(sorted(set(self.owned_partitions))))


@dataclass(frozen=True, slots=True, eq=False)
class ClusterView:
    """The read-only metadata an assignor may look at: partition counts and, optionally, replica racks.

    ``partition_racks`` maps a partition to the racks of all its replicas (KIP-881 takes offline and
    out-of-sync replicas into account too); a partition missing from it has no known rack.
    """

    partitions_per_topic: Mapping[str, int]
    partition_racks: Mapping[TopicPartition, frozenset[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        counts = dict(self.partitions_per_topic)
        for topic, count in counts.items():
            if count < 0:
                raise ValueError(f"topic {topic!r} has a negative partition count {count}")
        object.__setattr__(self, "partitions_per_topic", MappingProxyType(counts))
        racks = {tp: frozenset(r) for tp, r in self.partition_racks.items()}
        object.__setattr__(self, "partition_racks", MappingProxyType(racks))

    def partition_count(self, topic: str) -> int:
        """Partitions of ``topic``; 0 for a topic the metadata does not know (nothing to assign)."""
        return self.partitions_per_topic.get(topic, 0)

    def racks(self, tp: TopicPartition) -> frozenset[str]:
        return self.partition_racks.get(tp, frozenset())


class GroupAssignment(Mapping[str, tuple[TopicPartition, ...]]):
    """An assignor's result: member id -> its partitions, members and partitions in sorted order.

    It is a read-only mapping, so it compares equal to a plain dict with the same content. ``user_data``
    carries the optional per-member bytes of ConsumerProtocolAssignment (None for members without any).
    """

    __slots__ = ("_members", "_user_data")

    def __init__(
        self,
        members: Mapping[str, Iterable[TopicPartition]],
        user_data: Mapping[str, bytes | None] = _NO_USER_DATA,
    ) -> None:
        self._members: dict[str, tuple[TopicPartition, ...]] = {
            member: tuple(sorted(members[member], key=partition_order)) for member in sorted(members)
        }
        unknown = set(user_data) - set(self._members)
        if unknown:
            raise ValueError(f"user data for members without an assignment: {sorted(unknown)}")
        self._user_data: Mapping[str, bytes | None] = MappingProxyType(dict(user_data))

    def __getitem__(self, member_id: str) -> tuple[TopicPartition, ...]:
        return self._members[member_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._members)

    def __len__(self) -> int:
        return len(self._members)

    def __repr__(self) -> str:
        return f"GroupAssignment({self._members!r})"

    @property
    def user_data(self) -> Mapping[str, bytes | None]:
        return self._user_data

    def owners(self) -> dict[TopicPartition, str]:
        """Partition -> member; a partition given to two members is a bug the tests look for."""
        return {tp: member for member, tps in self._members.items() for tp in tps}
