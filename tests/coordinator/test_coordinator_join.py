"""JoinGroup: first joins, validation, the initial rebalance delay, leader election and protocol selection."""

from __future__ import annotations

import pytest
from coordinator_harness import GROUP, Harness, subscription

from groupstream.coordinator.classic_group import GroupState
from groupstream.coordinator.config import GroupCoordinatorConfig
from groupstream.protocol.error_codes import ErrorCode

E = ErrorCode
S = GroupState
DELAY = GroupCoordinatorConfig().initial_rebalance_delay_ms


def test_first_join_from_v4_gets_member_id_required_and_its_id() -> None:
    h = Harness()
    first = h.answer(h.join(client_id="app", version=4))
    assert first.error_code == E.MEMBER_ID_REQUIRED
    assert first.member_id.startswith("app-")
    assert first.generation_id == -1
    group = h.group()
    assert group.members == {} and group.pending_join_members == {first.member_id}
    token = h.join(first.member_id, client_id="app", version=4)
    assert h.parked(token) and h.state() is S.PREPARING_REBALANCE
    h.advance(DELAY)
    answer = h.answer(token)
    assert answer.error_code == 0
    assert (answer.member_id, answer.leader, answer.generation_id) == (first.member_id, first.member_id, 1)
    assert answer.protocol_name == "range"
    assert [(m.member_id, m.metadata) for m in answer.members] == [(first.member_id, subscription("t"))]


def test_join_before_v4_is_added_at_once_with_a_generated_id() -> None:
    h = Harness()
    token = h.join(client_id="old", version=3)
    h.advance(DELAY)
    answer = h.answer(token)
    assert (
        answer.error_code == 0 and answer.member_id.startswith("old-") and answer.leader == answer.member_id
    )


def test_v0_join_uses_the_session_timeout_as_rebalance_timeout() -> None:
    h = Harness()
    token = h.join(version=0, session=12_000)
    (member,) = h.group().members.values()
    assert member.rebalance_timeout_ms == 12_000
    h.advance(DELAY)
    assert h.answer(token).protocol_name == "range"


def test_pending_member_that_never_rejoins_is_forgotten_with_its_group() -> None:
    h = Harness()
    h.join_new(session=8_000)
    h.advance(7_999)
    assert h.shard.group_ids() == [GROUP]
    h.advance(1)
    assert h.shard.group_ids() == []  # nothing was written for it, nothing waits in it
    assert h.log == []


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"group": ""}, E.INVALID_GROUP_ID),
        ({"session": 5_999}, E.INVALID_SESSION_TIMEOUT),
        ({"session": 1_800_001}, E.INVALID_SESSION_TIMEOUT),
        ({"member_id": "ghost"}, E.UNKNOWN_MEMBER_ID),
        ({"protocol_type": ""}, E.INCONSISTENT_GROUP_PROTOCOL),
        ({"protocols": []}, E.INCONSISTENT_GROUP_PROTOCOL),
    ],
)
def test_join_validation(kwargs: dict[str, object], error: ErrorCode) -> None:
    h = Harness()
    answer = h.answer(h.join(**kwargs))  # type: ignore[arg-type]
    assert answer.error_code == error
    assert h.shard.group_ids() == []  # a failed first join leaves no group behind


@pytest.mark.parametrize("version", range(10))
def test_join_answers_encode_at_every_version(version: int) -> None:
    # Errors carry no protocol name: before v7 it must go out as "" (non-nullable), from v7 as null.
    h = Harness()
    error = h.answer(h.join(session=1, version=version))
    assert error.error_code == E.INVALID_SESSION_TIMEOUT
    assert error.protocol_name == ("" if version < 7 else None)
    token = h.join(version=version)
    if version >= 4:
        assert h.answer(token).error_code == E.MEMBER_ID_REQUIRED
        token = h.join(h.answer(token).member_id, version=version)
    h.advance(DELAY)
    answer = h.answer(token)
    assert answer.error_code == 0 and answer.protocol_name == "range"
    assert answer.protocol_type == ("consumer" if version >= 7 else None)
    assert answer.skip_assignment is False


def test_protocol_type_and_protocols_must_match_a_non_empty_group() -> None:
    h = Harness()
    h.form_group(1)
    other_type = h.answer(h.join(protocol_type="connect"))
    assert other_type.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    no_common = h.answer(h.join(protocols=[("roundrobin", b"x")]))
    assert no_common.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.state() is S.STABLE


def test_group_max_size_turns_away_extra_members() -> None:
    h = Harness(config=GroupCoordinatorConfig(max_size=2))
    members, _ = h.form_group(2)
    extra = h.answer(h.join(version=3))
    assert (extra.error_code, extra.member_id) == (E.GROUP_MAX_SIZE_REACHED, "")
    assert set(h.group().members) == set(members)
    # During a rebalance the limit counts members already waiting, so the last to rejoin is the one let go.
    leader, follower = members
    leader_join = h.join(leader)
    newcomer = h.join(version=3, client_id="new")
    assert h.parked(leader_join) and h.parked(newcomer)
    late = h.answer(h.join(follower))
    assert late.error_code == E.GROUP_MAX_SIZE_REACHED
    assert follower not in h.group().members
    # Everyone left has rejoined, so the rebalance completes without waiting for the timeout.
    assert h.answer(leader_join).generation_id == h.answer(newcomer).generation_id == 2


