"""What the driver asks of the brokers: which partitions a subscription covers, their offsets (earliest,
latest, by timestamp, a group's commits), and committing a stream's progress to its consumer group.

One `Admin` connection, held by the driver-side reader for the life of the query. Only the client properties
an admin client understands are passed on from the ``kafka.`` options.

A plan costs one Metadata request: the partitions are listed from it, and the offsets that follow (earliest,
latest, by timestamp) are asked of the leaders it names, until the next listing. A leader that moved meanwhile
answers with an error (or its connection fails): that lookup is asked once more with fresh metadata.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from groupstream.client.admin import Admin
from groupstream.client.admin.types import ListedOffset
from groupstream.client.errors import KafkaConnectionError, KafkaError
from groupstream.client.metadata import ClusterMetadata, TopicDescription
from groupstream.client.net.security import SECURITY_PROPERTIES
from groupstream.protocol.error_codes import ErrorCode
from groupstream.spark.dataloss import ClusterView, error_text
from groupstream.spark.options import SourceOptionError, SourceOptions
from groupstream.spark.planning import TopicPartition

__all__ = ["ADMIN_KEYS", "Cluster", "DataLossError", "topic_id"]

# The client settings of the source options the driver's Admin takes (it keeps no idle connections to expire),
# with the security ones, which it needs to reach a secured cluster at all.
ADMIN_KEYS = ("client.id", "request.timeout.ms", "socket.connection.setup.timeout.ms", *SECURITY_PROPERTIES)


class DataLossError(RuntimeError):
    """Records the query was to read are gone (deleted by retention, or the topic was deleted or recreated)."""

    def __init__(self, what: str) -> None:
        super().__init__(error_text(what))


_GONE = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID)
# What a partition's former leader (or a topic since recreated) answers an offset lookup sent by old metadata.
_STALE = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.FENCED_LEADER_EPOCH,
                    ErrorCode.UNKNOWN_LEADER_EPOCH, *_GONE})  # fmt: skip
_VIEW_ATTEMPTS = 3


def topic_id(desc: TopicDescription) -> str | None:
    """The topic's id as text; None when the broker serves none (Metadata below v10, or a zero id)."""
    return None if desc.topic_id is None or desc.topic_id.int == 0 else str(desc.topic_id)


def admin_config(bootstrap: str, client: Mapping[str, str]) -> dict[str, str]:
    conf = {"bootstrap.servers": bootstrap, "client.id": "groupstream-spark"}
    conf.update({k: v for k, v in client.items() if k in ADMIN_KEYS})
    return conf


