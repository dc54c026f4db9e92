"""The offset manager of seed 000: per assigned partition, the offset of the message to fetch next (the
offset after the last one submitted downstream). At drain it is committed; in a checkpoint it is where each
partition restarts after a reset."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from groupstream.assignment.types import TopicPartition

__all__ = ["OffsetManager"]


class OffsetManager:
    def __init__(self) -> None:
        self._next: dict[TopicPartition, int] = {}

    def submitted(self, tp: TopicPartition, offset: int) -> None:
        """A message at ``offset`` was submitted; an unassigned partition's message is not recorded."""
        if tp in self._next and offset >= self._next[tp]:
            self._next[tp] = offset + 1

    def remove(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self._next.pop(tp, None)

    def clear(self) -> None:
        self._next.clear()

    def partitions(self) -> frozenset[TopicPartition]:
        return frozenset(self._next)

    def snapshot(self) -> dict[TopicPartition, int]:
        return dict(sorted(self._next.items()))

    def update(self, positions: Mapping[TopicPartition, int]) -> None:
        self._next.update(positions)
