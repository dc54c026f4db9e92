"""Rebalances: every trigger, SyncGroup, Heartbeat, LeaveGroup, timeouts, and eager and cooperative flows."""

from __future__ import annotations

import pytest
from coordinator_harness import GROUP, Harness, assignment, subscription

from groupstream.coordinator.classic_group import GroupState
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.group_records import GroupMetadataKey

E = ErrorCode
S = GroupState


def _rejoin(h: Harness, members: list[str], **kwargs: object) -> dict[str, int]:
    return {m: h.join(m, **kwargs) for m in members}  # type: ignore[arg-type]


def _awaiting_sync(h: Harness, client_ids: str) -> tuple[list[str], int]:
    """A first generation formed but not synced (CompletingRebalance): one new member per client id, all
    rejoined and the initial delay over; returns the member ids, leader first, and the generation."""
    members = [h.join_new(client_id=x) for x in client_ids]
    tokens = _rejoin(h, members)
    h.advance(2 * h.config.initial_rebalance_delay_ms)
    return members, h.answer(tokens[members[0]]).generation_id


def _finish(h: Harness, tokens: dict[str, int], assign: dict[str, bytes] | None = None) -> int:
    """Complete a join phase whose JoinGroups were all answered: everyone syncs, the leader last."""
    answers = {m: h.answer(t) for m, t in tokens.items()}
    generation = next(iter(answers.values())).generation_id
    leader = next(iter(answers.values())).leader
    syncs = {m: h.sync(m, generation) for m in answers if m != leader}
    h.sync(leader, generation, assign or {m: assignment(("t", i)) for i, m in enumerate(answers)})
    assert all(h.answer(t).error_code == 0 for t in syncs.values())
    return int(generation)


# --- SyncGroup -------------------------------------------------------------------------------------------------


def test_followers_wait_for_the_leader_and_each_gets_its_own_assignment() -> None:
    h = Harness()
    (a, b, c), generation = _awaiting_sync(h, "abc")
    sb, sc = h.sync(b, generation), h.sync(c, generation)
    assert h.parked(sb) and h.parked(sc) and h.state() is S.COMPLETING_REBALANCE
    mark = len(h.log)
    sa = h.sync(a, generation, {a: b"A", b: b"B"})  # the leader forgot c
    assert [h.answer(t).assignment for t in (sa, sb, sc)] == [b"A", b"B", b""]
    assert h.state() is S.STABLE
    (record,) = h.records_since(mark)
    assert record.key == GroupMetadataKey(GROUP)
    assert {m.member_id: m.assignment for m in record.value.members} == {a: b"A", b: b"B", c: b""}
    assert record.value.generation == generation and record.value.leader == a
    # A member syncing after the group is Stable gets the stored assignment.
    assert h.answer(h.sync(b, generation)).assignment == b"B"


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"generation": 99}, E.ILLEGAL_GENERATION),
        ({"member_id": "ghost"}, E.UNKNOWN_MEMBER_ID),
        ({"group": "other"}, E.UNKNOWN_MEMBER_ID),
        ({"group": ""}, E.INVALID_GROUP_ID),
        ({"version": 5, "protocol_name": "roundrobin"}, E.INCONSISTENT_GROUP_PROTOCOL),
        ({"version": 5, "protocol_type": "connect"}, E.INCONSISTENT_GROUP_PROTOCOL),
        ({"instance_id": "not-mine"}, E.UNKNOWN_MEMBER_ID),
    ],
)
def test_sync_validation(change: dict[str, object], error: ErrorCode) -> None:
    h = Harness()
    (member,), generation = h.form_group(1)
    args: dict[str, object] = {"member_id": member, "generation": generation, **change}
    assert h.answer(h.sync(**args)).error_code == error  # type: ignore[arg-type]


def test_sync_v5_echoes_the_protocol() -> None:
    h = Harness()
    (member,), generation = h.form_group(1)
    answer = h.answer(h.sync(member, generation, version=5, protocol_type="consumer", protocol_name="range"))
    assert (answer.error_code, answer.protocol_type, answer.protocol_name) == (0, "consumer", "range")


def test_sync_to_an_empty_group_is_unknown_member() -> None:
    h = Harness()
    h.commit({("t", 0): 1})  # a simple consumer's group: Empty
    assert h.answer(h.sync("m", 0)).error_code == E.UNKNOWN_MEMBER_ID


def test_sync_during_preparing_rebalance_says_rebalance_in_progress() -> None:
    h = Harness()
    (a, b), generation = h.form_group(2)
    h.join(a)  # leader rejoins: PreparingRebalance
    assert h.answer(h.sync(b, generation)).error_code == E.REBALANCE_IN_PROGRESS


