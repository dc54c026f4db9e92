"""The KIP-848 member leaving, losing its coordinator, running out of max.poll.interval.ms, failing fatally,
committing, and steps that collide with leaving; manual clock, scripted heartbeat responses."""

from __future__ import annotations

import pytest
from membership_harness import (
    ID_A,
    MEMBER,
    Member,
    RecordingTarget,
    S,
    Step,
    owned_on_wire,
    sent,
    tp,
)

from groupstream.client.consumer.consumer_membership import (
    ConsumerMembershipConfig,
    ConsumerMembershipManager,
)
from groupstream.client.consumer.consumer_membership_errors import (
    FencedInstanceIdError,
    GroupAuthorizationError,
    GroupMaxSizeReachedError,
    GroupMembershipError,
    InvalidHeartbeatError,
    MaxPollIntervalExceededError,
    UnreleasedInstanceIdError,
    UnsupportedAssignorError,
)
from groupstream.client.consumer.consumer_membership_metadata import MetadataTopicNames
from groupstream.client.consumer.membership_api import NO_GROUP_IDENTITY, CommitIdentity
from groupstream.client.errors import UnsupportedVersionError
from groupstream.client.net.requests import ClientResponse
from groupstream.protocol.error_codes import ErrorCode

# --- leaving ----------------------------------------------------------------------------------------------------------


def test_dynamic_member_leaves_with_epoch_minus_one_after_revoking() -> None:
    h = Member()
    h.stable_with([0, 1])
    finished: list[BaseException | None] = []
    h.m.leave(h.now, finished.append)
    assert h.m.state is S.PREPARE_LEAVING
    revoke = h.target.running
    assert revoke is not None and revoke.kind == "revoke" and revoke.partitions == tp("A", 0, 1)
    h.target.finish()
    assert h.m.state is S.LEAVING
    leave = h.one()
    body = sent(leave)
    assert (body.member_id, body.member_epoch, body.instance_id) == (MEMBER, -1, None)
    assert h.m.state is S.UNSUBSCRIBED
    assert finished == []
    h.answer(leave, epoch=-1)
    assert finished == [None]
    assert h.poll() == []


def test_static_member_leaves_with_minus_two_and_rejoins_with_its_instance_id() -> None:
    h = Member(group_instance_id="inst-1")
    h.stable_with([0, 1])
    assert h.m.commit_identity() == CommitIdentity(1, MEMBER, "inst-1")
    finished: list[BaseException | None] = []
    h.m.leave(h.now, finished.append)
    h.target.finish()
    leave = h.one()
    body = sent(leave)
    assert (body.member_epoch, body.instance_id) == (-2, "inst-1")
    h.answer(leave, epoch=-2)
    assert finished == [None] and h.m.state is S.UNSUBSCRIBED

    h.m.subscribe(frozenset({"A"}), None, h.now)
    join = h.one()
    body = sent(join)
    assert (body.member_id, body.member_epoch, body.instance_id) == (MEMBER, 0, "inst-1")
    h.answer(join, epoch=2, assignment={ID_A: [0, 1]})  # the coordinator kept the assignment
    h.poll()
    assert h.target.running is not None and h.target.running.added == tp("A", 0, 1)


def test_leave_without_a_coordinator_completes_without_sending() -> None:
    h = Member()
    h.stable_with([0])
    h.locator.node = None
    finished: list[BaseException | None] = []
    h.m.leave(h.now, finished.append)
    h.target.finish()
    assert h.poll() == []
    assert finished == [None] and h.m.state is S.UNSUBSCRIBED


def test_leave_while_unsubscribed_or_fenced_completes_at_once() -> None:
    h = Member()
    finished: list[BaseException | None] = []
    h.m.leave(h.now, finished.append)
    assert finished == [None]
    h.stable_with([0])
    h.answer(h.one(), error=ErrorCode.FENCED_MEMBER_EPOCH, epoch=0)
    h.m.leave(h.now, finished.append)
    assert finished == [None, None] and h.m.state is S.UNSUBSCRIBED
    h.target.finish()  # the lose finishes: no rejoin
    assert h.m.state is S.UNSUBSCRIBED and h.poll() == []


