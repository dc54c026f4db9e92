"""A manual-clock runtime for driving one coordinator shard in tests: no threads, no sockets, no sleeps.

It does what the broker's runtime does, in-process: requests are encoded and decoded at their version (so the
shard sees exactly what a real client's bytes decode to), records are encoded to bytes, kept as the
partition's log and decoded again before ``replay``, responses are encoded at the request's version (so a body
a version cannot carry fails here), and timers fire in deadline order when the test advances the clock.
Every token is answered at most once; ``restart`` replays the log into a fresh shard.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from groupstream.coordinator.classic_group import ClassicGroup, GroupState
from groupstream.coordinator.config import GroupCoordinatorConfig
from groupstream.coordinator.request import ShardRequest
from groupstream.coordinator.result import CoordinatorRecord, CoordinatorResult, apply_timer_ops
from groupstream.coordinator.shard import GroupCoordinatorShard
from groupstream.protocol.consumer_protocol import (
    ConsumerAssignment,
    ConsumerSubscription,
    encode_assignment,
    encode_subscription,
)
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.group_records import decode_record, encode_record
from groupstream.protocol.messages import by_name

E = ErrorCode
GROUP = "g"


def subscription(
    *topics: str, owned: Iterable[tuple[str, int]] = (), user_data: bytes | None = None
) -> bytes:
    return encode_subscription(
        ConsumerSubscription(
            topics=tuple(topics), owned_partitions=tuple(sorted(owned)), user_data=user_data
        ),
        1,
    )


def assignment(*partitions: tuple[str, int]) -> bytes:
    return encode_assignment(ConsumerAssignment(tuple(sorted(partitions))))


def topic_id(name: str) -> uuid.UUID:
    """The id StaticTopics gives a topic: fixed by its name, so tests can name partitions by id."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"topic:{name}")


class StaticTopics:
    """The runtime's topics view over a dict the test may change: the shard's only window on the broker's
    topics (partition counts, ids, and the list that regular expressions are matched against)."""

    def __init__(self, topics: dict[str, int] | None = None) -> None:
        self.topics = dict(topics or {})

    def partition_count(self, topic: str) -> int | None:
        return self.topics.get(topic)

    def topic_id(self, topic: str) -> uuid.UUID | None:
        return topic_id(topic) if topic in self.topics else None

    def topic_name(self, tid: uuid.UUID) -> str | None:
        return next((t for t in self.topics if topic_id(t) == tid), None)

    def topic_names(self) -> list[str]:
        return sorted(self.topics)


