"""The KIP-848 member with a manual clock and no threads: scripted ConsumerGroupHeartbeat answers built with
the protocol codec, a recording `AssignmentTarget` (the consumer's side of the contract) and the real metadata
cache for topic ids."""

from __future__ import annotations

import pytest
from membership_harness import (
    ID_A,
    ID_B,
    MEMBER,
    Member,
    S,
    metadata_with,
    owned_on_wire,
    sent,
    tp,
)

from groupstream.client.consumer.consumer_membership_errors import (
    InvalidHeartbeatError,
)
from groupstream.client.consumer.membership_api import NO_GROUP_IDENTITY, CommitIdentity
from groupstream.protocol.error_codes import ErrorCode

# --- join, reconcile, acknowledge -------------------------------------------------------------------------------


def test_join_reconcile_acknowledge_stable_with_only_changed_fields() -> None:
    h = Member(server_assignor="uniform", client_rack="r1")
    assert h.m.state is S.UNSUBSCRIBED
    assert h.poll() == []  # not subscribed: no heartbeat
    h.m.subscribe(frozenset({"B", "A"}), None, h.now)
    assert h.m.state is S.JOINING

    join = h.one()
    assert join.node_id == 1
    body = sent(join)
    assert (body.group_id, body.member_id, body.member_epoch) == ("g", MEMBER, 0)
    assert body.subscribed_topic_names == ["A", "B"]
    assert body.subscribed_topic_regex == ""  # no regex, said explicitly (librdkafka sends both halves)
    assert body.rebalance_timeout_ms == 60_000
    assert body.server_assignor == "uniform"
    assert body.rack_id == "r1"
    assert body.topic_partitions == []  # a join reports owning nothing, explicitly
    assert body.instance_id is None
    assert h.poll() == []  # one heartbeat in flight at a time

    h.answer(join, epoch=5, assignment={ID_A: [0, 1]})
    assert h.m.state is S.RECONCILING
    assert h.m.commit_identity() == CommitIdentity(5, MEMBER, None)

    assert h.poll() == []  # the reconciliation starts; nothing to say yet
    assert h.target.kinds() == ["assign"]  # nothing owned: no revoke step at all
    step = h.target.running
    assert step is not None and step.partitions == tp("A", 0, 1) and step.added == tp("A", 0, 1)
    assert h.poll() == []  # not acknowledged before the consumer is done
    h.target.finish()
    assert h.m.state is S.ACKNOWLEDGING

    ack = h.one()  # at once, not an interval later
    body = sent(ack)
    assert body.member_epoch == 5
    assert owned_on_wire(body) == {ID_A: [0, 1]}
    assert body.subscribed_topic_names is None
    assert body.rebalance_timeout_ms == -1
    assert body.server_assignor is None and body.rack_id is None
    assert h.m.state is S.STABLE

    h.answer(ack, epoch=5, interval=2_000)
    assert h.delay() == 2_000
    h.now += 1_999
    assert h.delay() == 1
    h.now += 1
    body = sent(h.one())
    assert body.topic_partitions is None and body.subscribed_topic_names is None
    assert (body.member_epoch, body.rebalance_timeout_ms) == (5, -1)


def test_same_assignment_again_is_not_reconciled_again() -> None:
    h = Member()
    h.stable_with([0, 1])
    hb = h.one()
    h.answer(hb, epoch=2, assignment={ID_A: [1, 0]})
    assert h.m.state is S.STABLE
    assert h.m.commit_identity().generation_or_epoch == 2
    assert h.target.kinds() == ["assign"]


def test_empty_assignment_on_join_is_stable_at_once() -> None:
    h = Member()
    h.m.subscribe(frozenset({"A"}), None, h.now)
    h.answer(h.one(), epoch=1, assignment={})
    assert h.m.state is S.STABLE
    assert h.target.steps == []


def test_incremental_change_revokes_only_what_moves_then_assigns() -> None:
    h = Member()
    h.stable_with([0, 1, 2])
    hb = h.one()
    h.answer(hb, epoch=2, assignment={ID_A: [1, 2, 3]})
    assert h.m.state is S.RECONCILING
    h.poll()
    revoke = h.target.running
    assert revoke is not None and revoke.kind == "revoke" and revoke.partitions == tp("A", 0)
    assert h.poll() == []  # no assign and no acknowledgement while revoking
    h.target.finish()
    assign = h.target.running
    assert assign is not None and assign.kind == "assign"
    assert assign.partitions == tp("A", 1, 2, 3) and assign.added == tp("A", 3)
    h.target.finish()
    body = sent(h.one())
    assert owned_on_wire(body) == {ID_A: [1, 2, 3]}
    assert h.target.kinds() == ["assign", "revoke", "assign"]
    # the partitions that stayed were never part of any revoke
    assert all(not (s.partitions & tp("A", 1, 2)) for s in h.target.steps if s.kind == "revoke")


