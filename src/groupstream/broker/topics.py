"""Topic operations shared by the Metadata, Produce and CreateTopics handlers."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from groupstream.protocol.error_codes import ErrorCode
from groupstream.storage.catalog import validate_topic_name
from groupstream.storage.errors import InvalidTopicError, LogWriteError, TopicExistsError

if TYPE_CHECKING:
    from groupstream.broker.node import Broker

log = logging.getLogger("groupstream.broker.topics")


def describe_topic_error(name: str | None) -> ErrorCode:
    """INVALID_TOPIC_EXCEPTION for a name Kafka would reject, else NONE."""
    if name is None:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    try:
        validate_topic_name(name)
    except InvalidTopicError:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    return ErrorCode.NONE


def auto_create_topic(broker: Broker, name: str) -> tuple[Any, ErrorCode]:
    topic: Any
    try:
        topic = broker.catalog.create_topic(name, broker.config.num_partitions, {})
    except TopicExistsError:
        topic = broker.catalog.get_topic(name)
    except InvalidTopicError:
        return None, ErrorCode.INVALID_TOPIC_EXCEPTION
    except LogWriteError as e:
        log.warning("cannot auto-create topic %r: %s", name, e)
        return None, ErrorCode.KAFKA_STORAGE_ERROR
    return topic, ErrorCode.NONE
