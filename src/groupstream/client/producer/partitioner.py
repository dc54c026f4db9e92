"""Choosing a partition for a record that names none. Pure: the random source is passed in.

Keyed records go where Java's default partitioner puts them: ``toPositive(murmur2(key)) % partitions``, so
keys land on the same partitions as with Java clients and librdkafka's ``murmur2_random``. Records without a
key stick to one partition until ``batch.size`` bytes went there, then move to another partition that has a
leader, picked at random (the "uniform sticky" rule of KIP-794): batches fill up instead of a trickle of tiny
batches to every partition. ``uniform_sticky`` applies the sticky rule to keyed records too (Java's
``partitioner.ignore.keys=true``); a callable decides by itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from groupstream.client.producer.config import PartitionerFn
from groupstream.protocol.partitioner import default_partition


class Partitioner:
    def __init__(
        self,
        mode: str | PartitionerFn,
        batch_size: int,
        randrange: Callable[[int], int],
        available: Callable[[str], Sequence[int]],
    ) -> None:
        self._available = available  # the topic's partitions that have a leader, asked only when switching
        self._custom: PartitionerFn | None = mode if callable(mode) else None
        self._use_keys = mode != "uniform_sticky"
        self._batch_size = max(1, batch_size)
        self._randrange = randrange
        self._sticky: dict[str, list[int]] = {}  # topic -> [partition, bytes produced to it]

    def partition(self, topic: str, key: bytes | None, num_partitions: int, size: int) -> int:
        """The partition for a record of ``size`` bytes."""
        if self._custom is not None:
            return self._custom(topic, key, num_partitions)
        if key is not None and self._use_keys:
            return default_partition(key, num_partitions)
        state = self._sticky.get(topic)
        if state is None or state[1] >= self._batch_size or state[0] >= num_partitions:
            current = state[0] if state is not None else -1
            state = [self._next(current, num_partitions, self._available(topic)), 0]
            self._sticky[topic] = state
        state[1] += size
        return state[0]

    def _next(self, current: int, num_partitions: int, available: Sequence[int]) -> int:
        choices = [p for p in available if p < num_partitions] or list(range(num_partitions))
        if len(choices) > 1 and current in choices:
            choices.remove(current)
        return choices[self._randrange(len(choices))]
