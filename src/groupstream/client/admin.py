"""A synchronous Admin: topics, partitions, configs, offsets and consumer groups, over blocking connections.

Topic calls are one request to the bootstrap broker it connected to; a one-node cluster (our broker) answers
everything, and a Kafka cluster forwards admin requests to its controller. Group calls go to the group's
coordinator: FindCoordinator first, then the request, both retried while the answer is NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE or COORDINATOR_LOAD_IN_PROGRESS (a coordinator moving or loading its shard) until
``request.timeout.ms`` runs out. ListGroups asks every broker, since each lists only the groups it
coordinates. Per-topic (per-group) errors from the broker raise `KafkaError` naming the topic (group); calls
over several finish the request first and then raise for the first that failed (the others took effect).
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeVar

from groupstream.client.config import AdminConfig
from groupstream.client.errors import KafkaConnectionError, KafkaError, UnsupportedVersionError, check
from groupstream.client.metadata import ClusterMetadata, TopicDescription, request_metadata, topic_error
from groupstream.client.net.blocking import BlockingConnection
from groupstream.protocol.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    ConsumerAssignment,
    ConsumerSubscription,
    decode_assignment,
    decode_subscription,
)
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.errors import PeerProtocolError
from groupstream.protocol.messages import by_name
from groupstream.protocol.primitives import ZERO_UUID

__all__ = [
    "Admin",
    "ConfigEntry",
    "CreatedTopic",
    "GroupDescription",
    "GroupMember",
    "ListedGroup",
    "ListedOffset",
    "NewTopic",
    "OffsetAndMetadata",
    "TopicDescription",
]

_T = TypeVar("_T")

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


@dataclass(frozen=True)
class OffsetAndMetadata:
    """A committed position: the offset of the next record to consume, and the committer's metadata string."""

    offset: int
    metadata: str | None = ""
    leader_epoch: int = -1


@dataclass(frozen=True)
class PartitionLag:
    """A group's position in one partition: ``log_end`` None when the partition no longer exists."""

    committed: int
    log_end: int | None

    @property
    def lag(self) -> int | None:
        return None if self.log_end is None else max(self.log_end - self.committed, 0)


@dataclass(frozen=True)
class ListedGroup:
    """One row of ListGroups. ``state`` and ``group_type`` are None when the broker's version lacks them."""

    group_id: str
    protocol_type: str
    state: str | None = None
    group_type: str | None = None


