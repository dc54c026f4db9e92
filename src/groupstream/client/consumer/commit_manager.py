"""OffsetCommit and OffsetFetch to the group coordinator, and auto commit (network thread).

Requests wait until the coordinator is known. A commit carries the identity the membership manager gives
(classic generation, or KIP-848 member epoch; -1 outside a group). Coordinator errors (NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS) make every manager look the coordinator up again and
the request is retried until its deadline; membership errors are told to the membership manager (the member's
view is stale) and fail the commit with a message that says why, since committing after the group moved on
would overwrite the new owner's progress. Auto commit sends the positions of owned partitions every
``auto.commit.interval.ms``, asynchronously, and before a revocation (through the assignment target).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from groupstream.assignment.types import TopicPartition
from groupstream.client.consumer.errors import CommitFailedError
from groupstream.client.consumer.membership_api import NO_GROUP_IDENTITY, CommitIdentity, CoordinatorLocator
from groupstream.client.consumer.metrics import ConsumerMetrics
from groupstream.client.errors import KafkaError
from groupstream.client.net.requests import ClientResponse, PollResult, UnsentRequest
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name

__all__ = ["CommitManager", "OffsetAndMetadata"]

log = logging.getLogger("groupstream.client.consumer")

_COMMIT = by_name("OffsetCommit")
_FETCH = by_name("OffsetFetch")
_MAX_VERSION = 9  # v10 names topics by id
_COORDINATOR_ERRORS = frozenset(
    {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
)
_MEMBERSHIP_ERRORS = frozenset(
    {
        ErrorCode.ILLEGAL_GENERATION,
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.FENCED_INSTANCE_ID,
        ErrorCode.REBALANCE_IN_PROGRESS,
        ErrorCode.STALE_MEMBER_EPOCH,
        ErrorCode.FENCED_MEMBER_EPOCH,
    }
)

Done = Callable[[Any, BaseException | None], None]


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    metadata: str | None = None
    leader_epoch: int = -1


@dataclass(slots=True)
class _Call:
    kind: str  # "commit" | "fetch"
    payload: Any
    done: Done
    deadline_ms: int
    not_before_ms: int = 0
    in_flight: bool = False
    sent_ms: int = 0


class CommitManager:
    def __init__(
        self,
        group_id: str,
        locator: CoordinatorLocator,
        identity: Callable[[], CommitIdentity],
        on_membership_error: Callable[[int, int], None],
        left_group: Callable[[], BaseException | None],
        retry_backoff_ms: int,
    ) -> None:
        self.group_id = group_id
        self._locator = locator
        self._identity = identity
        self._on_membership_error = on_membership_error
        self._left_group = left_group
        self._backoff_ms = retry_backoff_ms
        self.metrics: ConsumerMetrics | None = None  # commit latencies, when the consumer measures them
        self._calls: list[_Call] = []
        self.closed = False

    # --- what other parts ask for ----------------------------------------------------------------------

    def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], now_ms: int, timeout_ms: int, done: Done) -> None:
        left = self._left_group()
        if left is not None:
            # Out of the group until the next poll: whatever it would commit now, the partitions' new owners
            # may have committed already (Java's "kicked out of the group" CommitFailedException, with why).
            done(None, CommitFailedError(ErrorCode.UNKNOWN_MEMBER_ID, f"commit refused: {left}",
                                         resource=f"group '{self.group_id}'"))  # fmt: skip
            return
        if not offsets:
            done(None, None)
            return
        self._calls.append(_Call("commit", dict(offsets), done, now_ms + timeout_ms))

    def fetch(self, partitions: frozenset[TopicPartition], now_ms: int, timeout_ms: int, done: Done) -> None:
        """``done(result, error)`` with result {tp: OffsetAndMetadata} for partitions that have a commit."""
        if not partitions:
            done({}, None)
            return
        self._calls.append(_Call("fetch", partitions, done, now_ms + timeout_ms))

    def pending(self) -> bool:
        return any(c.kind == "commit" for c in self._calls)

    def fail_all(self, error: BaseException) -> None:
        calls, self._calls = self._calls, []
        for c in calls:
            c.done(None, error)

    # --- the request manager -------------------------------------------------------------------------------

    def poll(self, now_ms: int) -> PollResult:
        requests = []
        delay: int | None = None
        for call in list(self._calls):
            if call.in_flight:
                continue
            if now_ms >= call.deadline_ms:
                self._calls.remove(call)
                call.done(None, KafkaError(ErrorCode.REQUEST_TIMED_OUT, f"the offset {call.kind} timed out",
                                           resource=f"group {self.group_id!r}"))  # fmt: skip
                continue
            node = self._locator.coordinator()
            if node is None or now_ms < call.not_before_ms:
                wait = max(call.not_before_ms - now_ms, 0) if node is not None else self._backoff_ms
                delay = wait if delay is None else min(delay, wait)
                continue
            call.in_flight = True
            call.sent_ms = now_ms
            requests.append(self._request(call, node))
        return PollResult(requests, next_poll_delay_ms=delay)

    def _request(self, call: _Call, node: int) -> UnsentRequest:
        identity = self._identity()
        if call.kind == "commit":
            return UnsentRequest(_COMMIT, self._commit_body(call.payload, identity),
                                 lambda r: self._on_commit(call, r), node_id=node, max_version=_MAX_VERSION)  # fmt: skip
        return UnsentRequest(_FETCH, lambda v: self._fetch_body(v, call.payload, identity),
                             lambda r: self._on_fetch(call, r), node_id=node, max_version=_MAX_VERSION)  # fmt: skip

    def _commit_body(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], identity: CommitIdentity) -> Any:
        R: Any = _COMMIT.Request
        T = R.OffsetCommitRequestTopic
        topics: dict[str, list[Any]] = {}
        for tp, om in sorted(offsets.items()):
            topics.setdefault(tp.topic, []).append(
                T.OffsetCommitRequestPartition(
                    partition_index=tp.partition,
                    committed_offset=om.offset,
                    committed_leader_epoch=om.leader_epoch,
                    committed_metadata=om.metadata,
                )
            )
        return R(
            group_id=self.group_id,
            generation_id_or_member_epoch=identity.generation_or_epoch,
            member_id=identity.member_id,
            group_instance_id=identity.group_instance_id,
            topics=[T(name=t, partitions=ps) for t, ps in topics.items()],
        )

    def _fetch_body(self, version: int, partitions: frozenset[TopicPartition], identity: CommitIdentity) -> Any:
        R: Any = _FETCH.Request
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        if version >= 8:
            G = R.OffsetFetchRequestGroup
            topics = [G.OffsetFetchRequestTopics(name=t, partition_indexes=ps) for t, ps in by_topic.items()]
            member = identity.member_id if identity is not NO_GROUP_IDENTITY and identity.member_id else None
            group = G(group_id=self.group_id, member_id=member, member_epoch=identity.generation_or_epoch, topics=topics)
            return R(groups=[group], require_stable=True)
        topics = [R.OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()]
        return R(group_id=self.group_id, topics=topics, require_stable=True)

    # --- responses ---------------------------------------------------------------------------------------

    def _retry(self, call: _Call, now_ms: int, coordinator_error: bool) -> None:
        call.in_flight = False
        call.not_before_ms = now_ms + self._backoff_ms
        if coordinator_error:
            self._locator.coordinator_lost(now_ms)

    def _finish(self, call: _Call, result: Any, error: BaseException | None) -> None:
        if call in self._calls:
            self._calls.remove(call)
        call.done(result, error)

    def _on_commit(self, call: _Call, response: ClientResponse) -> None:
        now = response.received_ms
        if response.error is not None:
            self._retry(call, now, coordinator_error=True)
            return
        codes = {
            TopicPartition(t.name, p.partition_index): p.error_code for t in response.body.topics for p in t.partitions
        }
        bad = {tp: c for tp, c in codes.items() if c != ErrorCode.NONE}
        if any(c in _COORDINATOR_ERRORS for c in bad.values()):
            self._retry(call, now, coordinator_error=True)
            return
        member = next((c for c in bad.values() if c in _MEMBERSHIP_ERRORS), None)
        if member is not None:
            self._on_membership_error(member, now)
            self._finish(call, None, CommitFailedError.from_code(member, self.group_id))
            return
        if bad:
            tp, code = sorted(bad.items())[0]
            self._finish(call, None, KafkaError(code, resource=f"group {self.group_id!r} {tp}"))
            return
        if self.metrics is not None:
            self.metrics.committed(now - call.sent_ms, now)
        self._finish(call, dict(call.payload), None)

    def _on_fetch(self, call: _Call, response: ClientResponse) -> None:
        now = response.received_ms
        if response.error is not None:
            self._retry(call, now, coordinator_error=True)
            return
        body = response.body
        if response.version >= 8:
            groups = [g for g in body.groups if g.group_id == self.group_id]
            group_error = groups[0].error_code if groups else ErrorCode.NONE
            rows = [(t.name, p) for g in groups for t in g.topics for p in t.partitions]
        else:
            group_error = body.error_code if response.version >= 2 else ErrorCode.NONE
            rows = [(t.name, p) for t in body.topics for p in t.partitions]
        codes = [group_error, *(p.error_code for _t, p in rows)]
        if any(c in _COORDINATOR_ERRORS for c in codes) or ErrorCode.UNSTABLE_OFFSET_COMMIT in codes:
            # UNSTABLE_OFFSET_COMMIT: a transaction's offsets are pending; Kafka retries too
            self._retry(call, now, coordinator_error=ErrorCode.UNSTABLE_OFFSET_COMMIT not in codes)
            return
        if group_error in _MEMBERSHIP_ERRORS:
            self._on_membership_error(group_error, now)
            self._finish(call, None, CommitFailedError.from_code(group_error, self.group_id))
            return
        if group_error not in (ErrorCode.NONE, ErrorCode.GROUP_ID_NOT_FOUND):
            self._finish(call, None, KafkaError(group_error, resource=f"group {self.group_id!r}"))
            return
        out: dict[TopicPartition, OffsetAndMetadata] = {}
        for topic, p in rows:
            if p.error_code == ErrorCode.NONE and p.committed_offset >= 0:
                out[TopicPartition(topic, p.partition_index)] = OffsetAndMetadata(
                    p.committed_offset, p.metadata, getattr(p, "committed_leader_epoch", -1)
                )
        self._finish(call, out, None)
