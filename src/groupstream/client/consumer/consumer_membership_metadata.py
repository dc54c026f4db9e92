"""Topic names for the topic ids a KIP-848 assignment carries, read from the client's metadata cache.

The coordinator names assigned topics by id only. Like Kafka's reconciliation, the member reconciles what it
can name and asks for a metadata update for the rest, then tries again once the cache has changed (its
``version`` moved). A regex subscription is resolved by the broker, so the client may not track the matching
topics at all: for those the update asks for every topic.
"""

from __future__ import annotations

import uuid
from typing import Protocol

from groupstream.client.net.metadata import MetadataCache

__all__ = ["MetadataTopicNames", "TopicNames"]


class TopicNames(Protocol):
    """What the membership manager needs from metadata."""

    @property
    def version(self) -> int:
        """Changes whenever the names known may have changed."""
        ...

    def topic_name(self, topic_id: uuid.UUID) -> str | None: ...

    def request_update(
        self, unknown: frozenset[uuid.UUID], topics: frozenset[str], pattern: str | None
    ) -> None:
        """Some assigned topic ids have no name yet: refresh the subscribed ``topics``, or every topic when
        subscribed by ``pattern``."""
        ...


class MetadataTopicNames:
    """`TopicNames` over a `MetadataCache` (network thread only, like the cache)."""

    def __init__(self, cache: MetadataCache) -> None:
        self._cache = cache
        self._names: dict[uuid.UUID, str] = {}
        self._names_version = -1

    @property
    def version(self) -> int:
        return self._cache.version

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        if self._names_version != self._cache.version:
            self._names = {
                desc.topic_id: name
                for name, desc in self._cache.cluster.topics.items()
                if desc.topic_id is not None and desc.topic_id.int != 0
            }
            self._names_version = self._cache.version
        return self._names.get(topic_id)

    def request_update(
        self, unknown: frozenset[uuid.UUID], topics: frozenset[str], pattern: str | None
    ) -> None:
        if pattern is not None:
            self._cache.want_all_topics(True)
        else:
            self._cache.add_topics(topics)
        self._cache.request_update()
