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
    RegionState,
)
from groupstream.region.merge import MergeKey, OffsetMerges

__all__ = ["LOG_KEEP", "ControlView"]

LOG_KEEP = 10_000  # commands and answers kept for followers that fell behind


@dataclass(frozen=True, slots=True)
class _Registered:
    offset: int
    region_index: int


class ControlView:
    def __init__(self, region: str) -> None:
        self.region = region
        self.merges = OffsetMerges()
        self.command: Command | None = None
        self.commands: list[Command] = []  # every command read, in order (members follow them one by one)
        self.acks: dict[str, Ack] = {}
        self._ack_log: list[Ack] = []  # recent answers, in order (the controller follows them one by one)
        self.acks_seen = 0  # answers read in all; the log holds the last `LOG_KEEP` of them
        self._members: dict[str, dict[str, _Registered]] = {}
        self._initial: dict[str, tuple[int, Offsets]] = {}
        self.checkpoints: dict[tuple[int, str], str] = {}
        self.state: RegionState | None = None
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
                self.commands.append(record)
                if len(self.commands) > 2 * LOG_KEEP:
                    del self.commands[:-LOG_KEEP]
                if record.kind == "retire" and record.checkpoint_id is not None:
                    self.merges.retire(record.checkpoint_id)
        elif isinstance(record, RegionState):
            self.state = record
        elif isinstance(record, CheckpointData):
            if record.data is None:
                self.checkpoints.pop((record.checkpoint_id, record.member), None)
            else:
                self.checkpoints[(record.checkpoint_id, record.member)] = record.data
        elif isinstance(record, Ack):
            self._ack_log.append(record)
            self.acks_seen += 1
            if len(self._ack_log) > 2 * LOG_KEEP:
                del self._ack_log[:-LOG_KEEP]
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

    def commands_after(self, seq: int) -> list[Command]:
        """Commands newer than ``seq``, oldest first."""
        return [c for c in self.commands if c.seq > seq]

    def acks_after(self, seen: int) -> list[Ack]:
        """The answers read after the first ``seen`` ones (as far as the log still holds them)."""
        new = self.acks_seen - seen
        return self._ack_log[max(len(self._ack_log) - new, 0) :] if new > 0 else []

    def answered(self, seq: int) -> dict[str, Ack]:
        """The members' answers to command ``seq`` (and later ones)."""
        return {m: a for m, a in self.acks.items() if a.seq >= seq}
