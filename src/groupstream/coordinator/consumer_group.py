"""A KIP-848 ``consumer`` group as its records describe it: the state ``replay`` builds and handlers read.

Everything here is durable and changed only by the ``apply_*`` methods, which the shard calls from ``replay``
(one per record type of `groupstream.protocol.consumer_group_records`). The few derived values (owner of each
partition, instance id -> member, topics subscribed by name, how many members are at each epoch or still
reconciling) are kept in step by the same methods, so that neither a heartbeat of a 1,000-member group nor the
replay of one record scans every member.

Partitions are ``(topic id, partition)``, as the records and the heartbeat name them: a topic deleted and
created again under the same name is a different topic, and the group must not mistake one for the other.

The group state is derived, as Kafka derives it: no members is Empty; a group epoch ahead of the target
assignment is Assigning; a member not yet at the target epoch, or still revoking or waiting for a partition,
makes it Reconciling; otherwise Stable. ``transition_to`` checks each change against the table.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Set
from dataclasses import dataclass, field
from enum import Enum
from operator import itemgetter

from groupstream.assignment.registry import DEFAULT_SERVER_ASSIGNOR
from groupstream.coordinator.consumer_partitions import PartitionSet, group_numbers
from groupstream.coordinator.partition_owners import OwnersView, TopicIdPartition, TopicOwners
from groupstream.coordinator.reconcile import NO_EPOCHS, NO_PARTITIONS, MemberAssignment, MemberState
from groupstream.protocol.consumer_group_records import (
    CurrentMemberAssignmentValue,
    MemberMetadataValue,
    PartitionMetadataValue,
    RegexValue,
    TargetAssignmentMemberValue,
    TopicPartitions,
)
from groupstream.protocol.messages.consumer_group_heartbeat import LEAVE_EPOCH
from groupstream.state_table import TransitionTable

__all__ = [
    "CONSUMER_GROUP_STATES",
    "ConsumerGroup",
    "ConsumerGroupSnapshot",
    "ConsumerGroupState",
    "ConsumerMember",
    "PartitionSet",
    "TopicIdPartition",
    "from_topic_partitions",
    "numbers_by_topic",
    "preferred_assignor",
    "to_topic_partitions",
]



class ConsumerGroupState(Enum):
    """Kafka's names, as ListGroups, DescribeGroups and ConsumerGroupDescribe report them."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


_S = ConsumerGroupState
_LIVE = frozenset({_S.EMPTY, _S.ASSIGNING, _S.RECONCILING, _S.STABLE})

CONSUMER_GROUP_STATES = TransitionTable.from_next("a consumer group", ConsumerGroupState, {
    # Records replay one at a time, so a group passes through every combination: a member's metadata record
    # alone makes an Empty group Reconciling (or Stable, before its first epoch), a group epoch record makes
    # any group Assigning, the last current-assignment record makes it Stable. Only Dead is final: a deleted
    # or unloaded group object is never used again (a new one is built from the log).
    _S.EMPTY: frozenset({_S.ASSIGNING, _S.RECONCILING, _S.STABLE, _S.DEAD}),
    _S.ASSIGNING: frozenset({_S.EMPTY, _S.RECONCILING, _S.STABLE, _S.DEAD}),
    _S.RECONCILING: frozenset({_S.EMPTY, _S.ASSIGNING, _S.STABLE, _S.DEAD}),
    _S.STABLE: frozenset({_S.EMPTY, _S.ASSIGNING, _S.RECONCILING, _S.DEAD}),
    _S.DEAD: frozenset(),
})


_TOPIC, _NUMBER = itemgetter(0), itemgetter(1)
_COLLECTIONS = (frozenset, set, list, tuple)

_LAST_GROUPED: list[tuple[PartitionSet, tuple[TopicPartitions, ...]]] = [(PartitionSet(), ())]
"""The last frozenset ``to_topic_partitions`` grouped, and how: a heartbeat that moves a member writes the
target record, the current-assignment record and the answer from the very same set (a memo, not state)."""


_SET_OF: dict[int, tuple[tuple[TopicPartitions, ...], PartitionSet]] = {}
"""The layouts of records written here from a frozenset (by the layout's id, the layout held so that the id
stays its own), and that set, until the record is replayed: the runtime replays the very records a handler
wrote, and rebuilding a set of thousands of (UUID, int) pairs hashes every UUID in Python (most of a large
rebalance's time). A memo, not state: a miss (a decoded record, an entry dropped) builds the same set."""
_SET_OF_MAX = 4096


