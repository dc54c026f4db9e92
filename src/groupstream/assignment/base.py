"""The client-side assignor interface (Kafka's ``ConsumerPartitionAssignor``), for built-in and custom assignors.

In the classic protocol the group leader runs the assignor named by the protocol the coordinator chose,
over every member's decoded subscription. Our assignors keep no state between rebalances: what Java's
sticky assignors remember (the member's last assignment and generation) is handed to
``subscription_user_data`` by the client, which knows both. That keeps the assignment layer pure and lets one
assignor object serve any number of consumers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import ClassVar

from groupstream.assignment.types import (
    ClusterView,
    GroupAssignment,
    RebalanceProtocol,
    Subscription,
    TopicPartition,
)

__all__ = [
    "AssignorError",
    "ConsumerPartitionAssignor",
    "index_subscriptions",
    "select_rebalance_protocol",
]


class AssignorError(ValueError):
    """The inputs cannot be assigned (duplicate member ids, no common rebalance protocol, unknown name)."""


class ConsumerPartitionAssignor(ABC):
    """A named assignment strategy for the classic consumer protocol.

    ``assign`` must be deterministic: the same subscriptions and cluster view, in any order, give the same
    result, and every member in ``subscriptions`` appears in the result (with an empty tuple if it gets
    nothing), because the coordinator hands each member exactly what the leader returns for it.
    """

    name: ClassVar[str]
    supported_protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (RebalanceProtocol.EAGER,)

    @abstractmethod
    def assign(self, cluster: ClusterView, subscriptions: Iterable[Subscription]) -> GroupAssignment:
        """Assign every partition of every subscribed topic known to ``cluster``."""

    def subscription_user_data(
        self,
        topics: Iterable[str],
        owned: Sequence[TopicPartition] | None,
        generation: int,
    ) -> bytes | None:
        """Bytes for the ``user_data`` of this member's subscription; ``owned`` is None before any assignment."""
        return None

    def on_assignment(
        self, assignment: Sequence[TopicPartition], user_data: bytes | None, generation: int
    ) -> None:
        """Called on every member after SyncGroup; a hook for custom assignors, a no-op for ours."""
        return None


def index_subscriptions(subscriptions: Iterable[Subscription]) -> dict[str, Subscription]:
    """Member id -> subscription, refusing two subscriptions for one member (the result could not say which)."""
    by_member: dict[str, Subscription] = {}
    for subscription in subscriptions:
        if subscription.member_id in by_member:
            raise AssignorError(f"member {subscription.member_id!r} has two subscriptions")
        by_member[subscription.member_id] = subscription
    return by_member


def select_rebalance_protocol(assignors: Iterable[ConsumerPartitionAssignor]) -> RebalanceProtocol:
    """The protocol a consumer uses: the highest one every configured assignor supports (as Kafka picks it)."""
    common: set[RebalanceProtocol] | None = None
    names: list[str] = []
    for assignor in assignors:
        names.append(assignor.name)
        supported = set(assignor.supported_protocols)
        common = supported if common is None else common & supported
    if common is None:
        raise AssignorError("no partition assignor configured")
    if not common:
        raise AssignorError(f"assignors {names} have no rebalance protocol in common")
    return max(common)