# --- coordinator trouble ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("code", [ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, None])
def test_coordinator_moves_the_assignment_stays_and_the_next_heartbeat_is_full(code: int | None) -> None:
    h = Member(retry_backoff_ms=100)
    h.stable_with([0, 1])
    hb = h.one()
    if code is None:
        h.disconnect(hb)
    else:
        h.answer(hb, error=code, epoch=0)
    assert h.locator.lost == [h.now]
    assert h.m.state is S.STABLE and h.target.kinds() == ["assign"]  # nothing lost: keeps fetching
    assert h.m.commit_identity().generation_or_epoch == 1
    assert h.poll() == []  # no coordinator known yet
    h.locator.node = 2
    assert h.delay() == 100  # backoff
    h.now += 100
    moved = h.one()
    assert moved.node_id == 2
    body = sent(moved)
    assert body.member_epoch == 1
    assert owned_on_wire(body) == {ID_A: [0, 1]} and body.subscribed_topic_names == ["A"]
    assert body.rebalance_timeout_ms == 60_000
    # a second failure in a row backs off twice as long
    h.disconnect(moved)
    h.locator.node = 2
    assert h.delay() == 200


def test_coordinator_loading_is_retried_on_the_same_coordinator() -> None:
    h = Member(retry_backoff_ms=50)
    h.stable_with([0])
    h.answer(h.one(), error=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, epoch=0)
    assert h.locator.lost == [] and h.m.state is S.STABLE
    assert h.delay() == 50
    h.now += 50
    assert owned_on_wire(sent(h.one())) == {ID_A: [0]}


# --- max.poll.interval.ms ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("instance", "epoch"), [(None, -1), ("inst-1", -2)])
def test_poll_interval_expiry_leaves_loses_and_rejoins_on_next_poll(instance: str | None, epoch: int) -> None:
    h = Member(max_poll_interval_ms=10_000, group_instance_id=instance)
    start = h.now
    h.m.poll_called(h.now)
    h.stable_with([0])
    h.answer(h.one(), epoch=1, interval=50_000)
    h.now = start + 9_999
    assert h.delay() == 1  # woken for the deadline even though the heartbeat is later
    h.now += 1
    leave = h.one()
    body = sent(leave)
    assert (body.member_epoch, body.instance_id) == (epoch, instance)
    assert h.m.state is S.UNJOINED
    lose = h.target.running
    assert lose is not None and lose.kind == "lose" and lose.partitions == tp("A", 0)
    assert h.m.commit_identity() == NO_GROUP_IDENTITY
    why = h.m.left_group_error()
    assert isinstance(why, MaxPollIntervalExceededError) and "max.poll.interval.ms (10000 ms)" in str(why)
    assert h.m.fatal_error() is None
    h.target.finish()
    h.now += 60_000
    assert h.poll() == []  # stays out until the application polls
    h.m.poll_called(h.now)
    assert h.m.state is S.JOINING
    assert h.m.left_group_error() is None
    body = sent(h.one())
    assert (body.member_id, body.member_epoch, body.instance_id) == (MEMBER, 0, instance)


def test_poll_called_before_the_lose_finishes_rejoins_after_it() -> None:
    h = Member(max_poll_interval_ms=10_000)
    h.m.poll_called(h.now)
    h.stable_with([0])
    h.now += 10_000
    h.one()
    h.m.poll_called(h.now)
    assert h.m.state is S.UNJOINED
    h.target.finish()
    assert h.m.state is S.JOINING


def test_poll_called_keeps_the_member_in() -> None:
    h = Member(max_poll_interval_ms=10_000)
    h.stable_with([0])
    for _ in range(5):
        h.now += 6_000
        h.m.poll_called(h.now)
        for req in h.poll():
            h.answer(req, epoch=1)
    assert h.m.state is S.STABLE and h.target.kinds() == ["assign"]


