"""`__consumer_offsets`: the internal compacted topic the group coordinator writes, created at broker start.

Its partition count decides where every group lives (see `groupstream.broker.group_routing`), so once the topic
exists its count wins over ``offsets.topic.num.partitions``, as in Kafka. Clients may read it (lag tools do)
but not write it: produce requests to internal topics get INVALID_TOPIC_EXCEPTION.
"""

from __future__ import annotations

import logging

from groupstream.storage.catalog import Catalog

log = logging.getLogger("groupstream.broker")

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})


def is_internal(topic: str | None) -> bool:
    return topic in INTERNAL_TOPICS


def offsets_topic_configs(segment_bytes: int) -> dict[str, str]:
    """Kafka's settings for the topic (compacted, 100 MiB segments), plus fsync before any answer."""
    return {
        "cleanup.policy": "compact",
        "segment.bytes": str(segment_bytes),
        "flush.policy": "always",
    }


def ensure_offsets_topic(catalog: Catalog, num_partitions: int, segment_bytes: int) -> int:
    """Create the topic if missing; returns its partition count."""
    info = catalog.get_topic(OFFSETS_TOPIC)
    if info is None:
        info = catalog.create_topic(OFFSETS_TOPIC, num_partitions, offsets_topic_configs(segment_bytes))
        log.info("created %s with %d partitions", OFFSETS_TOPIC, num_partitions)
    elif info.partitions != num_partitions:
        log.warning("%s already has %d partitions; offsets.topic.num.partitions=%d applies only to a new topic",
                    OFFSETS_TOPIC, info.partitions, num_partitions)
    return info.partitions
