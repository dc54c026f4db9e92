"""Loading, unloading and timers: what a shard does across restarts and when its runtime's timers misfire."""

from __future__ import annotations

import pytest
from coordinator_harness import GROUP, Harness, assignment

from groupstream.coordinator.classic_group import GroupState
from groupstream.coordinator.config import GroupCoordinatorConfig
from groupstream.coordinator.request import ShardRequest
from groupstream.coordinator.timers import (
    RETENTION_KEY,
    TimerKey,
    TimerKind,
    heartbeat_key,
    join_key,
    parse_key,
    sync_key,
)
from groupstream.protocol.error_codes import ErrorCode

E = ErrorCode
S = GroupState


def test_a_loaded_group_is_as_last_written_and_its_members_get_fresh_sessions() -> None:
    h = Harness()
    (a, b), generation = h.form_group(2, session=10_000)
    h.commit({("t", 0): 3}, generation=generation, member_id=a)
    h.advance(9_000)
    h.restart()
    group = h.group()
    assert (group.state, group.generation, group.leader_id, group.protocol_name) == (
        S.STABLE,
        generation,
        a,
        "range",
    )
    assert {m: x.assignment for m, x in group.members.items()} == {
        a: assignment(("t", 0)),
        b: assignment(("t", 1)),
    }
    assert h.shard.deadlines[heartbeat_key(GROUP, a)] == h.now + 10_000
    assert h.shard.deadlines[RETENTION_KEY] == h.now + h.config.offsets_retention_check_interval_ms
    assert h.fetch({"t": [0]}) == {("t", 0): (3, "")}
    h.advance(5_000)
    assert h.heartbeat(a, generation) == E.NONE
    h.advance(5_000)  # b never heartbeats to the new coordinator
    assert b not in h.group().members and h.state() is S.PREPARING_REBALANCE


def test_a_restart_mid_rebalance_loads_the_last_stable_generation() -> None:
    h = Harness()
    (a, b), generation = h.form_group(2)
    ta, tb = h.join(a), h.join(b)
    new_generation = h.answer(ta).generation_id
    parked = h.sync(b, new_generation)
    h.restart()
    assert h.answer(parked) == E.NOT_COORDINATOR  # the runtime answers what unload returned
    group = h.group()
    assert (group.state, group.generation) == (S.STABLE, generation)
    # The members come back with the generation they were given; it was never written, so they must rejoin.
    assert h.answer(h.sync(b, new_generation)).error_code == E.ILLEGAL_GENERATION
    assert not h.parked(tb)


def test_unload_returns_every_parked_request() -> None:
    h = Harness()
    (a, _b), _ = h.form_group(2)
    ta = h.join(a)
    pending = h.join(version=3, group="other")
    tokens = h.shard.unload()
    assert sorted(tokens) == sorted([ta, pending])
    assert h.shard.group_ids() == [] and dict(h.shard.deadlines) == {}


def test_on_loaded_rebalances_a_group_over_a_lowered_size_limit() -> None:
    h = Harness()
    h.form_group(3)
    h.config = GroupCoordinatorConfig(max_size=2)
    h.restart()
    assert h.state() is S.PREPARING_REBALANCE


def test_timers_the_shard_cancelled_or_moved_do_nothing() -> None:
    h = Harness()
    (_a, b), generation = h.form_group(2, session=10_000)
    key = heartbeat_key(GROUP, b)
    old_deadline = h.shard.deadlines[key]
    h.advance(5_000)
    assert h.heartbeat(b, generation) == E.NONE  # moves b's deadline
    # The runtime fires the old deadline anyway: too early for the new one, so nothing happens.
    assert h.shard.on_timer(key, old_deadline, h.topics).responses == []
    assert b in h.group().members
    h.leave((b, None))  # cancels b's timer
    late = h.shard.on_timer(key, h.now + 60_000, h.topics)
    assert (late.records, late.responses, late.timers) == ([], [], [])
    assert h.shard.on_timer("not-ours", h.now, h.topics).timers == []


def test_the_retention_check_reschedules_itself() -> None:
    h = Harness(config=GroupCoordinatorConfig(offsets_retention_check_interval_ms=1_000))
    h.advance(3_500)
    assert h.fired.count(RETENTION_KEY) == 3
    assert h.shard.deadlines[RETENTION_KEY] == h.timers[RETENTION_KEY]


@pytest.mark.parametrize(
    ("group", "member"), [("g", "m"), ("a-b:c", "x:1:y"), ("", ""), ("12:34", "-"), ("日本", "é")]
)
def test_timer_keys_round_trip_any_ids(group: str, member: str) -> None:
    assert parse_key(heartbeat_key(group, member)) == TimerKey(TimerKind.HEARTBEAT, group, member)
    assert parse_key(join_key(group)) == TimerKey(TimerKind.JOIN, group)
    assert parse_key(sync_key(group)) == TimerKey(TimerKind.SYNC, group)


@pytest.mark.parametrize(
    "key", ["", "join", "join:x:g", "join:5:g", "join:1:gg", "heartbeat:1:g", "sync:1:g:m", "x:1:g"]
)
def test_malformed_timer_keys_are_not_ours(key: str) -> None:
    assert parse_key(key) is None


def test_only_group_apis_are_handled() -> None:
    h = Harness()
    with pytest.raises(ValueError):
        h.shard.handle(ShardRequest(0, 9, None, 1), h.now, h.topics)


def test_config_from_kafka_property_names() -> None:
    config = GroupCoordinatorConfig.from_properties(
        {"offsets.retention.minutes": "2", "group.initial.rebalance.delay.ms": 0, "log.dirs": "/x"}
    )
    assert (config.offsets_retention_ms, config.initial_rebalance_delay_ms) == (120_000, 0)
    with pytest.raises(ValueError):
        GroupCoordinatorConfig.from_properties({"group.max.size": "lots"})
    with pytest.raises(ValueError):
        GroupCoordinatorConfig(min_session_timeout_ms=10, max_session_timeout_ms=5)
