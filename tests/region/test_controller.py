"""The region controller's drain -> checkpoint cycle and its resets, with a manual clock."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from groupstream.region.controller import (
    RegionController,
    RegionPhase,
    Resume,
    Retire,
    StartDrain,
    StartReset,
    TakeCheckpoint,
)

MEMBERS = ("a", "b", "c")


def cycle(ctl: RegionController, now: int) -> list[object]:
    """Run one full cycle started by the clock; return every effect."""
    effects: list[object] = list(ctl.tick(now))
    cid = ctl.checkpoint_id
    for m in sorted(ctl.members):
        effects += ctl.drained(m, cid, now)
    for m in sorted(ctl.members):
        effects += ctl.checkpointed(m, cid, None, now)
    return effects


def test_cycles_start_every_period_and_retire_the_checkpoint_before_the_last() -> None:
    ctl = RegionController(MEMBERS, period_ms=1000, reset_timeout_ms=10_000, now_ms=0)
    assert ctl.next_deadline() == 1000
    assert ctl.tick(999) == []
    assert ctl.tick(1000) == [StartDrain(1)]
    assert ctl.phase is RegionPhase.DRAINING and ctl.next_deadline() == 11_000  # the cycle's deadline
    assert ctl.drained("a", 1, 1001) == [] and ctl.drained("b", 1, 1002) == []
    assert ctl.drained("x", 1, 1002) == []  # not a member
    assert ctl.drained("c", 1, 1003) == [TakeCheckpoint(1)]
    assert ctl.checkpointed("a", 1, None, 1004) == [] and ctl.checkpointed("b", 1, None, 1004) == []
    assert ctl.checkpointed("c", 1, None, 1010) == [Resume()]
    assert ctl.last_complete == 1 and ctl.phase is RegionPhase.IDLE and ctl.next_deadline() == 2010
    assert cycle(ctl, 2010) == [StartDrain(2), TakeCheckpoint(2), Resume(), Retire(1)]
    assert ctl.last_complete == 2


def test_a_cycle_a_member_never_answers_times_out_into_a_reset() -> None:
    ctl = RegionController(MEMBERS, period_ms=1000, reset_timeout_ms=10_000, now_ms=0)
    assert ctl.tick(1000) == [StartDrain(1)]
    ctl.drained("a", 1, 1001)
    ctl.drained("b", 1, 1001)
    assert ctl.tick(10_999) == []
    effects = ctl.tick(11_000)  # c died before it drained
    assert len(effects) == 1 and isinstance(effects[0], StartReset)
    assert effects[0].attempt == 1 and "waiting for c" in effects[0].reason
    assert ctl.phase is RegionPhase.RESETTING


def test_an_operator_driven_region_checkpoints_on_request_only() -> None:
    ctl = RegionController(MEMBERS, period_ms=None, reset_timeout_ms=10_000, now_ms=0)
    assert ctl.next_deadline() is None and ctl.tick(10**9) == []
    assert ctl.request_checkpoint(5) == [StartDrain(1)]
    assert ctl.request_checkpoint(6) == []  # one at a time


def test_a_failed_checkpoint_resets_to_the_last_complete_one_and_its_id_is_not_reused() -> None:
    ctl = RegionController(MEMBERS, period_ms=1000, reset_timeout_ms=10_000, now_ms=0)
    cycle(ctl, 1000)
    ctl.tick(2000)
    for m in MEMBERS:
        ctl.drained(m, 2, 2000)
    assert ctl.checkpointed("b", 2, "disk full", 2001) == [
        StartReset(1, 1, "checkpoint 2 of member b failed: disk full")]  # fmt: skip
    assert ctl.checkpointed("c", 2, None, 2002) == []  # too late: the cycle is over
    for m in MEMBERS:
        out = ctl.reset_done(m, 1, 2100)
    assert out == [Resume()] and ctl.resets == 1
    assert ctl.tick(3100) == [StartDrain(3)]


def test_before_any_checkpoint_a_reset_goes_to_the_initial_state() -> None:
    ctl = RegionController(MEMBERS, period_ms=1000, reset_timeout_ms=10_000, now_ms=0)
    assert ctl.request_reset("a", "partitions revoked", 10) == [StartReset(None, 1, "member a: partitions revoked")]
    assert ctl.request_reset("b", "partitions revoked", 11) == []  # one reset covers both


def test_a_refused_drain_becomes_a_reset() -> None:
    ctl = RegionController(MEMBERS, period_ms=1000, reset_timeout_ms=10_000, now_ms=0)
    cycle(ctl, 1000)
    ctl.tick(2000)
    assert ctl.drain_refused("a", 2, "waiting for a reset", 2001) == [
        StartReset(1, 1, "member a refused to drain: waiting for a reset")]  # fmt: skip


def test_a_reset_that_times_out_is_tried_again_with_a_new_attempt() -> None:
    ctl = RegionController(MEMBERS, period_ms=1000, reset_timeout_ms=5000, now_ms=0)
    ctl.request_reset("a", "revoked", 100)
    assert ctl.next_deadline() == 5100
    ctl.reset_done("a", 1, 200)
    assert ctl.tick(5099) == []
    assert ctl.tick(5100) == [StartReset(None, 2, "reset attempt 1 timed out")]
    assert ctl.reset_done("b", 1, 5200) == []  # an answer for attempt 1
    for m in MEMBERS:
        out = ctl.reset_done(m, 2, 5300)
    assert out == [Resume()]


def test_a_reset_a_member_reports_failed_is_tried_again_soon() -> None:
    """A member whose commit of the cut was refused (the group is rebalancing) answers the reset with an error:
    a new attempt starts ``reset_retry_ms`` later instead of when the reset times out."""
    ctl = RegionController(MEMBERS, period_ms=1000, reset_timeout_ms=5000, now_ms=0, reset_retry_ms=250)
    ctl.request_reset("a", "revoked", 100)
    ctl.reset_done("a", 1, 200)
    assert ctl.reset_failed("b", 0, "an older attempt", 300) == [] and ctl.next_deadline() == 5100
    assert ctl.reset_failed("b", 1, "the commit of the cut failed: REBALANCE_IN_PROGRESS", 300) == []
    assert ctl.next_deadline() == 550
    assert ctl.reset_done("c", 1, 400) == []  # b never completed attempt 1
    assert ctl.tick(549) == []
    assert ctl.tick(550) == [StartReset(None, 2, "member b: reset attempt 1 failed: the commit of the cut failed: "
                                                 "REBALANCE_IN_PROGRESS")]  # fmt: skip
    assert ctl.next_deadline() == 5550
    assert ctl.reset_failed("c", 1, "late", 600) == []  # attempt 1 is over
    for m in MEMBERS:
        out = ctl.reset_done(m, 2, 700)
    assert out == [Resume()]
    assert ctl.reset_failed("a", 2, "after the reset completed", 800) == []
    assert ctl.phase is RegionPhase.IDLE


def test_members_joining_and_leaving() -> None:
    ctl = RegionController(MEMBERS, period_ms=1000, reset_timeout_ms=5000, now_ms=0)
    ctl.tick(1000)
    ctl.drained("a", 1, 1000)
    ctl.drained("b", 1, 1000)
    assert ctl.member_left("c", 1001) == [TakeCheckpoint(1)]  # nobody else to wait for
    assert ctl.member_joined("d", 1002) == [StartReset(None, 1, "member d joined during checkpointing")]
    ctl.reset_done("a", 1, 1003)
    ctl.reset_done("b", 1, 1003)
    assert ctl.reset_done("d", 1, 1004) == [Resume()]
    assert ctl.member_joined("e", 1005) == []  # idle: it takes part from the next cycle on


events = st.lists(
    st.one_of(
        st.tuples(st.just("tick"), st.integers(0, 3000)),
        st.tuples(st.just("drained"), st.sampled_from(MEMBERS)),
        st.tuples(st.just("checkpointed"), st.sampled_from(MEMBERS), st.booleans()),
        st.tuples(st.just("reset_done"), st.sampled_from(MEMBERS)),
        st.tuples(st.just("reset_failed"), st.sampled_from(MEMBERS)),
        st.tuples(st.just("request_reset"), st.sampled_from(MEMBERS)),
    ),
    max_size=60,
)


@given(events)
def test_ids_only_grow_and_every_reset_attempt_is_new(seq: list[tuple[object, ...]]) -> None:
    ctl = RegionController(MEMBERS, period_ms=500, reset_timeout_ms=1000, now_ms=0)
    now = 0
    drains: list[int] = []
    attempts: list[int] = []
    completed: list[int] = []
    for ev in seq:
        kind = ev[0]
        if kind == "tick":
            now += int(ev[1])  # type: ignore[call-overload]
            out = ctl.tick(now)
        elif kind == "drained":
            out = ctl.drained(str(ev[1]), ctl.checkpoint_id, now)
        elif kind == "checkpointed":
            out = ctl.checkpointed(str(ev[1]), ctl.checkpoint_id, None if ev[2] else "failed", now)
        elif kind == "reset_done":
            out = ctl.reset_done(str(ev[1]), ctl.attempt, now)
        elif kind == "reset_failed":
            out = ctl.reset_failed(str(ev[1]), ctl.attempt, "refused", now)
        else:
            out = ctl.request_reset(str(ev[1]), "revoked", now)
        for e in out:
            if isinstance(e, StartDrain):
                drains.append(e.checkpoint_id)
            elif isinstance(e, StartReset):
                attempts.append(e.attempt)
                assert e.checkpoint_id == (completed[-1] if completed else None)  # always the last complete one
            elif isinstance(e, Resume) and ctl.last_complete is not None and ctl.last_complete not in completed:
                completed.append(ctl.last_complete)
    assert drains == sorted(set(drains))
    assert attempts == sorted(set(attempts))
    assert completed == sorted(set(completed))
