"""A current-assignment record replayed as the handler wrote it takes the assignment it was written from (a memo,
issue 18's join storm); these pin that the result is exactly what replaying the record's bytes builds (a
restarted coordinator), and that an assignment in another form is rebuilt from the record."""

from __future__ import annotations

import uuid

from groupstream.coordinator.consumer_group import ConsumerGroup
from groupstream.coordinator.consumer_partitions import PartitionSet
from groupstream.coordinator.consumer_records import current_assignment_record, replay_consumer_record
from groupstream.coordinator.reconcile import MemberAssignment, MemberState
from groupstream.protocol.group_records import decode_record, encode_record

T = uuid.uuid5(uuid.NAMESPACE_URL, "topic:t")


def _replayed(record: object) -> ConsumerGroup:
    groups: dict[str, ConsumerGroup] = {}

    def get(group_id: str, create: bool) -> ConsumerGroup | None:
        if group_id not in groups and create:
            groups[group_id] = ConsumerGroup(group_id)
        return groups.get(group_id)

    replay_consumer_record(record, get, lambda g: None)  # type: ignore[arg-type]
    return groups["g"]


def test_the_written_assignment_is_taken_and_equals_the_decoded_one() -> None:
    a = MemberAssignment("m", 7, 6, MemberState.UNREVOKED_PARTITIONS, PartitionSet.from_sorted(T, range(0, 4)),
                         PartitionSet.from_sorted(T, range(10, 13)))  # fmt: skip
    record = current_assignment_record("g", a)
    decoded = decode_record(*encode_record(record))
    live, loaded = _replayed(record), _replayed(decoded)
    assert live.members["m"].assignment is a
    assert loaded.members["m"].assignment == a and loaded.members["m"].assignment is not a
    assert dict(live.owners) == dict(loaded.owners) == {(T, p): "m" for p in (0, 1, 2, 3, 10, 11, 12)}


def test_an_assignment_with_epochs_of_its_own_is_rebuilt_from_the_record() -> None:
    ps = PartitionSet.from_sorted(T, range(0, 4))
    # given at epoch 3 while the member is at 7: replay keeps that as given_at, a form the handler did not use
    a = MemberAssignment("m", 7, 6, MemberState.STABLE, ps, partition_epochs={(T, p): 3 for p in range(4)})
    record = current_assignment_record("g", a)
    replayed = _replayed(record).members["m"].assignment
    assert replayed is not a and replayed.given_at == 3 and not replayed.partition_epochs
    assert replayed.assignment_epochs() == a.assignment_epochs()
    assert replayed == _replayed(decode_record(*encode_record(record))).members["m"].assignment