def test_a_new_target_during_a_revoke_waits_for_the_running_reconciliation() -> None:
    h = Member()
    h.stable_with([0, 1, 2, 3])
    h.answer(h.one(), epoch=2, assignment={ID_A: [0, 1]})
    h.poll()
    assert h.target.running is not None and h.target.running.partitions == tp("A", 2, 3)
    # heartbeats go on while the consumer revokes; one brings a newer target
    h.now += 3_000
    hb = h.one()
    assert sent(hb).topic_partitions is None  # nothing reconciled yet, nothing to report
    h.answer(hb, epoch=3, assignment={ID_A: [0]})
    assert h.m.state is S.RECONCILING
    h.poll()
    assert len(h.target.steps) == 2  # no step started beside the running revoke
    h.target.finish()  # revoke A2, A3 -> assign the first target
    assert h.target.running is not None and h.target.running.kind == "assign"
    assert h.target.running.partitions == tp("A", 0, 1) and h.target.running.added == frozenset()
    h.target.finish()
    ack = h.one()
    assert owned_on_wire(sent(ack)) == {ID_A: [0, 1]}
    assert h.m.state is S.RECONCILING  # the newer target is next
    h.answer(ack, epoch=3)
    h.poll()
    revoke = h.target.running
    assert revoke is not None and revoke.kind == "revoke" and revoke.partitions == tp("A", 1)
    h.target.finish()
    h.target.finish()
    assert owned_on_wire(sent(h.one())) == {ID_A: [0]}
    assert h.m.state is S.STABLE
    assert h.target.kinds() == ["assign", "revoke", "assign", "revoke", "assign"]


def test_a_failing_callback_does_not_stop_the_reconciliation() -> None:
    h = Member()
    h.m.subscribe(frozenset({"A"}), None, h.now)
    h.answer(h.one(), assignment={ID_A: [0]})
    h.poll()
    boom = RuntimeError("listener failed")
    h.target.finish(boom)
    assert h.m.state is S.ACKNOWLEDGING
    assert h.m.last_step_error is boom


# --- subscriptions -------------------------------------------------------------------------------------------------


def test_regex_subscription_is_sent_to_the_broker_and_switching_clears_the_other() -> None:
    h = Member()
    h.m.subscribe(frozenset(), "orders-.*", h.now)
    join = h.one()
    body = sent(join)
    assert body.subscribed_topic_regex == "orders-.*"
    assert body.subscribed_topic_names == []
    assert h.cache.topics == frozenset()  # never resolved locally
    h.answer(join, epoch=1, assignment={})
    h.now += 3_000
    body = sent(h.one())
    assert (
        body.subscribed_topic_regex is None and body.subscribed_topic_names is None
    )  # unchanged: not repeated


def test_switching_subscription_kinds_clears_the_previous_one() -> None:
    h = Member()
    h.m.subscribe(frozenset(), "orders-.*", h.now)
    h.answer(h.one(), epoch=1, assignment={})
    h.m.subscribe(frozenset({"A"}), None, h.now)
    hb = h.one()  # a subscription change goes out at once
    body = sent(hb)
    assert body.subscribed_topic_names == ["A"] and body.subscribed_topic_regex == ""
    h.answer(hb, epoch=1)
    h.m.subscribe(frozenset(), "x.*", h.now)
    body = sent(h.one())
    assert body.subscribed_topic_regex == "x.*" and body.subscribed_topic_names == []


def test_a_regex_subscription_cannot_go_out_at_v0() -> None:
    h = Member()
    h.m.subscribe(frozenset(), "orders-.*", h.now)
    join = h.one()
    assert sent(join, 0).subscribed_topic_regex is None  # the field does not exist at v0
    h.answer(join, epoch=1, assignment={}, version=0)
    assert h.m.state is S.FATAL
    assert isinstance(h.m.fatal_error(), InvalidHeartbeatError)


def test_subscription_change_is_sent_at_once_and_only_once() -> None:
    h = Member()
    h.stable_with([0])
    hb = h.one()
    h.answer(hb, epoch=1)
    h.m.subscribe(frozenset({"A", "C"}), None, h.now)
    body = sent(h.one())
    assert body.subscribed_topic_names == ["A", "C"] and body.topic_partitions is None


# --- unknown topic ids -----------------------------------------------------------------------------------------------


