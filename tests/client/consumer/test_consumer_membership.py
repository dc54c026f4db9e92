"""The KIP-848 member with a manual clock and no threads: scripted ConsumerGroupHeartbeat answers built with
the protocol codec, a recording `AssignmentTarget` (the consumer's side of the contract) and the real metadata
cache for topic ids."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest

from groupstream.assignment.types import TopicPartition
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
from groupstream.client.consumer.member_state import MemberState
from groupstream.client.consumer.membership_api import NO_GROUP_IDENTITY, CommitIdentity, StepDone
from groupstream.client.errors import KafkaConnectionError, UnsupportedVersionError
from groupstream.client.net.metadata import MetadataCache
from groupstream.client.net.requests import ClientResponse, UnsentRequest
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name

S = MemberState
CGH = by_name("ConsumerGroupHeartbeat")
METADATA = by_name("Metadata")
MR: Any = METADATA.Response
HR: Any = CGH.Response

ID_A = uuid.UUID("aaaaaaaa-0000-0000-0000-000000000001")
ID_B = uuid.UUID("bbbbbbbb-0000-0000-0000-000000000002")
MEMBER = "member-1"


def tp(topic: str, *partitions: int) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(topic, p) for p in partitions)


# --- the consumer's side of the contract ------------------------------------------------------------------------


@dataclass
class Step:
    kind: str
    partitions: frozenset[TopicPartition]
    added: frozenset[TopicPartition] | None
    done: StepDone


@dataclass
class RecordingTarget:
    """Owns partitions the way the consumer does; steps finish only when the test says so (``finish``), and a
    step begun while another is running fails the test, because the contract says steps never overlap."""

    owned: frozenset[TopicPartition] = frozenset()
    steps: list[Step] = field(default_factory=list)
    running: Step | None = None

    def owned_partitions(self) -> frozenset[TopicPartition]:
        return self.owned

    def _begin(self, step: Step) -> None:
        assert self.running is None, f"{step.kind} began while {self.running.kind} was running"
        self.running = step
        self.steps.append(step)

    def revoke(self, partitions: frozenset[TopicPartition], done: StepDone) -> None:
        self._begin(Step("revoke", partitions, None, done))

    def assign(
        self, assignment: frozenset[TopicPartition], added: frozenset[TopicPartition], done: StepDone
    ) -> None:
        self._begin(Step("assign", assignment, added, done))

    def lose(self, partitions: frozenset[TopicPartition], done: StepDone) -> None:
        self._begin(Step("lose", partitions, None, done))

    def finish(self, error: BaseException | None = None) -> Step:
        step = self.running
        assert step is not None, "no step is running"
        if step.kind == "assign":
            self.owned = step.partitions
        else:
            self.owned = self.owned - step.partitions
        self.running = None
        step.done(error)
        return step

    def kinds(self) -> list[str]:
        return [s.kind for s in self.steps]


@dataclass
class Locator:
    node: int | None = 1
    lost: list[int] = field(default_factory=list)

    def coordinator(self) -> int | None:
        return self.node

    def coordinator_lost(self, now_ms: int) -> None:
        self.lost.append(now_ms)
        self.node = None


def metadata_with(cache: MetadataCache, topics: dict[str, tuple[uuid.UUID, int]], now_ms: int) -> None:
    P = MR.MetadataResponseTopic.MetadataResponsePartition
    body = MR(
        brokers=[MR.MetadataResponseBroker(node_id=1, host="h", port=9092)],
        cluster_id="c",
        controller_id=1,
        topics=[
            MR.MetadataResponseTopic(
                error_code=0,
                name=name,
                topic_id=tid,
                partitions=[
                    P(error_code=0, partition_index=i, leader_id=1, replica_nodes=[1], isr_nodes=[1])
                    for i in range(n)
                ],
            )
            for name, (tid, n) in topics.items()
        ],
    )
    cache.apply(body, 12, now_ms)


# --- harness ----------------------------------------------------------------------------------------------------


class Member:
    def __init__(self, **config: Any) -> None:
        self.now = 1_000
        self.target = RecordingTarget()
        self.locator = Locator()
        self.cache = MetadataCache()
        metadata_with(self.cache, {"A": (ID_A, 8)}, self.now)
        settings: dict[str, Any] = {"group_id": "g", "member_id": MEMBER, "max_poll_interval_ms": 60_000}
        settings.update(config)
        self.m = ConsumerMembershipManager(
            ConsumerMembershipConfig(**settings), self.target, self.locator, MetadataTopicNames(self.cache)
        )

    def poll(self) -> list[UnsentRequest]:
        return list(self.m.poll(self.now).unsent_requests)

    def delay(self) -> int | None:
        result = self.m.poll(self.now)
        assert not result.unsent_requests
        return result.next_poll_delay_ms

    def one(self) -> UnsentRequest:
        reqs = self.poll()
        assert len(reqs) == 1, reqs
        return reqs[0]

    def answer(
        self,
        req: UnsentRequest,
        *,
        epoch: int = 1,
        error: int = 0,
        assignment: dict[uuid.UUID, Iterable[int]] | None = None,
        interval: int = 3_000,
        version: int = 1,
        member_id: str | None = MEMBER,
        message: str | None = None,
    ) -> None:
        assign = None
        if assignment is not None:
            assign = HR.Assignment(
                topic_partitions=[
                    HR.Assignment.TopicPartitions(topic_id=t, partitions=sorted(ps))
                    for t, ps in assignment.items()
                ]
            )
        body = HR(
            throttle_time_ms=0,
            error_code=error,
            error_message=message,
            member_id=member_id,
            member_epoch=epoch,
            heartbeat_interval_ms=interval,
            assignment=assign,
        )
        decoded = CGH.decode_response(CGH.encode_response(body, version), version)
        req.handler(ClientResponse(req, req.node_id or -1, version, decoded, None, self.now))

    def disconnect(self, req: UnsentRequest) -> None:
        req.handler(
            ClientResponse(req, req.node_id or -1, 1, None, KafkaConnectionError("h:1", "closed"), self.now)
        )

    def stable_with(self, partitions: Iterable[int], *, epoch: int = 1) -> None:
        """Subscribe to A, join and reconcile ``partitions`` of A, acknowledge; STABLE afterwards."""
        self.m.subscribe(frozenset({"A"}), None, self.now)
        self.answer(self.one(), epoch=epoch, assignment={ID_A: partitions})
        if self.m.state is not S.STABLE:  # an empty assignment is stable at once
            self.m.poll(self.now)
            if self.target.running is not None:
                self.target.finish()
            ack = self.one()
            self.answer(ack, epoch=epoch)
        assert self.m.state is S.STABLE
        self.now += 3_000


def sent(req: UnsentRequest, version: int = 1) -> Any:
    """The request body at ``version``, checked to encode (the codec refuses fields a version lacks)."""
    body = req.body_for(version)
    CGH.encode_request(body, version)
    return body


def owned_on_wire(body: Any) -> dict[uuid.UUID, list[int]] | None:
    if body.topic_partitions is None:
        return None
    return {t.topic_id: list(t.partitions) for t in body.topic_partitions}


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