def test_initial_rebalance_waits_the_configured_delay() -> None:
    h = Harness()
    token = h.join(version=3)
    h.advance(DELAY - 1)
    assert h.parked(token)
    h.advance(1)
    assert h.answer(token).generation_id == 1


def test_initial_delay_grows_while_members_arrive_but_not_past_the_rebalance_timeout() -> None:
    # Kafka: each step that saw a new member waits one more delay, bounded by the rebalance timeout.
    h = Harness()
    start = h.now
    tokens = [h.join(version=3, rebalance=5_000, client_id="c0")]
    for i in range(1, 5):
        h.advance(1_000)
        tokens.append(h.join(version=3, rebalance=5_000, client_id=f"c{i}"))
    assert all(h.parked(t) for t in tokens)  # 4 s in: the first step (3 s) saw arrivals, so it was extended
    h.advance(1_000)
    assert h.now - start == 5_000
    answers = [h.answer(t) for t in tokens]
    assert {a.generation_id for a in answers} == {1}
    assert len(answers[0].members) == 5


def test_initial_delay_stops_growing_when_nobody_new_arrived() -> None:
    h = Harness()
    start = h.now
    first = h.join(version=3)
    h.advance(1_000)
    second = h.join(version=3)
    h.advance(2_000)  # first step ends at 3 s; a member arrived, so one more step
    assert h.parked(first) and h.parked(second)
    h.advance(3_000)
    assert h.now - start == 6_000
    assert h.answer(first).generation_id == h.answer(second).generation_id == 1


def test_zero_initial_delay_completes_on_the_next_timer_turn() -> None:
    h = Harness(config=GroupCoordinatorConfig(initial_rebalance_delay_ms=0))
    token = h.join(version=3)
    assert h.parked(token)  # completion is a timer, due now
    h.advance(0)
    assert h.answer(token).generation_id == 1


def test_first_joiner_leads_and_only_the_leader_sees_the_members() -> None:
    h = Harness()
    a = h.join_new(client_id="a")
    b = h.join_new(client_id="b")
    ta, tb = h.join(a, topics=("t",)), h.join(b, topics=("t", "u"))
    h.advance(2 * DELAY)
    leader, follower = h.answer(ta), h.answer(tb)
    assert leader.leader == follower.leader == a
    assert [(m.member_id, m.metadata) for m in leader.members] == [
        (a, subscription("t")),
        (b, subscription("t", "u")),
    ]
    assert follower.members == []


def _join_with(h: Harness, prefs: list[list[str]]) -> str:
    ids = [h.join_new(client_id=f"c{i}") for i in range(len(prefs))]
    tokens = [
        h.join(m, protocols=[(p, p.encode()) for p in pref]) for m, pref in zip(ids, prefs, strict=True)
    ]
    h.advance(2 * DELAY)
    names = {h.answer(t).protocol_name for t in tokens}
    (name,) = names
    return str(name)


def test_protocol_selection_is_by_votes_among_protocols_everyone_supports() -> None:
    assert (
        _join_with(Harness(), [["range", "roundrobin"], ["roundrobin", "range"], ["roundrobin", "range"]])
        == "roundrobin"
    )
    assert (
        _join_with(Harness(), [["range", "roundrobin"], ["range", "roundrobin"], ["roundrobin", "range"]])
        == "range"
    )
    # A protocol not everyone supports is never chosen, whatever the votes.
    assert _join_with(Harness(), [["sticky", "range"], ["sticky", "range"], ["range"]]) == "range"
    # A tie is broken by name (Kafka leaves it to hash order), so the choice is deterministic.
    assert _join_with(Harness(), [["roundrobin", "range"], ["range", "roundrobin"]]) == "range"


def test_leader_receives_each_members_metadata_for_the_chosen_protocol() -> None:
    h = Harness()
    a, b = h.join_new(client_id="a"), h.join_new(client_id="b")
    ta = h.join(a, protocols=[("range", b"a-range"), ("rr", b"a-rr")])
    tb = h.join(b, protocols=[("rr", b"b-rr"), ("range", b"b-range")])
    h.advance(2 * DELAY)
    answer = h.answer(ta)
    assert answer.protocol_name == "range"  # one vote each: the tie goes to the name first in order
    assert {m.member_id: m.metadata for m in answer.members} == {a: b"a-range", b: b"b-range"}
    assert not h.parked(tb)


def test_unknown_member_id_rejoining_is_rejected() -> None:
    h = Harness()
    h.form_group(1)
    answer = h.answer(h.join("nobody"))
    assert (answer.error_code, answer.member_id) == (E.UNKNOWN_MEMBER_ID, "nobody")


def test_a_member_may_rejoin_a_pending_id_only_once_it_has_one() -> None:
    h = Harness()
    member = h.join_new()
    # A static instance id with a pending (dynamic) id is a client bug Kafka answers with an internal error.
    answer = h.answer(h.join(member, instance_id="i"))
    assert answer.error_code == E.UNKNOWN_SERVER_ERROR
