"""`ClassicMembershipManager` (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) on a manual clock, no thread, no
network, driven through a recording assignment target."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from membership_harness import Locator, RecordingTarget, metadata_with, tp
from request_manager_kit import (
    HEARTBEAT,
    JOIN,
    LEAVE,
    SYNC,
    S,
    answer,
    request_body,
)

from groupstream.assignment.base import ConsumerPartitionAssignor
from groupstream.assignment.cooperative import CooperativeStickyAssignor
from groupstream.assignment.range import RangeAssignor
from groupstream.assignment.types import TopicPartition
from groupstream.client.consumer.classic_membership import ClassicMembershipConfig, ClassicMembershipManager
from groupstream.client.consumer.consumer_membership_errors import (
    FencedInstanceIdError,
    MaxPollIntervalExceededError,
)
from groupstream.client.consumer.membership_api import CommitIdentity
from groupstream.client.net.metadata import MetadataCache
from groupstream.client.net.requests import UnsentRequest
from groupstream.protocol.consumer_protocol import (
    ConsumerAssignment,
    ConsumerSubscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from groupstream.protocol.error_codes import ErrorCode as E


def subscription(topics: tuple[str, ...], owned: tuple[tuple[str, int], ...] = ()) -> bytes:
    return encode_subscription(ConsumerSubscription(topics=topics, owned_partitions=owned))


class Classic:
    def __init__(
        self, *assignors: ConsumerPartitionAssignor, instance_id: str | None = None, **config: Any
    ) -> None:
        self.now = 1_000
        self.target = RecordingTarget()
        self.locator = Locator(node=1)
        self.cache = MetadataCache()
        metadata_with(self.cache, {"t": (uuid.uuid4(), 4)}, self.now)
        settings: dict[str, Any] = {"rebalance_timeout_ms": 60_000, "heartbeat_interval_ms": 3_000}
        settings.update(config)
        self.m = ClassicMembershipManager(
            ClassicMembershipConfig(
                "g", instance_id, "client", assignors=assignors or (RangeAssignor(),), **settings
            ),
            self.target,
            self.locator,
            self.cache,
        )

    def poll(self) -> list[UnsentRequest]:
        return list(self.m.poll(self.now).unsent_requests)

    def one(self, api: Any) -> UnsentRequest:
        reqs = self.poll()
        assert [r.api.name for r in reqs] == [api.name], reqs
        return reqs[0]

    def answer_join(self, req: UnsentRequest, *, error: int = 0, member_id: str = "m-1", leader: str = "m-2",
                    generation: int = 5, members: tuple[tuple[str, bytes], ...] = ()) -> None:  # fmt: skip
        R: Any = JOIN.Response
        body = R(error_code=error, generation_id=generation, protocol_type="consumer",
                 protocol_name=self.m.config.assignors[0].name, leader=leader, member_id=member_id,
                 members=[R.JoinGroupResponseMember(member_id=m, metadata=md) for m, md in members])  # fmt: skip
        answer(req, body, self.now, 7)

    def answer_sync(self, req: UnsentRequest, partitions: frozenset[TopicPartition], error: int = 0) -> None:
        data = encode_assignment(
            ConsumerAssignment(tuple((p.topic, p.partition) for p in sorted(partitions)))
        )
        answer(req, SYNC.Response(error_code=error, protocol_type="consumer",
                                  protocol_name=self.m.config.assignors[0].name, assignment=data), self.now, 5)  # fmt: skip

    def answer_heartbeat(self, req: UnsentRequest, error: int = 0) -> None:
        answer(req, HEARTBEAT.Response(error_code=error), self.now, 4)

    def stable_with(self, partitions: frozenset[TopicPartition], generation: int = 5) -> None:
        """Subscribe to t, join as a follower and take ``partitions``; STABLE afterwards."""
        self.m.subscribe(frozenset({"t"}), None, self.now)
        self.m.poll_called(self.now)
        self.answer_join(self.one(JOIN), generation=generation)
        self.answer_sync(self.one(SYNC), partitions)
        self.target.finish()
        assert self.m.state is S.STABLE
        self.answer_heartbeat(self.one(HEARTBEAT))
        self.target.steps.clear()


def test_join_answers_member_id_required_by_joining_again_with_the_id_given() -> None:
    c = Classic()
    c.m.subscribe(frozenset({"t"}), None, c.now)
    first = c.one(JOIN)
    body = request_body(first, 7)
    assert body.member_id == "" and body.group_id == "g" and body.protocol_type == "consumer"
    assert first.timeout_ms == 65_000  # the rebalance timeout plus a margin
    (protocol,) = body.protocols
    assert protocol.name == "range" and decode_subscription(bytes(protocol.metadata)).topics == ("t",)
    assert c.poll() == []  # in flight
    c.answer_join(first, error=E.MEMBER_ID_REQUIRED, member_id="m-given")
    second = c.one(JOIN)  # at once: no backoff
    assert request_body(second, 7).member_id == "m-given"


def test_the_leader_assigns_with_the_configured_assignor_and_sends_the_assignments_in_sync_group() -> None:
    c = Classic()
    c.m.subscribe(frozenset({"t"}), None, c.now)
    c.answer_join(c.one(JOIN), member_id="m-1", leader="m-1", generation=9,
                  members=(("m-1", subscription(("t",))), ("m-2", subscription(("t",)))))  # fmt: skip
    sync = c.one(SYNC)
    body = request_body(sync, 5)
    assert (body.generation_id, body.member_id, body.protocol_name) == (9, "m-1", "range")
    got = {a.member_id: decode_assignment(bytes(a.assignment)).partitions for a in body.assignments}
    assert {m: sorted(ps) for m, ps in got.items()} == {
        "m-1": [("t", 0), ("t", 1)],
        "m-2": [("t", 2), ("t", 3)],
    }
    c.answer_sync(sync, tp("t", 0, 1))
    step = c.target.running
    assert step is not None and step.kind == "assign"
    assert step.partitions == tp("t", 0, 1) and step.added == tp("t", 0, 1)
    assert c.m.state is S.RECONCILING
    c.target.finish()
    assert c.m.state is S.STABLE
    assert c.m.commit_identity() == CommitIdentity(9, "m-1", None)
    assert request_body(c.one(HEARTBEAT), 4).generation_id == 9


def test_a_follower_sends_an_empty_sync_group() -> None:
    c = Classic()
    c.m.subscribe(frozenset({"t"}), None, c.now)
    c.answer_join(c.one(JOIN), member_id="m-2", leader="m-1", members=())
    body = request_body(c.one(SYNC), 5)
    assert list(body.assignments) == [] and body.member_id == "m-2"


def test_heartbeats_every_heartbeat_interval_on_the_manual_clock() -> None:
    c = Classic()
    c.stable_with(tp("t", 0))
    start = c.now  # the first heartbeat went at the start
    for _ in range(3):
        c.now = start + 2_999
        result = c.m.poll(c.now)
        assert list(result.unsent_requests) == [] and result.next_poll_delay_ms == 1
        c.now = start + 3_000
        hb = c.one(HEARTBEAT)
        body = request_body(hb, 4)
        assert (body.group_id, body.generation_id, body.member_id) == ("g", 5, "m-1")
        c.answer_heartbeat(hb)
        start = c.now
        c.m.poll_called(c.now)


def test_eager_rebalance_in_progress_revokes_everything_before_rejoining() -> None:
    c = Classic()
    c.stable_with(tp("t", 0, 1))
    c.now += 3_000
    c.answer_heartbeat(c.one(HEARTBEAT), E.REBALANCE_IN_PROGRESS)
    assert c.poll() == []  # the revocation runs first
    step = c.target.running
    assert step is not None and step.kind == "revoke" and step.partitions == tp("t", 0, 1)
    assert c.poll() == []
    c.target.finish()
    join = request_body(c.one(JOIN), 7)
    assert join.member_id == "m-1"
    assert decode_subscription(bytes(join.protocols[0].metadata)).owned_partitions == ()


def test_cooperative_revokes_only_what_moves_then_joins_once_more() -> None:
    c = Classic(CooperativeStickyAssignor())
    c.stable_with(tp("t", 0, 1, 2, 3))
    c.now += 3_000
    c.answer_heartbeat(c.one(HEARTBEAT), E.REBALANCE_IN_PROGRESS)
    join = c.one(JOIN)  # keeps its partitions and reports them as owned
    assert c.target.steps == []
    owned = decode_subscription(bytes(request_body(join, 7).protocols[0].metadata)).owned_partitions
    assert sorted(owned) == [("t", 0), ("t", 1), ("t", 2), ("t", 3)]
    c.answer_join(join, generation=6)
    c.answer_sync(c.one(SYNC), tp("t", 0, 1))
    step = c.target.running
    assert step is not None and (step.kind, step.partitions) == ("revoke", tp("t", 2, 3))
    c.target.finish()
    step = c.target.finish()
    assert (step.kind, step.partitions, step.added) == ("assign", tp("t", 0, 1), frozenset())
    assert c.m.state is S.STABLE
    follow_up = c.one(JOIN)  # KIP-429: released partitions are handed out in one more round
    c.answer_join(follow_up, generation=7)
    c.answer_sync(c.one(SYNC), tp("t", 0, 1))
    c.target.finish()
    assert c.m.state is S.STABLE
    assert [r.api.name for r in c.poll()] == ["Heartbeat"]  # nothing moved: no further round


@pytest.mark.parametrize("code", [E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION])
def test_unknown_member_or_illegal_generation_loses_the_partitions_and_rejoins_exactly_once(
    code: int,
) -> None:
    c = Classic()
    c.stable_with(tp("t", 0, 1))
    c.now += 3_000
    c.answer_heartbeat(c.one(HEARTBEAT), code)
    assert c.m.generation == -1
    assert c.m.member_id == ("" if code == E.UNKNOWN_MEMBER_ID else "m-1")
    assert c.m.commit_identity().generation_or_epoch == -1
    step = c.target.running
    assert step is not None and (step.kind, step.partitions) == ("lose", tp("t", 0, 1))
    assert c.poll() == []  # waits for the step
    c.target.finish()
    join = c.one(JOIN)
    assert request_body(join, 7).member_id == c.m.member_id
    for _ in range(3):
        c.now += 1_000
        assert c.poll() == []  # one join in flight, no loop
    c.answer_join(join, generation=8)
    c.answer_sync(c.one(SYNC), tp("t", 0))
    c.target.finish()
    assert c.m.state is S.STABLE and c.m.generation == 8
    assert [r.api.name for r in c.poll()] == ["Heartbeat"]
    assert c.target.kinds() == ["lose", "assign"]


def test_max_poll_interval_expiry_leaves_the_group_until_the_next_poll() -> None:
    c = Classic(rebalance_timeout_ms=10_000)
    c.stable_with(tp("t", 0, 1))
    polled = c.now
    assert c.m.left_group_error() is None
    c.now = polled + 10_001
    leave = c.one(LEAVE)
    body = request_body(leave, 3)
    assert [(m.member_id, m.group_instance_id) for m in body.members] == [("m-1", None)]
    assert request_body(leave, 0).member_id == "m-1"
    step = c.target.running
    assert step is not None and (step.kind, step.partitions) == ("lose", tp("t", 0, 1))
    c.target.finish()
    error = c.m.left_group_error()
    assert isinstance(error, MaxPollIntervalExceededError) and "max.poll.interval.ms (10000 ms)" in str(error)
    assert c.m.commit_identity() == CommitIdentity(-1, "", None)
    c.now += 5_000
    assert c.poll() == []  # stays out until the application polls
    c.m.poll_called(c.now)
    assert c.m.left_group_error() is None
    assert request_body(c.one(JOIN), 7).member_id == ""


def test_a_static_member_does_not_send_leave_group_when_its_poll_interval_runs_out() -> None:
    c = Classic(instance_id="static-1", rebalance_timeout_ms=10_000)
    c.stable_with(tp("t", 0))
    c.now += 10_001
    assert c.poll() == []
    assert isinstance(c.m.left_group_error(), MaxPollIntervalExceededError)
    assert c.target.kinds() == ["lose"]


def test_fenced_instance_id_is_fatal() -> None:
    c = Classic(instance_id="static-1")
    c.stable_with(tp("t", 0))
    c.now += 3_000
    c.answer_heartbeat(c.one(HEARTBEAT), E.FENCED_INSTANCE_ID)
    error = c.m.fatal_error()
    assert isinstance(error, FencedInstanceIdError) and error.code == E.FENCED_INSTANCE_ID
    assert "static-1" in str(error)
    assert c.m.state is S.FATAL
    assert c.target.kinds() == ["lose"]
    c.target.finish()
    c.now += 60_000
    assert c.poll() == []


def test_leave_revokes_then_sends_leave_group() -> None:
    c = Classic()
    c.stable_with(tp("t", 0, 1))
    done: list[BaseException | None] = []
    c.m.leave(c.now, done.append)
    step = c.target.running
    assert step is not None and (step.kind, step.partitions) == ("revoke", tp("t", 0, 1))
    assert c.poll() == [] and done == []  # LeaveGroup only once revoked (positions committed)
    c.target.finish()
    leave = c.one(LEAVE)
    assert [m.member_id for m in request_body(leave, 3).members] == ["m-1"]
    assert c.m.state is S.UNJOINED and c.m.commit_identity() == CommitIdentity(-1, "", None)
    answer(leave, LEAVE.Response(error_code=0), c.now, 3)
    assert done == [None]
    assert c.poll() == []


def test_a_static_member_leaves_without_leave_group() -> None:
    c = Classic(instance_id="static-1")
    c.stable_with(tp("t", 0))
    done: list[BaseException | None] = []
    c.m.leave(c.now, done.append)
    c.target.finish()
    assert done == [None]
    assert c.poll() == []


def test_a_member_that_leaves_with_a_rejoin_pending_does_not_join_again() -> None:
    c = Classic()
    c.stable_with(tp("t", 0, 1))
    c.now += 3_000
    c.answer_heartbeat(c.one(HEARTBEAT), E.REBALANCE_IN_PROGRESS)  # a rejoin is due at the next poll
    done: list[BaseException | None] = []
    c.m.leave(c.now, done.append)  # unsubscribe() before that poll
    c.target.finish()
    assert [r.api.name for r in c.poll()] == ["LeaveGroup"]
