"""The harness of the KIP-848 membership manager tests: the consumer's side of the contract (a recording
`AssignmentTarget`, a coordinator locator), scripted heartbeat responses and a manual clock."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from groupstream.assignment.types import TopicPartition
from groupstream.client.consumer.consumer_membership import (
    ConsumerMembershipConfig,
    ConsumerMembershipManager,
)
from groupstream.client.consumer.consumer_membership_metadata import MetadataTopicNames
from groupstream.client.consumer.member_state import MemberState
from groupstream.client.consumer.membership_api import StepDone
from groupstream.client.errors import KafkaConnectionError
from groupstream.client.net.metadata import MetadataCache
from groupstream.client.net.requests import ClientResponse, UnsentRequest
from groupstream.protocol.messages import by_name

S = MemberState
CGH = by_name("ConsumerGroupHeartbeat")
METADATA = by_name("Metadata")
MR: Any = METADATA.Response
HR: Any = CGH.Response

ID_A = uuid.UUID("aaaaaaaa-0000-0000-0000-000000000001")
ID_B = uuid.UUID("bbbbbbbb-0000-0000-0000-000000000002")
MEMBER = "member-1"


def tp(topic: str, *partitions: int) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(topic, p) for p in partitions)


# --- the consumer's side of the contract ------------------------------------------------------------------------


@dataclass
class Step:
    kind: str
    partitions: frozenset[TopicPartition]
    added: frozenset[TopicPartition] | None
    done: StepDone


@dataclass
class RecordingTarget:
    """Owns partitions the way the consumer does; steps finish only when the test says so (``finish``), and a
    step begun while another is running fails the test, because the contract says steps never overlap."""

    owned: frozenset[TopicPartition] = frozenset()
    steps: list[Step] = field(default_factory=list)
    running: Step | None = None

    def owned_partitions(self) -> frozenset[TopicPartition]:
        return self.owned

    def _begin(self, step: Step) -> None:
        assert self.running is None, f"{step.kind} began while {self.running.kind} was running"
        self.running = step
        self.steps.append(step)

    def revoke(self, partitions: frozenset[TopicPartition], done: StepDone) -> None:
        self._begin(Step("revoke", partitions, None, done))

    def assign(
        self, assignment: frozenset[TopicPartition], added: frozenset[TopicPartition], done: StepDone
    ) -> None:
        self._begin(Step("assign", assignment, added, done))

    def lose(self, partitions: frozenset[TopicPartition], done: StepDone) -> None:
        self._begin(Step("lose", partitions, None, done))

    def finish(self, error: BaseException | None = None) -> Step:
        step = self.running
        assert step is not None, "no step is running"
        if step.kind == "assign":
            self.owned = step.partitions
        else:
            self.owned = self.owned - step.partitions
        self.running = None
        step.done(error)
        return step

    def kinds(self) -> list[str]:
        return [s.kind for s in self.steps]


@dataclass
class Locator:
    node: int | None = 1
    lost: list[int] = field(default_factory=list)

    def coordinator(self) -> int | None:
        return self.node

    def coordinator_lost(self, now_ms: int) -> None:
        self.lost.append(now_ms)
        self.node = None


def metadata_with(cache: MetadataCache, topics: dict[str, tuple[uuid.UUID, int]], now_ms: int) -> None:
    P = MR.MetadataResponseTopic.MetadataResponsePartition
    body = MR(
        brokers=[MR.MetadataResponseBroker(node_id=1, host="h", port=9092)],
        cluster_id="c",
        controller_id=1,
        topics=[
            MR.MetadataResponseTopic(
                error_code=0,
                name=name,
                topic_id=tid,
                partitions=[
                    P(error_code=0, partition_index=i, leader_id=1, replica_nodes=[1], isr_nodes=[1])
                    for i in range(n)
                ],
            )
            for name, (tid, n) in topics.items()
        ],
    )
    cache.apply(body, 12, now_ms)


# --- harness ----------------------------------------------------------------------------------------------------


class Member:
    def __init__(self, **config: Any) -> None:
        self.now = 1_000
        self.target = RecordingTarget()
        self.locator = Locator()
        self.cache = MetadataCache()
        metadata_with(self.cache, {"A": (ID_A, 8)}, self.now)
        settings: dict[str, Any] = {"group_id": "g", "member_id": MEMBER, "max_poll_interval_ms": 60_000}
        settings.update(config)
        self.m = ConsumerMembershipManager(
            ConsumerMembershipConfig(**settings), self.target, self.locator, MetadataTopicNames(self.cache)
        )

    def poll(self) -> list[UnsentRequest]:
        return list(self.m.poll(self.now).unsent_requests)

    def delay(self) -> int | None:
        result = self.m.poll(self.now)
        assert not result.unsent_requests
        return result.next_poll_delay_ms

    def one(self) -> UnsentRequest:
        reqs = self.poll()
        assert len(reqs) == 1, reqs
        return reqs[0]

    def answer(
        self,
        req: UnsentRequest,
        *,
        epoch: int = 1,
        error: int = 0,
        assignment: dict[uuid.UUID, Iterable[int]] | None = None,
        interval: int = 3_000,
        version: int = 1,
        member_id: str | None = MEMBER,
        message: str | None = None,
    ) -> None:
        assign = None
        if assignment is not None:
            assign = HR.Assignment(
                topic_partitions=[
                    HR.Assignment.TopicPartitions(topic_id=t, partitions=sorted(ps))
                    for t, ps in assignment.items()
                ]
            )
        body = HR(
            throttle_time_ms=0,
            error_code=error,
            error_message=message,
            member_id=member_id,
            member_epoch=epoch,
            heartbeat_interval_ms=interval,
            assignment=assign,
        )
        decoded = CGH.decode_response(CGH.encode_response(body, version), version)
        req.handler(ClientResponse(req, req.node_id or -1, version, decoded, None, self.now))

    def disconnect(self, req: UnsentRequest) -> None:
        req.handler(
            ClientResponse(req, req.node_id or -1, 1, None, KafkaConnectionError("h:1", "closed"), self.now)
        )

    def stable_with(self, partitions: Iterable[int], *, epoch: int = 1) -> None:
        """Subscribe to A, join and reconcile ``partitions`` of A, acknowledge; STABLE afterwards."""
        self.m.subscribe(frozenset({"A"}), None, self.now)
        self.answer(self.one(), epoch=epoch, assignment={ID_A: partitions})
        if self.m.state is not S.STABLE:  # an empty assignment is stable at once
            self.m.poll(self.now)
            if self.target.running is not None:
                self.target.finish()
            ack = self.one()
            self.answer(ack, epoch=epoch)
        assert self.m.state is S.STABLE
        self.now += 3_000


def sent(req: UnsentRequest, version: int = 1) -> Any:
    """The request body at ``version``, checked to encode (the codec refuses fields a version lacks)."""
    body = req.body_for(version)
    CGH.encode_request(body, version)
    return body


def owned_on_wire(body: Any) -> dict[uuid.UUID, list[int]] | None:
    if body.topic_partitions is None:
        return None
    return {t.topic_id: list(t.partitions) for t in body.topic_partitions}
