"""Admin calls about consumer groups, each sent to the group's coordinator (found with FindCoordinator and
looked up again while it moves or loads), and ListGroups to every broker."""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from groupstream.client.admin.topics import TopicCalls
from groupstream.client.admin.types import (
    _COORDINATOR_ERRORS,
    _GROUP_KEY,
    _MAX_OFFSET_API_VERSION,
    _T,
    MEMBER_TYPES,
    ConsumerGroupDescription,
    ConsumerGroupMember,
    GroupDescription,
    GroupMember,
    ListedGroup,
    OffsetAndMetadata,
    PartitionLag,
    TopicPart,
    _by_topic,
    _decoded,
    _Retry,
    parse_group_state,
    parse_group_type,
)
from groupstream.client.errors import KafkaConnectionError, KafkaError, check
from groupstream.client.metadata import request_metadata
from groupstream.client.net.sync_client import NodeChannel
from groupstream.protocol.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    decode_assignment,
    decode_subscription,
)
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name
from groupstream.protocol.topic_partition import ByPartition


class GroupCalls(TopicCalls):
    def list_groups(
        self, states: Iterable[str] | None = None, types: Iterable[str] | None = None
    ) -> list[ListedGroup]:
        """Every group on every broker (sorted by id), optionally only those in ``states`` and of ``types``
        (``classic``, ``consumer``; both any case).

        Brokers before ListGroups v4 cannot filter or report states; their groups are described to learn them.
        Brokers before v5 do not report types; they have only classic groups, so a type filter counts theirs
        as ``classic`` (and ``group_type`` stays None).
        """
        wanted = None if states is None else {parse_group_state(s) for s in states}
        kinds = None if types is None else {parse_group_type(t) for t in types}
        out: dict[str, ListedGroup] = {}
        for broker in self.describe_cluster().brokers:
            on_broker = functools.partial(self._list_groups_on, broker.host, broker.port, wanted, kinds)
            for g in self._retrying(f"broker {broker.host}:{broker.port}", on_broker):
                out[g.group_id] = g
        groups = list(out.values())
        if kinds is not None:
            groups = [g for g in groups if (g.group_type or "classic").lower() in kinds]
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

    def _list_groups_on(
        self, host: str, port: int, states: set[str] | None, types: set[str] | None
    ) -> list[ListedGroup]:
        conn = self._conn_to(host, port)
        version = conn.version_for("ListGroups")
        R: Any = by_name("ListGroups").Request
        body = R(
            states_filter=sorted(states) if states is not None and version >= 4 else [],
            types_filter=sorted(types) if types is not None and version >= 5 else [],
        )
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

    def _describe_one(self, conn: NodeChannel, node_id: int, *, group: str) -> GroupDescription:
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

    def describe_consumer_groups(self, group_ids: Iterable[str]) -> dict[str, ConsumerGroupDescription]:
        """Epochs, assignor and members (with their current and target assignments) of each ``consumer``
        (KIP-848) group, by id, with ConsumerGroupDescribe.

        Every group is asked (one request per coordinator); then the first failure is raised as `KafkaError`:
        GROUP_ID_NOT_FOUND for a group that does not exist or is a classic group (describe those with
        `describe_groups`). A broker without ConsumerGroupDescribe raises `UnsupportedVersionError`.
        """
        results = self.describe_consumer_groups_or_errors(group_ids)
        out: dict[str, ConsumerGroupDescription] = {}
        for group, result in results.items():
            if isinstance(result, KafkaError):
                raise result
            out[group] = result
        return out

    def describe_consumer_groups_or_errors(
        self, group_ids: Iterable[str]
    ) -> dict[str, ConsumerGroupDescription | KafkaError]:
        """As `describe_consumer_groups`, but each group's error is returned in its place instead of raised
        (as Kafka's admin gives one future per group): a tool describing groups of either kind tells a
        classic or unknown group (GROUP_ID_NOT_FOUND) from a consumer group in one round trip.

        Groups are looked up with FindCoordinator and sent together to each coordinator; groups whose
        coordinator answers NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE or COORDINATOR_LOAD_IN_PROGRESS are
        looked up and asked again until ``request.timeout.ms`` runs out (then that error is raised).
        """
        wanted = list(dict.fromkeys(group_ids))
        out: dict[str, ConsumerGroupDescription | KafkaError] = {}
        if not wanted:
            return out

        def attempt() -> None:
            by_coordinator: dict[tuple[int, str, int], list[str]] = {}
            for group in wanted:
                if group in out:
                    continue
                try:
                    coordinator = self._find_coordinator(group)
                except KafkaError as e:
                    out[group] = e
                    continue
                by_coordinator.setdefault(coordinator, []).append(group)
            retry: int | None = None
            for (node_id, host, port), groups in by_coordinator.items():
                code = self._consumer_describe_on(self._conn_to(host, port), node_id, groups, out)
                retry = code if code is not None else retry
            if retry is not None:
                raise _Retry(retry)

        what = f"group {wanted[0]!r}" if len(wanted) == 1 else f"groups {', '.join(map(repr, wanted))}"
        self._retrying(what, attempt)
        return {g: out[g] for g in wanted}

    def _consumer_describe_on(
        self,
        conn: NodeChannel,
        node_id: int,
        groups: list[str],
        out: dict[str, ConsumerGroupDescription | KafkaError],
    ) -> int | None:
        """Describe ``groups`` on one coordinator into ``out``; the coordinator error of the groups it
        did not describe (left out of ``out`` to be asked again), or None."""
        version = conn.version_for("ConsumerGroupDescribe")
        R: Any = by_name("ConsumerGroupDescribe").Request
        resp = self._request(
            conn, "ConsumerGroupDescribe", R(group_ids=groups, include_authorized_operations=False), version
        )
        answered = {g.group_id: g for g in resp.groups}
        retry: int | None = None
        for group in groups:
            g = answered.get(group)
            if g is None:
                out[group] = KafkaError(
                    ErrorCode.UNKNOWN_SERVER_ERROR,
                    "the coordinator did not describe it",
                    resource=f"group {group!r}",
                )
            elif g.error_code in _COORDINATOR_ERRORS:
                retry = g.error_code
            elif g.error_code != ErrorCode.NONE:
                out[group] = KafkaError(g.error_code, g.error_message, resource=f"group {group!r}")
            else:
                out[group] = _consumer_group(g, version, node_id, conn.address)
        return retry

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
        self, conn: NodeChannel, group: str, wanted: list[tuple[str, int]] | None
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
        self, group: str, offsets: ByPartition[int | OffsetAndMetadata]
    ) -> None:
        """Commit ``offsets`` for ``group`` as an assign-mode consumer does (generation -1, no member).

        Kafka accepts this only while the group has no members; a group with members answers UNKNOWN_MEMBER_ID
        (or REBALANCE_IN_PROGRESS), which is raised.
        """
        commits = {
            (t, p): o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(int(o))
            for (t, p), o in offsets.items()
        }
        if not commits:
            return
        self._with_coordinator(group, lambda conn, _node: self._commit(conn, group, commits))

    def _commit(
        self, conn: NodeChannel, group: str, commits: Mapping[tuple[str, int], OffsetAndMetadata]
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

    def _delete_group(self, conn: NodeChannel, _node_id: int, *, group: str) -> None:
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
        self, conn: NodeChannel, group: str, topic: str, partitions: list[int]
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

    def find_coordinator(self, group: str) -> tuple[int, str, int]:
        """(node id, host, port) of ``group``'s coordinator, retried while it is not available."""
        return self._retrying(f"group {group!r}", lambda: self._find_coordinator(group))

    def _find_coordinator(self, group: str, key_type: int = _GROUP_KEY) -> tuple[int, str, int]:
        """The coordinator of a group (``key_type`` 0) or of a transactional id (1)."""
        conn = self._conn
        version = conn.version_for("FindCoordinator")
        R: Any = by_name("FindCoordinator").Request
        what = f"group {group!r}" if key_type == _GROUP_KEY else f"transactional id {group!r}"
        if version >= 4:
            resp = self._request(
                conn, "FindCoordinator", R(key_type=key_type, coordinator_keys=[group]), version
            )
            found = [c for c in resp.coordinators if c.key == group]
            if not found:
                raise KafkaError(
                    ErrorCode.UNKNOWN_SERVER_ERROR,
                    "FindCoordinator did not answer for it",
                    resource=what,
                )
            c = found[0]
            code, message, node = c.error_code, c.error_message, (c.node_id, c.host, c.port)
        else:
            resp = self._request(conn, "FindCoordinator", R(key=group, key_type=key_type), version)
            code, message, node = resp.error_code, resp.error_message, (resp.node_id, resp.host, resp.port)
        if code in _COORDINATOR_ERRORS:
            raise _Retry(code)
        check(code, message, resource=what)
        return node

    def _with_coordinator(self, group: str, call: Callable[[NodeChannel, int], _T]) -> _T:
        """Run ``call`` on the group's coordinator, finding it again after a coordinator error."""

        def attempt() -> _T:
            node_id, host, port = self._find_coordinator(group)
            return call(self._conn_to(host, port), node_id)

        return self._retrying(f"group {group!r}", attempt)

    def _retrying(self, what: str, attempt: Callable[[], _T]) -> _T:
        """Repeat ``attempt`` while it raises `_Retry` (or loses a connection),
        backing off 50 ms doubling to 1 s, until ``request.timeout.ms`` has passed; then raise the last error."""
        deadline = time.monotonic() + self._timeout_ms() / 1000
        backoff = 0.05
        while True:
            try:
                return attempt()
            except _Retry as e:
                last: KafkaError | KafkaConnectionError = KafkaError(e.code, resource=what)
            except KafkaConnectionError as e:
                last = e  # a coordinator gone: the core reconnects, or finds it elsewhere on the next attempt
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise last
            time.sleep(min(backoff, remaining))  # retry backoff while the coordinator moves or loads
            backoff = min(backoff * 2, 1.0)


def _named_partitions(assignment: Any, ids: dict[str, uuid.UUID]) -> tuple[TopicPart, ...]:
    """A ConsumerGroupDescribe assignment as sorted (topic, partition) pairs, noting each topic's id in ``ids``."""
    out: list[TopicPart] = []
    for t in assignment.topic_partitions:
        name = t.topic_name or str(t.topic_id)
        ids[name] = t.topic_id
        out.extend((name, p) for p in t.partitions)
    return tuple(sorted(out))


def _consumer_group(g: Any, version: int, node_id: int, coordinator: str) -> ConsumerGroupDescription:
    members = []
    for m in g.members:
        ids: dict[str, uuid.UUID] = {}
        current = _named_partitions(m.assignment, ids)
        target = _named_partitions(m.target_assignment, ids)
        stable = m.member_epoch == g.assignment_epoch and current == target
        members.append(
            ConsumerGroupMember(
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=tuple(m.subscribed_topic_names),
                subscribed_topic_regex=m.subscribed_topic_regex or None,  # Kafka 4.4 (and we) send "" for none
                assignment=current,
                target_assignment=target,
                state="stable" if stable else "reconciling",
                member_type=MEMBER_TYPES.get(m.member_type) if version >= 1 else None,
                topic_ids=ids,
            )
        )
    return ConsumerGroupDescription(
        group_id=g.group_id,
        state=g.group_state,
        group_epoch=g.group_epoch,
        assignment_epoch=g.assignment_epoch,
        assignor_name=g.assignor_name,
        members=tuple(sorted(members, key=lambda m: m.member_id)),
        coordinator_id=node_id,
        coordinator=coordinator,
    )
