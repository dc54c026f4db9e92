"""A consumer group's index of who holds each partition, kept per topic by partition number, and its
read-only view as one mapping of (topic id, partition) -> member id. The group keeps it in step with its
members' assignments on replay; handlers read it to find a partition's owner without walking the members."""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Iterator, Mapping
from itertools import repeat

TopicIdPartition = tuple[uuid.UUID, int]


class TopicOwners:
    """Who holds each partition of one topic, by partition number (None: nobody), and how many are held.

    A list, one pointer per partition, where a dict of int keys cost about four times as much (the index was
    a third of a member's memory); filled and emptied in C (``map`` over the numbers). Partition numbers
    come from the group's partition metadata (bounded by the topic's partition count); negative ones, which
    no valid record holds, are ignored."""

    __slots__ = ("held", "owner")

    def __init__(self) -> None:
        self.owner: list[str | None] = []
        self.held = 0

    def get(self, n: int) -> str | None:
        owner = self.owner
        return owner[n] if 0 <= n < len(owner) else None

    def owners_of(self, numbers: list[int]) -> list[str | None]:
        owner = self.owner
        if numbers and min(numbers) >= 0 and max(numbers) < len(owner):
            return list(map(owner.__getitem__, numbers))
        return [self.get(n) for n in numbers]

    def own(self, numbers: list[int], member_id: str) -> None:
        if numbers and min(numbers) < 0:
            numbers = [n for n in numbers if n >= 0]
        if not numbers:
            return
        owner = self.owner
        top = max(numbers)
        if top >= len(owner):
            owner.extend([None] * (top + 1 - len(owner)))
        self.held += list(map(owner.__getitem__, numbers)).count(None)
        deque(map(owner.__setitem__, numbers, repeat(member_id)), maxlen=0)

    def disown(self, numbers: list[int], member_id: str) -> None:
        """Release what ``member_id`` holds of ``numbers`` (another member's hold stays)."""
        previous = self.owners_of(numbers)
        if previous.count(member_id) == len(previous):
            deque(map(self.owner.__setitem__, numbers, repeat(None)), maxlen=0)
            self.held -= len(numbers)
            return
        for n, o in zip(numbers, previous, strict=True):
            if o == member_id:
                self.owner[n] = None
                self.held -= 1


class OwnersView(Mapping[TopicIdPartition, str]):
    """The per-topic owners index read as one mapping of (topic id, partition) -> member id."""

    __slots__ = ("_by_topic",)

    def __init__(self, by_topic: dict[uuid.UUID, TopicOwners]) -> None:
        self._by_topic = by_topic

    def __getitem__(self, partition: TopicIdPartition) -> str:
        found = self._by_topic.get(partition[0])
        owner = None if found is None else found.get(partition[1])
        if owner is None:
            raise KeyError(partition)
        return owner

    def get(self, partition: TopicIdPartition, default: str | None = None) -> str | None:  # type: ignore[override]
        found = self._by_topic.get(partition[0])
        owner = None if found is None else found.get(partition[1])
        return default if owner is None else owner

    def __iter__(self) -> Iterator[TopicIdPartition]:
        for topic_id, found in self._by_topic.items():
            for n, owner in enumerate(found.owner):
                if owner is not None:
                    yield topic_id, n

    def __len__(self) -> int:
        return sum(found.held for found in self._by_topic.values())
