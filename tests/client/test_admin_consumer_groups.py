"""The Admin's view of KIP-848 ``consumer`` groups (ConsumerGroupDescribe) against our broker: a real group of
two of our own consumers (``group.protocol=consumer``) over a 4-partition topic, a classic group and an unknown
one side by side, the group type in ListGroups, the coordinator being looked up again while its shard reloads,
and how a member's state (stable or reconciling) is read from a response."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from test_admin_groups import broker_with_loop

from groupstream import Consumer
from groupstream.broker.group_routing import partition_for
from groupstream.client.admin import Admin, ConsumerGroupDescription, NewTopic
from groupstream.client.admin.groups import _consumer_group
from groupstream.client.errors import KafkaError
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name
from support.brokers import BrokerKind, BrokerProcess

pytestmark = pytest.mark.broker_ours

PARTITIONS = 4
_T = TypeVar("_T")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    settings = {"group.initial.rebalance.delay.ms": "0", "group.consumer.heartbeat.interval.ms": "300"}
    with BrokerProcess(BrokerKind.GROUPSTREAM, tmp_path_factory.mktemp("admin-cg"), settings=settings) as b:
        yield b


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _member(bs: str, group: str, topic: str, name: str) -> Consumer:
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "client.id": name, "group.protocol": "consumer",
                  "group.remote.assignor": "uniform", "auto.offset.reset": "earliest"})  # fmt: skip
    c.subscribe([topic])
    return c


def _poll_until(
    members: list[Consumer], check: Callable[[], _T | None], what: str, timeout: float = 30
) -> _T:
    """Poll every member (which runs their rebalance callbacks) until ``check`` returns something."""
    deadline = time.monotonic() + timeout
    while True:
        for m in members:
            m.poll(0.05)
        found = check()
        if found is not None:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}"


def _stable_pair(
    admin: Admin, group: str, members: list[Consumer]
) -> Callable[[], ConsumerGroupDescription | None]:
    def check() -> ConsumerGroupDescription | None:
        desc = admin.describe_consumer_groups([group])[group]
        owned = all(m.assignment() for m in members)
        return desc if desc.stable and len(desc.members) == 2 and owned else None

    return check


def test_describe_a_stable_consumer_group(broker: BrokerProcess) -> None:
    bs = broker.bootstrap
    topic, group = _unique("cg-t"), _unique("cg")
    with Admin({"bootstrap.servers": bs}) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS)])
        members = [_member(bs, group, topic, f"m{i}") for i in range(2)]
        try:
            desc = _poll_until(members, _stable_pair(admin, group, members), "two members owning partitions")
            owned = {tuple(sorted((tp.topic, tp.partition) for tp in m.assignment())) for m in members}
            topic_id = admin.describe_topics([topic])[topic].topic_id
        finally:
            for m in members:
                m.close()

    assert (desc.group_id, desc.state, desc.assignor_name) == (group, "Stable", "uniform")
    assert desc.group_epoch > 0 and desc.assignment_epoch == desc.group_epoch
    assert desc.coordinator_id == 1 and desc.coordinator == bs
    assert sorted(m.client_id for m in desc.members) == ["m0", "m1"]
    assert [m.member_id for m in desc.members] == sorted(m.member_id for m in desc.members)
    for m in desc.members:
        assert m.member_epoch == desc.assignment_epoch
        assert m.assignment == m.target_assignment and len(m.assignment) == PARTITIONS // 2
        assert (m.state, m.reconciling, m.member_type) == ("stable", False, "consumer")
        assert (m.subscribed_topic_names, m.subscribed_topic_regex, m.instance_id) == ((topic,), None, None)
        assert m.client_host.endswith("127.0.0.1")
        assert m.topic_ids == {topic: topic_id}
    # the members' current assignments partition the topic, and are what the consumers themselves own
    owners = desc.owners()
    assert sorted(owners) == [(topic, p) for p in range(PARTITIONS)]
    assert desc.targets() == owners
    assert {m.assignment for m in desc.members} == owned


def test_classic_unknown_and_consumer_groups_side_by_side(broker: BrokerProcess) -> None:
    bs = broker.bootstrap
    topic, group, classic = _unique("cg-t"), _unique("cg"), _unique("classic")
    with Admin({"bootstrap.servers": bs}) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS)])
        admin.alter_group_offsets(classic, {(topic, 0): 1})  # an empty classic group with an offset
        members = [_member(bs, group, topic, f"m{i}") for i in range(2)]
        try:
            _poll_until(members, _stable_pair(admin, group, members), "a stable group")

            with pytest.raises(KafkaError) as info:
                admin.describe_consumer_groups([classic])
            assert info.value.code == ErrorCode.GROUP_ID_NOT_FOUND
            assert "is not a consumer group" in str(info.value) and repr(classic) in str(info.value)
            with pytest.raises(KafkaError) as info:
                admin.describe_consumer_groups([group, "no-such-group"])
            assert info.value.code == ErrorCode.GROUP_ID_NOT_FOUND and "'no-such-group'" in str(info.value)

            both = admin.describe_consumer_groups_or_errors([classic, group, "no-such-group", group])
            assert list(both) == [classic, group, "no-such-group"]
            assert isinstance(both[group], ConsumerGroupDescription) and len(both[group].members) == 2
            for missing in (classic, "no-such-group"):
                result = both[missing]
                assert isinstance(result, KafkaError) and result.code == ErrorCode.GROUP_ID_NOT_FOUND
            assert admin.describe_consumer_groups([]) == {}

            listed = {g.group_id: g for g in admin.list_groups()}
            assert (listed[group].group_type, listed[group].protocol_type, listed[group].state) == (
                "consumer", "consumer", "Stable")  # fmt: skip
            assert (listed[classic].group_type, listed[classic].state) == ("classic", "Empty")
            consumer_only = {g.group_id for g in admin.list_groups(types=["CONSUMER"])}
            assert group in consumer_only and classic not in consumer_only
            classic_only = {g.group_id for g in admin.list_groups(types=["classic"])}
            assert classic in classic_only and group not in classic_only
            assert [
                g.group_id for g in admin.list_groups(["stable"], ["consumer"]) if g.group_id == group
            ] == [group]
            with pytest.raises(ValueError, match="unknown group type 'share'"):
                admin.list_groups(types=["share"])
        finally:
            for m in members:
                m.close()


def test_describe_follows_the_coordinator_through_unload_and_reload(tmp_path: Path) -> None:
    with broker_with_loop(tmp_path) as (node, loop):
        bs = f"127.0.0.1:{node.config.port}"
        topic, group = _unique("cg-t"), _unique("cg")
        with Admin({"bootstrap.servers": bs}) as admin:
            admin.create_topics([NewTopic(topic, 2)])
            member = _member(bs, group, topic, "solo")

            def owns_both() -> ConsumerGroupDescription | None:
                desc = admin.describe_consumer_groups([group])[group]
                return desc if desc.stable and len(member.assignment()) == 2 else None

            before = _poll_until([member], owns_both, "the member owning both partitions")
            member.close()  # the group stays, Empty, as a consumer group

            shard = partition_for(group, 50)
            loop.call_soon_threadsafe(node.coordinator.unload, shard)
            with Admin({"bootstrap.servers": bs, "request.timeout.ms": 300}) as impatient:
                with pytest.raises(KafkaError) as info:
                    impatient.describe_consumer_groups([group])
                assert info.value.code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE)

            loop.call_soon_threadsafe(loop.call_later, 0.5, node.coordinator.reload, shard)
            started = time.monotonic()
            after = admin.describe_consumer_groups([group])[group]
            assert time.monotonic() - started >= 0.4
            assert (after.group_id, after.state, after.members) == (group, "Empty", ())
            assert after.group_epoch > before.group_epoch  # the leave bumped it


def _response_group(
    epoch: int, assignment_epoch: int, members: list[tuple[int, list[int], list[int]]]
) -> Any:
    """A ConsumerGroupDescribe answer for one group over topic ``t``: (member epoch, current, target)."""
    G = by_name("ConsumerGroupDescribe").Response.DescribedGroup
    A = G.Member.Assignment
    tid = uuid.UUID(int=7)

    def assignment(parts: list[int]) -> Any:
        return A(
            topic_partitions=[A.TopicPartitions(topic_id=tid, topic_name="t", partitions=parts)]
            if parts
            else []
        )

    return G(error_code=0, error_message=None, group_id="g", group_state="Reconciling", group_epoch=epoch,
             assignment_epoch=assignment_epoch, assignor_name="uniform", members=[
                 G.Member(member_id=f"m{i}", instance_id=None, rack_id=None, member_epoch=e, client_id="c",
                          client_host="h", subscribed_topic_names=["t"], subscribed_topic_regex=None,
                          assignment=assignment(cur), target_assignment=assignment(target), member_type=1)
                 for i, (e, cur, target) in enumerate(members)])  # fmt: skip


def test_member_state_is_read_from_epochs_and_assignments() -> None:
    raw = _response_group(5, 5, [(5, [0, 1], [0, 1]), (4, [2, 3], [2]), (4, [], [3]), (4, [0], [0])])
    desc = _consumer_group(raw, 1, 1, "b:9092")
    assert [(m.member_id, m.state) for m in desc.members] == [
        ("m0", "stable"), ("m1", "reconciling"), ("m2", "reconciling"), ("m3", "reconciling")]  # fmt: skip
    assert desc.members[1].assignment == (("t", 2), ("t", 3)) and desc.members[1].target_assignment == (
        ("t", 2),
    )
    assert desc.members[0].topic_ids == {"t": uuid.UUID(int=7)} and desc.members[2].topic_ids == {
        "t": uuid.UUID(int=7)
    }
    assert not desc.stable and desc.targets()[("t", 3)].member_id == "m2"
    assert _consumer_group(raw, 0, 1, "b:9092").members[0].member_type is None  # v0 has no member type
