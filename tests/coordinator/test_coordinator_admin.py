"""DescribeGroups, ListGroups and DeleteGroups as admin tools (kafka-consumer-groups.sh, our CLI) use them."""

from __future__ import annotations

import pytest
from coordinator_harness import GROUP, Harness, assignment, subscription

from groupstream.coordinator.classic_group import GroupState
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.group_records import GroupMetadataKey, OffsetCommitKey

E = ErrorCode
S = GroupState


def test_describe_a_stable_group_shows_members_with_metadata_and_assignment() -> None:
    h = Harness()
    (a, b), _ = h.form_group(2)
    (group,) = h.describe(GROUP, version=5)
    assert (group.error_code, group.group_state, group.protocol_type, group.protocol_data) == (
        0,
        "Stable",
        "consumer",
        "range",
    )
    members = {m.member_id: m for m in group.members}
    assert set(members) == {a, b}
    assert members[a].client_host == "/127.0.0.1" and members[a].client_id == "client"
    assert members[a].member_metadata == subscription("t")
    assert members[a].member_assignment == assignment(("t", 0))
    assert members[b].member_assignment == assignment(("t", 1))


def test_describe_during_a_rebalance_leaves_out_metadata() -> None:
    h = Harness()
    (a, b), _ = h.form_group(2)
    h.join(a)
    (group,) = h.describe(GROUP)
    assert (group.group_state, group.protocol_data) == ("PreparingRebalance", "")
    assert all(m.member_metadata == b"" for m in group.members)
    h.join(b)
    assert h.describe(GROUP)[0].group_state == "CompletingRebalance"


def test_describe_an_empty_group_and_static_members() -> None:
    h = Harness()
    h.commit({("t", 0): 1}, group="simple")
    (simple,) = h.describe("simple")
    assert (simple.group_state, simple.protocol_type, simple.members) == ("Empty", "", [])
    token = h.join(instance_id="inst", group="static", version=5)
    h.advance(h.config.initial_rebalance_delay_ms)
    assert h.answer(token).error_code == 0
    (static,) = h.describe("static", version=4)
    assert [m.group_instance_id for m in static.members] == ["inst"]


@pytest.mark.parametrize("version", range(7))
def test_describe_an_unknown_group(version: int) -> None:
    h = Harness()
    (group,) = h.describe("nope", version=version)
    assert group.group_id == "nope" and group.group_state == "Dead"
    if version >= 6:
        assert (group.error_code, group.error_message) == (E.GROUP_ID_NOT_FOUND, "Group nope not found.")
    else:
        assert group.error_code == 0


def test_list_groups_with_state_and_type_filters() -> None:
    h = Harness()
    h.form_group(1, group="stable")
    h.commit({("t", 0): 1}, group="simple")
    h.join(version=3, group="joining")
    all_groups = {g.group_id: (g.group_state, g.protocol_type, g.group_type) for g in h.list_groups()}
    assert all_groups == {
        "joining": ("PreparingRebalance", "consumer", "classic"),
        "simple": ("Empty", "", "classic"),
        "stable": ("Stable", "consumer", "classic"),
    }
    assert [g.group_id for g in h.list_groups(states=["stable", "EMPTY"])] == ["simple", "stable"]
    assert [g.group_id for g in h.list_groups(states=["Dead"])] == []
    assert len(h.list_groups(types=["Classic"])) == 3
    assert h.list_groups(types=["consumer"]) == []
    assert len(h.list_groups(version=0)) == 3


def test_delete_groups() -> None:
    h = Harness()
    h.form_group(1, group="busy")
    h.commit({("t", 0): 1, ("u", 1): 2}, group="idle")
    mark = len(h.log)
    assert h.delete_groups("busy", "idle", "missing", "") == {
        "busy": E.NON_EMPTY_GROUP,
        "idle": E.NONE,
        "missing": E.GROUP_ID_NOT_FOUND,
        "": E.INVALID_GROUP_ID,
    }
    records = h.records_since(mark)
    assert [(r.key, r.value) for r in records] == [
        (OffsetCommitKey("idle", "t", 0), None),
        (OffsetCommitKey("idle", "u", 1), None),
        (GroupMetadataKey("idle"), None),
    ]
    assert h.shard.group_ids() == ["busy"]
    assert h.fetch({"t": [0]}, group="idle") == {("t", 0): (-1, "")}
    h.restart()
    assert h.shard.group_ids() == ["busy"]
    assert h.delete_groups("idle") == {"idle": E.GROUP_ID_NOT_FOUND}


def test_a_group_emptied_by_its_members_can_be_deleted() -> None:
    h = Harness()
    (a,), _ = h.form_group(1)
    h.leave((a, None))
    assert h.state() is S.EMPTY
    assert h.delete_groups(GROUP) == {GROUP: E.NONE}
    h.restart()
    assert h.shard.group_ids() == []
