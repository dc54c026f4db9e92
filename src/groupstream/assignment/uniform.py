"""The server-side ``uniform`` assignor (KIP-848's default): balanced, and a partition moves only for balance.

It starts from the current target assignment, drops what a member no longer subscribes to (or what no
longer exists), and runs the same balanced, sticky assignment as the client's ``sticky``. Identical
subscriptions end with counts within one of each other and move the fewest partitions possible;
different subscriptions end in Kafka's balance condition (no member can take a partition from one that
holds two more).
"""

from __future__ import annotations

from groupstream.assignment.balance import balanced_sticky_assignment
from groupstream.assignment.ordering import java_string_key
from groupstream.assignment.ownership import Claim, resolve_claims
from groupstream.assignment.server import GroupSpec, ServerPartitionAssignor
from groupstream.assignment.types import ClusterView, GroupAssignment

__all__ = ["UniformAssignor", "uniform_assign"]


def uniform_assign(group: GroupSpec, topics: ClusterView) -> GroupAssignment:
    """The uniform target assignment of ``group``."""
    members = sorted((m.member_id for m in group), key=java_string_key)
    subscribed = {
        m.member_id: frozenset(t for t in m.subscribed_topics if topics.partition_count(t) > 0) for m in group
    }
    # A target assignment never gives one partition to two members; if one did, neither keeps it.
    claims = [Claim(m.member_id, tuple(m.assigned), 0) for m in group]
    owned = resolve_claims(claims, subscribed, topics)
    return GroupAssignment(balanced_sticky_assignment(members, subscribed, topics, owned))


class UniformAssignor(ServerPartitionAssignor):
    """``group.remote.assignor=uniform``."""

    name = "uniform"

    def assign(self, group: GroupSpec, topics: ClusterView) -> GroupAssignment:
        return uniform_assign(group, topics)