# --- fatal errors ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        (ErrorCode.FENCED_INSTANCE_ID, FencedInstanceIdError),
        (ErrorCode.UNRELEASED_INSTANCE_ID, UnreleasedInstanceIdError),
        (ErrorCode.GROUP_MAX_SIZE_REACHED, GroupMaxSizeReachedError),
        (ErrorCode.INVALID_REQUEST, InvalidHeartbeatError),
        (ErrorCode.UNSUPPORTED_ASSIGNOR, UnsupportedAssignorError),
        (ErrorCode.GROUP_AUTHORIZATION_FAILED, GroupAuthorizationError),
        (ErrorCode.UNSUPPORTED_VERSION, InvalidHeartbeatError),
        (ErrorCode.INVALID_REGULAR_EXPRESSION, InvalidHeartbeatError),
        (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, GroupMembershipError),
    ],
)
def test_fatal_errors_are_typed_and_stop_the_member(code: int, kind: type[GroupMembershipError]) -> None:
    h = Member(group_instance_id="inst-1")
    h.stable_with([0])
    h.answer(h.one(), error=code, epoch=0, message="broker says no")
    assert h.m.state is S.FATAL
    err = h.m.fatal_error()
    assert type(err) is kind
    assert isinstance(err, GroupMembershipError) and err.code == code and err.group_id == "g"
    assert "broker says no" in str(err)
    lose = h.target.running
    assert lose is not None and lose.kind == "lose"
    h.target.finish()
    h.now += 100_000
    h.m.poll_called(h.now)
    h.m.subscribe(frozenset({"B"}), None, h.now)
    assert h.poll() == [] and h.m.state is S.FATAL
    finished: list[BaseException | None] = []
    h.m.leave(h.now, finished.append)
    assert finished == [None]


def test_fatal_during_join_has_nothing_to_lose() -> None:
    h = Member()
    h.m.subscribe(frozenset({"A"}), None, h.now)
    h.answer(h.one(), error=ErrorCode.GROUP_AUTHORIZATION_FAILED, epoch=0)
    assert isinstance(h.m.fatal_error(), GroupAuthorizationError)
    assert h.target.steps == []


# --- commits ---------------------------------------------------------------------------------------------------------


def test_commit_identity_follows_the_epoch() -> None:
    h = Member()
    assert h.m.commit_identity() == NO_GROUP_IDENTITY
    h.m.subscribe(frozenset({"A"}), None, h.now)
    join = h.one()
    assert h.m.commit_identity() == NO_GROUP_IDENTITY  # epoch 0: not a member yet
    h.answer(join, epoch=7, assignment={})
    assert h.m.commit_identity() == CommitIdentity(7, MEMBER, None)


@pytest.mark.parametrize(
    "code", [ErrorCode.STALE_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH]
)
def test_rejected_commit_sends_the_next_heartbeat_at_once_without_leaving(code: int) -> None:
    h = Member()
    h.stable_with([0])
    h.answer(h.one(), epoch=1)
    assert h.delay() == 3_000
    h.m.commit_rejected(code, h.now)
    assert h.m.state is S.STABLE and h.target.kinds() == ["assign"]
    hb = h.one()
    h.answer(hb, epoch=2)
    assert h.m.commit_identity().generation_or_epoch == 2


def test_classic_commit_errors_are_ignored() -> None:
    h = Member()
    h.stable_with([0])
    h.answer(h.one(), epoch=1)
    h.m.commit_rejected(ErrorCode.REBALANCE_IN_PROGRESS, h.now)
    assert h.delay() == 3_000


# --- plumbing -------------------------------------------------------------------------------------------------------


def test_config_rejects_what_cannot_work() -> None:
    with pytest.raises(ValueError, match=r"group\.id"):
        ConsumerMembershipConfig(group_id="", member_id="m")
    with pytest.raises(ValueError, match="member id"):
        ConsumerMembershipConfig(group_id="g", member_id="")
    with pytest.raises(ValueError, match=r"max\.poll\.interval\.ms"):
        ConsumerMembershipConfig(group_id="g", member_id="m", max_poll_interval_ms=0)


def test_v0_coordinator_may_hand_out_its_own_member_id() -> None:
    h = Member()
    h.m.subscribe(frozenset({"A"}), None, h.now)
    h.answer(h.one(), epoch=1, assignment={}, version=0, member_id="server-given")
    h.now += 3_000
    assert sent(h.one(), 0).member_id == "server-given"


