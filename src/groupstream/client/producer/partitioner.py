"""Choosing a partition for a record that names none. The random source is passed in; the caller holds the
accumulator's lock (the sticky partition lives in the topic's route, shared by every producing thread).

Keyed records go where Java's default partitioner puts them: ``toPositive(murmur2(key)) % partitions``, so
keys land on the same partitions as with Java clients and librdkafka's ``murmur2_random``. Records without a
key stick to one partition until its batch is full, then move to another partition that has a leader, picked
at random (the sticky partitioner of KIP-480): batches fill up instead of a trickle of tiny batches to every
partition. ``uniform_sticky`` applies the sticky rule to keyed
records too (Java's ``partitioner.ignore.keys=true``); a callable decides by itself.
"""

from __future__ import annotations

from collections.abc import Callable

from groupstream.client.producer import encode
from groupstream.client.producer.accumulator import TopicRoute
from groupstream.client.producer.config import PartitionerFn


class Partitioner:
    def __init__(self, mode: str | PartitionerFn, randrange: Callable[[int], int]) -> None:
        self.custom: PartitionerFn | None = mode if callable(mode) else None
        self.use_keys = mode != "uniform_sticky"
        self._randrange = randrange

    def partition(self, route: TopicRoute, key: bytes | None) -> int:
        """The partition of a record that names none. A custom partitioner's answer is not checked here."""
        if self.custom is not None:
            return self.custom(route.topic, key, route.count)
        if key is not None and self.use_keys:
            return encode.key_partition(key, route.count)
        return self.sticky(route)

    def sticky(self, route: TopicRoute) -> int:
        """The partition records without a key go to now."""
        if not 0 <= route.sticky < route.count:
            self.next_sticky(route)
        return route.sticky

    def next_sticky(self, route: TopicRoute) -> int:
        """Move the sticky partition (its batch is full): another partition with a leader, at random."""
        current = route.sticky
        choices = [p for p in route.available if p < route.count] or list(range(route.count))
        if len(choices) > 1 and current in choices:
            choices.remove(current)
        route.sticky = choices[self._randrange(len(choices))]
        return route.sticky
