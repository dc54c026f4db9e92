"""Assignors by protocol name: ``partition.assignment.strategy`` on the client, ``group.remote.assignor`` on
the broker.

A registry is an immutable value: ``with_assignor`` returns a new one, so a consumer can add its custom
assignors without changing what any other consumer in the process sees.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Generic, Protocol, TypeVar

from groupstream.assignment.base import AssignorError, ConsumerPartitionAssignor
from groupstream.assignment.cooperative import CooperativeStickyAssignor
from groupstream.assignment.range import RangeAssignor
from groupstream.assignment.roundrobin import RoundRobinAssignor
from groupstream.assignment.server import ServerPartitionAssignor
from groupstream.assignment.server_range import ServerRangeAssignor
from groupstream.assignment.sticky import StickyAssignor
from groupstream.assignment.uniform import UniformAssignor

__all__ = [
    "CLIENT_ASSIGNORS",
    "DEFAULT_SERVER_ASSIGNOR",
    "SERVER_ASSIGNORS",
    "AssignorRegistry",
    "UnknownAssignorError",
]


class _Named(Protocol):
    @property
    def name(self) -> str: ...


A = TypeVar("A", bound=_Named)


class UnknownAssignorError(AssignorError, KeyError):
    """No assignor has that name; a KeyError too, so ``registry.get(name)`` returns None as a Mapping should."""

    def __str__(self) -> str:
        return str(self.args[0])


class AssignorRegistry(Mapping[str, A], Generic[A]):
    """Name -> assignor; looking up an unknown name raises AssignorError naming the known ones."""

    __slots__ = ("_by_name",)

    def __init__(self, assignors: Iterable[A]) -> None:
        by_name: dict[str, A] = {}
        for assignor in assignors:
            if not assignor.name:
                raise AssignorError(f"assignor {assignor!r} has no name")
            if assignor.name in by_name:
                raise AssignorError(f"two assignors are named {assignor.name!r}")
            by_name[assignor.name] = assignor
        self._by_name: Mapping[str, A] = MappingProxyType(by_name)

    def __getitem__(self, name: str) -> A:
        try:
            return self._by_name[name]
        except KeyError:
            raise UnknownAssignorError(f"unknown assignor {name!r}; known: {sorted(self._by_name)}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def with_assignor(self, assignor: A) -> AssignorRegistry[A]:
        """A registry with ``assignor`` added, replacing any assignor of the same name."""
        others = [a for name, a in self._by_name.items() if name != assignor.name]
        return AssignorRegistry([*others, assignor])


CLIENT_ASSIGNORS: AssignorRegistry[ConsumerPartitionAssignor] = AssignorRegistry(
    [RangeAssignor(), RoundRobinAssignor(), StickyAssignor(), CooperativeStickyAssignor()]
)
SERVER_ASSIGNORS: AssignorRegistry[ServerPartitionAssignor] = AssignorRegistry(
    [UniformAssignor(), ServerRangeAssignor()]
)
# Kafka's group.consumer.assignors lists uniform first: it is the default for members that name none.
DEFAULT_SERVER_ASSIGNOR = "uniform"
