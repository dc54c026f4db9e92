"""The one ``TopicPartition`` type of the code base: one partition of one topic, by name.

A ``NamedTuple`` rather than a dataclass because partitions are made and looked up on hot paths (the
producer's queues, the consumer's fetch positions, the broker's purgatory, every assignor) and were also
written as plain ``(topic, partition)`` tuples in half the code: a ``TopicPartition`` equals, hashes and
sorts exactly as that tuple does, so dict keys built either way meet, tuple unpacking keeps working and the
order is Kafka's (topic name, then partition number), compared in C.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple, TypeAlias, TypeVar

__all__ = ["ByPartition", "TopicPartition", "by_partition"]


class TopicPartition(NamedTuple):
    """One partition of one topic; ordered by topic name, then partition number, as Kafka sorts them."""

    topic: str
    partition: int

    def __repr__(self) -> str:
        return f"{self.topic}-{self.partition}"


_V = TypeVar("_V")

ByPartition: TypeAlias = Mapping[TopicPartition, _V] | Mapping[tuple[str, int], _V]
"""A mapping keyed by partition as a caller built it, with TopicPartition keys or plain ``(topic, partition)``
tuples (a ``Mapping`` is invariant in its key type, so an API taking either says so)."""


def by_partition(items: ByPartition[_V]) -> dict[TopicPartition, _V]:
    """``items`` keyed by TopicPartition: what an API taking `ByPartition` works on after its first line."""
    return {TopicPartition(t, p): v for (t, p), v in items.items()}
