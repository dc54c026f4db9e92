"""Cluster metadata as plain values, how a Metadata response becomes them, and the one-off Metadata request of
the Admin (the network core's `MetadataCache` reads its responses with the same `parse_metadata`)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from groupstream.client.errors import KafkaError
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name

_METADATA = by_name("Metadata")


@dataclass(frozen=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader_epoch: int = -1
    error_code: int = 0


@dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: uuid.UUID | None
    is_internal: bool
    partitions: tuple[PartitionInfo, ...]
    error_code: int = 0

    @property
    def partition_count(self) -> int:
        return len(self.partitions)


@dataclass(frozen=True)
class ClusterMetadata:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerInfo, ...]
    topics: dict[str, TopicDescription] = field(default_factory=dict)


class Channel(Protocol):
    """What the one-request-at-a-time helpers need of a connection (`NodeChannel` of the network core)."""

    def version_for(self, api_name: str, max_version: int | None = None) -> int: ...

    def request(self, api_name: str, body: Any = None, version: int | None = None) -> Any: ...


def request_metadata(channel: Channel, topics: Sequence[str] | None, allow_auto_create: bool = False) -> ClusterMetadata:
    """Metadata for ``topics`` (None: every topic). Per-topic errors stay in ``error_code``; the caller decides.

    Below v4 a broker may auto-create the named topics whatever we ask; every broker of the last five years
    serves v4+.
    """
    version = channel.version_for("Metadata")
    resp = channel.request("Metadata", metadata_request(version, topics, allow_auto_create), version)
    if version >= 13 and resp.error_code != ErrorCode.NONE:
        raise KafkaError(resp.error_code, resource="metadata")
    return parse_metadata(resp, version)


def metadata_request(version: int, topics: Sequence[str] | None, allow_auto_create: bool) -> Any:
    """The Metadata request body at ``version`` for ``topics`` (None: every topic)."""
    R: Any = _METADATA.Request
    wanted: Any
    if topics is None:
        wanted = [] if version == 0 else None
    else:
        wanted = [R.MetadataRequestTopic(name=t) for t in topics]  # topic_id stays zero: asked by name
    return R(topics=wanted, allow_auto_topic_creation=allow_auto_create if version >= 4 else True)


def parse_metadata(body: Any, version: int) -> ClusterMetadata:
    """A Metadata response body as plain values, topics sorted by name (the cache of the network core and the
    one-off requests read responses the same way)."""
    out: dict[str, TopicDescription] = {}
    for t in body.topics:
        if t.name is None:
            continue
        parts = tuple(
            sorted(
                (
                    PartitionInfo(
                        partition=p.partition_index,
                        leader=p.leader_id,
                        replicas=tuple(p.replica_nodes),
                        isr=tuple(p.isr_nodes),
                        leader_epoch=p.leader_epoch,
                        error_code=p.error_code,
                    )
                    for p in t.partitions
                ),
                key=lambda p: p.partition,
            )
        )
        topic_id = t.topic_id if version >= 10 else None
        out[t.name] = TopicDescription(t.name, topic_id, t.is_internal, parts, t.error_code)
    brokers = tuple(BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in body.brokers)
    return ClusterMetadata(body.cluster_id, body.controller_id, brokers, dict(sorted(out.items())))


def describe_one(channel: Channel, topic: str, allow_auto_create: bool = False) -> TopicDescription:
    """The topic's description, or KafkaError naming the topic (UNKNOWN_TOPIC_OR_PARTITION when it is absent)."""
    md = request_metadata(channel, [topic], allow_auto_create)
    desc = md.topics.get(topic)
    if desc is None:
        raise topic_error(topic, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if desc.error_code != ErrorCode.NONE:
        raise topic_error(topic, desc.error_code)
    return desc


def _topic_error_text(topic: str, code: int) -> str | None:
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return f"topic {topic!r} does not exist"
    if code == ErrorCode.INVALID_TOPIC_EXCEPTION:
        return f"{topic!r} is not a valid topic name"
    return None


def topic_error(topic: str, code: int) -> KafkaError:
    return KafkaError(code, _topic_error_text(topic, code), resource=topic)
