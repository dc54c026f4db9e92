"""What the broker gives the coordinator: the real shard, the ids it mints, and a view of the topics."""

from __future__ import annotations

import uuid

from groupstream.broker.config import BrokerConfig
from groupstream.broker.coordinator_runtime import Shard, ShardFactory
from groupstream.storage.catalog import Catalog


class CatalogTopics:
    """`groupstream.coordinator.request.TopicCatalogView` over the broker's catalog (read at call time)."""

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog

    def partition_count(self, topic: str) -> int | None:
        info = self._catalog.get_topic(topic)
        return None if info is None else info.partitions

    def topic_id(self, topic: str) -> uuid.UUID | None:
        info = self._catalog.get_topic(topic)
        return None if info is None else info.topic_id

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        info = self._catalog.topic_by_id(topic_id)
        return None if info is None else info.name

    def topic_names(self) -> list[str]:
        return [t.name for t in self._catalog.topics()]


def new_member_id(client_id: str) -> str:
    """Kafka's form: the client id, a dash, a random UUID."""
    return f"{client_id}-{uuid.uuid4()}"


def default_shard_factory(config: BrokerConfig) -> ShardFactory:
    from groupstream.coordinator.shard import GroupCoordinatorShard

    group_config = config.group_coordinator_config()

    def make(partition: int) -> Shard:
        shard: Shard = GroupCoordinatorShard(partition, group_config, new_member_id)
        return shard

    return make