def remember_set(grouped: tuple[TopicPartitions, ...], partitions: PartitionSet) -> None:
    """``from_topic_partitions(grouped)`` is ``partitions`` (the caller grouped exactly that set)."""
    memo = _SET_OF
    if len(memo) >= _SET_OF_MAX:
        try:
            del memo[next(iter(memo))]  # the oldest (another thread may have taken it: no matter)
        except (KeyError, StopIteration, RuntimeError):
            memo.clear()
    memo[id(grouped)] = (grouped, partitions)


_ASSIGNMENT_OF: dict[int, tuple[CurrentMemberAssignmentValue, MemberAssignment]] = {}
"""Current-assignment records written here from an assignment in the very form their replay builds (see
``remember_assignment``), by the value's id (the value held so that the id stays its own), until replayed:
the replay takes that assignment instead of building an equal one (its epochs counted again, a new object).
A memo, not state: a miss (a decoded record, an entry dropped) builds the same assignment."""


def remember_assignment(value: CurrentMemberAssignmentValue, assignment: MemberAssignment) -> None:
    """``value`` was written from ``assignment``, which lists no partition epoch of its own and has no
    ``given_at``: every partition at the member's epoch, the form ``apply_current_assignment`` gives it."""
    memo = _ASSIGNMENT_OF
    if len(memo) >= _SET_OF_MAX:
        memo.clear()
    memo[id(value)] = (value, assignment)


def _written_assignment(value: CurrentMemberAssignmentValue) -> MemberAssignment | None:
    if _ASSIGNMENT_OF:
        hit = _ASSIGNMENT_OF.pop(id(value), None)
        if hit is not None and hit[0] is value:
            return hit[1]
    return None


def _written_set(items: Iterable[TopicPartitions]) -> PartitionSet | None:
    """The set a record being replayed was written from (``remember_set``), taken out of the memo (a record is
    replayed once); None: not one written here."""
    if type(items) is tuple and _SET_OF:
        hit = _SET_OF.pop(id(items), None)
        if hit is not None and hit[0] is items:
            return hit[1]
    return None


def to_topic_partitions(partitions: Iterable[TopicIdPartition]) -> tuple[TopicPartitions, ...]:
    """Partitions grouped by topic, topics and partitions sorted (the records' and responses' layout)."""
    if type(partitions) is PartitionSet:
        last = _LAST_GROUPED[0]  # read once: another thread may replace it (the memo stays right either way)
        if last[0] is partitions:
            return last[1]
        grouped = _group_by_topic(partitions)
        _LAST_GROUPED[0] = (partitions, grouped)
        return grouped
    return _group_by_topic(partitions)


def numbers_by_topic(partitions: Iterable[TopicIdPartition]) -> dict[uuid.UUID, list[int]]:
    """Partition numbers by topic id, in the order met. A set whose pairs all share one topic id object
    (the usual member of a one-topic group) is split in C; otherwise one topic's pairs usually share its id
    object, which is hashed (uuid's hash is Python code) once per run of them, not once per partition."""
    if type(partitions) is PartitionSet:
        return {t: ns.tolist() for t, ns in partitions.by_topic()}
    if (
        type(partitions) in _COLLECTIONS or isinstance(partitions, Set)
    ) and partitions and len(set(map(id, map(_TOPIC, partitions)))) == 1:
        return {next(iter(partitions))[0]: list(map(_NUMBER, partitions))}
    return group_numbers(partitions)


def _group_by_topic(partitions: Iterable[TopicIdPartition]) -> tuple[TopicPartitions, ...]:
    if type(partitions) is PartitionSet:  # already grouped and sorted
        return tuple([TopicPartitions(t, tuple(ns)) for t, ns in partitions.by_topic()])
    by_topic = numbers_by_topic(partitions)
    return tuple(TopicPartitions(t, tuple(sorted(ps))) for t, ps in sorted(by_topic.items(), key=lambda kv: kv[0].bytes))


def preferred_assignor(members: Iterable[MemberMetadataValue]) -> str:
    """The server assignor most members ask for (ties broken by name), else Kafka's default (uniform)."""
    counts = Counter(md.server_assignor for md in members if md.server_assignor)
    if not counts:
        return DEFAULT_SERVER_ASSIGNOR
    return min(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0]


