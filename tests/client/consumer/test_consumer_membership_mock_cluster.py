"""Our KIP-848 member over our real network client, against a coordinator nobody here wrote: librdkafka's
in-process mock cluster (confluent-kafka, ``test.mock.num.brokers``), which serves ConsumerGroupHeartbeat.

Members split a topic's partitions exactly once (two or three of ours, or one of ours beside a librdkafka
consumer); when one leaves, the other converges to all of them without ever revoking the partitions it kept. The network loop is driven from the test thread (``run_once``), so
there is no background thread; waits poll a condition against a deadline.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import confluent_kafka as ck
import pytest

from groupstream.assignment.types import TopicPartition
from groupstream.client.consumer.consumer_membership import (
    ConsumerMembershipConfig,
    ConsumerMembershipManager,
)
from groupstream.client.consumer.consumer_membership_metadata import MetadataTopicNames
from groupstream.client.consumer.member_state import MemberState
from groupstream.client.consumer.membership_api import StepDone
from groupstream.client.net.config import NetworkConfig
from groupstream.client.net.metadata import MetadataCache
from groupstream.client.net.network_client import NetworkClient
from groupstream.client.net.network_thread import ApplicationEvent, NetworkThread, monotonic_ms
from groupstream.client.net.requests import ClientResponse, PollResult, UnsentRequest
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name

pytestmark = [pytest.mark.compat, pytest.mark.slow]

FIND_COORDINATOR = by_name("FindCoordinator")
TOPIC = "kip848-members"
PARTITIONS = 4


@pytest.fixture
def mock_cluster() -> Iterator[tuple[str, int]]:
    """A one-broker librdkafka mock cluster with TOPIC (auto-created with 4 partitions by the produce)."""
    producer = ck.Producer({"test.mock.num.brokers": 1, "log_level": 3})
    for _ in range(PARTITIONS):
        producer.produce(TOPIC, b"x")
    assert producer.flush(10) == 0
    broker = next(iter(producer.list_topics(timeout=10).brokers.values()))
    assert len(producer.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions) == PARTITIONS
    yield broker.host, broker.port
    del producer  # the mock cluster lives as long as its client


@dataclass
class FindCoordinator:
    """The smallest `CoordinatorLocator`: FindCoordinator v0-3 until it answers, again when told it moved."""

    group_id: str
    node: int | None = None
    in_flight: bool = False
    not_before_ms: int = 0
    lost: int = 0

    def coordinator(self) -> int | None:
        return self.node

    def coordinator_lost(self, now_ms: int) -> None:
        self.node = None
        self.lost += 1
        self.not_before_ms = now_ms + 100

    def poll(self, now_ms: int) -> PollResult:
        if self.node is not None or self.in_flight:
            return PollResult()
        if now_ms < self.not_before_ms:
            return PollResult((), self.not_before_ms - now_ms)
        self.in_flight = True
        body = FIND_COORDINATOR.Request(key=self.group_id, key_type=0)
        return PollResult((UnsentRequest(FIND_COORDINATOR, body, self._on_response, max_version=3),), None)

    def _on_response(self, response: ClientResponse) -> None:
        self.in_flight = False
        if response.error is None and response.body.error_code == ErrorCode.NONE:
            self.node = response.body.node_id
        else:
            self.not_before_ms = response.received_ms + 100


@dataclass
class Owner:
    """The consumer's side: owns partitions, finishes each step at once, and records every step."""

    owned: frozenset[TopicPartition] = frozenset()
    history: list[tuple[str, frozenset[TopicPartition]]] = field(default_factory=list)

    def owned_partitions(self) -> frozenset[TopicPartition]:
        return self.owned

    def revoke(self, partitions: frozenset[TopicPartition], done: StepDone) -> None:
        self.history.append(("revoke", partitions))
        self.owned -= partitions
        done(None)

    def assign(
        self, assignment: frozenset[TopicPartition], added: frozenset[TopicPartition], done: StepDone
    ) -> None:
        assert added == assignment - self.owned
        self.history.append(("assign", assignment))
        self.owned = assignment
        done(None)

    def lose(self, partitions: frozenset[TopicPartition], done: StepDone) -> None:
        self.history.append(("lose", partitions))
        self.owned -= partitions
        done(None)


class OurMember:
    def __init__(self, address: tuple[str, int], group_id: str, instance_id: str | None = None) -> None:
        self.cache = MetadataCache()
        self.cache.set_topics([TOPIC])
        self.client = NetworkClient(NetworkConfig(bootstrap_servers=(address,)), self.cache, monotonic_ms)
        self.owner = Owner()
        self.locator = FindCoordinator(group_id)
        self.member = ConsumerMembershipManager(
            ConsumerMembershipConfig(
                group_id=group_id,
                member_id=str(uuid.uuid4()),
                group_instance_id=instance_id,
                server_assignor="uniform",
            ),
            self.owner,
            self.locator,
            MetadataTopicNames(self.cache),
        )
        self.loop = NetworkThread(self.client, [self.locator, self.member], self._no_events)

    @staticmethod
    def _no_events(event: ApplicationEvent, now_ms: int) -> None:
        raise AssertionError(f"unexpected event {event!r}")

    def step(self) -> None:
        self.member.poll_called(monotonic_ms())
        self.loop.run_once(20)

    def close(self) -> None:
        self.client.close()


def run_until(members: list[OurMember], condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = monotonic_ms() + int(timeout_s * 1000)
    while not condition():
        assert monotonic_ms() < deadline, f"timed out waiting for {what}"
        for m in members:
            m.step()


def partitions(*ps: int) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(TOPIC, p) for p in ps)


