"""What a ConsumerGroupHeartbeat request carries, and the tracking that keeps it small (KIP-848).

The coordinator remembers a member's subscription, assignor, rebalance timeout and owned partitions, so a
heartbeat only repeats what changed since the last one sent: every other conditional field is null (-1 for the
rebalance timeout). That is not only about size: the owned partitions a member reports are how it acknowledges
a reconciled assignment, so they must go out exactly when they change. When the coordinator may have lost
what was sent (a join, any error, a new coordinator), `reset` makes the next request a full one, as Kafka's
``HeartbeatState.SentFields`` does.

Group id, member id and epoch go in every heartbeat; so does the instance id of a static member, as Kafka
4.x sends it, since the coordinator finds static members by it.

A subscription goes out whole: the topic list and the regular expression together (v1), the half not in use
empty (an empty regex means none). A null would only mean "unchanged", so switching from one kind to the
other must clear the old one explicitly; sending both every time is also what librdkafka does, and its mock
coordinator insists on it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from groupstream.protocol.messages import by_name

__all__ = [
    "CONSUMER_GROUP_HEARTBEAT",
    "HeartbeatFieldTracker",
    "HeartbeatFields",
    "Subscription",
    "TopicIdPartition",
    "group_by_topic",
]

CONSUMER_GROUP_HEARTBEAT = by_name("ConsumerGroupHeartbeat")


class TopicIdPartition(NamedTuple):
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True, slots=True)
class Subscription:
    """Topic names, or a regular expression the broker resolves (never resolved locally)."""

    topics: frozenset[str] = frozenset()
    pattern: str | None = None


def group_by_topic(partitions: Iterable[TopicIdPartition]) -> list[tuple[uuid.UUID, list[int]]]:
    """Partitions per topic id, sorted, as the wire wants them."""
    by_topic: dict[uuid.UUID, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic_id, []).append(tp.partition)
    return [(tid, sorted(ps)) for tid, ps in sorted(by_topic.items(), key=lambda kv: str(kv[0]))]


@dataclass(frozen=True, slots=True)
class HeartbeatFields:
    """One heartbeat's content, independent of the version it will be sent at. None means "unchanged"."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: tuple[TopicIdPartition, ...] | None = None

    def body(self, version: int) -> Any:
        """The request at ``version``. v0 has no regex field: a regex subscription cannot be sent there (the
        manager fails the member when the broker only speaks v0), and clearing one is unnecessary."""
        R: Any = CONSUMER_GROUP_HEARTBEAT.Request
        owned = None
        if self.topic_partitions is not None:
            owned = [
                R.TopicPartitions(topic_id=t, partitions=ps)
                for t, ps in group_by_topic(self.topic_partitions)
            ]
        return R(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=self.member_epoch,
            instance_id=self.instance_id,
            rack_id=self.rack_id,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            subscribed_topic_names=None
            if self.subscribed_topic_names is None
            else list(self.subscribed_topic_names),
            subscribed_topic_regex=self.subscribed_topic_regex if version >= 1 else None,
            server_assignor=self.server_assignor,
            topic_partitions=owned,
        )


class HeartbeatFieldTracker:
    """Builds heartbeats that carry only what changed since the last one built; `reset` forces a full one."""

    def __init__(
        self,
        group_id: str,
        *,
        instance_id: str | None,
        rack_id: str | None,
        rebalance_timeout_ms: int,
        server_assignor: str | None,
    ) -> None:
        self.group_id = group_id
        self.instance_id = instance_id
        self.rack_id = rack_id
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.server_assignor = server_assignor
        self._sent_rack: str | None = None
        self._sent_timeout = -1
        self._sent_subscription: Subscription | None = None
        self._sent_assignor: str | None = None
        self._sent_owned: frozenset[TopicIdPartition] | None = None

    def reset(self) -> None:
        """The coordinator may not have what was sent: the next heartbeat repeats everything."""
        self._sent_rack = None
        self._sent_timeout = -1
        self._sent_subscription = None
        self._sent_assignor = None
        self._sent_owned = None

    def owned_unsent(self, owned: frozenset[TopicIdPartition]) -> bool:
        return owned != self._sent_owned

    def subscription_unsent(self, subscription: Subscription) -> bool:
        return subscription != self._sent_subscription

    def build(
        self,
        member_id: str,
        member_epoch: int,
        subscription: Subscription,
        owned: frozenset[TopicIdPartition],
    ) -> HeartbeatFields:
        """The next heartbeat; what it carries counts as sent from now on (an error response calls `reset`)."""
        rack = None
        if self.rack_id is not None and self.rack_id != self._sent_rack:
            rack = self._sent_rack = self.rack_id
        timeout = -1
        if self.rebalance_timeout_ms != self._sent_timeout:
            timeout = self._sent_timeout = self.rebalance_timeout_ms
        names: tuple[str, ...] | None = None
        regex: str | None = None
        if subscription != self._sent_subscription:
            # both halves together, as librdkafka sends them: the other half empty clears what the broker had
            names = tuple(sorted(subscription.topics))
            regex = subscription.pattern if subscription.pattern is not None else ""
            self._sent_subscription = subscription
        assignor = None
        if self.server_assignor is not None and self.server_assignor != self._sent_assignor:
            assignor = self._sent_assignor = self.server_assignor
        topic_partitions: tuple[TopicIdPartition, ...] | None = None
        if owned != self._sent_owned:
            topic_partitions = tuple(sorted(owned, key=lambda tp: (str(tp.topic_id), tp.partition)))
            self._sent_owned = owned
        return HeartbeatFields(
            group_id=self.group_id,
            member_id=member_id,
            member_epoch=member_epoch,
            instance_id=self.instance_id,
            rack_id=rack,
            rebalance_timeout_ms=timeout,
            subscribed_topic_names=names,
            subscribed_topic_regex=regex,
            server_assignor=assignor,
            topic_partitions=topic_partitions,
        )

    def leave(self, member_id: str, leave_epoch: int) -> HeartbeatFields:
        """The leave heartbeat: identity and epoch -1 (or -2) only; the member is gone after it."""
        self.reset()
        return HeartbeatFields(
            group_id=self.group_id,
            member_id=member_id,
            member_epoch=leave_epoch,
            instance_id=self.instance_id,
        )
