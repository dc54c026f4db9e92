"""What rebalances did to a group, rebuilt from the coordinator's own records: pure.

The coordinator writes every change of a group to ``__consumer_offsets`` before it answers: a classic group's
new generation with each member's assignment (GroupMetadata), a KIP-848 group's epochs, members and each
member's current assignment (ConsumerGroupMetadata, ConsumerGroupMemberMetadata,
ConsumerGroupCurrentMemberAssignment). Read back in order with their timestamps, they tell who owned each
partition when, and when nobody did: what a console's rebalance timeline draws. Other tools only see the
group as it is now.

`group_history` takes ``(timestamp_ms, record)`` in log order and the topic names by id (KIP-848 records name
topics by id); what cannot be decoded is skipped by the caller.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from groupstream.protocol.consumer_group_records import (
    ConsumerGroupKey,
    ConsumerMemberKey,
    CurrentMemberAssignmentValue,
    GroupMetadataValue848,
    MemberMetadataValue,
)
from groupstream.protocol.consumer_protocol import decode_assignment
from groupstream.protocol.errors import PeerProtocolError
from groupstream.protocol.group_records import CoordinatorRecord, GroupMetadataKey, GroupMetadataValue

Partition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Event:
    time_ms: int
    text: str


@dataclass(slots=True)
class Span:
    """``owner`` held the partition from ``start_ms`` until ``end_ms`` (None: still holds it)."""

    owner: str
    start_ms: int
    end_ms: int | None = None


@dataclass(slots=True)
class GroupHistory:
    group_id: str
    events: list[Event] = field(default_factory=list)
    ownership: dict[Partition, list[Span]] = field(default_factory=dict)
    first_ms: int | None = None
    last_ms: int | None = None

    def owners(self) -> list[str]:
        """Everyone who ever owned a partition, in order of first ownership."""
        seen: dict[str, int] = {}
        for spans in self.ownership.values():
            for s in spans:
                seen[s.owner] = min(seen.get(s.owner, s.start_ms), s.start_ms)
        return sorted(seen, key=lambda o: (seen[o], o))

    def _seen(self, t: int) -> None:
        self.first_ms = t if self.first_ms is None else min(self.first_ms, t)
        self.last_ms = t if self.last_ms is None else max(self.last_ms, t)

    def _own(self, partition: Partition, owner: str | None, t: int) -> None:
        """``owner`` (None: nobody) holds ``partition`` from ``t`` on."""
        spans = self.ownership.setdefault(partition, [])
        current = spans[-1] if spans and spans[-1].end_ms is None else None
        if current is not None and current.owner == owner:
            return
        if current is not None:
            current.end_ms = t
        if owner is not None:
            spans.append(Span(owner, t))


def group_history(
    entries: Iterable[tuple[int, CoordinatorRecord]], group_id: str, topic_names: Mapping[uuid.UUID, str]
) -> GroupHistory:
    h = GroupHistory(group_id)
    names: dict[str, str] = {}  # member id -> what to call it (client id and a short member id)
    held: dict[str, set[Partition]] = {}  # consumer groups: each member's partitions
    for t, rec in entries:
        key, value = rec.key, rec.value
        if isinstance(key, GroupMetadataKey) and key.group == group_id:
            h._seen(t)
            _classic(h, t, value)
        elif isinstance(key, ConsumerGroupKey) and key.group == group_id and isinstance(value, GroupMetadataValue848):
            h._seen(t)
            h.events.append(Event(t, f"group epoch {value.epoch}"))
        elif isinstance(key, ConsumerMemberKey) and key.group == group_id:
            h._seen(t)
            _consumer_member(h, t, key.member_id, value, names, held, topic_names)
    return h


def _classic(h: GroupHistory, t: int, value: GroupMetadataValue | None) -> None:
    if value is None:
        h.events.append(Event(t, "group deleted"))
        for partition in list(h.ownership):
            h._own(partition, None, t)
        return
    if value.generation <= 0 and not value.members:
        return
    owners: dict[Partition, str] = {}
    for m in value.members:
        label = f"{m.client_id} ({m.member_id[-8:]})"
        try:
            assignment = decode_assignment(m.assignment) if m.assignment else None
        except PeerProtocolError:
            assignment = None
        for partition in assignment.partitions if assignment is not None else ():
            owners[partition] = label
    clients = ", ".join(sorted(m.client_id for m in value.members)) or "no members"
    h.events.append(Event(t, f"generation {value.generation}: {len(value.members)} members ({clients})"))
    for partition in set(h.ownership) | set(owners):
        h._own(partition, owners.get(partition), t)


def _consumer_member(
    h: GroupHistory,
    t: int,
    member_id: str,
    value: object,
    names: dict[str, str],
    held: dict[str, set[Partition]],
    topic_names: Mapping[uuid.UUID, str],
) -> None:
    if isinstance(value, MemberMetadataValue):
        if member_id not in names:
            h.events.append(Event(t, f"member {value.client_id} ({member_id[-8:]}) joined"))
        names[member_id] = f"{value.client_id} ({member_id[-8:]})"
    elif isinstance(value, CurrentMemberAssignmentValue):
        owner = names.get(member_id, member_id[-8:])
        now: set[Partition] = set()
        for tp in (*value.assigned, *value.pending_revocation):  # a partition being revoked is still held
            topic = topic_names.get(tp.topic_id, str(tp.topic_id))
            now.update((topic, p) for p in tp.partitions)
        before = held.get(member_id, set())
        for partition in before - now:
            _release(h, partition, owner, t)
        for partition in now - before:
            h._own(partition, owner, t)
        held[member_id] = now
        h.events.append(Event(t, f"{owner} at epoch {value.member_epoch}: {len(now)} partitions"))
    elif value is None and member_id in names:
        owner = names.pop(member_id)
        h.events.append(Event(t, f"member {owner} left"))
        for partition in held.pop(member_id, set()):
            _release(h, partition, owner, t)


def _release(h: GroupHistory, partition: Partition, owner: str, t: int) -> None:
    spans = h.ownership.get(partition, [])
    if spans and spans[-1].end_ms is None and spans[-1].owner == owner:
        h._own(partition, None, t)
