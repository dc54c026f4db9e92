"""The consumer's network-thread side: the subscription, the membership manager, auto commit.

Application calls arrive as `NetworkCall` events: a function the network thread runs with the clock reading,
completing the caller's future now or later (when a commit is acknowledged, a rebalance step finished). The
subscription lives here only; the fetch buffer is what both threads share.

A ``subscribe`` creates the membership manager for ``group.protocol`` (classic JoinGroup/SyncGroup or the
KIP-848 ``consumer`` protocol); a pattern is resolved against the cluster's topics here for the classic
protocol (its leader assigns what members subscribed to) and sent to the broker for the ``consumer`` one.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from groupstream.assignment.types import TopicPartition
from groupstream.client.consumer.assignment_target import ConsumerAssignmentTarget
from groupstream.client.consumer.commit_manager import CommitManager, OffsetAndMetadata
from groupstream.client.consumer.config import ConsumerConfig
from groupstream.client.consumer.coordinator_locator import GroupCoordinatorLocator
from groupstream.client.consumer.fetch_buffer import FetchBuffer
from groupstream.client.consumer.membership_api import NO_GROUP_IDENTITY, CommitIdentity, MembershipManager
from groupstream.client.consumer.metrics import ConsumerMetrics
from groupstream.client.net.metadata import MetadataCache
from groupstream.client.net.network_thread import CompletableEvent
from groupstream.client.net.requests import PollResult, min_delay

__all__ = ["ConsumerCore", "NetworkCall"]

log = logging.getLogger("groupstream.client.consumer")

_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


class NetworkCall(CompletableEvent):
    """Run ``fn(now_ms, future)`` on the network thread; it completes ``future`` (now or later)."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[int, Future[Any]], None], deadline_ms: int | None = None) -> None:
        super().__init__(deadline_ms)
        self.fn = fn


