"""A synchronous Admin: topics, partitions, configs and offsets, over one blocking connection.

Each call is one request to the bootstrap broker it connected to; a one-node cluster (our broker) answers
everything, and a Kafka cluster forwards admin requests to its controller. Per-topic errors from the broker
raise `KafkaError` naming the topic; calls over several topics finish the request first and then raise for
the first topic that failed (the others took effect).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from groupstream.client.config import AdminConfig
from groupstream.client.errors import KafkaConnectionError, KafkaError, UnsupportedVersionError
from groupstream.client.metadata import ClusterMetadata, TopicDescription, request_metadata, topic_error
from groupstream.client.net.blocking import BlockingConnection
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name
from groupstream.protocol.primitives import ZERO_UUID

__all__ = ["Admin", "ConfigEntry", "CreatedTopic", "ListedOffset", "NewTopic", "TopicDescription"]

# ListOffsets' special timestamps
LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
_OFFSET_SPECS = {"latest": LATEST, "earliest": EARLIEST, "max-timestamp": MAX_TIMESTAMP}

_TOPIC_RESOURCE = 2
# Kafka's DescribeConfigsResponse.ConfigSource, by id
CONFIG_SOURCES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG",
    8: "GROUP_CONFIG",
}
_DEFAULT_CONFIG = 5


@dataclass(frozen=True)
class NewTopic:
    """What to create; -1 means the broker's default (``num.partitions``, ``default.replication.factor``)."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    config: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CreatedTopic:
    name: str
    topic_id: uuid.UUID | None
    num_partitions: int
    replication_factor: int


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: str
    is_default: bool
    read_only: bool
    is_sensitive: bool


@dataclass(frozen=True)
class ListedOffset:
    """``offset`` is -1 when no record matches (a timestamp after the last record)."""

    offset: int
    timestamp: int
    leader_epoch: int = -1


def parse_offset_spec(spec: str | int) -> int:
    """"earliest", "latest", "max-timestamp" or a timestamp in ms (>= 0) to ListOffsets' timestamp field."""
    if isinstance(spec, bool):
        raise ValueError(f"offset spec must be earliest, latest, max-timestamp or a timestamp, got {spec!r}")
    if isinstance(spec, int):
        if spec < MAX_TIMESTAMP:
            raise ValueError(f"timestamp must be >= 0 (or -1 latest, -2 earliest, -3 max), got {spec}")
        return spec
    key = spec.strip().lower().replace("_", "-")
    if key in _OFFSET_SPECS:
        return _OFFSET_SPECS[key]
    if key.isdigit():
        return int(key)
    raise ValueError(f"offset spec must be earliest, latest, max-timestamp or a timestamp in ms, got {spec!r}")


