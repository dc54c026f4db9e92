"""Pure, deterministic partition assignors: the client-side strategies of the classic protocol (``range``,
``roundrobin``, ``sticky``, ``cooperative-sticky``) and the server-side ones of KIP-848 (``uniform``,
``range``). No I/O, clock, randomness or threads; inputs are decoded subscriptions and a read-only view
of the cluster, outputs are sorted assignments.
"""

from groupstream.assignment.base import (
    AssignorError,
    ConsumerPartitionAssignor,
    select_rebalance_protocol,
)
from groupstream.assignment.cooperative import (
    CooperativeStickyAssignor,
    needs_follow_up_rebalance,
    revoked_partitions,
    validate_cooperative_assignment,
)
from groupstream.assignment.range import RangeAssignor
from groupstream.assignment.registry import (
    CLIENT_ASSIGNORS,
    DEFAULT_SERVER_ASSIGNOR,
    SERVER_ASSIGNORS,
    AssignorRegistry,
)
from groupstream.assignment.roundrobin import RoundRobinAssignor
from groupstream.assignment.server import GroupSpec, MemberSpec, ServerPartitionAssignor
from groupstream.assignment.server_range import ServerRangeAssignor
from groupstream.assignment.sticky import StickyAssignor
from groupstream.assignment.types import (
    ClusterView,
    GroupAssignment,
    RebalanceProtocol,
    Subscription,
    TopicPartition,
)
from groupstream.assignment.uniform import UniformAssignor

__all__ = [
    "CLIENT_ASSIGNORS",
    "DEFAULT_SERVER_ASSIGNOR",
    "SERVER_ASSIGNORS",
    "AssignorError",
    "AssignorRegistry",
    "ClusterView",
    "ConsumerPartitionAssignor",
    "CooperativeStickyAssignor",
    "GroupAssignment",
    "GroupSpec",
    "MemberSpec",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "ServerPartitionAssignor",
    "ServerRangeAssignor",
    "StickyAssignor",
    "Subscription",
    "TopicPartition",
    "UniformAssignor",
    "needs_follow_up_rebalance",
    "revoked_partitions",
    "select_rebalance_protocol",
    "validate_cooperative_assignment",
]
