"""`CommitManager` (OffsetCommit, OffsetFetch) on a manual clock, no thread, no network: requests are taken from
``poll(now_ms)`` and answered at the version named."""

from __future__ import annotations

from typing import Any

import pytest
from membership_harness import Locator
from request_manager_kit import (
    COMMIT,
    FETCH,
    T0,
    T1,
    U0,
    answer,
    disconnect,
    request_body,
)

from groupstream.assignment.types import TopicPartition
from groupstream.client.consumer.commit_manager import CommitManager, OffsetAndMetadata
from groupstream.client.consumer.consumer_membership_errors import (
    MaxPollIntervalExceededError,
)
from groupstream.client.consumer.errors import CommitFailedError
from groupstream.client.consumer.membership_api import NO_GROUP_IDENTITY, CommitIdentity
from groupstream.client.errors import KafkaError
from groupstream.client.net.requests import UnsentRequest
from groupstream.protocol.error_codes import ErrorCode as E


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
