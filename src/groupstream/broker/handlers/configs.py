"""DescribeConfigs for topics (their effective log configs) and the broker."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from groupstream.broker.handlers import handles
from groupstream.protocol.connection import Request
from groupstream.protocol.error_codes import ErrorCode

if TYPE_CHECKING:
    from groupstream.broker.node import Broker

TOPIC = 2
BROKER = 4
# Kafka's ConfigSource values
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5


@handles("DescribeConfigs")
def handle_describe_configs(broker: Broker, request: Request) -> Any:
    req = request.body
    R = request.api.Response
    Res = R.DescribeConfigsResult
    C = Res.DescribeConfigsResourceResult
    results = []
    for res in req.resources:
        if res.resource_type == TOPIC:
            topic = broker.catalog.get_topic(res.resource_name)
            if topic is None:
                results.append(Res(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                   error_message=f"topic {res.resource_name!r} does not exist",
                                   resource_type=TOPIC, resource_name=res.resource_name, configs=[]))
                continue
            effective = broker.catalog.topic_config(topic.name).to_properties()
            overrides = topic.configs
            entries = [(k, v, DYNAMIC_TOPIC_CONFIG if k in overrides else DEFAULT_CONFIG) for k, v in effective.items()]
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
