"""DescribeConfigs for topics (their effective log configs) and the broker; IncrementalAlterConfigs for topics.

A topic's overrides change as Kafka's controller changes them: the operations of one resource apply in order
to its current overrides, the result is validated whole as CreateTopics configs are, and it is kept (in the
catalog, and by the open partition logs) or refused whole. The broker's own configuration is static (read at
start), so altering a broker resource is refused as Kafka refuses a config it cannot update dynamically.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from groupstream.broker.handlers import handles
from groupstream.broker.topics import describe_topic_error
from groupstream.protocol.bodies import (
    DESCRIBE_CONFIGS,
    INCREMENTAL_ALTER_CONFIGS,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from groupstream.protocol.connection import Request
from groupstream.protocol.error_codes import ErrorCode
from groupstream.security.acl import CLUSTER_NAME, Operation, ResourceType
from groupstream.storage.config import LIST_PROPERTIES
from groupstream.storage.errors import InvalidConfigError, LogWriteError, UnknownTopicError

if TYPE_CHECKING:
    from groupstream.broker.node import Broker

# Kafka's ConfigResource.Type ids
TOPIC = 2
BROKER = 4
_OTHER_RESOURCES = {8: "BROKER_LOGGER", 16: "CLIENT_METRICS", 32: "GROUP"}
# Kafka's ConfigSource values
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
# Kafka's AlterConfigOp.OpType ids
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OPS = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}
_NODE_ID = re.compile(r"[+-]?[0-9]+")  # what Java's Integer.parseInt takes


_Alterable = IncrementalAlterConfigsRequest.AlterConfigsResource.AlterableConfig

@handles("DescribeConfigs")
def handle_describe_configs(broker: Broker, request: Request) -> DescribeConfigsResponse:
    req = DESCRIBE_CONFIGS.body_of(request)
    R = DESCRIBE_CONFIGS.Response
    Res = R.DescribeConfigsResult
    C = Res.DescribeConfigsResourceResult
    results = []
    for res in req.resources:
        refusal = _refusal(broker, Operation.DESCRIBE_CONFIGS, res.resource_type, res.resource_name)
        if refusal is not None:
            results.append(Res(error_code=refusal.code, error_message=refusal.message, resource_type=res.resource_type,
                               resource_name=res.resource_name, configs=[]))  # fmt: skip
            continue
        if res.resource_type == TOPIC:
            topic = broker.catalog.get_topic(res.resource_name)
            if topic is None:
                results.append(Res(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                   error_message=f"topic {res.resource_name!r} does not exist",
                                   resource_type=TOPIC, resource_name=res.resource_name, configs=[]))
                continue
            effective = broker.catalog.topic_config(topic.name).to_properties()
            overrides = topic.configs
            entries = [
                (k, _shown(k, overrides[k], v), DYNAMIC_TOPIC_CONFIG) if k in overrides else (k, v, DEFAULT_CONFIG)
                for k, v in effective.items()
            ]
        elif res.resource_type == BROKER:
            if res.resource_name not in ("", str(broker.config.node_id)):
                results.append(Res(error_code=ErrorCode.INVALID_REQUEST,
                                   error_message=f"no broker {res.resource_name!r} in this cluster",
                                   resource_type=BROKER, resource_name=res.resource_name, configs=[]))
                continue
            entries = [(k, v, STATIC_BROKER_CONFIG) for k, v in broker_properties(broker).items()]
        else:
            results.append(Res(error_code=ErrorCode.INVALID_REQUEST,
                               error_message=f"resource type {res.resource_type} is not supported",
                               resource_type=res.resource_type, resource_name=res.resource_name, configs=[]))
            continue
        if res.configuration_keys is not None:
            keys = set(res.configuration_keys)
            entries = [e for e in entries if e[0] in keys]
        configs = [
            C(name=k, value=v, read_only=res.resource_type == BROKER, is_default=request.version == 0 and src == DEFAULT_CONFIG,
              config_source=src, is_sensitive=False, synonyms=[], config_type=0, documentation=None)
            for k, v, src in sorted(entries)
        ]
        results.append(Res(error_code=ErrorCode.NONE, error_message=None, resource_type=res.resource_type,
                           resource_name=res.resource_name, configs=configs))
    return R(throttle_time_ms=0, results=results)


def broker_properties(broker: Broker) -> dict[str, str]:
    c = broker.config
    host, port = c.advertised
    props = {
        "node.id": str(c.node_id),
        "listeners": f"PLAINTEXT://{c.host}:{c.port}",
        "advertised.listeners": f"PLAINTEXT://{host}:{port}",
        "auto.create.topics.enable": str(c.auto_create_topics).lower(),
        "num.partitions": str(c.num_partitions),
        "socket.request.max.bytes": str(c.max_frame),
        "log.dirs": str(c.data_dir),
    }
    for k, v in broker.default_log_config.to_properties().items():
        props[f"log.{k}" if not k.startswith("max.message") else "message.max.bytes"] = v
    return props


def _shown(name: str, override: str, effective: str) -> str:
    """An overridden value as Kafka describes it: parsed and written out again, which keeps a list in the
    order given (``delete,compact`` after an APPEND of compact), where our parsed config sorts it."""
    if name in LIST_PROPERTIES:
        return ",".join(p.strip() for p in override.split(",") if p.strip())
    return effective


class _Refused(Exception):
    """One resource's alteration refused: the error code and message of its result."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@handles("IncrementalAlterConfigs")
