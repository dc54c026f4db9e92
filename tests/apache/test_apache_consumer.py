"""Our Consumer's group features on a 3-node Apache Kafka cluster, where the group coordinator and the
partition leaders are different nodes: the scenarios our broker's tests run (``tests/client/consumer``,
``tests/compat/groups``), imported and run here unchanged.

- KIP-822: partitions a member paused and keeps across a rebalance stay paused (nothing of them is returned),
  under the classic protocol with ``cooperative-sticky`` and under ``group.protocol=consumer``.
- Static membership (``group.instance.id``): a member that restarts within its session timeout gets exactly
  its old partitions back and the other members lose none (no rebalance for them), with both protocols.
- Regular-expression subscriptions: matched in the client for the classic protocol and by Kafka's group
  coordinator (``SubscribedTopicRegex``) for the ``consumer`` protocol; a matching topic created later is
  assigned and read. Kafka matches again when new topics appear, at most every 10 s
  (``REGEX_BATCH_REFRESH_MIN_INTERVAL_MS``), hence the longer wait there.
"""

from __future__ import annotations

from typing import Any

import pytest
from apache_helpers import filled_topic
from group_harness import Members
from test_consumer_brokers import (
    classic,
    kip848,
    paused_partitions_stay_paused_across_a_rebalance,
    regex_subscription_picks_up_new_topics,
)
from test_group_static import static_bounce

from support.apache_kafka import ApacheKafkaCluster, ExternalKafkaCluster

pytestmark = [pytest.mark.broker_apache, pytest.mark.compat]

Cluster = ApacheKafkaCluster | ExternalKafkaCluster
BOTH = [
    pytest.param(classic("cooperative-sticky"), id="classic-cooperative-sticky"),
    pytest.param(kip848("uniform"), id="consumer-uniform"),
]


@pytest.mark.parametrize("settings", BOTH)
def test_kip822_paused_partitions_stay_paused_across_a_rebalance(
    apache_cluster: Cluster, settings: dict[str, Any]
) -> None:
    paused_partitions_stay_paused_across_a_rebalance(apache_cluster.bootstrap, settings, filled_topic)


@pytest.mark.parametrize(
    ("protocol", "strategy"), [("classic", "cooperative-sticky"), ("consumer", "uniform")],
    ids=["classic-cooperative-sticky", "consumer-uniform"],
)  # fmt: skip
def test_static_member_bounce_keeps_the_assignment_without_a_rebalance(
    apache_cluster: Cluster, members: Members, protocol: str, strategy: str
) -> None:
    static_bounce(apache_cluster.bootstrap, members, "groupstream", strategy, protocol)


@pytest.mark.parametrize("settings", BOTH)
def test_regex_subscription_picks_up_a_matching_topic_created_later(
    apache_cluster: Cluster, settings: dict[str, Any]
) -> None:
    timeout_s = 45 if settings.get("group.protocol") == "consumer" else 30
    regex_subscription_picks_up_new_topics(apache_cluster.bootstrap, settings, timeout_s)
