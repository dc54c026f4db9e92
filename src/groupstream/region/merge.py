"""The merge of every member's checkpointed offsets, keyed by [checkpoint id, reset attempt] (seed 000).

On a reset to a checkpoint, each member contributes its offset manager at that checkpoint (the next offsets of
the partitions it owned) with the assignable partitions it saw. Once the contributions cover every assignable
partition, the merge is complete: every member can seek any partition to where the consistent cut left it,
even one another member owned at the cut. Contributions that name no assignable partition at all (a member
that joined after the checkpoint contributes an empty one) never complete a merge. A member that does not see
the merge complete in time falls back to the committed offsets it checkpointed (`seek_map`). Those are the cut
as well: the checkpoint read them once the whole region drained, and every reset commits the cut it reset to
(see `operator`), so a failed cycle's drain does not leave them ahead of the published output.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from groupstream.assignment.types import TopicPartition

__all__ = ["MERGE_TIMEOUT_CAP_MS", "MergeKey", "OffsetMerges", "merge_timeout_ms", "seek_map"]

MERGE_TIMEOUT_CAP_MS = 30_000


@dataclass(frozen=True, slots=True, order=True)
class MergeKey:
    checkpoint_id: int
    reset_attempt: int


def merge_timeout_ms(reset_timeout_ms: int, max_poll_interval_ms: int) -> int:
    """How long a member waits for the merge: a quarter of the reset timeout, but at most half of
    ``max.poll.interval.ms`` (the member must poll again before the group evicts it) and at most 30 s."""
    return max(min(reset_timeout_ms // 4, max_poll_interval_ms // 2, MERGE_TIMEOUT_CAP_MS), 0)


@dataclass(slots=True)
class _Merge:
    assignable: set[TopicPartition] = field(default_factory=set)
    offsets: dict[TopicPartition, int] = field(default_factory=dict)
    members: set[str] = field(default_factory=set)
    conflicts: set[TopicPartition] = field(default_factory=set)

    @property
    def complete(self) -> bool:
        # A contribution naming no assignable partitions (a member that joined after the checkpoint, or one
        # that checkpointed before its first assignment) says nothing about the cut: alone it must not make
        # the merge complete, or a member would seek to an empty merge, i.e. to the initial offsets.
        return bool(self.assignable) and self.assignable <= self.offsets.keys()


class OffsetMerges:
    """The merges of one group, as every member builds them from the same contributions in the same order."""

    def __init__(self) -> None:
        self._merges: dict[MergeKey, _Merge] = {}

    def contribute(
        self,
        key: MergeKey,
        member_id: str,
        assignable: frozenset[TopicPartition],
        offsets: Mapping[TopicPartition, int],
    ) -> bool:
        """Add one member's contribution (a repeated one from the same member replaces nothing it already
        gave); returns whether the merge is complete now. Two members naming different offsets for one
        partition cannot both have owned it at one cut; the higher offset is kept and the partition is
        recorded in ``conflicts``."""
        merge = self._merges.setdefault(key, _Merge())
        merge.members.add(member_id)
        merge.assignable |= assignable
        for tp, offset in offsets.items():
            old = merge.offsets.get(tp)
            if old is not None and old != offset:
                merge.conflicts.add(tp)
                offset = max(old, offset)
            merge.offsets[tp] = offset
        return merge.complete

    def is_complete(self, key: MergeKey) -> bool:
        merge = self._merges.get(key)
        return merge is not None and merge.complete

    def merged(self, key: MergeKey) -> dict[TopicPartition, int] | None:
        """The merged offsets once complete, else None."""
        merge = self._merges.get(key)
        if merge is None or not merge.complete:
            return None
        return dict(merge.offsets)

    def conflicts(self, key: MergeKey) -> frozenset[TopicPartition]:
        merge = self._merges.get(key)
        return frozenset() if merge is None else frozenset(merge.conflicts)

    def members(self, key: MergeKey) -> frozenset[str]:
        merge = self._merges.get(key)
        return frozenset() if merge is None else frozenset(merge.members)

    def retire(self, checkpoint_id: int) -> None:
        """``retireCheckpoint``: drop the merges of this checkpoint and every older one."""
        for key in [k for k in self._merges if k.checkpoint_id <= checkpoint_id]:
            del self._merges[key]

    def keys(self) -> list[MergeKey]:
        return sorted(self._merges)


def seek_map(
    merged: Mapping[TopicPartition, int] | None, committed_at_checkpoint: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int]:
    """The seek offset map of a reset to a checkpoint: the merge when it completed in time, else the offsets
    this member saw committed when it checkpointed (for partitions the merge lacks, too)."""
    out = dict(committed_at_checkpoint)
    if merged is not None:
        out.update(merged)
    return out
