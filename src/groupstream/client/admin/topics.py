"""Admin calls about topics, partitions, records, configs and offsets, each sent where Kafka wants it:
metadata and topic changes to the broker it knows, ListOffsets and DeleteRecords to partition leaders,
ElectLeaders to the controller."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from groupstream.client.admin.base import AdminBase
from groupstream.client.admin.types import (
    _DEFAULT_CONFIG,
    _TOPIC_RESOURCE,
    CONFIG_SOURCES,
    MAX_TIMESTAMP,
    ConfigEntry,
    CreatedTopic,
    ListedOffset,
    NewTopic,
    _by_topic,
    parse_offset_spec,
)
from groupstream.client.errors import KafkaError, UnsupportedVersionError, check
from groupstream.client.metadata import ClusterMetadata, TopicDescription, request_metadata, topic_error
from groupstream.client.net.sync_client import NodeChannel
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name
from groupstream.protocol.primitives import ZERO_UUID
from groupstream.protocol.topic_partition import ByPartition


class TopicCalls(AdminBase):
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

    def metadata(self, topics: Iterable[str] | None = None) -> ClusterMetadata:
        """One Metadata answer: the brokers, and ``topics`` (every topic: None, internal ones included) with
        their partitions and leaders. `list_offsets` takes it to find the leaders without asking again."""
        return request_metadata(self._conn, None if topics is None else list(topics))

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
                    None
                    if p.error_code == ErrorCode.NONE
                    else KafkaError(
                        p.error_code, p.error_message, resource=f"{result.topic}-{p.partition_id}"
                    )
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

    def list_offsets(
        self, specs: ByPartition[str | int], *, metadata: ClusterMetadata | None = None
    ) -> dict[tuple[str, int], ListedOffset]:
        """Offsets by ``(topic, partition)`` for "earliest", "latest", "max-timestamp" or a timestamp in ms,
        each asked of its partition's leader: as ``metadata`` (a `metadata` answer the caller just read) names
        it, else as a Metadata request asked now does. A leader that moved since answers NOT_LEADER_OR_FOLLOWER,
        raised: the caller then asks again without ``metadata``."""
        timestamps = {(t, p): parse_offset_spec(s) for (t, p), s in specs.items()}
        out: dict[tuple[str, int], ListedOffset] = {}
        for conn, tps in self._by_leader(timestamps, metadata).items():
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
        self, conn: NodeChannel, timestamps: Mapping[tuple[str, int], int]
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

    def _by_leader(
        self, tps: Iterable[tuple[str, int]], md: ClusterMetadata | None = None
    ) -> dict[NodeChannel, list[tuple[str, int]]]:
        """Group partitions by the connection to their leader (in ``md``, else in a Metadata answer asked for
        now); partitions of unknown topics, or without a known leader, go to the bootstrap broker, which answers
        them with the error that explains why."""
        wanted = sorted(set(tps))
        if md is None:
            md = request_metadata(self._conn, sorted({t for t, _ in wanted}))
        brokers = {b.node_id: b for b in md.brokers}
        out: dict[NodeChannel, list[tuple[str, int]]] = {}
        for topic, partition in wanted:
            desc = md.topics.get(topic)
            leader = None
            if desc is not None:
                leader = next((p.leader for p in desc.partitions if p.partition == partition), None)
            broker = brokers.get(leader) if leader is not None else None
            conn = self._conn if broker is None else self._conn_to(broker.host, broker.port)
            out.setdefault(conn, []).append((topic, partition))
        return out

    def log_end_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Log-end offsets of those ``partitions`` that exist (a deleted topic's committed offsets remain
        in a group, so lag tools ask about partitions that are gone)."""
        wanted = sorted(set(partitions))
        existing = self.list_topics(include_internal=True)
        live = [tp for tp in wanted if tp[0] in existing and tp[1] < existing[tp[0]].partition_count]
        if not live:
            return {}
        return {tp: lo.offset for tp, lo in self.list_offsets(dict.fromkeys(live, "latest")).items()}
