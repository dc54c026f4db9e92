"""CreateTopics, DeleteTopics, CreatePartitions: one node, so the replication factor is 1 (or -1 for default)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from groupstream.broker.handlers import handles
from groupstream.broker.offsets_topic import is_internal
from groupstream.protocol.bodies import (
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_TOPICS,
    CreatePartitionsResponse,
    CreateTopicsResponse,
    DeleteTopicsResponse,
)
from groupstream.protocol.connection import Request
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.primitives import ZERO_UUID
from groupstream.security.acl import Operation, ResourceType
from groupstream.storage.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidTopicError,
    LogWriteError,
    TopicExistsError,
    UnknownTopicError,
)

if TYPE_CHECKING:
    from groupstream.broker.node import Broker

_ERRORS = (
    (TopicExistsError, ErrorCode.TOPIC_ALREADY_EXISTS),
    (InvalidTopicError, ErrorCode.INVALID_TOPIC_EXCEPTION),
    (InvalidPartitionsError, ErrorCode.INVALID_PARTITIONS),
    (InvalidConfigError, ErrorCode.INVALID_CONFIG),
    (UnknownTopicError, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (LogWriteError, ErrorCode.KAFKA_STORAGE_ERROR),  # the disk refused; nothing of the change was kept
)


def _code_for(exc: Exception) -> ErrorCode:
    for cls, code in _ERRORS:
        if isinstance(exc, cls):
            return code
    raise exc


@handles("CreateTopics")
def handle_create_topics(broker: Broker, request: Request) -> CreateTopicsResponse:
    req = CREATE_TOPICS.body_of(request)
    R = CREATE_TOPICS.Response
    T = R.CreatableTopicResult
    out = []
    auth = broker.authorizer
    may_create_any = auth.allowed_on_cluster(Operation.CREATE)
    for t in req.topics:
        if not (may_create_any or auth.allowed(Operation.CREATE, ResourceType.TOPIC, t.name)):
            out.append(T(name=t.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                         error_message=auth.denial(Operation.CREATE, ResourceType.TOPIC, t.name)))  # fmt: skip
            continue
        partitions = broker.config.num_partitions if t.num_partitions == -1 else t.num_partitions
        if t.assignments:
            partitions = len(t.assignments)
        if t.replication_factor not in (-1, 1) or any(a.broker_ids != [broker.config.node_id] for a in t.assignments):
            out.append(T(name=t.name, error_code=ErrorCode.INVALID_REPLICATION_FACTOR,
                         error_message=f"this cluster has one broker (id {broker.config.node_id}); "
                         f"replication factor {t.replication_factor} is not possible"))
            continue
        nulls = [c.name for c in t.configs if c.value is None]
        if nulls:  # as Kafka's controller answers, rather than a parse error from the config layer
            out.append(T(name=t.name, error_code=ErrorCode.INVALID_CONFIG,
                         error_message=f"Null value not supported for topic configs: {','.join(nulls)}"))
            continue
        configs = {c.name: c.value for c in t.configs if c.value is not None}
        try:
            if req.validate_only:
                broker.catalog.validate_new_topic(t.name, partitions, configs)
                topic = None
            else:
                topic = broker.catalog.create_topic(t.name, partitions, configs)
        except (TopicExistsError, InvalidTopicError, InvalidPartitionsError, InvalidConfigError,
                LogWriteError) as e:
            out.append(T(name=t.name, error_code=_code_for(e), error_message=str(e)))
            continue
        out.append(
            T(
                name=t.name,
                topic_id=topic.topic_id if topic is not None else ZERO_UUID,
                error_code=ErrorCode.NONE,
                num_partitions=partitions,
                replication_factor=1,
            )
        )
    return R(throttle_time_ms=0, topics=out)


@handles("DeleteTopics")
def handle_delete_topics(broker: Broker, request: Request) -> DeleteTopicsResponse:
    req = DELETE_TOPICS.body_of(request)
    R = DELETE_TOPICS.Response
    D = R.DeletableTopicResult
    if request.version >= 6:
        wanted = [(t.name, t.topic_id) for t in req.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in req.topic_names]
    out = []
    deleted: list[str] = []
    auth = broker.authorizer
    for name, topic_id in wanted:
        topic = broker.catalog.get_topic(name) if name is not None else broker.catalog.topic_by_id(topic_id)
        named = topic.name if topic is not None else name
        if named is not None and not auth.allowed(Operation.DELETE, ResourceType.TOPIC, named):
            out.append(D(name=name, topic_id=topic_id, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                         error_message=auth.denial(Operation.DELETE, ResourceType.TOPIC, named)))  # fmt: skip
            continue
        if topic is None:
            code = ErrorCode.UNKNOWN_TOPIC_ID if name is None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            out.append(D(name=name, topic_id=topic_id, error_code=code))
            continue
        if is_internal(topic.name):  # the group coordinator lives in it
            out.append(D(name=topic.name, topic_id=topic.topic_id, error_code=ErrorCode.INVALID_TOPIC_EXCEPTION,
                         error_message=f"{topic.name} is an internal topic and cannot be deleted"))
            continue
        for p in range(topic.partitions):
            broker.flusher.forget(broker.catalog.log(topic.name, p))
        try:
            broker.catalog.delete_topic(topic.name)
        except LogWriteError as e:
            out.append(D(name=topic.name, topic_id=topic.topic_id, error_code=_code_for(e), error_message=str(e)))
            continue
        broker.purgatory.wake_all()
        deleted.append(topic.name)
        out.append(D(name=topic.name, topic_id=topic.topic_id, error_code=ErrorCode.NONE))
    if deleted:
        broker.coordinator.topics_deleted(deleted)
    return R(throttle_time_ms=0, responses=out)


@handles("CreatePartitions")
def handle_create_partitions(broker: Broker, request: Request) -> CreatePartitionsResponse:
    req = CREATE_PARTITIONS.body_of(request)
    R = CREATE_PARTITIONS.Response
    out = []
    for t in req.topics:
        if not broker.authorizer.allowed(Operation.ALTER, ResourceType.TOPIC, t.name):
            out.append(R.CreatePartitionsTopicResult(name=t.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                       error_message=broker.authorizer.denial(Operation.ALTER, ResourceType.TOPIC, t.name)))  # fmt: skip
            continue
        try:
            topic = broker.catalog.get_topic(t.name)
            if topic is None:
                raise UnknownTopicError(f"topic {t.name!r} does not exist")
            if is_internal(t.name):  # its partition count decides where every group lives
                raise InvalidTopicError(f"{t.name} is an internal topic; its partition count cannot change")
            if t.count <= topic.partitions:
                raise InvalidPartitionsError(
                    f"topic {t.name!r} has {topic.partitions} partitions; the new count must be larger, got {t.count}"
                )
            if not req.validate_only:
                broker.catalog.add_partitions(t.name, t.count)
        except (UnknownTopicError, InvalidPartitionsError, InvalidTopicError, LogWriteError) as e:
            out.append(R.CreatePartitionsTopicResult(name=t.name, error_code=_code_for(e), error_message=str(e)))
            continue
        out.append(R.CreatePartitionsTopicResult(name=t.name, error_code=ErrorCode.NONE, error_message=None))
    return R(throttle_time_ms=0, results=out)
