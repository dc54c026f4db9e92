"""Our consumer in groups on a 3-node Apache Kafka cluster, each member in its own process: the classic
protocol with our ``cooperative-sticky`` and ``range`` assignors, and KIP-848 ``group.protocol=consumer`` with
the broker's ``uniform`` and ``range`` assignors.

The scenario is the one our broker's group tests run (`test_group_lifecycle.scenario`) while records flow: a
member joins, another joins, a third is killed with SIGKILL and its partitions move after the session timeout,
one leaves, the last leaves, and a fresh member resumes from the committed offsets. From the members' own
reports the group checks establish that no partition ever had two owners at once, that every acknowledged
commit came from the partition's owner, that each new owner resumed at the last acknowledged commit, that
every produced record was processed, and that the group's committed offsets end at the log ends. On this
cluster the group coordinator is one node and the partition leaders are spread over all three.
"""

from __future__ import annotations

import pytest
from group_harness import Members
from test_group_lifecycle import scenario

from support.apache_kafka import ApacheKafkaCluster, ExternalKafkaCluster

pytestmark = [pytest.mark.broker_apache, pytest.mark.compat, pytest.mark.slow]

CASES = [
    ("classic", "cooperative-sticky"),
    ("classic", "range"),
    ("consumer", "uniform"),
    ("consumer", "range"),
]


@pytest.mark.parametrize(("protocol", "strategy"), CASES, ids=[f"{p}-{s}" for p, s in CASES])
def test_our_consumer_group_join_crash_leave_resume(
    apache_cluster: ApacheKafkaCluster | ExternalKafkaCluster, members: Members, protocol: str, strategy: str
) -> None:
    scenario(apache_cluster.bootstrap, members, "groupstream", strategy, protocol=protocol)
