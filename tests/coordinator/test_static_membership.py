"""Static membership (group.instance.id): replacement without a rebalance, fencing, leaving, restarts."""

from __future__ import annotations

from typing import Any

from coordinator_harness import GROUP, Harness, assignment, subscription

from groupstream.coordinator.classic_group import GroupState
from groupstream.coordinator.config import GroupCoordinatorConfig
from groupstream.protocol.error_codes import ErrorCode

E = ErrorCode
S = GroupState
TIMEOUTS: dict[str, Any] = {"session": 20_000, "rebalance": 30_000}


def _static_group(h: Harness, *instances: str, version: int = 5) -> tuple[dict[str, str], int]:
    """Static members join (no MEMBER_ID_REQUIRED for them) and sync; returns instance -> member id."""
    tokens = {i: h.join(instance_id=i, client_id=f"app-{i}", version=version, **TIMEOUTS) for i in instances}
    h.advance(2 * h.config.initial_rebalance_delay_ms)
    answers = {i: h.answer(t) for i, t in tokens.items()}
    ids = {i: a.member_id for i, a in answers.items()}
    generation = answers[instances[0]].generation_id
    leader = answers[instances[0]].leader
    followers = [h.sync(m, generation, instance_id=i) for i, m in ids.items() if m != leader]
    h.sync(
        leader,
        generation,
        {m: assignment(("t", n)) for n, m in enumerate(ids.values())},
        instance_id=next(i for i, m in ids.items() if m == leader),
    )
    assert all(h.answer(t).error_code == 0 for t in followers)
    return ids, generation


def _restarted(h: Harness, instance_id: str, **fields: Any) -> int:
    """A bounced process joins under its instance id: it is let in once the old member id has stayed silent
    for the liveness window (the old process is gone); returns the join's token."""
    token = h.join(instance_id=instance_id, **TIMEOUTS, **fields)
    assert h.parked(token)
    h.advance(h.config.static_member_liveness_ms)
    return token


def test_static_members_join_without_member_id_required() -> None:
    h = Harness()
    ids, generation = _static_group(h, "a", "b")
    assert ids["a"].startswith("a-") and ids["b"].startswith(
        "b-"
    )  # prefixed by the instance id, as Kafka does
    assert h.group().static_members == {"a": ids["a"], "b": ids["b"]}
    assert h.state() is S.STABLE and generation == 1


def test_a_bounced_static_member_takes_its_place_back_without_a_rebalance() -> None:
    h = Harness()
    ids, generation = _static_group(h, "a", "b")
    old = ids["b"]
    mark = len(h.log)
    answer = h.answer(_restarted(h, "b", client_id="app-b"))
    new = answer.member_id
    assert answer.error_code == 0 and new != old and answer.generation_id == generation
    assert (answer.leader, answer.members) == (ids["a"], [])
    assert h.state() is S.STABLE and h.group().generation == generation
    # The replacement is persisted, with the assignment it had.
    (record,) = h.records_since(mark)
    persisted = {m.group_instance_id: m for m in record.value.members}
    assert persisted["b"].member_id == new and persisted["b"].assignment == assignment(("t", 1))
    assert h.answer(h.sync(new, generation, instance_id="b")).assignment == assignment(("t", 1))
    # The other member never hears of a rebalance; the old process is fenced wherever it speaks.
    assert h.heartbeat(ids["a"], generation, instance_id="a") == E.NONE
    assert h.heartbeat(old, generation, instance_id="b") == E.FENCED_INSTANCE_ID
    assert h.answer(h.sync(old, generation, instance_id="b")).error_code == E.FENCED_INSTANCE_ID
    assert h.commit({("t", 1): 5}, generation=generation, member_id=old, instance_id="b") == {
        ("t", 1): E.FENCED_INSTANCE_ID
    }
    assert h.answer(h.join(old, instance_id="b", **TIMEOUTS)).error_code == E.FENCED_INSTANCE_ID
    assert h.leave((old, "b")).members[0].error_code == E.FENCED_INSTANCE_ID


def test_a_static_member_back_with_another_subscription_causes_a_rebalance() -> None:
    h = Harness()
    ids, generation = _static_group(h, "a", "b")
    token = _restarted(h, "b", topics=("t", "u"))
    assert h.parked(token) and h.state() is S.PREPARING_REBALANCE
    assert ids["b"] not in h.group().members
    ta = h.join(ids["a"], instance_id="a", **TIMEOUTS)
    leader_view = {m.group_instance_id: m.metadata for m in h.answer(ta).members}
    assert leader_view["b"] == subscription("t", "u")
    assert h.answer(token).generation_id == generation + 1