def stable(m: OurMember) -> bool:
    return m.member.state is MemberState.STABLE


def test_two_of_our_members_split_the_partitions_and_one_takes_all_after_a_leave(
    mock_cluster: tuple[str, int],
) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    a, b = OurMember(mock_cluster, group), OurMember(mock_cluster, group)
    try:
        a.member.subscribe(frozenset({TOPIC}), None, monotonic_ms())
        run_until(
            [a],
            lambda: stable(a) and a.owner.owned == partitions(0, 1, 2, 3),
            20,
            "the first member to own all",
        )
        first_epoch = a.member.commit_identity().generation_or_epoch
        assert first_epoch > 0

        b.member.subscribe(frozenset({TOPIC}), None, monotonic_ms())

        def split() -> bool:
            both = a.owner.owned | b.owner.owned
            return (
                stable(a)
                and stable(b)
                and both == partitions(0, 1, 2, 3)
                and not (a.owner.owned & b.owner.owned)
                and len(a.owner.owned) == len(b.owner.owned) == 2
            )

        run_until([a, b], split, 30, "the two members to split the partitions")
        kept = a.owner.owned
        # the first member only gave partitions away: what it kept was never revoked
        assert all(kind != "lose" for kind, _ in a.owner.history)
        assert all(not (ps & kept) for kind, ps in a.owner.history if kind == "revoke")

        left: list[BaseException | None] = []
        b.member.leave(monotonic_ms(), left.append)
        run_until([a, b], lambda: left == [None], 10, "the leave to be answered")
        assert b.member.state is MemberState.UNSUBSCRIBED and b.owner.owned == frozenset()
        run_until(
            [a], lambda: stable(a) and a.owner.owned == partitions(0, 1, 2, 3), 30, "the rest to move back"
        )
        assert all(not (ps & kept) for kind, ps in a.owner.history if kind == "revoke")
        assert a.member.commit_identity().generation_or_epoch > first_epoch
        assert a.member.fatal_error() is None and b.member.fatal_error() is None
    finally:
        a.close()
        b.close()


def test_three_members_split_exactly_once(mock_cluster: tuple[str, int]) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    members = [OurMember(mock_cluster, group) for _ in range(3)]
    try:
        for m in members:
            m.member.subscribe(frozenset({TOPIC}), None, monotonic_ms())

        def split() -> bool:
            owned = [m.owner.owned for m in members]
            return (
                all(stable(m) for m in members)
                and sorted(len(o) for o in owned) == [1, 1, 2]
                and frozenset().union(*owned) == partitions(0, 1, 2, 3)
            )

        run_until(members, split, 40, "three members to split four partitions")
        ids = {m.member.commit_identity().member_id for m in members}
        assert len(ids) == 3  # three distinct members, each with its own client-generated id
    finally:
        for m in members:
            m.close()


def test_our_member_and_a_librdkafka_consumer_share_a_group(mock_cluster: tuple[str, int]) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    ours = OurMember(mock_cluster, group)
    theirs = ck.Consumer(
        {
            "bootstrap.servers": f"{mock_cluster[0]}:{mock_cluster[1]}",
            "group.id": group,
            "group.protocol": "consumer",
            "enable.auto.commit": False,
            "log_level": 3,
        }
    )
    their_owned: set[TopicPartition] = set()

    def step_both() -> None:
        theirs.poll(0)
        their_owned.clear()
        their_owned.update(TopicPartition(p.topic, p.partition) for p in theirs.assignment())

    try:
        ours.member.subscribe(frozenset({TOPIC}), None, monotonic_ms())
        theirs.subscribe([TOPIC])

        def split() -> bool:
            step_both()
            return (
                stable(ours)
                and len(ours.owner.owned) == 2
                and len(their_owned) == 2
                and not (ours.owner.owned & their_owned)
                and ours.owner.owned | their_owned == partitions(0, 1, 2, 3)
            )

        run_until([ours], split, 40, "our member and librdkafka's to split the partitions")
    finally:
        theirs.close()
        ours.close()


def test_static_member_leaves_with_minus_two_and_takes_its_partitions_back(
    mock_cluster: tuple[str, int],
) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    static, other = OurMember(mock_cluster, group, instance_id="static-1"), OurMember(mock_cluster, group)
    try:
        static.member.subscribe(frozenset({TOPIC}), None, monotonic_ms())
        other.member.subscribe(frozenset({TOPIC}), None, monotonic_ms())

        def split() -> bool:
            return stable(static) and stable(other) and len(static.owner.owned) == len(other.owner.owned) == 2

        run_until([static, other], split, 40, "the two members to split the partitions")
        kept, others = static.owner.owned, other.owner.owned
        other_steps = len(other.owner.history)

        left: list[BaseException | None] = []
        static.member.leave(monotonic_ms(), left.append)
        run_until([static, other], lambda: left == [None], 10, "the static leave to be answered")
        # the coordinator keeps the static member's partitions for it: the other member, heartbeating on,
        # is given none of them
        answered = other.member.heartbeats_answered
        run_until(
            [other], lambda: other.member.heartbeats_answered >= answered + 2, 30, "two more heartbeats"
        )
        assert other.owner.owned == others and len(other.owner.history) == other_steps

        static.member.subscribe(frozenset({TOPIC}), None, monotonic_ms())
        run_until([static, other], lambda: stable(static) and static.owner.owned == kept, 30, "the rejoin")
        assert other.owner.owned == others and len(other.owner.history) == other_steps  # nothing moved
    finally:
        static.close()
        other.close()