def from_topic_partitions(items: Iterable[TopicPartitions]) -> PartitionSet:
    """The partitions as a set of (topic id, partition). A layout grouped from a set here is answered with
    that set (``remember_set``)."""
    written = _written_set(items)
    if written is not None:
        return written
    by_topic: dict[uuid.UUID, list[int]] = {}
    for t in items:
        found = by_topic.get(t.topic_id)
        if found is None:
            by_topic[t.topic_id] = list(t.partitions)
        else:
            found.extend(t.partitions)
    return PartitionSet.from_numbers(by_topic)


def _names_exactly(items: tuple[TopicPartitions, ...], partitions: PartitionSet) -> bool:
    """Whether the grouped ``items`` name exactly ``partitions``, compared on the partition numbers of each
    topic (one UUID hash per topic, none per partition). False when unsure (a topic listed twice, say): the
    caller then builds the set and compares."""
    if sum(len(t.partitions) for t in items) != len(partitions):
        return False
    by_topic = numbers_by_topic(partitions)
    if len(by_topic) != len(items):
        return False
    for t in items:
        numbers = by_topic.get(t.topic_id)
        if numbers is None or sorted(numbers) != sorted(t.partitions):
            return False
    return True


def _partition_epochs(items: Iterable[TopicPartitions], own: int) -> tuple[int, dict[TopicIdPartition, int]]:
    """The recorded assignment epochs (KIP-1251) as (the most common one, the others by partition): a member
    usually holds all its partitions from one epoch. Partitions recorded without epochs count as given at
    ``own`` (the member's epoch). Counted on the ints; partitions are looked up only for the exceptions."""
    every: list[int] = []
    for t in items:
        every.extend((own,) * len(t.partitions) if t.assignment_epochs is None else t.assignment_epochs)
    if not every:
        return own, {}
    if every.count(every[0]) == len(every):  # the usual record: one epoch (counted in C, no Counter)
        common = every[0]
    else:
        counts: dict[int, int] = {}
        for e in every:
            counts[e] = counts.get(e, 0) + 1
        common = max(counts.items(), key=lambda kv: (kv[1], kv[0] == own, -kv[0]))[0]
    out: dict[TopicIdPartition, int] = {}
    for t in items:
        epochs = t.assignment_epochs
        if epochs is None:
            if own != common:
                out.update(((t.topic_id, p), own) for p in t.partitions)
            continue
        if epochs.count(common) == len(epochs):
            continue
        for p, e in zip(t.partitions, epochs, strict=False):
            if e != common:
                out[(t.topic_id, p)] = e
    return common, out


def _assignment_of(
    member_id: str, value: CurrentMemberAssignmentValue, target: PartitionSet | None, written: PartitionSet | None
) -> MemberAssignment:
    """The assignment a current-assignment record describes; ``written``: the set its assigned partitions
    were written from (`remember_set`), if known."""
    if written is not None:
        assigned = written
    elif target is not None and _names_exactly(value.assigned, target):
        assigned = target  # compared on the numbers: no set built (a loaded member usually holds its target)
    else:
        assigned = from_topic_partitions(value.assigned)
    pending = from_topic_partitions(value.pending_revocation) if value.pending_revocation else NO_PARTITIONS
    # Only the epochs that differ from the member's own are kept: a missing one means exactly that
    # (KIP-1251's default), and after a rebalance most of a member's partitions were given at its epoch.
    own = max(value.member_epoch, 0)
    given_at, epochs = _partition_epochs(value.assigned + value.pending_revocation, own)
    if target is not None and (assigned is target or target == assigned):
        # A reconciled member holds its target: share the set, and key the epochs by its partitions,
        # so that a partition is one tuple however many of the group's maps name it.
        assigned = target
        if epochs:
            # Those of partitions pending revocation (not in the target) are kept as they are.
            shared = {p: epochs[p] for p in target if p in epochs}
            if len(shared) != len(epochs):
                shared.update((p, e) for p, e in epochs.items() if p not in shared)
            epochs = shared
    return MemberAssignment(
        member_id, value.member_epoch, value.previous_member_epoch, MemberState(value.state),
        assigned, pending, epochs or NO_EPOCHS, -1 if given_at == own else given_at,
    )  # fmt: skip


def _take_one(counts: Counter[str], keys: Iterable[str]) -> None:
    """One subscriber fewer for each key; a key nobody subscribes to any more is dropped, so that the keys
    are exactly what is subscribed (only the keys taken from can have reached zero: no scan of the rest)."""
    for key in keys:
        if counts[key] > 1:
            counts[key] -= 1
        else:
            counts.pop(key, None)


