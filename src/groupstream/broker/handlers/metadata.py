"""Metadata and DescribeTopicPartitions: one broker that leads every partition (its only replica, always in sync,
so no eligible leader replicas); topics auto-created on request (Metadata) when allowed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from groupstream.broker.handlers import handles
from groupstream.broker.offsets_topic import is_internal
from groupstream.broker.topics import auto_create_topic, describe_topic_error
from groupstream.protocol.bodies import (
    DESCRIBE_TOPIC_PARTITIONS,
    METADATA,
    DescribeTopicPartitionsResponse,
    MetadataResponse,
)
from groupstream.protocol.connection import Request
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.primitives import ZERO_UUID
from groupstream.security.acl import Operation, ResourceType

if TYPE_CHECKING:
    from groupstream.broker.node import Broker


@handles("Metadata")
def handle_metadata(broker: Broker, request: Request) -> MetadataResponse:
    api = METADATA
    R = api.Response
    req = METADATA.body_of(request)
    node = broker.config.node_id
    host, port = broker.config.advertised
    catalog = broker.catalog

    auth = broker.authorizer
    topics_out = []
    if req.topics is None or (request.version == 0 and not req.topics):
        # every topic: those the principal may not describe are left out, as Kafka does
        wanted: list[str] = auth.visible(Operation.DESCRIBE, ResourceType.TOPIC, (t.name for t in catalog.topics()))
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
            if name is None:
                # neither a name nor an id. Before v12 Kafka refuses the request ("Topic name can not be null for
                # version"): this topic is answered INVALID_REQUEST; from v12 (where the answer's name may be
                # null) it stays the invalid topic it was when it reached the name checks as None.
                if request.version < 12:
                    topics_out.append(R.MetadataResponseTopic(error_code=ErrorCode.INVALID_REQUEST, name=""))
                else:
                    topics_out.append(R.MetadataResponseTopic(error_code=ErrorCode.INVALID_TOPIC_EXCEPTION, name=None))
                continue
            if not auth.allowed(Operation.DESCRIBE, ResourceType.TOPIC, name):
                topics_out.append(R.MetadataResponseTopic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=t.name,
                                                          topic_id=getattr(t, "topic_id", ZERO_UUID)))  # fmt: skip
                continue
            wanted.append(name)

    may_create_any = auth.allowed_on_cluster(Operation.CREATE)
    for name in wanted:
        topic = catalog.get_topic(name)
        if topic is None:
            allow = req.allow_auto_topic_creation if request.version >= 4 else True
            code = describe_topic_error(name)
            may_create = may_create_any or auth.allowed(Operation.CREATE, ResourceType.TOPIC, name)
            if code == ErrorCode.NONE and allow and broker.config.auto_create_topics and not may_create:
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif code == ErrorCode.NONE and allow and broker.config.auto_create_topics:
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


# Kafka's max.request.partition.size.limit: the most partitions one DescribeTopicPartitions answer holds.
MAX_PARTITIONS_PER_ANSWER = 2000


@handles("DescribeTopicPartitions")
def handle_describe_topic_partitions(broker: Broker, request: Request) -> DescribeTopicPartitionsResponse:
    """The topics asked for (every topic when none is named), sorted by name, from the cursor's topic and
    partition on, at most ``response_partition_limit`` partitions; ``next_cursor`` names the first partition
    left out. A named topic that does not exist is answered with an error, as Kafka does; with every topic
    asked for there is none."""
    R = DESCRIBE_TOPIC_PARTITIONS.Response
    T = R.DescribeTopicPartitionsResponseTopic
    P = T.DescribeTopicPartitionsResponsePartition
    req = DESCRIBE_TOPIC_PARTITIONS.body_of(request)
    node = broker.config.node_id
    catalog = broker.catalog
    cursor = req.cursor
    first_name = cursor.topic_name if cursor is not None else ""
    every_topic = not req.topics
    auth = broker.authorizer
    if every_topic:
        names = sorted(auth.visible(Operation.DESCRIBE, ResourceType.TOPIC,
                                    (t.name for t in catalog.topics() if t.name >= first_name)))  # fmt: skip
    else:
        names = sorted({t.name for t in req.topics if t.name >= first_name})
    if (cursor is not None and not every_topic and cursor.topic_name not in names) or (
        cursor is not None and cursor.partition_index < 0
    ):
        # Kafka refuses the whole request: each topic asked for carries the error.
        return R(throttle_time_ms=0, next_cursor=None, topics=[
            T(error_code=ErrorCode.INVALID_REQUEST, name=t.name, topic_id=ZERO_UUID, is_internal=False, partitions=[])
            for t in req.topics])  # fmt: skip
    remaining = max(min(MAX_PARTITIONS_PER_ANSWER, req.response_partition_limit), 1)
    topics_out = []
    next_cursor = None
    for name in names:
        if remaining == 0:  # the previous topic filled the answer: the next one starts the next answer
            next_cursor = R.Cursor(topic_name=name, partition_index=0)
            break
        if not auth.allowed(Operation.DESCRIBE, ResourceType.TOPIC, name):
            topics_out.append(T(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name, topic_id=ZERO_UUID,
                                is_internal=False, partitions=[]))  # fmt: skip
            continue
        topic = catalog.get_topic(name)
        if topic is None:
            if not every_topic:
                code = describe_topic_error(name)
                topics_out.append(T(error_code=code if code != ErrorCode.NONE else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                    name=name, topic_id=ZERO_UUID, is_internal=is_internal(name), partitions=[]))  # fmt: skip
            continue
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        end = min(topic.partitions, first + remaining)
        partitions = [
            P(error_code=0, partition_index=p, leader_id=node, leader_epoch=0, replica_nodes=[node],
              isr_nodes=[node], eligible_leader_replicas=[], last_known_elr=[], offline_replicas=[])
            for p in range(first, end)
        ]  # fmt: skip
        topics_out.append(T(error_code=0, name=topic.name, topic_id=topic.topic_id, is_internal=is_internal(topic.name),
                            partitions=partitions))  # fmt: skip
        if end < topic.partitions:
            next_cursor = R.Cursor(topic_name=topic.name, partition_index=end)
            break
        remaining -= len(partitions)
    return R(throttle_time_ms=0, topics=topics_out, next_cursor=next_cursor)
