"""Registries, the assignor interface, protocol selection and the value types."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from groupstream.assignment import (
    CLIENT_ASSIGNORS,
    DEFAULT_SERVER_ASSIGNOR,
    SERVER_ASSIGNORS,
    AssignorError,
    ClusterView,
    ConsumerPartitionAssignor,
    GroupAssignment,
    GroupSpec,
    MemberSpec,
    RebalanceProtocol,
    Subscription,
    TopicPartition,
    select_rebalance_protocol,
)


class EverythingToTheFirst(ConsumerPartitionAssignor):
    """A custom assignor, as a user of our client would write one."""

    name = "first"

    def assign(self, cluster: ClusterView, subscriptions: Iterable[Subscription]) -> GroupAssignment:
        subs = sorted(subscriptions, key=lambda s: s.member_id)
        everything = [TopicPartition(t, p) for t in subs[0].topics for p in range(cluster.partition_count(t))]
        return GroupAssignment({s.member_id: everything if s is subs[0] else [] for s in subs})


def test_client_registry_has_kafkas_names() -> None:
    assert sorted(CLIENT_ASSIGNORS) == ["cooperative-sticky", "range", "roundrobin", "sticky"]
    assert all(CLIENT_ASSIGNORS[name].name == name for name in CLIENT_ASSIGNORS)


def test_server_registry_has_kafkas_names_and_default() -> None:
    assert sorted(SERVER_ASSIGNORS) == ["range", "uniform"]
    assert DEFAULT_SERVER_ASSIGNOR in SERVER_ASSIGNORS


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(AssignorError, match="known: \\['cooperative-sticky'"):
        CLIENT_ASSIGNORS["nope"]
    assert CLIENT_ASSIGNORS.get("nope") is None


def test_custom_assignor_registered_without_touching_the_default_registry() -> None:
    custom = CLIENT_ASSIGNORS.with_assignor(EverythingToTheFirst())
    assert "first" in custom and "first" not in CLIENT_ASSIGNORS
    result = custom["first"].assign(
        ClusterView({"t": 2}), [Subscription("b", ("t",)), Subscription("a", ("t",))]
    )
    assert result == {"a": (TopicPartition("t", 0), TopicPartition("t", 1)), "b": ()}
    assert custom["first"].subscription_user_data(["t"], None, -1) is None


def test_protocol_selection_takes_the_highest_common() -> None:
    assert (
        select_rebalance_protocol([CLIENT_ASSIGNORS["cooperative-sticky"]]) is RebalanceProtocol.COOPERATIVE
    )
    both = [CLIENT_ASSIGNORS["cooperative-sticky"], CLIENT_ASSIGNORS["range"]]
    assert select_rebalance_protocol(both) is RebalanceProtocol.EAGER


def test_protocol_selection_refuses_no_common_protocol() -> None:
    class CooperativeOnly(EverythingToTheFirst):
        name = "coop-only"
        supported_protocols = (RebalanceProtocol.COOPERATIVE,)

    with pytest.raises(AssignorError, match="no rebalance protocol in common"):
        select_rebalance_protocol([CooperativeOnly(), CLIENT_ASSIGNORS["range"]])
    with pytest.raises(AssignorError):
        select_rebalance_protocol([])


def test_duplicate_members_are_refused() -> None:
    twice = [Subscription("a", ("t",)), Subscription("a", ("t",))]
    for assignor in CLIENT_ASSIGNORS.values():
        with pytest.raises(AssignorError, match="two subscriptions"):
            assignor.assign(ClusterView({"t": 1}), twice)
    with pytest.raises(AssignorError, match="twice"):
        GroupSpec([MemberSpec("a", frozenset()), MemberSpec("a", frozenset())])


def test_values_are_normalised_and_read_only() -> None:
    s = Subscription("m", ("b", "a", "b"), owned_partitions=(TopicPartition("b", 1), TopicPartition("a", 0)))
    assert s.topics == ("a", "b")
    assert s.owned_partitions == (TopicPartition("a", 0), TopicPartition("b", 1))
    cluster = ClusterView({"t": 1})
    with pytest.raises(TypeError):
        cluster.partitions_per_topic["t"] = 2  # type: ignore[index]
    with pytest.raises(ValueError, match="negative"):
        ClusterView({"t": -1})
    result = GroupAssignment({"b": [TopicPartition("t", 1), TopicPartition("t", 0)], "a": []})
    assert list(result) == ["a", "b"] and result["b"] == (TopicPartition("t", 0), TopicPartition("t", 1))
    assert result.owners() == {TopicPartition("t", 0): "b", TopicPartition("t", 1): "b"}
    with pytest.raises(ValueError, match="user data"):
        GroupAssignment({"a": []}, user_data={"z": b""})


def test_topic_partition_order_and_repr() -> None:
    assert sorted([TopicPartition("b", 0), TopicPartition("a", 10), TopicPartition("a", 2)]) == [
        TopicPartition("a", 2),
        TopicPartition("a", 10),
        TopicPartition("b", 0),
    ]
    assert repr(TopicPartition("t", 3)) == "t-3"
