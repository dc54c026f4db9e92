"""The consumer's group request managers on a manual clock, no thread, no network: `CommitManager` (OffsetCommit,
OffsetFetch), `GroupCoordinatorLocator` (FindCoordinator) and `ClassicMembershipManager` (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup). Requests are taken from ``poll(now_ms)`` and answered by calling their handlers with
responses encoded and decoded at the version named, as the network client would."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from membership_harness import Locator, RecordingTarget, metadata_with, tp

from groupstream.assignment.base import ConsumerPartitionAssignor
from groupstream.assignment.cooperative import CooperativeStickyAssignor
from groupstream.assignment.range import RangeAssignor
from groupstream.assignment.types import TopicPartition
from groupstream.client.consumer.classic_member_state import ClassicMemberState
from groupstream.client.consumer.classic_membership import ClassicMembershipConfig, ClassicMembershipManager
from groupstream.client.consumer.commit_manager import CommitManager, OffsetAndMetadata
from groupstream.client.consumer.consumer_membership_errors import (
    FencedInstanceIdError,
    MaxPollIntervalExceededError,
)
from groupstream.client.consumer.coordinator_locator import COORDINATOR_NODE_BASE, GroupCoordinatorLocator
from groupstream.client.consumer.errors import CommitFailedError
from groupstream.client.consumer.membership_api import NO_GROUP_IDENTITY, CommitIdentity
from groupstream.client.errors import KafkaConnectionError, KafkaError
from groupstream.client.net.metadata import MetadataCache
from groupstream.client.net.requests import ClientResponse, UnsentRequest
from groupstream.protocol.consumer_protocol import (
    ConsumerAssignment,
    ConsumerSubscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from groupstream.protocol.error_codes import ErrorCode as E
from groupstream.protocol.messages import by_name

S = ClassicMemberState
COMMIT, FETCH, FIND = by_name("OffsetCommit"), by_name("OffsetFetch"), by_name("FindCoordinator")
JOIN, SYNC, HEARTBEAT, LEAVE = (by_name(n) for n in ("JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup"))
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
U0 = TopicPartition("u", 0)


def answer(req: UnsentRequest, body: Any, now_ms: int, version: int) -> None:
    """Answer ``req`` with ``body`` as the wire carries it at ``version`` (the codec drops what it lacks)."""
    api = req.api
    decoded = api.decode_response(api.encode_response(body, version), version)  # type: ignore[attr-defined]
    req.handler(
        ClientResponse(req, req.node_id if req.node_id is not None else -1, version, decoded, None, now_ms)
    )


def disconnect(req: UnsentRequest, now_ms: int) -> None:
    req.handler(
        ClientResponse(req, req.node_id or -1, 0, None, KafkaConnectionError("h:1", "closed"), now_ms)
    )


def request_body(req: UnsentRequest, version: int) -> Any:
    """The request body at ``version``, checked to encode at it."""
    body = req.body_for(version)
    req.api.encode_request(body, version)  # type: ignore[attr-defined]
    return body


# --- CommitManager ------------------------------------------------------------------------------------------------


class Commits:
    def __init__(
        self, *, identity: CommitIdentity = NO_GROUP_IDENTITY, left: BaseException | None = None
    ) -> None:
        self.now = 1_000
        self.locator = Locator(node=None)
        self.identity = identity
        self.left = left
        self.membership_errors: list[tuple[int, int]] = []
        self.results: list[tuple[Any, BaseException | None]] = []
        self.m = CommitManager(
            "g",
            self.locator,
            lambda: self.identity,
            lambda code, now: self.membership_errors.append((code, now)),
            lambda: self.left,
            retry_backoff_ms=100,
        )

    def done(self, result: Any, error: BaseException | None) -> None:
        self.results.append((result, error))

    def commit(self, offsets: dict[TopicPartition, OffsetAndMetadata], timeout_ms: int = 5_000) -> None:
        self.m.commit(offsets, self.now, timeout_ms, self.done)

    def poll(self) -> list[UnsentRequest]:
        return list(self.m.poll(self.now).unsent_requests)


def commit_response(codes: dict[TopicPartition, int]) -> Any:
    R: Any = COMMIT.Response
    T = R.OffsetCommitResponseTopic
    by_topic: dict[str, list[Any]] = {}
    for p, code in sorted(codes.items()):
        by_topic.setdefault(p.topic, []).append(
            T.OffsetCommitResponsePartition(partition_index=p.partition, error_code=code)
        )
    return R(topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()])


OFFSETS = {T1: OffsetAndMetadata(20, "m1", 3), T0: OffsetAndMetadata(10), U0: OffsetAndMetadata(5)}


def test_a_commit_waits_until_the_coordinator_is_known() -> None:
    c = Commits()
    c.commit(OFFSETS)
    result = c.m.poll(c.now)
    assert list(result.unsent_requests) == []
    assert result.next_poll_delay_ms == 100  # looks again after the backoff
    assert c.m.pending()
    c.locator.node = 7
    (req,) = c.poll()
    assert req.node_id == 7 and req.api is COMMIT and req.max_version == 9
    assert c.poll() == []  # in flight: not sent twice


def test_the_commit_body_carries_the_identity_the_membership_gives() -> None:
    c = Commits(identity=CommitIdentity(7, "member-1", "instance-1"))
    c.locator.node = 1
    c.commit(OFFSETS)
    (req,) = c.poll()
    body = request_body(req, 9)
    assert (body.group_id, body.generation_id_or_member_epoch, body.member_id, body.group_instance_id) == (
        "g",
        7,
        "member-1",
        "instance-1",
    )
    rows = {(t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
            for t in body.topics for p in t.partitions}  # fmt: skip
    assert rows == {("t", 0): (10, -1, None), ("t", 1): (20, 3, "m1"), ("u", 0): (5, -1, None)}
    assert [t.name for t in body.topics] == ["t", "u"]  # one entry per topic
    answer(req, commit_response(dict.fromkeys(OFFSETS, 0)), c.now, 9)
    assert c.results == [(OFFSETS, None)]
    assert not c.m.pending()


def test_outside_a_group_a_commit_carries_generation_minus_one_and_no_member() -> None:
    c = Commits()
    c.locator.node = 1
    c.commit({T0: OffsetAndMetadata(1)})
    body = request_body(c.poll()[0], 9)
    assert (body.generation_id_or_member_epoch, body.member_id, body.group_instance_id) == (-1, "", None)


@pytest.mark.parametrize(
    "code", [E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE]
)
def test_a_coordinator_error_tells_the_locator_and_retries_after_backoff_until_the_deadline(
    code: int,
) -> None:
    c = Commits()
    c.locator.node = 1
    c.commit({T0: OffsetAndMetadata(1)}, timeout_ms=1_000)  # deadline 2_000
    req = c.poll()[0]
    c.now = 1_010
    answer(req, commit_response({T0: code}), c.now, 9)
    assert c.locator.lost == [1_010]
    assert c.results == []
    c.locator.node = 2  # found again at once
    result = c.m.poll(1_050)
    # the backoff runs out at 1_110
    assert list(result.unsent_requests) == [] and result.next_poll_delay_ms == 60
    c.now = 1_110
    (retry,) = c.poll()
    assert retry.node_id == 2
    c.now = 1_200
    answer(retry, commit_response({T0: code}), c.now, 9)
    assert c.locator.lost == [1_010, 1_200]
    c.locator.node = 2
    c.now = 2_000
    assert c.poll() == []
    ((result_value, error),) = c.results
    assert result_value is None
    assert isinstance(error, KafkaError) and error.code == E.REQUEST_TIMED_OUT
    assert not c.m.pending()


def test_a_broken_connection_retries_like_a_coordinator_error() -> None:
    c = Commits()
    c.locator.node = 1
    c.commit({T0: OffsetAndMetadata(1)})
    disconnect(c.poll()[0], 1_005)
    assert c.locator.lost == [1_005]
    c.locator.node = 1
    c.now = 1_105
    answer(c.poll()[0], commit_response({T0: 0}), c.now, 9)
    assert c.results == [({T0: OffsetAndMetadata(1)}, None)]


WHY = {
    E.ILLEGAL_GENERATION: "rebalanced since this member's last assignment",
    E.UNKNOWN_MEMBER_ID: "no longer knows this member",
    E.FENCED_INSTANCE_ID: "took over this group.instance.id",
    E.STALE_MEMBER_EPOCH: "epoch is stale",
    E.FENCED_MEMBER_EPOCH: "was fenced",
    E.REBALANCE_IN_PROGRESS: "the group is rebalancing",
}


@pytest.mark.parametrize("code", list(WHY), ids=[E(c).name for c in WHY])
def test_a_membership_error_is_reported_and_fails_the_commit_saying_why(code: int) -> None:
    c = Commits(identity=CommitIdentity(3, "m", None))
    c.locator.node = 1
    c.commit({T0: OffsetAndMetadata(1), T1: OffsetAndMetadata(2)})
    c.now = 1_020
    answer(c.poll()[0], commit_response({T0: 0, T1: code}), c.now, 9)
    assert c.membership_errors == [(code, 1_020)]
    ((result, error),) = c.results
    assert result is None
    assert isinstance(error, CommitFailedError) and error.code == code
    assert WHY[code] in str(error)
    assert c.locator.lost == []
    c.now = 5_000
    assert c.poll() == []  # not retried


def test_another_partition_error_fails_the_commit_with_that_error() -> None:
    c = Commits()
    c.locator.node = 1
    c.commit({T0: OffsetAndMetadata(1)})
    answer(c.poll()[0], commit_response({T0: E.OFFSET_METADATA_TOO_LARGE}), c.now, 9)
    ((_, error),) = c.results
    assert isinstance(error, KafkaError) and not isinstance(error, CommitFailedError)
    assert error.code == E.OFFSET_METADATA_TOO_LARGE
    assert c.membership_errors == []


def test_a_commit_while_out_of_the_group_fails_at_once_with_the_reason() -> None:
    left = MaxPollIntervalExceededError("g", 300_000)
    c = Commits(left=left)
    c.locator.node = 1
    c.commit({T0: OffsetAndMetadata(1)})
    ((result, error),) = c.results
    assert result is None
    assert isinstance(error, CommitFailedError)
    assert str(left) in str(error) and "max.poll.interval.ms" in str(error)
    assert c.poll() == [] and not c.m.pending()


def test_an_empty_commit_completes_at_once() -> None:
    c = Commits()
    c.commit({})
    assert c.results == [(None, None)]
    c.locator.node = 1
    assert c.poll() == [] and not c.m.pending()


def test_fail_all_fails_every_pending_call() -> None:
    c = Commits()
    c.commit({T0: OffsetAndMetadata(1)})
    c.m.fetch(frozenset({T0}), c.now, 1_000, c.done)
    boom = RuntimeError("closing")
    c.m.fail_all(boom)
    assert c.results == [(None, boom), (None, boom)]
    c.locator.node = 1
    assert c.poll() == []


def test_offset_fetch_at_v8_names_the_group_member_and_epoch() -> None:
    c = Commits(identity=CommitIdentity(4, "member-1", None))
    c.locator.node = 1
    c.m.fetch(frozenset({T1, T0, U0}), c.now, 1_000, c.done)
    (req,) = c.poll()
    assert req.api is FETCH and req.max_version == 9
    for version in (8, 9):
        body = request_body(req, version)
        (group,) = body.groups
        assert (group.group_id, group.member_id, group.member_epoch) == ("g", "member-1", 4)
        assert {t.name: list(t.partition_indexes) for t in group.topics} == {"t": [0, 1], "u": [0]}
        assert body.require_stable


def test_offset_fetch_at_v8_outside_a_group_sends_no_member_id() -> None:
    c = Commits()
    c.locator.node = 1
    c.m.fetch(frozenset({T0}), c.now, 1_000, c.done)
    (group,) = request_body(c.poll()[0], 8).groups
    assert (group.member_id, group.member_epoch) == (None, -1)


def test_offset_fetch_below_v8_uses_the_single_group_shape() -> None:
    c = Commits(identity=CommitIdentity(4, "member-1", None))
    c.locator.node = 1
    c.m.fetch(frozenset({T0, U0}), c.now, 1_000, c.done)
    req = c.poll()[0]
    body = request_body(req, 7)
    assert body.group_id == "g" and body.require_stable
    assert {t.name: list(t.partition_indexes) for t in body.topics} == {"t": [0], "u": [0]}
    R: Any = FETCH.Response
    P = R.OffsetFetchResponseTopic.OffsetFetchResponsePartition
    answer(req, R(error_code=0, topics=[
        R.OffsetFetchResponseTopic(name="t", partitions=[P(partition_index=0, committed_offset=42,
                                                           committed_leader_epoch=2, metadata="x", error_code=0)]),
        R.OffsetFetchResponseTopic(name="u", partitions=[P(partition_index=0, committed_offset=-1, metadata="",
                                                           error_code=0)]),
    ]), c.now, 7)  # fmt: skip
    assert c.results == [({T0: OffsetAndMetadata(42, "x", 2)}, None)]  # u-0 has no commit


def fetch_v8_response(
    rows: dict[TopicPartition, int], *, group_error: int = 0, partition_error: int = 0
) -> Any:
    R: Any = FETCH.Response
    G = R.OffsetFetchResponseGroup
    P = G.OffsetFetchResponseTopics.OffsetFetchResponsePartitions
    by_topic: dict[str, list[Any]] = {}
    for p, offset in sorted(rows.items()):
        row = P(partition_index=p.partition, committed_offset=offset, committed_leader_epoch=-1, metadata="",
                error_code=partition_error)  # fmt: skip
        by_topic.setdefault(p.topic, []).append(row)
    topics = [G.OffsetFetchResponseTopics(name=t, partitions=ps) for t, ps in by_topic.items()]
    return R(groups=[G(group_id="g", topics=topics, error_code=group_error)])


def test_offset_fetch_at_v8_returns_the_committed_offsets() -> None:
    c = Commits()
    c.locator.node = 1
    c.m.fetch(frozenset({T0, T1}), c.now, 1_000, c.done)
    answer(c.poll()[0], fetch_v8_response({T0: 7, T1: -1}), c.now, 8)
    assert c.results == [({T0: OffsetAndMetadata(7, "", -1)}, None)]


def test_offset_fetch_retries_unstable_offsets_without_losing_the_coordinator() -> None:
    c = Commits()
    c.locator.node = 1
    c.m.fetch(frozenset({T0}), c.now, 1_000, c.done)
    answer(c.poll()[0], fetch_v8_response({T0: 7}, partition_error=E.UNSTABLE_OFFSET_COMMIT), c.now, 8)
    assert c.locator.lost == [] and c.results == []
    assert c.poll() == []
    c.now += 100
    answer(c.poll()[0], fetch_v8_response({T0: 7}), c.now, 8)
    assert c.results == [({T0: OffsetAndMetadata(7, "", -1)}, None)]


def test_offset_fetch_with_a_group_membership_error_fails_and_is_reported() -> None:
    c = Commits(identity=CommitIdentity(4, "m", None))
    c.locator.node = 1
    c.m.fetch(frozenset({T0}), c.now, 1_000, c.done)
    answer(c.poll()[0], fetch_v8_response({}, group_error=E.STALE_MEMBER_EPOCH), c.now, 9)
    assert c.membership_errors == [(E.STALE_MEMBER_EPOCH, c.now)]
    ((_, error),) = c.results
    assert isinstance(error, CommitFailedError) and error.code == E.STALE_MEMBER_EPOCH


# --- GroupCoordinatorLocator ---------------------------------------------------------------------------------------


def find_response(version: int, *, node: int = 3, error: int = 0, key: str = "g") -> Any:
    R: Any = FIND.Response
    if version >= 4:
        return R(
            coordinators=[R.Coordinator(key=key, node_id=node, host="coord", port=9093, error_code=error)]
        )
    return R(error_code=error, node_id=node, host="coord", port=9093)


def locator() -> tuple[GroupCoordinatorLocator, MetadataCache]:
    cache = MetadataCache()
    return GroupCoordinatorLocator("g", cache, backoff_ms=100, backoff_max_ms=1_000), cache


@pytest.mark.parametrize("version", [3, 4])
def test_find_coordinator_is_sent_when_unknown_and_the_answer_sets_a_node_of_its_own(version: int) -> None:
    loc, cache = locator()
    assert loc.coordinator() is None
    (req,) = loc.poll(0).unsent_requests
    assert req.api is FIND and req.node_id is None  # any broker
    body = request_body(req, version)
    if version >= 4:
        assert (body.key_type, list(body.coordinator_keys)) == (0, ["g"])
    else:
        assert (body.key_type, body.key) == (0, "g")
    assert list(loc.poll(1).unsent_requests) == []  # in flight
    answer(req, find_response(version, node=3), 5, version)
    own = COORDINATOR_NODE_BASE - 3
    assert loc.coordinator() == own  # Java's Integer.MAX_VALUE - node id: a connection of its own
    info = cache.broker(own)
    assert info is not None and (info.host, info.port) == ("coord", 9093)
    assert cache.broker(3) is None  # the broker's own node id is left to metadata
    result = loc.poll(6)
    assert list(result.unsent_requests) == [] and result.next_poll_delay_ms is None


@pytest.mark.parametrize("version", [3, 4])
def test_find_coordinator_errors_are_retried_with_exponential_backoff(version: int) -> None:
    loc, _ = locator()
    now = 0
    for expected in (100, 200, 400, 800, 1_000, 1_000):  # doubling, capped at backoff_max_ms
        (req,) = loc.poll(now).unsent_requests
        answer(req, find_response(version, error=E.COORDINATOR_NOT_AVAILABLE), now, version)
        assert loc.coordinator() is None
        result = loc.poll(now)
        assert list(result.unsent_requests) == [] and result.next_poll_delay_ms == expected
        assert list(loc.poll(now + expected - 1).unsent_requests) == []
        now += expected
    (req,) = loc.poll(now).unsent_requests
    answer(req, find_response(version, node=5), now, version)
    assert loc.coordinator() == COORDINATOR_NODE_BASE - 5


def test_a_disconnection_or_an_answer_without_the_group_is_retried() -> None:
    loc, _ = locator()
    disconnect(loc.poll(0).unsent_requests[0], 10)
    assert loc.coordinator() is None
    assert list(loc.poll(109).unsent_requests) == []
    (req,) = loc.poll(110).unsent_requests
    answer(req, find_response(4, key="another-group"), 120, 4)
    assert loc.coordinator() is None
    assert loc.poll(120).next_poll_delay_ms == 200
    answer(loc.poll(320).unsent_requests[0], find_response(4, node=1), 330, 4)
    assert loc.coordinator() == COORDINATOR_NODE_BASE - 1


def test_coordinator_lost_clears_it_and_finds_it_again_after_the_backoff() -> None:
    loc, _ = locator()
    for now in (0, 100):  # two failures: the next would wait 400
        answer(
            loc.poll(now).unsent_requests[0], find_response(4, error=E.COORDINATOR_LOAD_IN_PROGRESS), now, 4
        )
    answer(loc.poll(300).unsent_requests[0], find_response(4, node=2), 300, 4)
    assert loc.coordinator() == COORDINATOR_NODE_BASE - 2
    loc.coordinator_lost(1_000)
    assert loc.coordinator() is None
    assert loc.poll(1_000).next_poll_delay_ms == 100
    (req,) = loc.poll(1_100).unsent_requests
    answer(req, find_response(4, error=E.COORDINATOR_NOT_AVAILABLE), 1_100, 4)
    assert loc.poll(1_100).next_poll_delay_ms == 100  # a success reset the attempts
    answer(loc.poll(1_200).unsent_requests[0], find_response(4, node=4), 1_200, 4)
    assert loc.coordinator() == COORDINATOR_NODE_BASE - 4


# --- ClassicMembershipManager ------------------------------------------------------------------------------------


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