_NO_METADATA = MemberMetadataValue(None, None, "", "", (), None, -1, None)


@dataclass(slots=True)
class ConsumerMember:
    """One member: its subscription (the MemberMetadata record) and its current assignment (the
    CurrentMemberAssignment record)."""

    member_id: str
    metadata: MemberMetadataValue = _NO_METADATA
    assignment: MemberAssignment = field(init=False)

    def __post_init__(self) -> None:
        self.assignment = MemberAssignment(self.member_id, 0, 0, MemberState.STABLE, NO_PARTITIONS)

    @property
    def epoch(self) -> int:
        return self.assignment.epoch

    @property
    def instance_id(self) -> str | None:
        return self.metadata.instance_id

    @property
    def is_reconciled(self) -> bool:
        return self.assignment.state is MemberState.STABLE


@dataclass(frozen=True, slots=True)
class ConsumerGroupSnapshot:
    """A group's durable state, comparable: replaying the same records yields an equal snapshot."""

    epoch: int
    creation_time_ms: int
    partition_metadata: PartitionMetadataValue | None
    assignment_epoch: int
    targets: tuple[tuple[str, PartitionSet], ...]
    members: tuple[tuple[str, MemberMetadataValue, MemberAssignment], ...]
    regexes: tuple[tuple[str, RegexValue], ...]
    state: ConsumerGroupState


class ConsumerGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.epoch = 0
        self.creation_time_ms = -1
        self.partition_metadata: PartitionMetadataValue | None = None
        self.assignment_epoch = 0
        # When the target assignment was last computed (0: never, or not recorded): the assignment interval
        # runs from it, across a restart too (Kafka's AssignmentTimestamp).
        self.assignment_timestamp_ms = 0
        self.targets: dict[str, PartitionSet] = {}
        self.members: dict[str, ConsumerMember] = {}
        self.regexes: dict[str, RegexValue] = {}
        self.state = ConsumerGroupState.EMPTY
        # Derived from the members, kept in step by the apply_* methods.
        # Topic id -> partition number -> the member holding it (assigned or pending revocation): by number,
        # so that a lookup hashes an int in C rather than a (UUID, int) pair (UUID's hash is Python code).
        self._owners: dict[uuid.UUID, TopicOwners] = {}
        self.static_members: dict[str, str] = {}
        self.topic_subscribers: Counter[str] = Counter()
        self.regex_subscribers: Counter[str] = Counter()
        # Member epoch -> how many members are at it, and how many members are not STABLE: the group state
        # is derived after every replayed record, and scanning the members for it made loading a
        # 1,000-member group O(records x members). A Counter of epochs, not a count of members off the
        # target epoch, so that a new target epoch needs no recount.
        self._members_at_epoch: dict[int, int] = {}
        self._unreconciled = 0
        # subscribed_topic_names(), computed when first asked after the subscriptions or regexes changed: a
        # heartbeat reads it to find the partition metadata the group needs, and it rarely changes.
        self._subscribed_names: frozenset[str] | None = None
        # Session state (not in any record): when the regular expressions were last resolved.
        self.regex_refresh_deadline_ms = 0
        # While the shard loads the log: each member's last current-assignment record, applied once loading
        # ends (``flush_assignments``). A log holds a member's assignment at every epoch it went through
        # (a record per member per rebalance); only the last one is the state.
        self._deferred: dict[str, CurrentMemberAssignmentValue | None] | None = None

    # --- state -------------------------------------------------------------------------------------------

    def transition_to(self, target: ConsumerGroupState) -> None:
        if target is self.state:
            return
        self.state = CONSUMER_GROUP_STATES.check(self.state, target, who=f"group {self.group_id!r}")

    def derived_state(self) -> ConsumerGroupState:
        """The state, by its definition over every member: what checks compare the kept state with.
        Replay uses the same rule on the counts it keeps (``_refresh``), without scanning the members."""
        if not self.members:
            return _S.EMPTY
        if self.epoch > self.assignment_epoch:
            return _S.ASSIGNING
        for m in self.members.values():
            if m.epoch != self.assignment_epoch or not m.is_reconciled:
                return _S.RECONCILING
        return _S.STABLE

    def _refresh(self) -> None:
        """Re-derive the state after a record, in O(1): some member is off the target epoch exactly when
        fewer than all of them are at it."""
        if self.state is _S.DEAD:
            return
        if not self.members:
            state = _S.EMPTY
        elif self.epoch > self.assignment_epoch:
            state = _S.ASSIGNING
        elif self._unreconciled or self._members_at_epoch.get(self.assignment_epoch, 0) != len(self.members):
            state = _S.RECONCILING
        else:
            state = _S.STABLE
        self.transition_to(state)

    def _count(self, assignment: MemberAssignment, n: int) -> None:
        """Add (n=1) or take away (n=-1) one member's assignment from the counts ``_refresh`` reads."""
        at = self._members_at_epoch
        left = at.get(assignment.epoch, 0) + n
        if left:
            at[assignment.epoch] = left
        else:
            del at[assignment.epoch]  # epochs only grow: do not keep every past one
            if len(at) <= 1:
                # A dict keeps the table its peak needed (a join storm has members at hundreds of epochs at
                # once): once the group is back to one epoch, keep a table of that size.
                self._members_at_epoch = dict(at)
        if assignment.state is not MemberState.STABLE:
            self._unreconciled += n

    def _add_member(self, member_id: str) -> ConsumerMember:
        member = self.members[member_id] = ConsumerMember(member_id)
        self._count(member.assignment, 1)
        return member

    # --- replay (the only mutations) --------------------------------------------------------------------

    def apply_epoch(self, epoch: int, creation_time_ms: int) -> None:
        self.epoch = epoch
        if self.creation_time_ms < 0:
            self.creation_time_ms = creation_time_ms
        self._refresh()

    def apply_partition_metadata(self, value: PartitionMetadataValue | None) -> None:
        self.partition_metadata = value

    def apply_member_metadata(self, member_id: str, value: MemberMetadataValue | None) -> None:
        member = self.members.get(member_id)
        if member is not None:
            self._unindex(member)
        self._subscribed_names = None
        if value is None:
            if self._deferred is not None:
                self._deferred.pop(member_id, None)
            if member is not None:
                self._release(member)
                self._count(member.assignment, -1)
                del self.members[member_id]
            self._refresh()
            return
        if member is None:
            member = self._add_member(member_id)
        member.metadata = value
        self._index(member)
        self._refresh()

    def apply_target_member(self, member_id: str, value: TargetAssignmentMemberValue | None) -> None:
        if value is None:
            self.targets.pop(member_id, None)
        else:
            target = from_topic_partitions(value.partitions)
            member = self.members.get(member_id)
            if member is not None and member.assignment.assigned == target:
                target = member.assignment.assigned  # one set (and one tuple per partition) for both
            self.targets[member_id] = target

    def apply_target_epoch(self, epoch: int, timestamp_ms: int = 0) -> None:
        self.assignment_epoch = epoch
        self.assignment_timestamp_ms = timestamp_ms
        self._refresh()

    def defer_assignments(self) -> None:
        """Keep only each member's last current-assignment record until ``flush_assignments`` (loading)."""
        if self._deferred is None:
            self._deferred = {}

    def flush_assignments(self) -> None:
        """Apply the current-assignment records kept back, and apply the next ones as they come."""
        deferred, self._deferred = self._deferred, None
        for member_id, value in (deferred or {}).items():
            self.apply_current_assignment(member_id, value)

    def apply_current_assignment(self, member_id: str, value: CurrentMemberAssignmentValue | None) -> None:
        member = self.members.get(member_id)
        if member is None:
            if value is None:
                return
            member = self._add_member(member_id)
        if self._deferred is not None:
            self._deferred[member_id] = value
            return
        before = member.assignment.holds()
        self._count(member.assignment, -1)
        if value is None:
            self._release(member)
            member.assignment = MemberAssignment(member_id, LEAVE_EPOCH, LEAVE_EPOCH, MemberState.STABLE, NO_PARTITIONS)
        else:
            target = self.targets.get(member_id)
            written = _written_set(value.assigned)  # the set the handler wrote this very record from
            passed = _written_assignment(value)
            if (
                passed is not None
                and passed.member_id == member_id
                and (target is None or passed.assigned is target or target != passed.assigned)
            ):
                # The assignment the handler wrote this very record from, already in the form built below.
                if value.pending_revocation:
                    _written_set(value.pending_revocation)  # its memo entry, taken out as building would
                member.assignment = passed
            else:
                member.assignment = _assignment_of(member_id, value, target, written)
            # Only what the member no longer holds is released, and only what it did not hold is taken (what
            # it keeps is its own already): a rebalance that leaves thousands of partitions where they are
            # costs no pass over them.
            after = member.assignment.holds()
            if before:
                self._disown(member_id, before - after if after else before)
                self._own(member_id, after - before)
            else:
                self._own(member_id, after)
        self._count(member.assignment, 1)
        self._refresh()

    def apply_regex(self, regex: str, value: RegexValue | None) -> None:
        self._subscribed_names = None
        if value is None:
            self.regexes.pop(regex, None)
        else:
            self.regexes[regex] = value

    def mark_dead(self) -> None:
        self.transition_to(_S.DEAD)

    def _release(self, member: ConsumerMember) -> None:
        self._disown(member.member_id, member.assignment.holds())

    def _own(self, member_id: str, partitions: Iterable[TopicIdPartition]) -> None:
        owners = self._owners
        for topic_id, numbers in numbers_by_topic(partitions).items():
            found = owners.get(topic_id)
            if found is None:
                found = owners[topic_id] = TopicOwners()
            found.own(numbers, member_id)
            if not found.held:
                del owners[topic_id]

    def _disown(self, member_id: str, partitions: Iterable[TopicIdPartition]) -> None:
        """Release what ``member_id`` holds of ``partitions`` (another member's hold stays)."""
        owners = self._owners
        for topic_id, numbers in numbers_by_topic(partitions).items():
            found = owners.get(topic_id)
            if found is None:
                continue
            found.disown(numbers, member_id)
            if not found.held:
                del owners[topic_id]

    def _index(self, member: ConsumerMember) -> None:
        md = member.metadata
        if md.instance_id is not None:
            self.static_members[md.instance_id] = member.member_id
        self.topic_subscribers.update(md.subscribed_topics)
        if md.subscribed_regex:
            self.regex_subscribers[md.subscribed_regex] += 1

    def _unindex(self, member: ConsumerMember) -> None:
        md = member.metadata
        if md.instance_id is not None and self.static_members.get(md.instance_id) == member.member_id:
            del self.static_members[md.instance_id]
        _take_one(self.topic_subscribers, md.subscribed_topics)
        if md.subscribed_regex:
            _take_one(self.regex_subscribers, (md.subscribed_regex,))

    # --- reading ----------------------------------------------------------------------------------------

    @property
    def owners(self) -> Mapping[TopicIdPartition, str]:
        """Partition -> the member holding it (assigned or pending revocation): a read-only view of the index
        (``get`` is ``owner_of``); handlers asking about a whole set use ``held_elsewhere``."""
        return OwnersView(self._owners)

    def has_owners(self) -> bool:
        return bool(self._owners)

    def owner_of(self, partition: TopicIdPartition) -> str | None:
        found = self._owners.get(partition[0])
        return None if found is None else found.get(partition[1])

    def held_elsewhere(self, partitions: Set[TopicIdPartition], member_id: str) -> list[TopicIdPartition]:
        """The partitions of ``partitions`` a member other than ``member_id`` holds (one UUID hash per topic)."""
        out: list[TopicIdPartition] = []
        owners = self._owners
        for topic_id, numbers in numbers_by_topic(partitions).items():
            found = owners.get(topic_id)
            if found is None:
                continue
            holders = found.owners_of(numbers)
            if holders.count(None) + holders.count(member_id) == len(holders):
                continue  # the usual answer: nobody else
            out.extend([(topic_id, n) for n, o in zip(numbers, holders, strict=True) if o is not None and o != member_id])
        return out

    def static_member(self, instance_id: str) -> ConsumerMember | None:
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def subscribed_topic_names(self) -> frozenset[str]:
        """Topics some member subscribes to by name or through a regular expression."""
        names = self._subscribed_names
        if names is None:
            found = set(self.topic_subscribers)
            for regex in self.regex_subscribers:
                resolved = self.regexes.get(regex)
                if resolved is not None:
                    found.update(resolved.topics)
            names = self._subscribed_names = frozenset(found)
        return names

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return topic in self.subscribed_topic_names()

    def snapshot(self) -> ConsumerGroupSnapshot:
        return ConsumerGroupSnapshot(
            self.epoch, self.creation_time_ms, self.partition_metadata, self.assignment_epoch,
            tuple(sorted(self.targets.items())),
            tuple((m.member_id, m.metadata, m.assignment) for m in sorted(self.members.values(), key=lambda m: m.member_id)),
            tuple(sorted(self.regexes.items())), self.state,
        )  # fmt: skip

    def __iter__(self) -> Iterator[ConsumerMember]:
        return iter(self.members.values())
