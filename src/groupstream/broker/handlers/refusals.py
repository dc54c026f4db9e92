"""What refuses a requested partition before its log is read, said once for the handlers that serve
partitions of topics by name (DeleteRecords, DescribeProducers, ListOffsets): the principal may not perform
the operation on the topic, or the partition does not exist, in that order, as Kafka answers them."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from groupstream.protocol.error_codes import ErrorCode
from groupstream.security.acl import Operation, ResourceType

if TYPE_CHECKING:
    from groupstream.broker.node import Broker


def partition_refusal(broker: Broker, topic: str, operation: Operation) -> Callable[[int], int]:
    """For topic ``topic`` (looked up and authorized once): the error that answers partition ``index``
    (TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION), or NONE when its log may be read."""
    info = broker.catalog.get_topic(topic)
    if not broker.authorizer.allowed(operation, ResourceType.TOPIC, topic):
        return lambda index: ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if info is None:
        return lambda index: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    count = info.partitions
    return lambda index: ErrorCode.NONE if 0 <= index < count else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
