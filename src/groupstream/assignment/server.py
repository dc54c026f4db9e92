"""The server-side assignor interface (KIP-848): the coordinator computes each group's target assignment.

The coordinator resolves subscriptions (topic names and regular expressions) to topic names before it
calls an assignor, and passes each member's current target assignment, so that assignors can be sticky.
``group.remote.assignor`` picks the assignor by name; the names are Kafka's.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import pairwise
from typing import ClassVar

from groupstream.assignment.base import AssignorError
from groupstream.assignment.types import ClusterView, GroupAssignment, TopicPartition

__all__ = ["GroupSpec", "MemberSpec", "ServerPartitionAssignor"]


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """One member as the coordinator sees it: what it subscribes to and what it is currently targeted with."""

    member_id: str
    subscribed_topics: frozenset[str]
    assigned: frozenset[TopicPartition] = frozenset()
    instance_id: str | None = None
    rack_id: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "subscribed_topics", frozenset(self.subscribed_topics))
        object.__setattr__(self, "assigned", frozenset(self.assigned))


@dataclass(frozen=True, slots=True)
class GroupSpec:
    """All members of a group, sorted by member id; member ids are unique."""

    members: tuple[MemberSpec, ...]

    def __init__(self, members: Iterable[MemberSpec]) -> None:
        ordered = tuple(sorted(members, key=lambda m: m.member_id))
        for before, after in pairwise(ordered):
            if before.member_id == after.member_id:
                raise AssignorError(f"member {after.member_id!r} appears twice in the group")
        object.__setattr__(self, "members", ordered)

    def __iter__(self) -> Iterator[MemberSpec]:
        return iter(self.members)

    def __len__(self) -> int:
        return len(self.members)


class ServerPartitionAssignor(ABC):
    """A KIP-848 assignor: deterministic, and every member of the group appears in the result."""

    name: ClassVar[str]

    @abstractmethod
    def assign(self, group: GroupSpec, topics: ClusterView) -> GroupAssignment:
        """The new target assignment; topics unknown to ``topics`` have nothing to assign and are skipped."""
