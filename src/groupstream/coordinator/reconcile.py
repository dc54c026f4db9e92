"""KIP-848 reconciliation as a pure function: a member's next assignment from its current one, the group's
target assignment for it, what it reports it owns, and who owns every partition now.

The rules (the semantics of Kafka's CurrentAssignmentBuilder):

- revoke first: a member with partitions the target no longer gives it keeps its epoch, keeps the partitions
  that stay, and must give up the others (UNREVOKED_PARTITIONS). It gets nothing new until it has reported
  that it no longer owns them. A member whose heartbeat reports that it owns none of them (a static member's
  new process, or a member rejoining at epoch 0, both owning nothing) has nothing to revoke: they are
  released at once and it moves on, as Kafka's ``ownsRevokedPartitions`` decides. Otherwise such a member
  would wait at epoch 0 (or -2) for a revocation it cannot report, since its next heartbeat at that epoch
  would be a join (or a leave). A heartbeat at the member's own epoch that does not yet report all that
  epoch gave it is no such evidence: that member is still taking partitions on (`_still_acquiring`);
- assign a partition only once its previous owner released it: a partition another member still holds (in
  its assignment or pending its revocation) waits (UNRELEASED_PARTITIONS); the member moves to the target
  epoch with what it can have now;
- otherwise the member takes the whole target at the target epoch (STABLE).

So at every moment a partition belongs to at most one member: a new owner gets it only after the old owner's
revocation was acknowledged. ``owner_of(partition)`` answers for the group as it is now (None: nobody);
``owner_of`` itself None says that nobody holds any partition (an empty owners index: a first member given
thousands of partitions asks nothing); ``held_elsewhere(partitions, member_id)``, when given, answers for a
whole set at once which of them a member other than ``member_id`` holds (the same answer as asking
``owner_of`` for each, cheaper for an index kept by topic).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass, field
from enum import IntEnum
from types import MappingProxyType

from groupstream.coordinator.consumer_partitions import EMPTY, PartitionSet

__all__ = ["NO_EPOCHS", "NO_PARTITIONS", "MemberAssignment", "MemberState", "epochs_for", "owners", "reconcile"]

Partition = tuple[uuid.UUID, int]
"""(topic id, partition), as the records and ConsumerGroupHeartbeat name partitions."""


NO_EPOCHS: Mapping[Partition, int] = MappingProxyType({})
NO_PARTITIONS: PartitionSet = EMPTY
"""The one empty partition set (every member has one pending)."""


class MemberState(IntEnum):
    """Kafka's values, as ConsumerGroupCurrentMemberAssignment records them."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


@dataclass(frozen=True, slots=True)
class MemberAssignment:
    member_id: str
    epoch: int
    previous_epoch: int
    state: MemberState
    assigned: PartitionSet
    pending_revocation: PartitionSet = NO_PARTITIONS
    # KIP-1251: the member epoch at which each held partition was given to the member; a held partition
    # missing here counts as given at the member's epoch. Never mutated: assignments share it. A mapping,
    # not sorted pairs: sorting pairs keyed by topic UUIDs (compared in Python) was most of the cost of a
    # member taking thousands of partitions, and equality does not need an order.
    partition_epochs: Mapping[Partition, int] = field(default_factory=lambda: NO_EPOCHS)
    # The epoch a held partition missing from ``partition_epochs`` was given at; -1: the member's epoch
    # (never below 0). A member that kept its partitions across rebalances holds them all from one older
    # epoch: that one number instead of a map per member.
    given_at: int = -1

    def __post_init__(self) -> None:
        # Any set of pairs is taken (tests, older callers), and kept in the compact form.
        if type(self.assigned) is not PartitionSet:
            object.__setattr__(self, "assigned", PartitionSet.of(self.assigned))
        if type(self.pending_revocation) is not PartitionSet:
            object.__setattr__(self, "pending_revocation", PartitionSet.of(self.pending_revocation))

    def default_epoch(self) -> int:
        """The epoch of a held partition ``partition_epochs`` does not list."""
        return self.given_at if self.given_at >= 0 else max(self.epoch, 0)

    def holds(self) -> PartitionSet:
        """What no other member may be given: assigned, or still to be revoked."""
        return self.assigned | self.pending_revocation if self.pending_revocation else self.assigned

    def assignment_epochs(self) -> Mapping[Partition, int]:
        """Every held partition -> the epoch it was given at (KIP-1251; what offset commits are checked
        against). A partition without a recorded epoch (records written before) counts as given at the
        member's epoch, never below 0, as in Kafka. Read-only: it may be the assignment's own mapping."""
        known = self.partition_epochs
        held = self.holds()
        if len(known) == len(held):  # complete: nothing to fill in
            return known
        default = self.default_epoch()
        return {p: known.get(p, default) for p in held}


