"""The merge of every member's checkpointed offsets, keyed by [checkpoint id, reset attempt] (seed 000).

On a reset to a checkpoint, each member contributes its offset manager at that checkpoint (the next offsets of
the partitions it owned) with the assignable partitions it saw. Once the contributions cover every assignable
partition, the merge is complete: every member can seek any partition to where the consistent cut left it,
even one another member owned at the cut. Contributions that name no assignable partition at all (a member
that joined after the checkpoint contributes an empty one) never complete a merge. A member that does not see
the merge complete in time falls back to the checkpoint's data in the region's shared checkpoint store: its
own and every other member's file of that checkpoint (`fallback_offsets`), which a member that joined after the
checkpoint needs most (it has no file; the member that owned its partitions at the cut may be gone, so the merge
cannot complete). Those offsets are the cut as well: the checkpoint read the committed offsets once the whole
region drained, and every reset commits the cut it reset to (see `operator`), so a failed cycle's drain does
not leave them ahead of the published output.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from groupstream.assignment.types import TopicPartition

__all__ = ["MERGE_TIMEOUT_CAP_MS", "MergeKey", "OffsetMerges", "fallback_offsets", "merge_timeout_ms", "seek_map"]

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


def fallback_offsets(
    checkpoints: Iterable[tuple[Mapping[TopicPartition, int], Mapping[TopicPartition, int]]],
) -> dict[TopicPartition, int]:
    """The cut of one checkpoint from the members' files of it, each given as (offset manager, committed offsets):
    what a reset seeks to when the merge does not complete in time.

    Per partition:

    1. an owner's offset manager wins: it is the next offset of the partition its owner had submitted at the
       cut, exactly what the merge would have given (seed: "the start offsets for these partitions after
       reset"). Two owners of one partition at one cut cannot be; should two files disagree, the higher offset
       is kept, as the merge keeps it: every record below it is in the published output of whoever named it;
    2. else the highest committed offset of the files: every member read them once the whole region had
       drained, so they agree; a lower one can only be a read that predates another member's commit (the
       seed's note on the committed map), never one beyond the cut, since every reset commits its cut;
    3. else none: the partition is in no file (added since the checkpoint), and seeks to its start position.

    No file at all (the store is not shared, or lost) gives an empty map: every partition seeks to its start
    position, the seed's rule for a partition without an entry, which replays rather than skips."""
    owned: dict[TopicPartition, int] = {}
    committed: dict[TopicPartition, int] = {}
    for offset_manager, committed_map in checkpoints:
        for tp, offset in offset_manager.items():
            owned[tp] = max(offset, owned.get(tp, offset))
        for tp, offset in committed_map.items():
            committed[tp] = max(offset, committed.get(tp, offset))
    return {**committed, **owned}


def seek_map(
    merged: Mapping[TopicPartition, int] | None, fallback: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int]:
    """The seek offset map of a reset to a checkpoint: the merge when it completed in time, else the
    checkpoint's cut from the members' files (`fallback_offsets`; also for partitions the merge lacks)."""
    out = dict(fallback)
    if merged is not None:
        out.update(merged)
    return out