@dataclass
class Harness:
    # A consumer group computes a new target at every change here, as in Kafka's own unit tests: the tests
    # of the assignment interval (KIP-1263) and the property test's churn set one.
    config: GroupCoordinatorConfig = field(default_factory=lambda: GroupCoordinatorConfig(consumer_assignment_interval_ms=0))
    topics: StaticTopics = field(default_factory=lambda: StaticTopics({"t": 4, "u": 2}))
    now: int = 1_000_000
    log: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    timers: dict[str, int] = field(default_factory=dict)
    answers: dict[int, Any] = field(default_factory=dict)
    sent: dict[int, tuple[str, int]] = field(default_factory=dict)
    fired: list[str] = field(default_factory=list)
    fired_at: list[tuple[str, int]] = field(default_factory=list)  # (timer key, clock when it fired)

    def __post_init__(self) -> None:
        self._tokens = itertools.count(1)
        self._ids = itertools.count(1)
        self.shard = self._new_shard()
        self.apply(self.shard.on_loaded(self.now))

    def _new_shard(self) -> GroupCoordinatorShard:
        return GroupCoordinatorShard(7, self.config, lambda prefix: f"{prefix}-{next(self._ids)}")

    # --- the runtime -----------------------------------------------------------------------------------

    def apply(self, result: CoordinatorResult) -> list[CoordinatorRecord]:
        """Append (as bytes), replay (decoded from those bytes), schedule timers, then deliver responses."""
        replayed = []
        for record in result.records:
            key, value = encode_record(record)
            self.log.append((key, value))
            decoded = decode_record(key, value)
            assert decoded == record, "a record does not survive its own encoding"
            self.shard.replay(decoded)
            replayed.append(decoded)
        apply_timer_ops(self.timers, result.timers)
        for token, response in result.responses:
            assert token in self.sent, f"response to a token never sent: {token}"
            assert token not in self.answers, f"token {token} answered twice"
            api_name, version = self.sent[token]
            api = by_name(api_name)
            self.answers[token] = api.decode_response(api.encode_response(response, version), version)
        return replayed

    def send(self, api_name: str, version: int, client_id: str = "client", **fields: Any) -> int:
        api = by_name(api_name)
        body = api.decode_request(api.encode_request(api.Request(**fields), version), version)
        token = next(self._tokens)
        self.sent[token] = (api_name, version)
        request = ShardRequest(api.key, version, body, token, client_id, "/127.0.0.1")
        self.apply(self.shard.handle(request, self.now, self.topics))
        return token

    def answer(self, token: int) -> Any:
        assert token in self.answers, f"token {token} is still parked"
        return self.answers[token]

    def parked(self, token: int) -> bool:
        return token not in self.answers

    def advance(self, ms: int) -> None:
        """Move the clock, firing every timer that falls due on the way, in deadline order."""
        target = self.now + ms
        while True:
            due = [(deadline, key) for key, deadline in self.timers.items() if deadline <= target]
            if not due:
                break
            deadline, key = min(due)
            del self.timers[key]
            self.now = max(self.now, deadline)
            self.fired.append(key)
            self.fired_at.append((key, self.now))
            self.apply(self.shard.on_timer(key, self.now, self.topics))
        self.now = target

    def restart(self) -> None:
        """Unload (parked requests get NOT_COORDINATOR, as the runtime would answer) and load from the log."""
        for token in self.shard.unload():
            self.answers[token] = E.NOT_COORDINATOR
        self.shard = self._new_shard()
        self.timers.clear()
        for key, value in self.log:
            self.shard.replay(decode_record(key, value))
        self.apply(self.shard.on_loaded(self.now))

    # --- client calls ----------------------------------------------------------------------------------

    def join(
        self,
        member_id: str = "",
        *,
        group: str = GROUP,
        instance_id: str | None = None,
        protocols: Sequence[tuple[str, bytes]] | None = None,
        topics: Sequence[str] = ("t",),
        session: int = 10_000,
        rebalance: int = 30_000,
        version: int = 5,
        protocol_type: str = "consumer",
        client_id: str = "client",
    ) -> int:
        if protocols is None:
            protocols = [("range", subscription(*topics))]
        J = by_name("JoinGroup").Request
        return self.send(
            "JoinGroup",
            version,
            client_id=client_id,
            group_id=group,
            session_timeout_ms=session,
            rebalance_timeout_ms=rebalance if version >= 1 else -1,
            member_id=member_id,
            group_instance_id=instance_id,
            protocol_type=protocol_type,
            protocols=[J.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols],
        )

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        *,
        group: str = GROUP,
        instance_id: str | None = None,
        version: int = 3,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> int:
        S = by_name("SyncGroup").Request
        return self.send(
            "SyncGroup",
            version,
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance_id,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            assignments=[
                S.SyncGroupRequestAssignment(member_id=k, assignment=v)
                for k, v in (assignments or {}).items()
            ],
        )

    def heartbeat(
        self,
        member_id: str,
        generation: int,
        *,
        group: str = GROUP,
        instance_id: str | None = None,
        version: int = 3,
    ) -> ErrorCode:
        token = self.send(
            "Heartbeat",
            version,
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance_id,
        )
        return ErrorCode(self.answer(token).error_code)

    def leave(self, *members: tuple[str, str | None], group: str = GROUP, version: int = 3) -> Any:
        L = by_name("LeaveGroup").Request
        if version < 3:
            ((member_id, _),) = members
            return self.answer(self.send("LeaveGroup", version, group_id=group, member_id=member_id))
        return self.answer(
            self.send(
                "LeaveGroup",
                version,
                group_id=group,
                members=[L.MemberIdentity(member_id=m, group_instance_id=i) for m, i in members],
            )
        )

    def commit(
        self,
        offsets: dict[tuple[str, int], int],
        *,
        group: str = GROUP,
        generation: int = -1,
        member_id: str = "",
        instance_id: str | None = None,
        metadata: str | None = "",
        version: int = 8,
        retention_ms: int = -1,
    ) -> dict[tuple[str, int], ErrorCode]:
        C = by_name("OffsetCommit").Request
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (topic, partition), offset in offsets.items():
            by_topic.setdefault(topic, []).append((partition, offset))
        token = self.send(
            "OffsetCommit",
            version,
            group_id=group,
            generation_id_or_member_epoch=generation,
            member_id=member_id,
            group_instance_id=instance_id,
            retention_time_ms=retention_ms,
            topics=[
                C.OffsetCommitRequestTopic(
                    name=topic,
                    partitions=[
                        C.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                            partition_index=p, committed_offset=o, committed_metadata=metadata
                        )
                        for p, o in parts
                    ],
                )
                for topic, parts in by_topic.items()
            ],
        )
        return {
            (t.name, p.partition_index): ErrorCode(p.error_code)
            for t in self.answer(token).topics
            for p in t.partitions
        }

    def fetch(
        self, partitions: dict[str, list[int]] | None, *, group: str = GROUP, version: int = 7
    ) -> dict[tuple[str, int], tuple[int, str]]:
        """Committed (offset, metadata) per partition, through OffsetFetch at ``version`` (v8+: batched)."""
        F = by_name("OffsetFetch").Request
        if version >= 8:
            topics = (
                None
                if partitions is None
                else [
                    F.OffsetFetchRequestGroup.OffsetFetchRequestTopics(name=t, partition_indexes=ps)
                    for t, ps in partitions.items()
                ]
            )
            token = self.send(
                "OffsetFetch", version, groups=[F.OffsetFetchRequestGroup(group_id=group, topics=topics)]
            )
            (g,) = self.answer(token).groups
            assert g.group_id == group and g.error_code == 0
            topics_out = g.topics
        else:
            topics = (
                None
                if partitions is None
                else [F.OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in partitions.items()]
            )
            token = self.send("OffsetFetch", version, group_id=group, topics=topics)
            topics_out = self.answer(token).topics
        out = {}
        for t in topics_out:
            for p in t.partitions:
                assert p.error_code == 0
                out[t.name, p.partition_index] = (p.committed_offset, p.metadata)
        return out

    def describe(self, *groups: str, version: int = 5) -> list[Any]:
        return list(self.answer(self.send("DescribeGroups", version, groups=list(groups))).groups)

    def list_groups(
        self, states: Sequence[str] = (), types: Sequence[str] = (), version: int = 5
    ) -> list[Any]:
        fields: dict[str, Any] = {}
        if version >= 4:
            fields["states_filter"] = list(states)
        if version >= 5:
            fields["types_filter"] = list(types)
        return list(self.answer(self.send("ListGroups", version, **fields)).groups)

    def delete_groups(self, *groups: str, version: int = 2) -> dict[str, ErrorCode]:
        answer = self.answer(self.send("DeleteGroups", version, groups_names=list(groups)))
        return {r.group_id: ErrorCode(r.error_code) for r in answer.results}

    # --- inspection ------------------------------------------------------------------------------------

    def group(self, group_id: str = GROUP) -> ClassicGroup:
        group = self.shard.group(group_id)
        assert group is not None, f"no group {group_id!r}"
        return group

    def state(self, group_id: str = GROUP) -> GroupState:
        return self.group(group_id).state

    def records_since(self, mark: int) -> list[CoordinatorRecord]:
        return [decode_record(k, v) for k, v in self.log[mark:]]

    # --- composite steps -------------------------------------------------------------------------------

    def join_new(self, **kwargs: Any) -> str:
        """A v4+ client's first join: MEMBER_ID_REQUIRED, then the join it parks; returns the member id."""
        first = self.answer(self.join(**kwargs))
        assert first.error_code == E.MEMBER_ID_REQUIRED
        return str(first.member_id)

    def form_group(self, n: int, **kwargs: Any) -> tuple[list[str], int]:
        """``n`` dynamic members join a new group and sync; returns (member ids, leader first) and generation."""
        ids = [self.join_new(client_id=f"c{i}", **kwargs) for i in range(n)]
        tokens = [self.join(member_id, **kwargs) for member_id in ids]
        while any(self.parked(t) for t in tokens):
            self.advance(max(self.config.initial_rebalance_delay_ms, 1))
        answers = [self.answer(t) for t in tokens]
        generation = answers[0].generation_id
        leader = answers[0].leader
        ordered = [leader] + [m for m in ids if m != leader]
        group = kwargs.get("group", GROUP)
        syncs = [self.sync(m, generation, group=group) for m in ordered[1:]]
        self.sync(leader, generation, {m: assignment(("t", i)) for i, m in enumerate(ordered)}, group=group)
        for t in syncs:
            assert self.answer(t).error_code == 0
        assert self.state(group) is GroupState.STABLE
        return ordered, generation