class Cluster:
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.admin = Admin(admin_config(options.bootstrap_servers, options.client_config))
        self._metadata: ClusterMetadata | None = None  # the last listing's, whose leaders offset lookups use

    def close(self) -> None:
        self.admin.close()

    # --- partitions ---------------------------------------------------------------------------------

    def partitions(self, must_exist: bool) -> list[TopicPartition]:
        """Every partition the subscription covers now. ``must_exist`` (batch queries): a named topic or an
        assigned partition that does not exist is an error; a stream waits for it to appear instead."""
        return self._partitions(self._list_topics(), must_exist)

    def partitions_and_ids(self, must_exist: bool) -> tuple[list[TopicPartition], dict[str, str]]:
        """`partitions`, and the ids of their topics (those that have one), from one Metadata answer."""
        listed = self._list_topics()
        tps = self._partitions(listed, must_exist)
        return tps, {t: i for t in {t for t, _ in tps} if (i := topic_id(listed[t])) is not None}

    def view(self) -> ClusterView:
        """The subscribed partitions now, with their log ends and topic ids. A topic that answers with an error
        or has a partition without a leader is unsettled; a topic deleted between the two requests is looked
        at again."""
        for attempt in range(_VIEW_ATTEMPTS):
            topics = {t: d for t, d in self._list_topics().items() if d.error_code not in _GONE}
            unsettled = frozenset(
                t for t in self._names(topics)
                if topics[t].error_code != ErrorCode.NONE or any(p.leader < 0 for p in topics[t].partitions)
            )  # fmt: skip
            tps = [tp for tp in self._partitions(topics, must_exist=False) if tp[0] not in unsettled]
            try:
                latest = self.latest(tps)
            except KafkaError as e:
                if e.code in _GONE and attempt + 1 < _VIEW_ATTEMPTS:
                    continue
                raise
            ids = {t: i for t in {tp[0] for tp in tps} | unsettled if (i := topic_id(topics[t])) is not None}
            return ClusterView(latest, ids, unsettled)
        raise AssertionError("unreachable")

    def _list_topics(self) -> dict[str, TopicDescription]:
        """Every topic but the internal ones, from a Metadata answer kept for the offset lookups that follow."""
        self._metadata = self.admin.metadata()
        return {n: t for n, t in self._metadata.topics.items() if not t.is_internal}

    def _partitions(self, topics: Mapping[str, TopicDescription], must_exist: bool) -> list[TopicPartition]:
        opts = self.options
        if opts.assign is not None:
            wanted = [TopicPartition(t, p) for t, ps in opts.assign.items() for p in ps]
            present = [tp for tp in wanted if tp.topic in topics and tp.partition < topics[tp.topic].partition_count]
            if must_exist and len(present) < len(wanted):
                t, p = sorted(set(wanted) - set(present))[0]
                raise SourceOptionError(f"option 'assign' names {t}-{p}, which does not exist")
            return sorted(present)
        if opts.pattern is None and must_exist:
            missing = [t for t in opts.topics if t not in topics]
            if missing:
                raise SourceOptionError(f"option 'subscribe' names topic {missing[0]!r}, which does not exist")
        return sorted(TopicPartition(t, p) for t in self._names(topics) for p in range(topics[t].partition_count))

    def _names(self, topics: Mapping[str, TopicDescription]) -> list[str]:
        """The subscribed topics among ``topics`` (all of them for ``assign``)."""
        opts = self.options
        if opts.assign is not None:
            return sorted(t for t in opts.assign if t in topics)
        if opts.pattern is not None:
            return sorted(t for t in topics if opts.pattern.fullmatch(t))
        return [t for t in opts.topics if t in topics]

    # --- offsets ------------------------------------------------------------------------------------

    def earliest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list(dict.fromkeys(tps, "earliest"))

    def latest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list(dict.fromkeys(tps, "latest"))

    def by_timestamp(self, timestamps: Mapping[TopicPartition, int], strategy: str) -> dict[TopicPartition, int]:
        """The first offset at or after each timestamp. Where no record is that late: Spark's strategies,
        ``error`` (fail, naming the partition) or ``latest`` (the end of the partition)."""
        listed = self._list_offsets(timestamps) if timestamps else {}
        out: dict[TopicPartition, int] = {}
        missing = []
        for (t, p), found in listed.items():
            tp = TopicPartition(t, p)
            if found.offset >= 0:
                out[tp] = found.offset
            elif strategy == "latest":
                missing.append(tp)
            else:
                raise SourceOptionError(
                    f"no record in {tp} has a timestamp at or after {timestamps[tp]}; set "
                    "startingOffsetsByTimestampStrategy=latest to start at the end of such partitions"
                )
        out.update(self.latest(missing))
        return out

    def _list(self, specs: Mapping[TopicPartition, str]) -> dict[TopicPartition, int]:
        if not specs:
            return {}
        return {TopicPartition(t, p): found.offset for (t, p), found in self._list_offsets(specs).items()}

    def _list_offsets(self, specs: Mapping[TopicPartition, str] | Mapping[TopicPartition, int]) -> dict[
        tuple[str, int], ListedOffset
    ]:
        """``admin.list_offsets`` at the leaders of the last listing; once more at fresh ones if that is stale."""
        if self._metadata is not None:
            try:
                return self.admin.list_offsets(specs, metadata=self._metadata)
            except KafkaConnectionError:
                pass
            except KafkaError as e:
                if e.code not in _STALE:
                    raise
            self._metadata = None
        return self.admin.list_offsets(specs)

    def committed(self, group: str, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        wanted = list(tps)
        listed = self.admin.list_group_offsets(group, wanted)
        return {TopicPartition(t, p): om.offset for (t, p), om in listed.items() if om.offset >= 0}

    def commit(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit a stream's progress as an assign-mode consumer does. A group with live members refuses it
        (their commits would fight ours); that is reported, and the query goes on."""
        try:
            self.admin.alter_group_offsets(group, dict(offsets))
        except KafkaError as e:
            if e.code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION):
                raise SourceOptionError(
                    f"consumer group {group!r} has active members, so the query cannot commit its offsets "
                    "to it; give the query a group.id of its own"
                ) from e
            raise