def epochs_for(
    member: MemberAssignment, held: Set[Partition], new_epoch: int, *, omit: int | None = None
) -> Mapping[Partition, int]:
    """Assignment epochs of ``held``: kept partitions keep theirs, new ones are given at ``new_epoch``. Only
    those that differ from ``omit`` are listed (default ``max(new_epoch, 0)``: what a missing one means for
    an assignment at ``new_epoch``), so that the work is proportional to what the member held before and
    kept at another epoch, not to what it is given now (a first member given 10,000 partitions lists none)."""
    skip = max(new_epoch, 0) if omit is None else omit
    known = member.partition_epochs
    out: dict[Partition, int] = {}
    for p, e in known.items():
        if e != skip and p in held:
            out[p] = e
    old_default = member.default_epoch()
    if old_default != skip:
        for p in member.holds():
            if p not in known and p in held:
                out[p] = old_default
    return out or NO_EPOCHS


def reconcile(
    member: MemberAssignment,
    target_epoch: int,
    target: Set[Partition],
    owned: Set[Partition] | None,
    owner_of: Callable[[Partition], str | None] | None,
    reported_epoch: int | None = None,
    subscribed: Callable[[uuid.UUID], bool] | None = None,
    held_elsewhere: Callable[[PartitionSet, str], list[Partition]] | None = None,
) -> MemberAssignment:
    """The member's next assignment. ``owned`` is what its heartbeat reported (None: not reported, so a
    pending revocation stays pending and any partition to revoke is taken to be still owned);
    ``reported_epoch`` is the epoch that heartbeat was sent at (see `_still_acquiring`); ``subscribed``
    says whether the member subscribes to a topic id (None: to every topic of its target).

    A member keeps no partition of a topic it no longer subscribes to, whatever the target says: those
    move to pending revocation at once, even while the group's next target assignment is still to come
    (Kafka's KAFKA-19431 subscription consistency), and the target's partitions of such topics are not
    given to it."""
    gone = NO_PARTITIONS if subscribed is None else _of_other_topics(member.assigned, subscribed)
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if owned is None or owned & member.pending_revocation:
            # still waiting for the member to give them up (and for more, if it unsubscribed meanwhile)
            return _revoke_now(member, gone, owned, reported_epoch) if gone else member
        member = MemberAssignment(member.member_id, member.epoch, member.previous_epoch, member.state,
                                  member.assigned, NO_PARTITIONS, epochs_for(member, member.assigned, member.epoch))  # fmt: skip
    elif member.state is MemberState.STABLE and member.epoch == target_epoch:
        return _revoke_now(member, gone, owned, reported_epoch) if gone else member
    if subscribed is not None:
        other = _of_other_topics(target, subscribed)
        if other:
            target = PartitionSet.of(target) - other
    return _next(member, target_epoch, PartitionSet.of(target), owned, owner_of, reported_epoch, held_elsewhere)


def _of_other_topics(partitions: Set[Partition], subscribed: Callable[[uuid.UUID], bool]) -> PartitionSet:
    """The partitions of topics ``subscribed`` says no to (asked once per topic)."""
    ps = PartitionSet.of(partitions)
    if all(map(subscribed, ps.topics())):
        return NO_PARTITIONS
    return PartitionSet.from_numbers({t: ns for t, ns in ps.by_topic() if not subscribed(t)})