def test_a_returning_static_leader_before_v9_is_told_the_old_leader_leads() -> None:
    # So it acts as a follower and simply syncs, instead of reassigning the whole group.
    h = Harness()
    ids, generation = _static_group(h, "a", "b")
    answer = h.answer(_restarted(h, "a", version=8))
    assert answer.leader == ids["a"] and answer.member_id != ids["a"] and answer.members == []
    assert h.group().leader_id == answer.member_id
    assert h.answer(h.sync(answer.member_id, generation, instance_id="a")).assignment == assignment(("t", 0))


def test_a_returning_static_leader_from_v9_leads_but_skips_assignment() -> None:
    h = Harness()
    _ids, _generation = _static_group(h, "a", "b", version=9)
    answer = h.answer(_restarted(h, "a", version=9))
    assert answer.leader == answer.member_id and answer.skip_assignment is True
    assert {m.group_instance_id for m in answer.members} == {"a", "b"}
    assert h.state() is S.STABLE


def test_replacing_during_completing_rebalance_fences_the_parked_sync_and_rebalances() -> None:
    h = Harness()
    tokens = {i: h.join(instance_id=i, **TIMEOUTS) for i in ("a", "b")}
    h.advance(2 * h.config.initial_rebalance_delay_ms)
    generation = h.answer(tokens["a"]).generation_id
    old_b = h.answer(tokens["b"]).member_id
    parked = h.sync(old_b, generation, instance_id="b")
    replacement = _restarted(h, "b")
    assert h.answer(parked).error_code == E.FENCED_INSTANCE_ID
    assert h.parked(replacement) and h.state() is S.PREPARING_REBALANCE


def test_replacing_during_preparing_rebalance_fences_the_parked_join() -> None:
    h = Harness()
    ids, generation = _static_group(h, "a", "b")
    old_join = h.join(ids["b"], instance_id="b", topics=("u",), **TIMEOUTS)  # starts a rebalance, parks
    new_join = _restarted(h, "b", topics=("u",))
    answer = h.answer(old_join)
    assert (answer.error_code, answer.member_id) == (E.FENCED_INSTANCE_ID, ids["b"])
    h.join(ids["a"], instance_id="a", **TIMEOUTS)
    assert h.answer(new_join).generation_id == generation + 1


def test_static_members_that_do_not_rejoin_are_kept_through_the_rebalance_timeout() -> None:
    h = Harness()
    ids, generation = _static_group(h, "a", "b")
    ta = h.join(ids["a"], instance_id="a", topics=("u",), **TIMEOUTS)
    for _ in range(2):  # b stays alive by heartbeat but does not rejoin
        h.advance(10_000)
        assert h.heartbeat(ids["b"], generation, instance_id="b") == E.REBALANCE_IN_PROGRESS
    assert h.parked(ta)
    h.advance(10_000)  # the rebalance timeout: a dynamic member would be dropped now, a static one is kept
    answer = h.answer(ta)
    assert answer.generation_id == generation + 1
    assert {m.group_instance_id for m in answer.members} == {"a", "b"}
    # It learns of the new generation when it next heartbeats, and rejoins.
    assert h.heartbeat(ids["b"], generation, instance_id="b") == E.ILLEGAL_GENERATION


def test_leave_by_instance_id_alone() -> None:
    h = Harness()
    ids, _ = _static_group(h, "a", "b")
    answer = h.leave(("", "b"), ("", "nobody"))
    assert [(m.group_instance_id, m.error_code) for m in answer.members] == [
        ("b", 0),
        ("nobody", E.UNKNOWN_MEMBER_ID),
    ]
    assert set(h.group().members) == {ids["a"]} and h.state() is S.PREPARING_REBALANCE


def test_static_members_and_assignments_survive_a_restart() -> None:
    h = Harness()
    ids, generation = _static_group(h, "a", "b")
    h.restart()
    group = h.group()
    assert group.state is S.STABLE and group.generation == generation
    assert group.static_members == {"a": ids["a"], "b": ids["b"]}
    assert group.members[ids["b"]].assignment == assignment(("t", 1))
    # The restarted process comes back under a new member id and gets its partitions with no rebalance.
    answer = h.answer(_restarted(h, "b"))
    assert answer.error_code == 0 and h.state() is S.STABLE
    assert h.answer(h.sync(answer.member_id, generation, instance_id="b")).assignment == assignment(("t", 1))
    assert h.heartbeat(ids["a"], generation, instance_id="a") == E.NONE


def test_a_static_member_must_use_its_instance_id_consistently() -> None:
    h = Harness()
    ids, generation = _static_group(h, "a")
    assert h.answer(h.join(ids["a"], instance_id="z", **TIMEOUTS)).error_code == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat(ids["a"], generation, instance_id="a") == E.NONE
    assert h.shard.group(GROUP) is not None