def test_a_rebalance_before_the_leader_syncs_sends_parked_followers_back_to_join() -> None:
    h = Harness()
    (_leader, b), generation = _awaiting_sync(h, "ab")
    parked = h.sync(b, generation)
    newcomer = h.join(version=3, client_id="c")  # a new member during CompletingRebalance
    assert h.answer(parked).error_code == E.REBALANCE_IN_PROGRESS
    assert h.state() is S.PREPARING_REBALANCE and h.parked(newcomer)


def test_a_repeated_sync_replaces_the_parked_one() -> None:
    h = Harness()
    (a, b), generation = _awaiting_sync(h, "ab")
    first = h.sync(b, generation)
    second = h.sync(b, generation)
    assert h.answer(first).error_code == E.REBALANCE_IN_PROGRESS
    h.sync(a, generation, {a: b"A", b: b"B"})
    assert h.answer(second).assignment == b"B"


# --- Heartbeat -------------------------------------------------------------------------------------------------


def test_heartbeat_answers_by_state_and_validates_the_member() -> None:
    h = Harness()
    (a, b), generation = h.form_group(2)
    assert h.heartbeat(a, generation) == E.NONE
    assert h.heartbeat(a, generation + 1) == E.ILLEGAL_GENERATION
    assert h.heartbeat("ghost", generation) == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat(a, generation, group="nope") == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat(a, generation, group="") == E.INVALID_GROUP_ID
    assert h.heartbeat(a, generation, instance_id="x") == E.UNKNOWN_MEMBER_ID
    h.join(a)  # the leader rejoins: everybody else learns of the rebalance from its next heartbeat
    assert h.heartbeat(b, generation) == E.REBALANCE_IN_PROGRESS
    tb = h.join(b)
    assert h.state() is S.COMPLETING_REBALANCE
    assert h.heartbeat(b, h.answer(tb).generation_id) == E.NONE


def test_heartbeats_keep_a_member_alive_past_its_first_session() -> None:
    h = Harness()
    (a, b), generation = h.form_group(2, session=10_000)
    for _ in range(5):
        h.advance(6_000)
        assert h.heartbeat(a, generation) == E.NONE
        assert h.heartbeat(b, generation) == E.NONE
    assert h.state() is S.STABLE and set(h.group().members) == {a, b}


# --- rebalance triggers ----------------------------------------------------------------------------------------


def test_trigger_a_new_member_joins() -> None:
    h = Harness()
    (a, b), generation = h.form_group(2)
    c = h.join_new(client_id="c")
    tc = h.join(c)
    assert h.state() is S.PREPARING_REBALANCE
    assert h.heartbeat(a, generation) == h.heartbeat(b, generation) == E.REBALANCE_IN_PROGRESS
    tokens = {**_rejoin(h, [a, b]), c: tc}
    assert _finish(h, tokens) == generation + 1
    assert h.state() is S.STABLE and set(h.group().members) == {a, b, c}


def test_trigger_a_member_leaves() -> None:
    h = Harness()
    (a, b, c), generation = h.form_group(3)
    answer = h.leave((c, None))
    assert [(m.member_id, m.error_code) for m in answer.members] == [(c, 0)]
    assert h.heartbeat(a, generation) == E.REBALANCE_IN_PROGRESS
    assert h.heartbeat(c, generation) == E.UNKNOWN_MEMBER_ID
    assert _finish(h, _rejoin(h, [a, b])) == generation + 1
    assert set(h.group().members) == {a, b}


def test_trigger_a_missed_heartbeat_expires_the_member() -> None:
    h = Harness()
    (a, b), generation = h.form_group(2, session=10_000)
    h.advance(9_000)
    assert h.heartbeat(a, generation) == E.NONE
    h.advance(1_000)  # b's session ends
    assert b not in h.group().members and h.state() is S.PREPARING_REBALANCE
    assert h.heartbeat(a, generation) == E.REBALANCE_IN_PROGRESS
    assert h.heartbeat(b, generation) == E.UNKNOWN_MEMBER_ID
    assert _finish(h, _rejoin(h, [a])) == generation + 1


def test_trigger_a_follower_rejoins_with_new_metadata() -> None:
    h = Harness()
    (a, b), generation = h.form_group(2)
    tb = h.join(b, topics=("t", "u"))
    assert h.parked(tb) and h.state() is S.PREPARING_REBALANCE
    tokens = {**_rejoin(h, [a]), b: tb}
    leader_view = {m.member_id: m.metadata for m in h.answer(tokens[a]).members}
    assert leader_view[b] == subscription("t", "u")
    assert _finish(h, tokens) == generation + 1