def _revoke_now(
    member: MemberAssignment, gone: PartitionSet, owned: Set[Partition] | None, reported_epoch: int | None
) -> MemberAssignment:
    """``gone`` (assigned partitions of topics no longer subscribed to) leaves the assignment at the member's
    epoch, as Kafka's updateCurrentAssignment does (which also sets the previous epoch to the current one):
    pending revocation while the member may still own any partition pending, otherwise simply dropped."""
    keep = member.assigned - gone
    pending = member.pending_revocation | gone
    if owned is None or not pending.isdisjoint(owned) or _still_acquiring(member, owned, reported_epoch):
        # keep | pending is exactly what the member held (gone was part of its assignment): no union to build
        return MemberAssignment(member.member_id, member.epoch, member.epoch, MemberState.UNREVOKED_PARTITIONS,
                                keep, pending, epochs_for(member, member.holds(), member.epoch))  # fmt: skip
    return MemberAssignment(member.member_id, member.epoch, member.epoch, member.state, keep,
                            partition_epochs=epochs_for(member, keep, member.epoch))  # fmt: skip


def _still_acquiring(member: MemberAssignment, owned: Set[Partition], reported_epoch: int | None) -> bool:
    """A heartbeat at the member's own epoch that does not yet report everything that epoch gave it comes
    from a member still taking those partitions on: what it leaves out may be owned a moment later. Java's
    consumer reconciles the partitions of topics whose names it already knows first and reports that subset
    (often nothing) while it looks the others up; releasing the rest then gave them to another member while
    the first one went on to take them (two owners for a few hundred milliseconds). Such a member revokes
    them like any other, which costs one heartbeat when it really never owned them. A join (epoch 0) or a
    static member's new process owns nothing for certain and is not held back."""
    return reported_epoch is not None and 0 < reported_epoch == member.epoch and not member.assigned <= owned


def _next(
    member: MemberAssignment,
    target_epoch: int,
    target: PartitionSet,
    owned: Set[Partition] | None,
    owner_of: Callable[[Partition], str | None] | None,
    reported_epoch: int | None = None,
    held_elsewhere: Callable[[PartitionSet, str], list[Partition]] | None = None,
) -> MemberAssignment:
    if member.assigned:
        keep, revoke = member.assigned & target, member.assigned - target
    else:  # a member holding nothing (just joined, or fenced and back): nothing to keep or revoke
        keep = revoke = NO_PARTITIONS
    if revoke and (owned is None or not revoke.isdisjoint(owned) or _still_acquiring(member, owned, reported_epoch)):
        # keep | revoke is exactly the member's assignment: no union of the two to build
        return MemberAssignment(member.member_id, member.epoch, member.previous_epoch,
                                MemberState.UNREVOKED_PARTITIONS, keep, revoke,
                                epochs_for(member, member.assigned, member.epoch))  # fmt: skip
    # Nothing to revoke, or nothing the member still owns: what goes away is released now.
    new = target - member.assigned if member.assigned else target
    me = member.member_id
    if owner_of is None:
        blocked: list[Partition] = []
    elif held_elsewhere is not None:
        blocked = held_elsewhere(new, me)
    else:
        blocked = [p for p in new if owner_of(p) not in (None, me)]
    previous = member.epoch if member.epoch != target_epoch else member.previous_epoch
    if blocked:
        state, held = MemberState.UNRELEASED_PARTITIONS, keep | new.difference(blocked)
    else:
        state, held = MemberState.STABLE, target  # keep | new is the target: the very same set, no copy
    return MemberAssignment(member.member_id, target_epoch, previous, state, held,
                            partition_epochs=epochs_for(member, held, target_epoch))  # fmt: skip


def owners(members: Mapping[str, MemberAssignment]) -> dict[Partition, str]:
    """Partition -> the member holding it (assigned or pending revocation)."""
    out: dict[Partition, str] = {}
    for m in members.values():
        for p in m.holds():
            out[p] = m.member_id
    return out