# --- steps that finish inside the call, and steps that collide with leaving ----------------------------------------


class ImmediateTarget(RecordingTarget):
    """A consumer that finishes every step before returning (the contract allows ``done`` from inside)."""

    def _begin(self, step: Step) -> None:
        super()._begin(step)
        self.finish()


def test_steps_that_finish_inside_the_call_reconcile_and_acknowledge_in_one_poll() -> None:
    h = Member()
    h.target = ImmediateTarget()
    h.m = ConsumerMembershipManager(
        ConsumerMembershipConfig(group_id="g", member_id=MEMBER),
        h.target,
        h.locator,
        MetadataTopicNames(h.cache),
    )
    h.m.subscribe(frozenset({"A"}), None, h.now)
    h.answer(h.one(), epoch=1, assignment={ID_A: [0, 1]})
    ack = h.one()  # reconciled and acknowledged in the same poll
    assert owned_on_wire(sent(ack)) == {ID_A: [0, 1]} and h.m.state is S.STABLE
    h.answer(ack, epoch=2, assignment={ID_A: [1]})
    ack = h.one()
    assert owned_on_wire(sent(ack)) == {ID_A: [1]}
    assert h.target.kinds() == ["assign", "revoke", "assign"]
    h.answer(ack, error=ErrorCode.FENCED_MEMBER_EPOCH, epoch=0)
    assert h.m.state is S.JOINING and h.target.kinds()[-1] == "lose" and h.target.owned == frozenset()


def test_leave_during_a_reconciliation_revokes_everything_after_the_running_step() -> None:
    h = Member()
    h.stable_with([0])
    h.answer(h.one(), epoch=2, assignment={ID_A: [0, 1]})
    h.poll()
    assert h.target.running is not None and h.target.running.kind == "assign"
    finished: list[BaseException | None] = []
    h.m.leave(h.now, finished.append)
    assert h.m.state is S.PREPARE_LEAVING
    h.target.finish()  # the assign completes: not acknowledged, the member is leaving
    revoke = h.target.running
    assert revoke is not None and revoke.kind == "revoke" and revoke.partitions == tp("A", 0, 1)
    h.target.finish()
    leave = h.one()
    assert sent(leave).member_epoch == -1
    h.answer(leave, epoch=-1)
    assert finished == [None]


def test_fenced_while_preparing_to_leave_finishes_without_sending_a_leave() -> None:
    h = Member()
    h.stable_with([0])
    finished: list[BaseException | None] = []
    h.m.leave(h.now, finished.append)
    h.now += 3_000
    hb = h.one()  # heartbeats go on while the consumer revokes
    h.answer(hb, error=ErrorCode.UNKNOWN_MEMBER_ID, epoch=0)
    assert h.m.state is S.PREPARE_LEAVING
    h.now += 3_000
    assert h.poll() == []  # not a member any more: no heartbeat with epoch 0 (that would rejoin)
    h.target.finish()
    assert h.m.state is S.UNSUBSCRIBED and finished == [None]
    assert h.poll() == []


def test_subscribe_during_a_leave_rejoins_once_it_is_done() -> None:
    h = Member()
    h.stable_with([0])
    h.m.leave(h.now, lambda _e: None)
    h.m.subscribe(frozenset({"B"}), None, h.now)
    h.target.finish()
    leave = h.one()
    assert sent(leave).member_epoch == -1
    assert h.m.state is S.JOINING
    body = sent(h.one())
    assert body.member_epoch == 0 and body.subscribed_topic_names == ["B"]


def test_a_broker_without_the_consumer_protocol_is_fatal_and_says_what_to_do() -> None:
    h = Member()
    h.m.subscribe(frozenset({"A"}), None, h.now)
    join = h.one()
    join.handler(
        ClientResponse(join, 1, -1, None, UnsupportedVersionError("broker h:1 does not serve it"), h.now)
    )
    err = h.m.fatal_error()
    assert isinstance(err, InvalidHeartbeatError) and "group.protocol=classic" in str(err)
    assert h.m.state is S.FATAL and h.locator.lost == []