def test_a_follower_rejoining_unchanged_gets_the_current_generation_without_a_rebalance() -> None:
    h = Harness()
    (a, b), generation = h.form_group(2)
    answer = h.answer(h.join(b))
    assert (answer.error_code, answer.generation_id, answer.leader, answer.members) == (0, generation, a, [])
    assert h.state() is S.STABLE


def test_trigger_the_leader_rejoins() -> None:
    # How a leader asks for a rebalance nobody's metadata shows (partition growth, a cooperative follow-up).
    h = Harness()
    (a, b), generation = h.form_group(2)
    ta = h.join(a)
    assert h.parked(ta) and h.state() is S.PREPARING_REBALANCE
    assert _finish(h, {a: ta, **_rejoin(h, [b])}) == generation + 1


def test_rejoin_during_completing_rebalance() -> None:
    h = Harness()
    (a, b), generation = _awaiting_sync(h, "ab")
    again = h.answer(h.join(a))  # same metadata: it missed its answer, so it gets it again
    assert again.generation_id == generation and len(again.members) == 2
    changed = h.join(b, topics=("u",))  # new metadata: back to PreparingRebalance
    assert h.parked(changed) and h.state() is S.PREPARING_REBALANCE


def test_members_that_do_not_rejoin_in_time_are_removed() -> None:
    h = Harness()
    timeouts = {"rebalance": 20_000, "session": 30_000}
    (a, b, c), generation = h.form_group(3, **timeouts)
    ta = h.join(a, **timeouts)
    h.advance(5_000)
    assert h.heartbeat(b, generation) == E.REBALANCE_IN_PROGRESS
    tb = h.join(b, **timeouts)
    h.advance(14_999)
    assert h.parked(ta) and h.parked(tb)
    h.advance(1)  # the rebalance timeout: c never rejoined, though its session has not ended
    assert c not in h.group().members
    assert h.answer(ta).generation_id == h.answer(tb).generation_id == generation + 1
    assert {m.member_id for m in h.answer(ta).members} == {a, b}


def test_a_leader_that_does_not_rejoin_is_replaced_by_one_that_did() -> None:
    h = Harness()
    (a, b), _generation = h.form_group(2, rebalance=20_000, session=30_000)
    tb = h.join(b, topics=("u",), rebalance=20_000, session=30_000)
    h.advance(20_000)
    answer = h.answer(tb)
    assert answer.leader == b and [m.member_id for m in answer.members] == [b]
    assert a not in h.group().members


def test_members_that_do_not_sync_in_time_are_removed() -> None:
    h = Harness()
    (a, b), _generation = h.form_group(2, rebalance=20_000, session=30_000)
    tokens = _rejoin(h, [a, b], rebalance=20_000, session=30_000)
    new_generation = h.answer(tokens[a]).generation_id
    h.sync(a, new_generation, {a: b"A", b: b"B"})
    assert h.state() is S.STABLE
    h.advance(19_999)
    assert b in h.group().members
    h.advance(1)  # b never sent SyncGroup for the new generation
    assert b not in h.group().members and h.state() is S.PREPARING_REBALANCE


def test_a_new_member_whose_join_waits_too_long_is_dropped() -> None:
    # The old member keeps heartbeating but never rejoins; its rebalance timeout is longer than the 5 minute
    # limit on a new member's parked join.
    h = Harness()
    (a,), generation = h.form_group(1, rebalance=600_000, session=30_000)
    newcomer = h.join(version=3, client_id="n", rebalance=600_000)
    for _ in range(29):
        h.advance(10_000)
        assert h.heartbeat(a, generation) == E.REBALANCE_IN_PROGRESS
    assert h.parked(newcomer)
    h.advance(10_000)
    answer = h.answer(newcomer)
    assert (answer.error_code, answer.member_id) == (E.UNKNOWN_MEMBER_ID, "")
    assert list(h.group().members) == [a]


def test_the_last_member_leaving_empties_the_group_with_a_new_generation() -> None:
    h = Harness()
    (a,), generation = h.form_group(1)
    mark = len(h.log)
    h.leave((a, None))
    assert h.state() is S.EMPTY
    (record,) = h.records_since(mark)
    assert record.value.generation == generation + 1
    assert (record.value.protocol, record.value.leader, record.value.members) == (None, None, ())
    assert record.value.protocol_type == "consumer"
    assert h.group().generation == generation + 1


# --- LeaveGroup ------------------------------------------------------------------------------------------------


