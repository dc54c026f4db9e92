"""Driving ``consumer`` (KIP-848) group members against a shard in the manual-clock harness.

`Member` behaves like a well-behaved client: it sends a full request when it joins, then only what it owns,
and takes whatever assignment an answer carries as what it owns from then on (revoking at once).
"""

from __future__ import annotations

from typing import Any

from coordinator_harness import GROUP, Harness, topic_id

from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name

E = ErrorCode
CGH = by_name("ConsumerGroupHeartbeat").Request


def heartbeat(
    h: Harness,
    member_id: str,
    epoch: int,
    *,
    group: str = GROUP,
    topics: tuple[str, ...] | None = None,
    regex: str | None = None,
    owned: set[tuple[str, int]] | None = None,
    instance_id: str | None = None,
    rebalance_timeout_ms: int = -1,
    assignor: str | None = None,
    version: int = 1,
    client_id: str = "client",
) -> Any:
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(owned or ()):
        by_topic.setdefault(t, []).append(p)
    parts = None if owned is None else [CGH.TopicPartitions(topic_id=topic_id(t), partitions=ps) for t, ps in by_topic.items()]
    fields: dict[str, Any] = dict(
        group_id=group, member_id=member_id, member_epoch=epoch, instance_id=instance_id,
        rebalance_timeout_ms=rebalance_timeout_ms, subscribed_topic_names=None if topics is None else list(topics),
        server_assignor=assignor, topic_partitions=parts,
    )  # fmt: skip
    if version >= 1:
        fields["subscribed_topic_regex"] = regex
    return h.answer(h.send("ConsumerGroupHeartbeat", version, client_id=client_id, **fields))


def names(h: Harness, assignment: Any) -> set[tuple[str, int]]:
    out = set()
    for t in assignment.topic_partitions:
        name = h.topics.topic_name(t.topic_id)
        assert name is not None
        out.update((name, p) for p in t.partitions)
    return out


class Member:
    def __init__(self, h: Harness, member_id: str, *, topics: tuple[str, ...] | None = ("t",),
                 regex: str | None = None, instance_id: str | None = None, assignor: str | None = None,
                 rebalance_timeout_ms: int = 30_000) -> None:  # fmt: skip
        self.h = h
        self.member_id = member_id
        self.topics = topics
        self.regex = regex
        self.instance_id = instance_id
        self.assignor = assignor
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.epoch = 0
        self.owned: set[tuple[str, int]] = set()
        self.last: Any = None

    def join(self) -> Any:
        self.epoch, self.owned = 0, set()
        return self._take(heartbeat(
            self.h, self.member_id, 0, topics=self.topics, regex=self.regex, owned=set(),
            instance_id=self.instance_id, assignor=self.assignor, rebalance_timeout_ms=self.rebalance_timeout_ms))  # fmt: skip

    def beat(self) -> Any:
        return self._take(heartbeat(self.h, self.member_id, self.epoch, owned=self.owned, instance_id=self.instance_id))

    def leave(self, epoch: int = -1) -> Any:
        return heartbeat(self.h, self.member_id, epoch, instance_id=self.instance_id)

    def _take(self, answer: Any) -> Any:
        self.last = answer
        if answer.error_code == E.NONE:
            self.epoch = answer.member_epoch
            if answer.assignment is not None:
                self.owned = names(self.h, answer.assignment)
        return answer


def settle(members: list[Member], rounds: int = 10) -> None:
    """Heartbeat every member in turn until a round changes nothing (or fail)."""
    for _ in range(rounds):
        before = [(m.epoch, frozenset(m.owned)) for m in members]
        for m in members:
            assert m.beat().error_code == E.NONE, m.last
        if [(m.epoch, frozenset(m.owned)) for m in members] == before:
            return
    raise AssertionError("the group did not settle")
