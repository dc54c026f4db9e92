"""The client's view of the cluster, and the request manager that keeps it fresh. Pure: no I/O, no clock.

The cache starts empty (the network client knows only the bootstrap addresses) and is filled by Metadata
responses: brokers, and for each topic of interest its id, partitions and leaders. It is refreshed

- when a user of the cache asks (`request_update`): a leader moved (NOT_LEADER_OR_FOLLOWER), a topic is not
  known yet (UNKNOWN_TOPIC_OR_PARTITION), a connection to a leader dropped;
- when a topic of interest is added;
- every ``metadata.max.age.ms`` regardless, so a client that sees no error still learns of new partitions.

Only one Metadata request is in flight at a time; after a failure, or an answer that still lacks something
(a leader being elected), the next one waits ``retry.backoff.ms``, as Java's ``Metadata`` does.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from groupstream.client.metadata import (
    BrokerInfo,
    ClusterMetadata,
    TopicDescription,
    metadata_request,
    parse_metadata,
)
from groupstream.client.net.requests import ClientResponse, PollResult, UnsentRequest
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name

_METADATA = by_name("Metadata")
_ZERO_UUID = uuid.UUID(int=0)
_EMPTY = ClusterMetadata(None, -1, ())


class MetadataCache:
    """Cluster metadata for the topics a client works with, and the requests that refresh it."""

    def __init__(
        self,
        *,
        max_age_ms: int = 300_000,
        retry_backoff_ms: int = 100,
        allow_auto_topic_creation: bool = False,
    ) -> None:
        self.max_age_ms = max_age_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self.cluster: ClusterMetadata = _EMPTY
        self.version = 0  # bumped by every applied response, so users can tell that something changed
        self.topic_errors: dict[str, int] = {}  # last error the broker gave per topic of interest
        self._topics: set[str] = set()
        self._all_topics = False
        self._brokers: dict[int, BrokerInfo] = {}
        self._extra_brokers: dict[int, BrokerInfo] = {}
        self._leaders: dict[tuple[str, int], int] = {}
        self._need_update = True  # the first poll always asks: it learns the brokers
        self._in_flight = False
        self._last_refresh_ms: int | None = None
        self._not_before_ms = 0
        self._new_topics_asked = False

    # --- what to fetch --------------------------------------------------------------------------------------

    @property
    def topics(self) -> frozenset[str]:
        return frozenset(self._topics)

    def add_topics(self, topics: Iterable[str], *, at_once: bool = False) -> None:
        """Track these topics too; a topic not in the cache yet triggers an update (``at_once``: without waiting
        out ``retry.backoff.ms`` after the last answer, as Java's ``requestUpdateForNewTopics``, which its
        producer calls for a record's new topic: the records produced meanwhile wait for it)."""
        for t in topics:
            if t not in self._topics:
                self._topics.add(t)
                if t not in self.cluster.topics:
                    self._need_update = True
                    if at_once:
                        self._not_before_ms = 0
                        self._new_topics_asked = True  # a request in flight cannot cover it: none after it

    def remove_topics(self, topics: Iterable[str]) -> None:
        """Stop tracking these topics (a producer gave up on a topic that does not exist)."""
        self._topics.difference_update(topics)

    def set_topics(self, topics: Iterable[str]) -> None:
        """Track exactly ``topics`` (a consumer's assign or subscribe). New ones are asked for at once, without
        waiting out ``retry.backoff.ms`` after the last answer: Java's ``requestUpdateForNewTopics``."""
        wanted = set(topics)
        if wanted - self._topics:
            self._need_update = True
            self._not_before_ms = 0
            self._new_topics_asked = True  # a request in flight now cannot cover them: no backoff after it
        self._topics = wanted

    def want_all_topics(self, flag: bool = True) -> None:
        """Fetch every topic (a consumer subscribed by pattern)."""
        if flag and not self._all_topics:
            self._need_update = True
        self._all_topics = flag

    def request_update(self) -> None:
        """Refresh at the next poll (after the retry backoff if the last attempt just failed)."""
        self._need_update = True

    @property
    def update_requested(self) -> bool:
        return self._need_update

    # --- reading ----------------------------------------------------------------------------------------------

    @property
    def brokers(self) -> dict[int, BrokerInfo]:
        return self._brokers

    def add_broker(self, node_id: int, host: str, port: int) -> None:
        """An address learnt outside Metadata, kept across refreshes: the group coordinator, which a consumer
        reaches under a node id of its own (so that its requests get their own connection, as Java's do)."""
        self._extra_brokers[node_id] = BrokerInfo(node_id, host, port, None)

    def broker(self, node_id: int) -> BrokerInfo | None:
        return self._brokers.get(node_id) or self._extra_brokers.get(node_id)

    def topic(self, name: str) -> TopicDescription | None:
        return self.cluster.topics.get(name)

    def partition_count(self, topic: str) -> int | None:
        """Partitions of ``topic``, or None while the topic is unknown (or answered with an error)."""
        desc = self.cluster.topics.get(topic)
        if desc is None or desc.error_code != ErrorCode.NONE or not desc.partitions:
            return None
        return len(desc.partitions)

    def leader(self, topic: str, partition: int) -> int | None:
        """The leader's node id, or None when unknown or being elected."""
        return self._leaders.get((topic, partition))

    def topic_id(self, topic: str) -> uuid.UUID | None:
        desc = self.cluster.topics.get(topic)
        if desc is None or desc.topic_id is None or desc.topic_id == _ZERO_UUID:
            return None
        return desc.topic_id

    def available_partitions(self, topic: str) -> list[int]:
        """Partitions of ``topic`` that have a leader (where a record without a key may go)."""
        desc = self.cluster.topics.get(topic)
        if desc is None:
            return []
        return [p.partition for p in desc.partitions if p.leader >= 0]

    # --- the request manager side ---------------------------------------------------------------------------

    def poll(self, now_ms: int) -> PollResult:
        if self._in_flight:
            return PollResult()
        due: int | None
        if self._need_update:
            due = self._not_before_ms
        elif self._last_refresh_ms is not None and self.max_age_ms > 0:
            due = self._last_refresh_ms + self.max_age_ms
        else:
            due = None
        if due is None:
            return PollResult()
        if now_ms < due:
            return PollResult((), due - now_ms)
        self._in_flight = True
        self._need_update = False  # a request_update() while this one is out asks again afterwards
        self._new_topics_asked = False
        topics = None if self._all_topics else sorted(self._topics)
        request = UnsentRequest(_METADATA, lambda v: self._body(v, topics), self._on_response)
        return PollResult((request,), None)

    def _body(self, version: int, topics: list[str] | None) -> Any:
        return metadata_request(version, topics, self.allow_auto_topic_creation)

    def _on_response(self, response: ClientResponse) -> None:
        self._in_flight = False
        now = response.received_ms
        body = response.body
        if response.error is not None or body is None:
            self._need_update = True
            self._not_before_ms = now + self.retry_backoff_ms
            return
        if response.version >= 13 and body.error_code != ErrorCode.NONE:
            self._need_update = True
            self._not_before_ms = now + self.retry_backoff_ms
            return
        self.apply(body, response.version, now)

    def apply(self, body: Any, version: int, now_ms: int) -> None:
        """Take in a Metadata response body (also used directly by tests)."""
        parsed = parse_metadata(body, version)
        topics = parsed.topics
        incomplete = False
        errors: dict[str, int] = {}
        for name, desc in topics.items():
            if desc.error_code != ErrorCode.NONE:
                errors[name] = desc.error_code
                incomplete = True
            elif any(p.leader < 0 for p in desc.partitions):
                incomplete = True
        brokers = parsed.brokers
        if not self._all_topics:
            for name in self._topics - topics.keys():
                errors[name] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                incomplete = True
        self.cluster = parsed
        self._brokers = {b.node_id: b for b in brokers}
        self._leaders = {
            (name, p.partition): p.leader
            for name, desc in topics.items()
            for p in desc.partitions
            if p.leader >= 0 and p.leader in self._brokers
        }
        self.topic_errors = errors
        self.version += 1
        self._last_refresh_ms = now_ms
        self._need_update = self._need_update or (incomplete and bool(self._topics or self._all_topics))
        self._not_before_ms = now_ms if self._new_topics_asked else now_ms + self.retry_backoff_ms