def test_leave_v0_to_v2_answer_one_member_at_top_level() -> None:
    h = Harness()
    (a, b), _ = h.form_group(2)
    for version in (0, 1, 2):
        assert h.leave(("ghost", None), version=version).error_code == E.UNKNOWN_MEMBER_ID
    assert h.leave((b, None), version=1).error_code == 0
    assert set(h.group().members) == {a}


def test_leave_v3_batch_reports_each_member() -> None:
    h = Harness()
    (a, b, c), _ = h.form_group(3)
    answer = h.leave((b, None), ("ghost", None), (c, "not-static"), version=4)
    assert answer.error_code == 0
    assert [(m.member_id, m.error_code) for m in answer.members] == [
        (b, 0),
        ("ghost", E.UNKNOWN_MEMBER_ID),
        (c, E.UNKNOWN_MEMBER_ID),
    ]
    assert set(h.group().members) == {a, c}


def test_leave_of_an_unknown_group() -> None:
    h = Harness()
    assert h.leave(("m", None)).error_code == E.UNKNOWN_MEMBER_ID
    assert h.leave(("m", None), group="").error_code == E.INVALID_GROUP_ID


def test_a_pending_member_may_leave() -> None:
    h = Harness()
    (_a,), _ = h.form_group(1)
    pending = h.join_new(client_id="p")
    answer = h.leave((pending, None))
    assert answer.members[0].error_code == 0
    # Nobody's assignment changes, so unlike Kafka this is no reason to rebalance.
    assert pending not in h.group().pending_join_members and h.state() is S.STABLE


def test_leaving_members_parked_join_is_answered() -> None:
    h = Harness()
    (a, b), _ = h.form_group(2)
    ta = h.join(a)
    h.leave((a, None))
    assert h.answer(ta).error_code == E.UNKNOWN_MEMBER_ID
    # b is the only member left and has not rejoined: it becomes the leader when it does.
    tb = h.join(b)
    assert h.answer(tb).leader == b


# --- eager and cooperative clients -----------------------------------------------------------------------------


def test_eager_rebalance_moves_partitions_through_a_new_generation() -> None:
    h = Harness()
    (a, b), generation = h.form_group(2)
    c = h.join_new(client_id="c")
    tokens = {**_rejoin(h, [a, b]), c: h.join(c)}
    new = {a: assignment(("t", 0), ("t", 1)), b: assignment(("t", 2)), c: assignment(("t", 3))}
    assert _finish(h, tokens, new) == generation + 1
    assert {m.member_id: m.assignment for m in h.group().members.values()} == new


def test_cooperative_metadata_passes_through_untouched_and_the_leader_asks_for_a_follow_up() -> None:
    h = Harness()
    coop = "cooperative-sticky"
    (a, b), generation = h.form_group(2, protocols=[(coop, subscription("t"))])
    owned_a = subscription("t", owned=[("t", 0), ("t", 1)], user_data=b"\x00ud-a")
    owned_b = subscription("t", owned=[("t", 2), ("t", 3)], user_data=b"\x00ud-b")
    c = h.join_new(client_id="c", protocols=[(coop, subscription("t"))])
    tc = h.join(c, protocols=[(coop, subscription("t"))])
    ta = h.join(a, protocols=[(coop, owned_a)])
    tb = h.join(b, protocols=[(coop, owned_b)])
    leader = h.answer(ta)
    assert leader.protocol_name == coop
    assert {m.member_id: m.metadata for m in leader.members} == {a: owned_a, b: owned_b, c: subscription("t")}
    # First round: a gives up t-1 (revoked, assigned to nobody yet); the others keep what they own.
    user_data = b"\x00\x01opaque"
    first = {a: assignment(("t", 0)) + user_data, b: assignment(("t", 2), ("t", 3)), c: assignment()}
    gen1 = _finish(h, {a: ta, b: tb, c: tc}, first)
    assert gen1 == generation + 1
    assert h.answer(h.sync(a, gen1)).assignment == first[a]  # assignment bytes come back byte for byte
    # The leader's follow-up: it rejoins, everyone rejoins, t-1 goes to c.
    ta2 = h.join(a, protocols=[(coop, subscription("t", owned=[("t", 0)]))])
    assert h.heartbeat(b, gen1) == E.REBALANCE_IN_PROGRESS
    tb2 = h.join(b, protocols=[(coop, owned_b)])
    tc2 = h.join(c, protocols=[(coop, subscription("t"))])
    second = {a: assignment(("t", 0)), b: assignment(("t", 2), ("t", 3)), c: assignment(("t", 1))}
    assert _finish(h, {a: ta2, b: tb2, c: tc2}, second) == gen1 + 1
    assert h.group().members[c].assignment == second[c]
