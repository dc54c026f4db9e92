"""What a region's control plane says, folded from its records in log order (pure).

Every member and the controller fold the same topic, so they agree: on the region index of a group (the
first registration in the log decides, as the first member to create the seed's MBean does), on the initial
offsets (the first member to publish them), on each merge, on the latest command and on each member's latest
answer.
"""

from __future__ import annotations

from dataclasses import dataclass

from groupstream.region.control_records import (
    Ack,
    CheckpointData,
    Command,
    ControlRecord,
    InitialOffsets,
    MemberRegistration,
    MergeContribution,
    Offsets,
)
from groupstream.region.merge import MergeKey, OffsetMerges

__all__ = ["ControlView"]


@dataclass(frozen=True, slots=True)
class _Registered:
    offset: int
    region_index: int


class ControlView:
    def __init__(self, region: str) -> None:
        self.region = region
        self.merges = OffsetMerges()
        self.command: Command | None = None
        self.acks: dict[str, Ack] = {}
        self._members: dict[str, dict[str, _Registered]] = {}
        self._initial: dict[str, tuple[int, Offsets]] = {}
        self.checkpoints: dict[tuple[int, str], str] = {}
        self.applied = 0  # records folded so far (waiters compare it)

    def apply(self, record: ControlRecord, offset: int) -> None:
        """Fold one record read at ``offset``; records of other regions are ignored."""
        if record.region != self.region:
            return
        self.applied += 1
        if isinstance(record, MemberRegistration):
            group = self._members.setdefault(record.group, {})
            if record.region_index is None:
                group.pop(record.member, None)
            elif record.member not in group:
                group[record.member] = _Registered(offset, record.region_index)
        elif isinstance(record, InitialOffsets):
            if record.group not in self._initial:
                self._initial[record.group] = (offset, dict(record.offsets))
        elif isinstance(record, MergeContribution):
            key = MergeKey(record.checkpoint_id, record.attempt)
            self.merges.contribute(key, record.member, record.assignable, record.offsets)
        elif isinstance(record, Command):
            if self.command is None or record.seq > self.command.seq:
                self.command = record
                if record.kind == "retire" and record.checkpoint_id is not None:
                    self.merges.retire(record.checkpoint_id)
        elif isinstance(record, CheckpointData):
            if record.data is None:
                self.checkpoints.pop((record.checkpoint_id, record.member), None)
            else:
                self.checkpoints[(record.checkpoint_id, record.member)] = record.data
        elif isinstance(record, Ack):
            old = self.acks.get(record.member)
            if old is None or record.seq >= old.seq:
                self.acks[record.member] = record

    def members(self, group: str) -> dict[str, int]:
        """The members registered in ``group`` and the region index each gave."""
        return {m: r.region_index for m, r in sorted(self._members.get(group, {}).items())}

    def group_region_index(self, group: str) -> int | None:
        """The region index of the group's first registration still present: the one every member must have."""
        regs = self._members.get(group, {})
        if not regs:
            return None
        return min(regs.values(), key=lambda r: r.offset).region_index

    def initial_offsets(self, group: str) -> Offsets | None:
        found = self._initial.get(group)
        return None if found is None else dict(found[1])

    def answered(self, seq: int) -> dict[str, Ack]:
        """The members' answers to command ``seq`` (and later ones)."""
        return {m: a for m, a in self.acks.items() if a.seq >= seq}