class Admin:
    """``Admin({"bootstrap.servers": "127.0.0.1:9092"})``; also ``Admin(bootstrap_servers=...)``. Not thread-safe."""

    def __init__(self, config: Mapping[str, Any] | None = None, **aliases: Any) -> None:
        self.config = AdminConfig.from_mapping(config, aliases)
        self._conn = self._connect()

    def _connect(self) -> BlockingConnection:
        failures: list[KafkaConnectionError] = []
        for host, port in self.config.bootstrap_servers:
            try:
                return BlockingConnection(
                    host,
                    port,
                    client_id=self.config.client_id,
                    timeout_s=self.config.request_timeout_ms / 1000,
                    connect_timeout_s=self.config.connection_setup_timeout_ms / 1000,
                )
            except KafkaConnectionError as e:
                failures.append(e)
        if len(failures) == 1:
            raise failures[0]
        raise KafkaConnectionError(
            ",".join(f.address for f in failures),
            "no bootstrap server reachable (" + "; ".join(str(f) for f in failures) + ")",
        )

    @property
    def connection(self) -> BlockingConnection:
        """The broker connection, for the lite produce/fetch helpers (valid while this Admin is open)."""
        return self._conn

    def _timeout_ms(self) -> int:
        return self.config.request_timeout_ms

    # --- topics ---------------------------------------------------------------------------------------

    def create_topics(self, specs: Iterable[NewTopic | str], validate_only: bool = False) -> dict[str, CreatedTopic]:
        api = by_name("CreateTopics")
        version = self._conn.version_for("CreateTopics")
        wanted = [NewTopic(s) if isinstance(s, str) else s for s in specs]
        if validate_only and version < 1:
            raise UnsupportedVersionError(f"broker {self._conn.address} cannot validate without creating (CreateTopics v0)")
        R: Any = api.Request
        C = R.CreatableTopic
        topics = [
            C(
                name=t.name,
                num_partitions=t.num_partitions,
                replication_factor=t.replication_factor,
                assignments=[],
                configs=[C.CreatableTopicConfig(name=k, value=str(v)) for k, v in sorted(t.config.items())],
            )
            for t in wanted
        ]
        resp = self._conn.request(
            "CreateTopics", R(topics=topics, timeout_ms=self._timeout_ms(), validate_only=validate_only), version
        )
        asked = {t.name: t for t in wanted}
        out: dict[str, CreatedTopic] = {}
        errors: list[KafkaError] = []
        for r in resp.topics:
            if r.error_code != ErrorCode.NONE:
                errors.append(KafkaError(r.error_code, r.error_message, resource=r.name))
                continue
            spec = asked.get(r.name, NewTopic(r.name))
            out[r.name] = CreatedTopic(
                name=r.name,
                topic_id=r.topic_id if version >= 7 and r.topic_id != ZERO_UUID else None,
                num_partitions=r.num_partitions if version >= 5 else spec.num_partitions,
                replication_factor=r.replication_factor if version >= 5 else spec.replication_factor,
            )
        if errors:
            raise errors[0]
        return out

    def delete_topics(self, names: Iterable[str]) -> None:
        api = by_name("DeleteTopics")
        version = self._conn.version_for("DeleteTopics")
        names = list(names)
        R: Any = api.Request
        if version >= 6:
            body = R(topics=[R.DeleteTopicState(name=n, topic_id=ZERO_UUID) for n in names], timeout_ms=self._timeout_ms())
        else:
            body = R(topic_names=names, timeout_ms=self._timeout_ms())
        resp = self._conn.request("DeleteTopics", body, version)
        for r in resp.responses:
            if r.error_code != ErrorCode.NONE:
                if r.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    raise topic_error(r.name, r.error_code)
                raise KafkaError(r.error_code, r.error_message, resource=r.name)

    def list_topics(self, include_internal: bool = False) -> dict[str, TopicDescription]:
        """Every topic (by name, sorted), with partitions and leaders."""
        md = request_metadata(self._conn, None)
        return {n: t for n, t in md.topics.items() if include_internal or not t.is_internal}

    def describe_topics(self, names: Iterable[str]) -> dict[str, TopicDescription]:
        """Partitions, leaders and topic ids; never auto-creates. Raises for the first unknown topic."""
        names = list(names)
        md = request_metadata(self._conn, names)
        out: dict[str, TopicDescription] = {}
        for n in names:
            desc = md.topics.get(n)
            if desc is None:
                raise topic_error(n, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            if desc.error_code != ErrorCode.NONE:
                raise topic_error(n, desc.error_code)
            out[n] = desc
        return out

    def describe_cluster(self) -> ClusterMetadata:
        return request_metadata(self._conn, [])

    def create_partitions(self, name: str, total: int, validate_only: bool = False) -> None:
        """Grow ``name`` to ``total`` partitions (Kafka never shrinks a topic)."""
        api = by_name("CreatePartitions")
        R: Any = api.Request
        body = R(
            topics=[R.CreatePartitionsTopic(name=name, count=total, assignments=None)],
            timeout_ms=self._timeout_ms(),
            validate_only=validate_only,
        )
        resp = self._conn.request("CreatePartitions", body)
        for r in resp.results:
            if r.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise topic_error(r.name, r.error_code)
            if r.error_code != ErrorCode.NONE:
                raise KafkaError(r.error_code, r.error_message, resource=r.name)

    # --- configs --------------------------------------------------------------------------------------

    def describe_configs(self, topic: str) -> dict[str, ConfigEntry]:
        """The topic's effective configuration, by name, with where each value comes from."""
        api = by_name("DescribeConfigs")
        version = self._conn.version_for("DescribeConfigs")
        R: Any = api.Request
        body = R(resources=[R.DescribeConfigsResource(resource_type=_TOPIC_RESOURCE, resource_name=topic,
                                                      configuration_keys=None)])
        resp = self._conn.request("DescribeConfigs", body, version)
        out: dict[str, ConfigEntry] = {}
        for res in resp.results:
            if res.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise topic_error(res.resource_name, res.error_code)
            if res.error_code != ErrorCode.NONE:
                raise KafkaError(res.error_code, res.error_message, resource=res.resource_name)
            for c in res.configs:
                source = c.config_source if version >= 1 else (_DEFAULT_CONFIG if c.is_default else 0)
                out[c.name] = ConfigEntry(
                    name=c.name,
                    value=c.value,
                    source=CONFIG_SOURCES.get(source, f"SOURCE_{source}"),
                    is_default=c.is_default if version == 0 else source == _DEFAULT_CONFIG,
                    read_only=c.read_only,
                    is_sensitive=c.is_sensitive,
                )
        return dict(sorted(out.items()))

    # --- offsets --------------------------------------------------------------------------------------

    def list_offsets(self, specs: Mapping[tuple[str, int], str | int]) -> dict[tuple[str, int], ListedOffset]:
        """Offsets by ``(topic, partition)`` for "earliest", "latest", "max-timestamp" or a timestamp in ms."""
        api = by_name("ListOffsets")
        timestamps = {tp: parse_offset_spec(s) for tp, s in specs.items()}
        needs = 7 if MAX_TIMESTAMP in timestamps.values() else 0
        version = self._conn.version_for("ListOffsets")
        if version < needs:
            raise UnsupportedVersionError(f"broker {self._conn.address} cannot list the max-timestamp offset")
        R: Any = api.Request
        T = R.ListOffsetsTopic
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), ts in timestamps.items():
            by_topic.setdefault(topic, []).append(
                T.ListOffsetsPartition(partition_index=partition, timestamp=ts, max_num_offsets=1)
            )
        body = R(replica_id=-1, isolation_level=0, topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()])
        resp = self._conn.request("ListOffsets", body, version)
        out: dict[tuple[str, int], ListedOffset] = {}
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code != ErrorCode.NONE:
                    if p.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                        raise KafkaError(p.error_code, f"topic {t.name!r} has no partition {p.partition_index}"
                                         " (or does not exist)", resource=f"{t.name}[{p.partition_index}]")
                    raise KafkaError(p.error_code, resource=f"{t.name}[{p.partition_index}]")
                if version == 0:
                    offset = p.old_style_offsets[0] if p.old_style_offsets else -1
                    out[(t.name, p.partition_index)] = ListedOffset(offset, -1)
                else:
                    out[(t.name, p.partition_index)] = ListedOffset(p.offset, p.timestamp, p.leader_epoch)
        missing = set(timestamps) - set(out)
        if missing:
            topic, partition = sorted(missing)[0]
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "the broker did not answer for it",
                             resource=f"{topic}[{partition}]")
        return out

    # --- lifecycle ------------------------------------------------------------------------------------

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Admin({self._conn.address})"