def handle_incremental_alter_configs(broker: Broker, request: Request) -> IncrementalAlterConfigsResponse:
    req = INCREMENTAL_ALTER_CONFIGS.body_of(request)
    R = INCREMENTAL_ALTER_CONFIGS.Response
    counts = Counter((res.resource_type, res.resource_name) for res in req.resources)
    out = []
    for res in req.resources:
        code, message = ErrorCode.NONE, None
        try:
            if counts[(res.resource_type, res.resource_name)] > 1:
                raise _Refused(ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")
            refusal = _refusal(broker, Operation.ALTER_CONFIGS, res.resource_type, res.resource_name)
            if refusal is not None:
                raise refusal
            _check_operations(res.configs)
            if res.resource_type == TOPIC:
                _alter_topic(broker, res.resource_name, res.configs, req.validate_only)
            elif res.resource_type == BROKER:
                _alter_broker(broker, res.resource_name, res.configs)
            elif res.resource_type in _OTHER_RESOURCES:
                raise _Refused(ErrorCode.INVALID_REQUEST, f"{_OTHER_RESOURCES[res.resource_type]} configs cannot be "
                               "altered on this broker: it alters topic configs only")  # fmt: skip
            else:
                raise _Refused(ErrorCode.INVALID_REQUEST, f"Unknown resource type {res.resource_type}")
        except _Refused as e:
            code, message = e.code, e.message
        out.append(R.AlterConfigsResourceResponse(error_code=code, error_message=message,
                                                  resource_type=res.resource_type, resource_name=res.resource_name))  # fmt: skip
    return R(throttle_time_ms=0, responses=out)


def _refusal(broker: Broker, operation: Operation, resource_type: int, name: str) -> _Refused | None:
    """What Kafka's authorization table asks of a topic's configs (the topic) or the broker's (the cluster)."""
    auth = broker.authorizer
    if resource_type == TOPIC and not auth.allowed(operation, ResourceType.TOPIC, name):
        return _Refused(ErrorCode.TOPIC_AUTHORIZATION_FAILED, auth.denial(operation, ResourceType.TOPIC, name))
    if resource_type == BROKER and not auth.allowed_on_cluster(operation):
        return _Refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, auth.denial(operation, ResourceType.CLUSTER, CLUSTER_NAME))
    return None


def _check_operations(configs: Sequence[_Alterable]) -> None:
    """What Kafka's broker checks before any resource-specific step."""
    names = Counter(c.name for c in configs)
    if any(n > 1 for n in names.values()):
        raise _Refused(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    unknown = [c.config_operation for c in configs if c.config_operation not in _OPS]
    if unknown:
        raise _Refused(ErrorCode.INVALID_REQUEST, f"Unknown operations type {unknown[0]}")
    null = [c.name for c in configs if c.config_operation != DELETE and c.value is None]
    if null:
        raise _Refused(ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(null))


def _alter_topic(broker: Broker, name: str, configs: Sequence[_Alterable], validate_only: bool) -> None:
    if not name:
        raise _Refused(ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.")
    if describe_topic_error(name) != ErrorCode.NONE:
        raise _Refused(ErrorCode.INVALID_TOPIC_EXCEPTION, f"{name!r} is not a legal topic name")
    topic = broker.catalog.get_topic(name)
    if topic is None:
        raise _Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
    overrides = dict(topic.configs)
    for c in configs:
        if c.config_operation == SET:
            assert c.value is not None, "_check_operations refuses null values to set"
            overrides[c.name] = c.value
        elif c.config_operation == DELETE:
            overrides.pop(c.name, None)
        else:
            overrides[c.name] = _list_operation(broker, overrides, c)
    try:
        broker.catalog.replace_topic_configs(name, overrides, validate_only=validate_only)
    except InvalidConfigError as e:
        raise _Refused(ErrorCode.INVALID_CONFIG, str(e)) from None
    except UnknownTopicError as e:
        raise _Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, str(e)) from None
    except LogWriteError as e:  # the disk refused the catalog: nothing changed
        raise _Refused(ErrorCode.KAFKA_STORAGE_ERROR, str(e)) from None


def _list_operation(broker: Broker, overrides: dict[str, str], c: _Alterable) -> str:
    """APPEND or SUBTRACT on a list config, from its override or else its current (broker default) value:
    APPEND adds each given item not yet listed, at the end; SUBTRACT removes each given item."""
    op = _OPS[c.config_operation]
    if c.name not in LIST_PROPERTIES:
        raise _Refused(ErrorCode.INVALID_CONFIG, f"Can't {op} to key {c.name} because its type is not LIST.")
    current = overrides.get(c.name)
    if current is None:
        current = broker.catalog.defaults.to_properties().get(c.name, "")
    items = [item for item in current.split(",") if item]
    assert c.value is not None, "_check_operations refuses null values to append or subtract"
    for item in c.value.split(","):
        if op == "APPEND" and item not in items:
            items.append(item)
        elif op == "SUBTRACT" and item in items:
            items.remove(item)
    return ",".join(items)


def _alter_broker(broker: Broker, name: str, configs: Sequence[_Alterable]) -> None:
    """Every broker config is static here (Kafka's ``Cannot update these configs dynamically``); deleting a
    dynamic value that was never set changes nothing, as in Kafka."""
    if name:
        if not _NODE_ID.fullmatch(name):
            raise _Refused(ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}")
        if int(name) != broker.config.node_id:
            raise _Refused(ErrorCode.INVALID_REQUEST,
                           f"Unexpected broker id, expected {broker.config.node_id}, but received {name}")  # fmt: skip
    changed = [c.name for c in configs if c.config_operation != DELETE]
    if changed:
        raise _Refused(ErrorCode.INVALID_REQUEST, f"Cannot update these configs dynamically: {', '.join(changed)} "
                       "(this broker reads its configuration at start: set them in its properties and restart it)")  # fmt: skip
