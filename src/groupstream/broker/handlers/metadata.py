"""Metadata: one broker that leads every partition; topics auto-created on request when allowed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from groupstream.broker.handlers import handles
from groupstream.broker.offsets_topic import is_internal
from groupstream.broker.topics import auto_create_topic, describe_topic_error
from groupstream.protocol.connection import Request
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.primitives import ZERO_UUID

if TYPE_CHECKING:
    from groupstream.broker.node import Broker


@handles("Metadata")
def handle_metadata(broker: Broker, request: Request) -> Any:
    api = request.api
    R = api.Response
    req = request.body
    node = broker.config.node_id
    host, port = broker.config.advertised
    catalog = broker.catalog

    topics_out = []
    if req.topics is None or (request.version == 0 and not req.topics):
        wanted: list[str] = [t.name for t in catalog.topics()]
    else:
        wanted = []
        for t in req.topics:
            name = t.name
            # By id when one is given, as Kafka does: Java's consumer asks for the topics a KIP-848 assignment
            # names by id with the name left empty (""), not null.
            if not name and getattr(t, "topic_id", ZERO_UUID) != ZERO_UUID:
                found = catalog.topic_by_id(t.topic_id)
                if found is None:
                    topics_out.append(
                        R.MetadataResponseTopic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=t.topic_id)
                    )
                    continue
                name = found.name
            wanted.append(name)

    for name in wanted:
        topic = catalog.get_topic(name)
        if topic is None:
            allow = req.allow_auto_topic_creation if request.version >= 4 else True
            code = describe_topic_error(name)
            if code == ErrorCode.NONE and allow and broker.config.auto_create_topics:
                topic, code = auto_create_topic(broker, name)
            elif code == ErrorCode.NONE:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if topic is None:
                topics_out.append(R.MetadataResponseTopic(error_code=code, name=name))
                continue
        partitions = [
            R.MetadataResponseTopic.MetadataResponsePartition(
                error_code=0,
                partition_index=p,
                leader_id=node,
                leader_epoch=0,
                replica_nodes=[node],
                isr_nodes=[node],
                offline_replicas=[],
            )
            for p in range(topic.partitions)
        ]
        topics_out.append(
            R.MetadataResponseTopic(
                error_code=0,
                name=topic.name,
                topic_id=topic.topic_id,
                is_internal=is_internal(topic.name),
                partitions=partitions,
            )
        )
    return R(
        throttle_time_ms=0,
        brokers=[R.MetadataResponseBroker(node_id=node, host=host, port=port, rack=None)],
        cluster_id=broker.cluster_id,
        controller_id=node,
        topics=topics_out,
    )