# --- a second live process with an instance id in use ----------------------------------------------------


def test_a_second_live_process_is_fenced_and_the_first_keeps_its_place() -> None:
    h = Harness()
    ids, generation = _static_group(h, "a", "b")
    mark = len(h.log)
    duplicate = h.join(instance_id="b", client_id="app-b2", **TIMEOUTS)
    assert h.parked(duplicate)
    h.advance(1_000)
    # The first process heartbeats: it is alive, so the newcomer is the duplicate.
    assert h.heartbeat(ids["b"], generation, instance_id="b") == E.NONE
    assert h.answer(duplicate).error_code == E.FENCED_INSTANCE_ID
    assert h.records_since(mark) == [] and h.state() is S.STABLE
    assert h.group().static_members == {"a": ids["a"], "b": ids["b"]}
    assert not any(k.startswith("takeover") for k in h.shard.deadlines)
    h.advance(h.config.static_member_liveness_ms)
    assert h.heartbeat(ids["b"], generation, instance_id="b") == E.NONE


def test_a_sync_or_join_from_the_first_process_also_shows_it_alive() -> None:
    h = Harness()
    ids, generation = _static_group(h, "a", "b")
    duplicate = h.join(instance_id="b", **TIMEOUTS)
    assert h.answer(h.sync(ids["b"], generation, instance_id="b")).error_code == 0
    assert h.answer(duplicate).error_code == E.FENCED_INSTANCE_ID
    duplicate = h.join(instance_id="b", **TIMEOUTS)
    h.join(ids["b"], instance_id="b", **TIMEOUTS)  # an unchanged rejoin of a follower in a Stable group
    assert h.answer(duplicate).error_code == E.FENCED_INSTANCE_ID


def test_the_window_follows_the_observed_heartbeat_interval() -> None:
    h = Harness()
    ids, generation = _static_group(h, "a", "b")
    for _ in range(2):
        h.advance(1_000)
        assert h.heartbeat(ids["b"], generation, instance_id="b") == E.NONE
    # Heartbeats 1 s apart: silent for 1.5 intervals + 500 ms (2 s) means gone.
    newcomer = h.join(instance_id="b", **TIMEOUTS)
    h.advance(1_999)
    assert h.parked(newcomer)
    h.advance(1)
    answer = h.answer(newcomer)
    assert answer.error_code == 0 and h.group().static_members["b"] == answer.member_id


def test_a_member_silent_for_longer_than_the_window_is_replaced_at_once() -> None:
    h = Harness()
    ids, _ = _static_group(h, "a", "b")
    h.advance(h.config.static_member_liveness_ms)
    answer = h.answer(h.join(instance_id="b", **TIMEOUTS))
    assert answer.error_code == 0 and answer.member_id != ids["b"]


def test_liveness_zero_is_kafkas_immediate_takeover() -> None:
    h = Harness(config=GroupCoordinatorConfig(static_member_liveness_ms=0))
    ids, generation = _static_group(h, "a", "b")
    answer = h.answer(h.join(instance_id="b", **TIMEOUTS))
    assert answer.error_code == 0
    assert h.heartbeat(ids["b"], generation, instance_id="b") == E.FENCED_INSTANCE_ID


def test_a_newer_claim_replaces_an_older_waiting_one() -> None:
    h = Harness()
    _static_group(h, "a", "b")
    first = h.join(instance_id="b", **TIMEOUTS)
    second = h.join(instance_id="b", **TIMEOUTS)
    assert h.answer(first).error_code == E.REBALANCE_IN_PROGRESS
    h.advance(h.config.static_member_liveness_ms)
    assert h.answer(second).error_code == 0


def test_a_waiting_newcomer_joins_as_a_new_member_when_the_old_one_left_meanwhile() -> None:
    h = Harness()
    ids, generation = _static_group(h, "a", "b")
    newcomer = h.join(instance_id="b", **TIMEOUTS)
    h.leave((ids["b"], "b"))
    ta = h.join(ids["a"], instance_id="a", **TIMEOUTS)  # a rejoins the rebalance the leave started
    assert h.answer(ta).generation_id == generation + 1
    h.advance(h.config.static_member_liveness_ms)
    assert h.parked(newcomer) and h.state() is S.PREPARING_REBALANCE  # a new member: one more rebalance
    h.join(ids["a"], instance_id="a", **TIMEOUTS)
    assert h.answer(newcomer).generation_id == generation + 2


def test_unloading_answers_a_waiting_newcomer() -> None:
    h = Harness()
    _static_group(h, "a", "b")
    newcomer = h.join(instance_id="b", **TIMEOUTS)
    assert newcomer in h.shard.unload()