def test_unknown_topic_id_waits_for_metadata() -> None:
    h = Member()
    h.m.subscribe(frozenset({"A", "B"}), None, h.now)
    h.answer(h.one(), epoch=1, assignment={ID_B: [0, 1]})
    assert h.m.state is S.RECONCILING
    h.cache.poll(h.now)  # the cache's own first request, out of the way
    h.poll()
    assert h.target.steps == []  # nothing assigned under a name the member does not know
    assert "B" in h.cache.topics and h.cache.update_requested
    h.poll()
    assert h.target.steps == []  # still waiting
    metadata_with(h.cache, {"A": (ID_A, 8), "B": (ID_B, 2)}, h.now)
    h.poll()
    step = h.target.running
    assert step is not None and step.kind == "assign" and step.partitions == tp("B", 0, 1)
    h.target.finish()
    assert owned_on_wire(sent(h.one())) == {ID_B: [0, 1]}


def test_known_part_of_the_target_is_reconciled_while_the_rest_waits() -> None:
    h = Member()
    h.m.subscribe(frozenset({"A", "B"}), None, h.now)
    h.answer(h.one(), epoch=1, assignment={ID_A: [0], ID_B: [0]})
    h.poll()
    assert h.target.running is not None and h.target.running.partitions == tp("A", 0)
    h.target.finish()
    ack = h.one()
    assert owned_on_wire(sent(ack)) == {ID_A: [0]}
    assert h.m.state is S.RECONCILING
    h.answer(ack, epoch=1)
    h.poll()
    assert h.target.running is None  # B still unnamed
    metadata_with(h.cache, {"A": (ID_A, 8), "B": (ID_B, 1)}, h.now)
    h.poll()
    step = h.target.running
    assert step is not None and step.partitions == tp("A", 0) | tp("B", 0) and step.added == tp("B", 0)


# --- fencing ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("code", [ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID])
def test_fenced_member_loses_its_partitions_and_rejoins_with_epoch_zero(code: int) -> None:
    h = Member()
    h.stable_with([0, 1], epoch=4)
    h.answer(h.one(), error=code, epoch=0)
    assert h.m.state is S.FENCED
    lose = h.target.running
    assert lose is not None and lose.kind == "lose" and lose.partitions == tp("A", 0, 1)
    assert h.m.commit_identity() == NO_GROUP_IDENTITY
    assert h.poll() == []  # no heartbeat while the partitions are being lost
    h.target.finish()
    assert h.m.state is S.JOINING
    body = sent(h.one())  # at once, no backoff the first time
    assert (body.member_id, body.member_epoch) == (MEMBER, 0)  # same member id (KIP-1082)
    assert body.topic_partitions == [] and body.subscribed_topic_names == ["A"]
    assert body.rebalance_timeout_ms == 60_000
    assert "revoke" not in h.target.kinds()  # lost, never revoked (no commit)


def test_fenced_again_while_joining_backs_off_exponentially() -> None:
    h = Member(retry_backoff_ms=100, retry_backoff_max_ms=1_000)
    h.m.subscribe(frozenset({"A"}), None, h.now)
    delays = []
    for _ in range(5):
        join = h.one()
        assert sent(join).member_epoch == 0
        h.answer(join, error=ErrorCode.UNKNOWN_MEMBER_ID, epoch=0)
        assert h.m.state is S.JOINING  # nothing owned: nothing to lose, straight back
        delay = h.delay()
        assert delay is not None
        delays.append(delay)
        h.now += delay
    assert delays == [100, 200, 400, 800, 1_000]
    assert h.target.steps == []


def test_fenced_during_a_revoke_loses_after_the_step() -> None:
    h = Member()
    h.stable_with([0, 1])
    h.answer(h.one(), epoch=2, assignment={ID_A: [0]})
    h.poll()
    assert h.target.running is not None and h.target.running.kind == "revoke"
    h.now += 3_000
    h.answer(h.one(), error=ErrorCode.FENCED_MEMBER_EPOCH, epoch=0)
    assert h.m.state is S.FENCED
    assert h.target.kinds() == ["assign", "revoke"]  # the lose waits for the revoke
    h.target.finish()
    lose = h.target.running
    assert lose is not None and lose.kind == "lose" and lose.partitions == tp("A", 0)
    h.target.finish()
    assert h.m.state is S.JOINING
    assert sent(h.one()).member_epoch == 0


def test_answer_to_a_heartbeat_sent_before_the_fence_is_ignored() -> None:
    h = Member()
    h.stable_with([0])
    stale = h.one()
    h.m.commit_rejected(ErrorCode.STALE_MEMBER_EPOCH, h.now)
    h.answer(stale, error=ErrorCode.FENCED_MEMBER_EPOCH, epoch=0)
    h.target.finish()
    join = h.one()
    h.answer(stale, epoch=9, assignment={ID_A: [5]})  # late duplicate from the old incarnation
    assert h.m.state is S.JOINING and h.m.commit_identity() == NO_GROUP_IDENTITY
    h.answer(join, epoch=10, assignment={ID_A: [1]})
    assert h.m.state is S.RECONCILING and h.m.commit_identity().generation_or_epoch == 10