@dataclass(frozen=True)
class GroupMember:
    """A member as DescribeGroups shows it. For protocol type ``consumer`` the raw metadata and assignment
    bytes are decoded too (None when they do not decode: another protocol mislabelled, or a member of a group
    still rebalancing)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment_bytes: bytes
    subscription: ConsumerSubscription | None = None
    assignment: ConsumerAssignment | None = None

    @property
    def assigned_partitions(self) -> tuple[tuple[str, int], ...]:
        return self.assignment.partitions if self.assignment is not None else ()


@dataclass(frozen=True)
class GroupDescription:
    """A group as its coordinator describes it. A group the coordinator does not know is state ``Dead`` with
    no members (what DescribeGroups v0-v5 answer; v6's GROUP_ID_NOT_FOUND is folded into the same form)."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[GroupMember, ...]
    coordinator_id: int = -1
    coordinator: str = ""

    @property
    def exists(self) -> bool:
        return self.state != "Dead"

    def owners(self) -> dict[tuple[str, int], GroupMember]:
        """Which member is assigned each (topic, partition)."""
        return {tp: m for m in self.members for tp in m.assigned_partitions}


# The group states Kafka names, by lower-case name, so a user's "stable" filters like "Stable".
GROUP_STATES = {
    s.lower(): s
    for s in (
        "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Assigning", "Reconciling",
        "NotReady",
    )
}  # fmt: skip
_COORDINATOR_ERRORS = frozenset(
    {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
)
_GROUP_KEY = 0  # FindCoordinator key type of a consumer group
# OffsetCommit/OffsetFetch v10 name topics by id; the admin names them, so it stops at v9.
_MAX_OFFSET_API_VERSION = 9


class _Retry(Exception):
    """The coordinator moved, is not there yet, or is still loading: find it again and retry."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def parse_group_state(text: str) -> str:
    """A user's state name (any case) as Kafka spells it; raises ValueError listing the known ones."""
    found = GROUP_STATES.get(text.strip().lower())
    if found is None:
        raise ValueError(f"unknown group state {text!r}; known: {', '.join(GROUP_STATES.values())}")
    return found


def parse_offset_spec(spec: str | int) -> int:
    """ "earliest", "latest", "max-timestamp" or a timestamp in ms (>= 0) to ListOffsets' timestamp field."""
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
    raise ValueError(
        f"offset spec must be earliest, latest, max-timestamp or a timestamp in ms, got {spec!r}"
    )


class Admin:
    """``Admin({"bootstrap.servers": "127.0.0.1:9092"})``; also ``Admin(bootstrap_servers=...)``. Not thread-safe."""

    def __init__(self, config: Mapping[str, Any] | None = None, **aliases: Any) -> None:
        self.config = AdminConfig.from_mapping(config, aliases)
        self._others: dict[str, BlockingConnection] = {}  # connections to other brokers (coordinators)
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

    def create_topics(
        self, specs: Iterable[NewTopic | str], validate_only: bool = False
    ) -> dict[str, CreatedTopic]:
        api = by_name("CreateTopics")
        version = self._conn.version_for("CreateTopics")
        wanted = [NewTopic(s) if isinstance(s, str) else s for s in specs]
        if validate_only and version < 1:
            raise UnsupportedVersionError(
                f"broker {self._conn.address} cannot validate without creating (CreateTopics v0)"
            )
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
            "CreateTopics",
            R(topics=topics, timeout_ms=self._timeout_ms(), validate_only=validate_only),
            version,
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
            body = R(
                topics=[R.DeleteTopicState(name=n, topic_id=ZERO_UUID) for n in names],
                timeout_ms=self._timeout_ms(),
            )
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

    def delete_records(self, before: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """Delete every record below ``before[(topic, partition)]`` (-1: the high watermark), as
        ``kafka-delete-records.sh`` does, asking each partition's leader; returns the new log start offsets."""
        out: dict[tuple[str, int], int] = {}
        for conn, tps in self._by_leader(before).items():
            wanted: dict[str, list[tuple[int, int]]] = {}
            for topic, partition in tps:
                wanted.setdefault(topic, []).append((partition, before[(topic, partition)]))
            R: Any = by_name("DeleteRecords").Request
            T = R.DeleteRecordsTopic
            body = R(
                topics=[T(name=t, partitions=[T.DeleteRecordsPartition(partition_index=p, offset=o) for p, o in ps])
                        for t, ps in wanted.items()],
                timeout_ms=self._timeout_ms(),
            )  # fmt: skip
            resp = conn.request("DeleteRecords", body, conn.version_for("DeleteRecords"))
            for t in resp.topics:
                for p in t.partitions:
                    check(p.error_code, resource=f"{t.name}[{p.partition_index}]")
                    out[(t.name, p.partition_index)] = p.low_watermark
        return out

    def elect_leaders(
        self, partitions: Iterable[tuple[str, int]], election_type: str = "preferred"
    ) -> dict[tuple[str, int], KafkaError | None]:
        """Elect the leaders of ``partitions`` (``preferred`` or ``unclean``), asking the controller; the error
        of each partition, None where the election took place. On our broker, electing an `__consumer_offsets`
        partition moves its group coordinator (unload and reload); data partitions need no election."""
        types = {"preferred": 0, "unclean": 1}
        if election_type not in types:
            raise ValueError(f"election type must be preferred or unclean, got {election_type!r}")
        wanted = _by_topic(partitions)
        version = self._conn.version_for("ElectLeaders")
        if version < 1 and election_type != "preferred":
            raise UnsupportedVersionError(f"broker {self._conn.address} only elects preferred leaders")
        R: Any = by_name("ElectLeaders").Request
        body = R(
            election_type=types[election_type],
            topic_partitions=[R.TopicPartitions(topic=t, partitions=ps) for t, ps in wanted.items()],
            timeout_ms=self._timeout_ms(),
        )
        md = request_metadata(self._conn, [])
        controller = next((b for b in md.brokers if b.node_id == md.controller_id), None)
        conn = self._conn if controller is None else self._conn_to(controller.host, controller.port)
        resp = conn.request("ElectLeaders", body, version)
        if version >= 1:
            check(resp.error_code)
        out: dict[tuple[str, int], KafkaError | None] = {}
        for result in resp.replica_election_results:
            for p in result.partition_result:
                out[(result.topic, p.partition_id)] = (
                    None if p.error_code == ErrorCode.NONE
                    else KafkaError(p.error_code, p.error_message, resource=f"{result.topic}-{p.partition_id}")
                )
        return out

    def describe_configs(self, topic: str) -> dict[str, ConfigEntry]:
        """The topic's effective configuration, by name, with where each value comes from."""
        api = by_name("DescribeConfigs")
        version = self._conn.version_for("DescribeConfigs")
        R: Any = api.Request
        body = R(
            resources=[
                R.DescribeConfigsResource(
                    resource_type=_TOPIC_RESOURCE, resource_name=topic, configuration_keys=None
                )
            ]
        )
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
        """Offsets by ``(topic, partition)`` for "earliest", "latest", "max-timestamp" or a timestamp in ms,
        each asked of its partition's leader."""
        timestamps = {tp: parse_offset_spec(s) for tp, s in specs.items()}
        out: dict[tuple[str, int], ListedOffset] = {}
        for conn, tps in self._by_leader(timestamps).items():
            out.update(self._list_offsets_on(conn, {tp: timestamps[tp] for tp in tps}))
        missing = set(timestamps) - set(out)
        if missing:
            topic, partition = sorted(missing)[0]
            raise KafkaError(
                ErrorCode.UNKNOWN_SERVER_ERROR,
                "the broker did not answer for it",
                resource=f"{topic}[{partition}]",
            )
        return out

    def _list_offsets_on(
        self, conn: BlockingConnection, timestamps: Mapping[tuple[str, int], int]
    ) -> dict[tuple[str, int], ListedOffset]:
        api = by_name("ListOffsets")
        needs = 7 if MAX_TIMESTAMP in timestamps.values() else 0
        version = conn.version_for("ListOffsets")
        if version < needs:
            raise UnsupportedVersionError(f"broker {conn.address} cannot list the max-timestamp offset")
        R: Any = api.Request
        T = R.ListOffsetsTopic
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), ts in timestamps.items():
            by_topic.setdefault(topic, []).append(
                T.ListOffsetsPartition(partition_index=partition, timestamp=ts, max_num_offsets=1)
            )
        body = R(
            replica_id=-1, isolation_level=0, topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()]
        )
        resp = conn.request("ListOffsets", body, version)
        out: dict[tuple[str, int], ListedOffset] = {}
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code != ErrorCode.NONE:
                    if p.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                        raise KafkaError(
                            p.error_code,
                            f"topic {t.name!r} has no partition {p.partition_index} (or does not exist)",
                            resource=f"{t.name}[{p.partition_index}]",
                        )
                    raise KafkaError(p.error_code, resource=f"{t.name}[{p.partition_index}]")
                if version == 0:
                    offset = p.old_style_offsets[0] if p.old_style_offsets else -1
                    out[(t.name, p.partition_index)] = ListedOffset(offset, -1)
                else:
                    out[(t.name, p.partition_index)] = ListedOffset(p.offset, p.timestamp, p.leader_epoch)
        return out

    def _by_leader(self, tps: Iterable[tuple[str, int]]) -> dict[BlockingConnection, list[tuple[str, int]]]:
        """Group partitions by the connection to their leader; partitions of unknown topics, or without a
        known leader, go to the bootstrap broker, which answers them with the error that explains why."""
        wanted = sorted(set(tps))
        md = request_metadata(self._conn, sorted({t for t, _ in wanted}))
        brokers = {b.node_id: b for b in md.brokers}
        out: dict[BlockingConnection, list[tuple[str, int]]] = {}
        for topic, partition in wanted:
            desc = md.topics.get(topic)
            leader = None
            if desc is not None:
                leader = next((p.leader for p in desc.partitions if p.partition == partition), None)
            broker = brokers.get(leader) if leader is not None else None
            conn = self._conn if broker is None else self._conn_to(broker.host, broker.port)
            out.setdefault(conn, []).append((topic, partition))
        return out

    # --- consumer groups ------------------------------------------------------------------------------

    def list_groups(self, states: Iterable[str] | None = None) -> list[ListedGroup]:
        """Every group on every broker (sorted by id), optionally only those in ``states`` (any case).

        Brokers before ListGroups v4 cannot filter or report states; their groups are described to learn them.
        """
        wanted = None if states is None else {parse_group_state(s) for s in states}
        out: dict[str, ListedGroup] = {}
        for broker in self.describe_cluster().brokers:
            on_broker = functools.partial(self._list_groups_on, broker.host, broker.port, wanted)
            for g in self._retrying(f"broker {broker.host}:{broker.port}", on_broker):
                out[g.group_id] = g
        groups = list(out.values())
        if wanted is not None and any(g.state is None for g in groups):
            unknown = [g.group_id for g in groups if g.state is None]
            described = self.describe_groups(unknown)
            groups = [
                ListedGroup(g.group_id, g.protocol_type, described[g.group_id].state, g.group_type)
                if g.state is None
                else g
                for g in groups
            ]
        if wanted is not None:
            groups = [g for g in groups if g.state in wanted]
        return sorted(groups, key=lambda g: g.group_id)

    def _list_groups_on(self, host: str, port: int, states: set[str] | None) -> list[ListedGroup]:
        conn = self._conn_to(host, port)
        version = conn.version_for("ListGroups")
        R: Any = by_name("ListGroups").Request
        body = R(states_filter=sorted(states) if states is not None and version >= 4 else [])
        resp = self._request(conn, "ListGroups", body, version)
        if resp.error_code in _COORDINATOR_ERRORS:
            raise _Retry(resp.error_code)
        check(resp.error_code, resource=f"broker {conn.address}")
        return [
            ListedGroup(
                g.group_id,
                g.protocol_type,
                g.group_state if version >= 4 else None,
                g.group_type if version >= 5 and g.group_type else None,
            )
            for g in resp.groups
        ]

    def describe_groups(self, group_ids: Iterable[str]) -> dict[str, GroupDescription]:
        """State, protocol and members of each group, by id, asked of each group's coordinator."""
        out: dict[str, GroupDescription] = {}
        for group in group_ids:
            out[group] = self._with_coordinator(group, functools.partial(self._describe_one, group=group))
        return out

    def _describe_one(self, conn: BlockingConnection, node_id: int, *, group: str) -> GroupDescription:
        version = conn.version_for("DescribeGroups")
        R: Any = by_name("DescribeGroups").Request
        resp = self._request(
            conn, "DescribeGroups", R(groups=[group], include_authorized_operations=False), version
        )
        found = [g for g in resp.groups if g.group_id == group]
        if not found:
            raise KafkaError(
                ErrorCode.UNKNOWN_SERVER_ERROR,
                "the coordinator did not describe it",
                resource=f"group {group!r}",
            )
        g = found[0]
        if g.error_code in _COORDINATOR_ERRORS:
            raise _Retry(g.error_code)
        if g.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
            return GroupDescription(group, "Dead", "", "", (), node_id, conn.address)
        check(g.error_code, g.error_message, resource=f"group {group!r}")
        consumer = g.protocol_type == CONSUMER_PROTOCOL_TYPE
        members = tuple(
            GroupMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                metadata=bytes(m.member_metadata),
                assignment_bytes=bytes(m.member_assignment),
                subscription=_decoded(decode_subscription, m.member_metadata) if consumer else None,
                assignment=_decoded(decode_assignment, m.member_assignment) if consumer else None,
            )
            for m in g.members
        )
        return GroupDescription(
            group, g.group_state, g.protocol_type, g.protocol_data, members, node_id, conn.address
        )

    def log_end_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Log-end offsets of those ``partitions`` that exist (a deleted topic's committed offsets remain
        in a group, so lag tools ask about partitions that are gone)."""
        wanted = sorted(set(partitions))
        existing = self.list_topics(include_internal=True)
        live = [tp for tp in wanted if tp[0] in existing and tp[1] < existing[tp[0]].partition_count]
        if not live:
            return {}
        return {tp: lo.offset for tp, lo in self.list_offsets(dict.fromkeys(live, "latest")).items()}

    def consumer_lag(self, group: str) -> dict[tuple[str, int], PartitionLag]:
        """Per partition the group has committed: the committed offset, the log end and the lag."""
        committed = {tp: om.offset for tp, om in self.list_group_offsets(group).items()}
        ends = self.log_end_offsets(committed)
        return {tp: PartitionLag(offset, ends.get(tp)) for tp, offset in sorted(committed.items())}

    def list_group_offsets(
        self, group: str, partitions: Iterable[tuple[str, int]] | None = None
    ) -> dict[tuple[str, int], OffsetAndMetadata]:
        """The group's committed offsets by (topic, partition), sorted; partitions without one are left out.

        A group the coordinator does not know has none.
        """
        wanted = None if partitions is None else sorted(set(partitions))
        return self._with_coordinator(group, lambda conn, _node: self._fetch_offsets(conn, group, wanted))

    def _fetch_offsets(
        self, conn: BlockingConnection, group: str, wanted: list[tuple[str, int]] | None
    ) -> dict[tuple[str, int], OffsetAndMetadata]:
        version = conn.version_for("OffsetFetch", _MAX_OFFSET_API_VERSION)
        R: Any = by_name("OffsetFetch").Request
        asked = wanted
        if asked is None and version < 2:
            # v0-1 cannot ask for "all": ask for every partition of every topic instead
            md = request_metadata(conn, None)
            asked = [(t.name, p.partition) for t in md.topics.values() for p in t.partitions]
        grouped = _by_topic(asked) if asked is not None else None
        if version >= 8:
            G = R.OffsetFetchRequestGroup
            topics = (
                None
                if grouped is None
                else [G.OffsetFetchRequestTopics(name=t, partition_indexes=ps) for t, ps in grouped.items()]
            )
            body = R(groups=[G(group_id=group, topics=topics)])
        else:
            topics = (
                None
                if grouped is None
                else [R.OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in grouped.items()]
            )
            body = R(group_id=group, topics=topics)
        resp = self._request(conn, "OffsetFetch", body, version)
        if version >= 8:
            mine = [g for g in resp.groups if g.group_id == group]
            group_error = mine[0].error_code if mine else ErrorCode.NONE
            rows = [(t.name, p) for g in mine for t in g.topics for p in t.partitions]
        else:
            group_error = resp.error_code if version >= 2 else ErrorCode.NONE
            rows = [(t.name, p) for t in resp.topics for p in t.partitions]
        if group_error in _COORDINATOR_ERRORS:
            raise _Retry(group_error)
        if group_error == ErrorCode.GROUP_ID_NOT_FOUND:
            return {}
        check(group_error, resource=f"group {group!r}")
        out: dict[tuple[str, int], OffsetAndMetadata] = {}
        for topic, p in rows:
            if p.error_code in _COORDINATOR_ERRORS:
                raise _Retry(p.error_code)
            if p.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and (
                wanted is None or p.committed_offset < 0
            ):
                continue
            check(p.error_code, resource=f"group {group!r} {topic}[{p.partition_index}]")
            if p.committed_offset >= 0:
                out[(topic, p.partition_index)] = OffsetAndMetadata(
                    p.committed_offset, p.metadata, p.committed_leader_epoch
                )
        return dict(sorted(out.items()))

    def alter_group_offsets(
        self, group: str, offsets: Mapping[tuple[str, int], int | OffsetAndMetadata]
    ) -> None:
        """Commit ``offsets`` for ``group`` as an assign-mode consumer does (generation -1, no member).

        Kafka accepts this only while the group has no members; a group with members answers UNKNOWN_MEMBER_ID
        (or REBALANCE_IN_PROGRESS), which is raised.
        """
        commits = {
            tp: o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(int(o))
            for tp, o in offsets.items()
        }
        if not commits:
            return
        self._with_coordinator(group, lambda conn, _node: self._commit(conn, group, commits))

    def _commit(
        self, conn: BlockingConnection, group: str, commits: Mapping[tuple[str, int], OffsetAndMetadata]
    ) -> None:
        version = conn.version_for("OffsetCommit", _MAX_OFFSET_API_VERSION)
        R: Any = by_name("OffsetCommit").Request
        T = R.OffsetCommitRequestTopic
        grouped: dict[str, list[Any]] = {}
        for (topic, partition), om in sorted(commits.items()):
            grouped.setdefault(topic, []).append(
                T.OffsetCommitRequestPartition(
                    partition_index=partition,
                    committed_offset=om.offset,
                    committed_leader_epoch=om.leader_epoch,
                    committed_metadata=om.metadata,
                )
            )
        body = R(
            group_id=group,
            generation_id_or_member_epoch=-1,
            member_id="",
            topics=[T(name=t, partitions=ps) for t, ps in grouped.items()],
        )
        resp = self._request(conn, "OffsetCommit", body, version)
        errors: list[KafkaError] = []
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code in _COORDINATOR_ERRORS:
                    raise _Retry(p.error_code)
                if p.error_code != ErrorCode.NONE:
                    errors.append(
                        KafkaError(p.error_code, resource=f"group {group!r} {t.name}[{p.partition_index}]")
                    )
        if errors:
            raise errors[0]

    def delete_groups(self, group_ids: Iterable[str]) -> None:
        """Delete empty groups with their offsets. Every group is tried; then the first failure is raised
        (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, ...)."""
        errors: list[KafkaError] = []
        for group in group_ids:
            try:
                self._with_coordinator(group, functools.partial(self._delete_group, group=group))
            except KafkaError as e:
                errors.append(e)
        if errors:
            raise errors[0]

    def _delete_group(self, conn: BlockingConnection, _node_id: int, *, group: str) -> None:
        R: Any = by_name("DeleteGroups").Request
        resp = self._request(conn, "DeleteGroups", R(groups_names=[group]), conn.version_for("DeleteGroups"))
        for r in resp.results:
            if r.group_id != group:
                continue
            if r.error_code in _COORDINATOR_ERRORS:
                raise _Retry(r.error_code)
            check(r.error_code, resource=f"group {group!r}")
            return
        raise KafkaError(
            ErrorCode.UNKNOWN_SERVER_ERROR,
            "the coordinator did not answer for it",
            resource=f"group {group!r}",
        )

    def delete_group_offsets(self, group: str, topic: str, partitions: Iterable[int]) -> None:
        """Drop the group's committed offsets of ``topic``'s ``partitions`` (OffsetDelete). Refused with
        GROUP_SUBSCRIBED_TO_TOPIC for partitions of a topic the group's members still subscribe to."""
        parts = sorted(set(partitions))
        self._with_coordinator(group, lambda conn, _node: self._delete_offsets(conn, group, topic, parts))

    def _delete_offsets(
        self, conn: BlockingConnection, group: str, topic: str, partitions: list[int]
    ) -> None:
        R: Any = by_name("OffsetDelete").Request
        T = R.OffsetDeleteRequestTopic
        body = R(
            group_id=group,
            topics=[T(name=topic, partitions=[T.OffsetDeleteRequestPartition(p) for p in partitions])],
        )
        resp = self._request(conn, "OffsetDelete", body, conn.version_for("OffsetDelete"))
        if resp.error_code in _COORDINATOR_ERRORS:
            raise _Retry(resp.error_code)
        check(resp.error_code, resource=f"group {group!r}")
        for t in resp.topics:
            for p in t.partitions:
                check(p.error_code, resource=f"group {group!r} {t.name}[{p.partition_index}]")

    # --- coordinators ---------------------------------------------------------------------------------

    def find_coordinator(self, group: str) -> tuple[int, str, int]:
        """(node id, host, port) of ``group``'s coordinator, retried while it is not available."""
        return self._retrying(f"group {group!r}", lambda: self._find_coordinator(group))

    def _find_coordinator(self, group: str) -> tuple[int, str, int]:
        conn = self._conn
        version = conn.version_for("FindCoordinator")
        R: Any = by_name("FindCoordinator").Request
        if version >= 4:
            resp = self._request(
                conn, "FindCoordinator", R(key_type=_GROUP_KEY, coordinator_keys=[group]), version
            )
            found = [c for c in resp.coordinators if c.key == group]
            if not found:
                raise KafkaError(
                    ErrorCode.UNKNOWN_SERVER_ERROR,
                    "FindCoordinator did not answer for it",
                    resource=f"group {group!r}",
                )
            c = found[0]
            code, message, node = c.error_code, c.error_message, (c.node_id, c.host, c.port)
        else:
            resp = self._request(conn, "FindCoordinator", R(key=group, key_type=_GROUP_KEY), version)
            code, message, node = resp.error_code, resp.error_message, (resp.node_id, resp.host, resp.port)
        if code in _COORDINATOR_ERRORS:
            raise _Retry(code)
        check(code, message, resource=f"group {group!r}")
        return node

    def _with_coordinator(self, group: str, call: Callable[[BlockingConnection, int], _T]) -> _T:
        """Run ``call`` on the group's coordinator, finding it again after a coordinator error."""

        def attempt() -> _T:
            node_id, host, port = self._find_coordinator(group)
            return call(self._conn_to(host, port), node_id)

        return self._retrying(f"group {group!r}", attempt)

    def _retrying(self, what: str, attempt: Callable[[], _T]) -> _T:
        """Repeat ``attempt`` while it raises `_Retry` (or loses a connection other than the bootstrap one),
        backing off 50 ms doubling to 1 s, until ``request.timeout.ms`` has passed; then raise the last error."""
        deadline = time.monotonic() + self._timeout_ms() / 1000
        backoff = 0.05
        while True:
            try:
                return attempt()
            except _Retry as e:
                last: KafkaError | KafkaConnectionError = KafkaError(e.code, resource=what)
            except KafkaConnectionError as e:
                if self._conn.closed:
                    raise
                self._drop(e.address)
                last = e
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise last
            time.sleep(min(backoff, remaining))  # retry backoff while the coordinator moves or loads
            backoff = min(backoff * 2, 1.0)

    def _request(self, conn: BlockingConnection, api: str, body: Any, version: int) -> Any:
        return conn.request(api, body, version)

    def _conn_to(self, host: str, port: int) -> BlockingConnection:
        """The bootstrap connection when it is that broker, else one more connection kept until close()."""
        if (host, port) == (self._conn.host, self._conn.port):
            return self._conn
        key = f"{host}:{port}"
        conn = self._others.get(key)
        if conn is None or conn.closed:
            conn = BlockingConnection(
                host,
                port,
                client_id=self.config.client_id,
                timeout_s=self.config.request_timeout_ms / 1000,
                connect_timeout_s=self.config.connection_setup_timeout_ms / 1000,
            )
            self._others[key] = conn
        return conn

    def _drop(self, address: str) -> None:
        conn = self._others.pop(address, None)
        if conn is not None:
            conn.close()

    # --- lifecycle ------------------------------------------------------------------------------------

    def close(self) -> None:
        self._conn.close()
        for conn in self._others.values():
            conn.close()
        self._others.clear()

    def __enter__(self) -> Admin:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Admin({self._conn.address})"


def _by_topic(pairs: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, partition in sorted(set(pairs)):
        out.setdefault(topic, []).append(partition)
    return out


def _decoded(decode: Callable[[bytes], _T], raw: bytes | memoryview) -> _T | None:
    """Decode consumer-protocol bytes, or None when they are not (the group only claims protocol "consumer")."""
    try:
        return decode(bytes(raw))
    except PeerProtocolError:
        return None
