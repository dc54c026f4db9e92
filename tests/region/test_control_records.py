"""Control-plane records: every kind survives encode/decode, unknown keys are skipped, and the view folds
them as every member must agree."""

from __future__ import annotations

import pytest

from groupstream.assignment.types import TopicPartition
from groupstream.region.control_records import (
    Ack,
    CheckpointData,
    Command,
    InitialOffsets,
    MemberRegistration,
    MergeContribution,
    decode,
    encode,
)
from groupstream.region.control_view import ControlView
from groupstream.region.merge import MergeKey

A, B = TopicPartition("t", 0), TopicPartition("t", 1)
RECORDS = [
    MemberRegistration("r", "g", "m1", 3),
    MemberRegistration("r", "g", "m1", None),
    InitialOffsets("r", "g", "m1", {A: 5, B: 0}),
    MergeContribution("r", 7, 2, "m1", frozenset({A, B}), {A: 9}),
    Command("r", 12, "reset", None, 4),
    Command("r", 13, "drain", 8, 0),
    Ack("r", "m1", 12, "reset", None),
    Ack("r", "m2", 13, "drain", "queue stuck"),
    CheckpointData("r", 7, "m1", '{"x":1}'),
    CheckpointData("r", 7, "m1", None),
]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: type(r).__name__)
def test_round_trip(record: object) -> None:
    key, value = encode(record)  # type: ignore[arg-type]
    assert decode(key, value) == record


def test_unknown_and_malformed_keys_are_skipped_and_names_cannot_hold_slashes() -> None:
    assert decode(b"r/shiny-new-kind/x", b"{}") is None
    assert decode(b"nokind", b"{}") is None
    assert decode(b"r/initial/g/m1", None) is None  # a tombstone of a kind nobody deletes
    with pytest.raises(ValueError, match="cannot contain '/'"):
        encode(MemberRegistration("r", "g/x", "m", 1))


def test_the_view_folds_records_as_every_member_must_agree() -> None:
    view = ControlView("r")
    view.apply(MemberRegistration("other-region", "g", "z", 1), 0)
    view.apply(MemberRegistration("r", "g", "m2", 4), 1)
    view.apply(MemberRegistration("r", "g", "m1", 5), 2)
    view.apply(MemberRegistration("r", "g", "m2", 4), 3)  # m2 restarted: still the first
    assert view.members("g") == {"m1": 5, "m2": 4}
    assert view.group_region_index("g") == 4
    view.apply(MemberRegistration("r", "g", "m2", None), 4)
    assert view.group_region_index("g") == 5  # the first registration still present decides
    view.apply(InitialOffsets("r", "g", "m1", {A: 1}), 5)
    view.apply(InitialOffsets("r", "g", "m2", {A: 2}), 6)
    assert view.initial_offsets("g") == {A: 1}
    view.apply(MergeContribution("r", 3, 1, "m1", frozenset({A, B}), {A: 10}), 7)
    view.apply(MergeContribution("r", 3, 1, "m2", frozenset({A, B}), {B: 20}), 8)
    assert view.merges.merged(MergeKey(3, 1)) == {A: 10, B: 20}
    view.apply(Command("r", 2, "drain", 4), 9)
    view.apply(Command("r", 1, "resume"), 10)  # an older command cannot win
    assert view.command == Command("r", 2, "drain", 4)
    view.apply(Ack("r", "m1", 2, "drain"), 11)
    assert set(view.answered(2)) == {"m1"} and view.answered(3) == {}
    view.apply(CheckpointData("r", 3, "m1", "data"), 12)
    assert view.checkpoints == {(3, "m1"): "data"}
    view.apply(Command("r", 3, "retire", 3), 13)
    assert view.merges.keys() == []
    view.apply(CheckpointData("r", 3, "m1", None), 14)
    assert view.checkpoints == {}
    assert view.applied == 14  # everything but the other region's record