class ConsumerCore:
    def __init__(
        self,
        config: ConsumerConfig,
        buffer: FetchBuffer,
        metadata: MetadataCache,
        locator: GroupCoordinatorLocator | None,
        commits: CommitManager | None,
        post: Callable[[Callable[[], None]], None],
        metrics: ConsumerMetrics | None = None,
    ) -> None:
        """``post(fn)`` hands ``fn`` to the network thread (from the application thread)."""
        self.metrics = metrics
        self.cfg = config
        self.buffer = buffer
        self.metadata = metadata
        self.locator = locator
        self.commits = commits
        self._post = post
        self.membership: MembershipManager | None = None
        self.topics: frozenset[str] = frozenset()
        self.pattern: re.Pattern[str] | None = None
        self.manual = False
        self._member_id = str(uuid.uuid4())
        self._next_auto_commit_ms: int | None = None
        self._last_auto_commit: dict[TopicPartition, int] = {}
        self._leaving: MembershipManager | None = None  # a manager leaving the group after unsubscribe/close
        self.now_ms = 0  # the network thread's last clock reading (application calls that need one use it)

    # --- events --------------------------------------------------------------------------------------------

    def process(self, event: Any, now_ms: int) -> None:
        if isinstance(event, NetworkCall):
            event.fn(now_ms, event.future)
        elif callable(event):
            event()

    # --- subscription ----------------------------------------------------------------------------------------

    def subscribe(self, topics: frozenset[str], pattern: re.Pattern[str] | None, listener: Any, now_ms: int) -> None:
        if self.manual:
            raise ValueError("subscribe() after assign(): call unsubscribe() first (a consumer does one or the other)")
        if self.cfg.group_id is None:
            raise ValueError("subscribe() needs group.id: the group splits the partitions among its members")
        if self.membership is None:
            self.membership = self._new_membership(listener)
            if self.metrics is not None:
                self.metrics.rebalance_started(now_ms)
        self.topics, self.pattern = topics, pattern
        if pattern is None:
            self.metadata.set_topics(topics)
            self.membership.subscribe(topics, None, now_ms)
        elif self.cfg.group_protocol == "consumer":
            self.metadata.want_all_topics(True)
            self.membership.subscribe(frozenset(), _java_regex(pattern), now_ms)
        else:
            self.metadata.want_all_topics(True)
            self.metadata.request_update()
            self.topics = self._matching()
            self.membership.subscribe(self.topics, None, now_ms)
        self.metadata.request_update()
        self._next_auto_commit_ms = now_ms + self.cfg.auto_commit_interval_ms

    def _matching(self) -> frozenset[str]:
        assert self.pattern is not None
        names = self.metadata.cluster.topics.keys() if self.metadata.cluster.topics else ()
        return frozenset(t for t in names if t not in _INTERNAL_TOPICS and self.pattern.fullmatch(t))

    def assign(self, partitions: frozenset[TopicPartition], now_ms: int) -> None:
        if self.membership is not None:
            raise ValueError("assign() after subscribe(): call unsubscribe() first (a consumer does one or the other)")
        self.manual = bool(partitions)
        self.buffer.assign(partitions)
        self.metadata.set_topics({tp.topic for tp in partitions})
        self.metadata.request_update()
        self._next_auto_commit_ms = now_ms + self.cfg.auto_commit_interval_ms

    def unsubscribe(self, now_ms: int, done: Callable[[BaseException | None], None]) -> None:
        membership, self.membership = self.membership, None
        self.topics, self.pattern, self.manual = frozenset(), None, False

        def left(error: BaseException | None) -> None:
            self._leaving = None
            self.buffer.assign(())
            done(error)

        if membership is None:
            left(None)
            return
        self._leaving = membership
        membership.leave(now_ms, left)

    def _new_membership(self, listener: Any) -> MembershipManager:
        cfg = self.cfg
        assert self.locator is not None and cfg.group_id is not None
        auto = self._commit_for_revocation if cfg.enable_auto_commit else None
        target = ConsumerAssignmentTarget(self.buffer, listener, auto, self._post, self.metrics)
        if cfg.group_protocol == "consumer":
            from groupstream.client.consumer.consumer_membership import (
                ConsumerMembershipConfig,
                ConsumerMembershipManager,
            )
            from groupstream.client.consumer.consumer_membership_metadata import MetadataTopicNames

            mcfg = ConsumerMembershipConfig(
                group_id=cfg.group_id,
                member_id=self._member_id,
                group_instance_id=cfg.group_instance_id,
                client_rack=cfg.client_rack,
                max_poll_interval_ms=cfg.max_poll_interval_ms,
                server_assignor=cfg.group_remote_assignor,
                retry_backoff_ms=cfg.network.retry_backoff_ms,
                retry_backoff_max_ms=cfg.network.retry_backoff_max_ms,
            )
            return ConsumerMembershipManager(mcfg, target, self.locator, MetadataTopicNames(self.metadata))
        from groupstream.client.consumer.classic_membership import (
            ClassicMembershipConfig,
            ClassicMembershipManager,
        )

        ccfg = ClassicMembershipConfig(
            group_id=cfg.group_id,
            group_instance_id=cfg.group_instance_id,
            client_id=cfg.network.client_id,
            session_timeout_ms=cfg.session_timeout_ms,
            rebalance_timeout_ms=cfg.max_poll_interval_ms,
            heartbeat_interval_ms=cfg.heartbeat_interval_ms,
            retry_backoff_ms=cfg.network.retry_backoff_ms,
            retry_backoff_max_ms=cfg.network.retry_backoff_max_ms,
            assignors=tuple(cfg.assignors),
            client_rack=cfg.client_rack,
        )
        return ClassicMembershipManager(ccfg, target, self.locator, self.metadata)

    # --- commits -----------------------------------------------------------------------------------------

    def identity(self) -> CommitIdentity:
        member = self.membership or self._leaving  # a leaving member still commits what it revokes
        if member is None:
            return NO_GROUP_IDENTITY
        return member.commit_identity()

    def left_group_error(self) -> BaseException | None:
        return None if self.membership is None else self.membership.left_group_error()

    def on_membership_error(self, code: int, now_ms: int) -> None:
        if self.membership is not None:
            self.membership.commit_rejected(code, now_ms)

    def _commit_for_revocation(
        self, offsets: dict[TopicPartition, OffsetAndMetadata], done: Callable[[BaseException | None], None]
    ) -> None:
        assert self.commits is not None
        self.commits.commit(offsets, self.now_ms, self.cfg.default_api_timeout_ms, lambda _r, e: done(e))

    # --- the request manager ---------------------------------------------------------------------------------

    def poll(self, now_ms: int) -> PollResult:
        self.now_ms = now_ms
        delay: int | None = None
        requests: list[Any] = []
        if self.pattern is not None and self.cfg.group_protocol == "classic" and self.membership is not None:
            matching = self._matching()
            if matching != self.topics:
                self.topics = matching
                self.membership.subscribe(matching, None, now_ms)
        if self._next_auto_commit_ms is not None and self.cfg.enable_auto_commit and self.commits is not None:
            if now_ms >= self._next_auto_commit_ms:
                self._auto_commit(now_ms)
                self._next_auto_commit_ms = now_ms + self.cfg.auto_commit_interval_ms
            delay = max(self._next_auto_commit_ms - now_ms, 0)
        for manager in (self.membership, self._leaving):
            if manager is not None:
                result = manager.poll(now_ms)
                requests.extend(result.unsent_requests)
                delay = min_delay(delay, result.next_poll_delay_ms)
        return PollResult(requests, next_poll_delay_ms=delay)

    def _auto_commit(self, now_ms: int) -> None:
        assert self.commits is not None
        positions = self.buffer.positions()
        changed = {tp: o for tp, o in positions.items() if self._last_auto_commit.get(tp) != o}
        if not changed or (self.membership is None and not self.manual):
            return

        def done(_result: Any, error: BaseException | None) -> None:
            if error is None:
                self._last_auto_commit.update(changed)
            else:
                log.warning("auto commit failed: %s", error)

        self.commits.commit({tp: OffsetAndMetadata(o) for tp, o in changed.items()}, now_ms,
                            self.cfg.default_api_timeout_ms, done)  # fmt: skip

    def final_commit(self, now_ms: int, done: Callable[[BaseException | None], None]) -> None:
        """On close with auto commit: commit the positions of what is still owned."""
        if not self.cfg.enable_auto_commit or self.commits is None:
            done(None)
            return
        positions = self.buffer.positions()
        if not positions:
            done(None)
            return
        offsets = {tp: OffsetAndMetadata(o) for tp, o in positions.items()}
        self.commits.commit(offsets, now_ms, self.cfg.default_api_timeout_ms, lambda _r, e: done(e))


def _java_regex(pattern: re.Pattern[str]) -> str:
    """KIP-848 sends the subscription's regular expression to the broker (RE2/J syntax there); the common
    subset (classes, alternation, repetition, anchors) reads the same."""
    return pattern.pattern
