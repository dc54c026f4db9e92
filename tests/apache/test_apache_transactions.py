"""Our transactional producer and read_committed consumer against Apache Kafka 4.x (issue 17): the scenarios
of ``tests/client/transactions/txn_scenarios.py``, which run against our broker too. Apache Kafka serves
transactions fully, so it is the reference our client is held to."""

from __future__ import annotations

import pytest
from txn_scenarios import (
    aborted_records_are_invisible_to_read_committed,
    admin_and_cli_show_open_transactions,
    killed_loop_outputs_every_record_once,
    stale_group_metadata_makes_the_transaction_abortable,
    stopped_zombie_cannot_commit,
    zombie_is_fenced,
)

from support.apache_kafka import ApacheKafkaCluster, ExternalKafkaCluster
from support.cluster_topics import unique

pytestmark = [pytest.mark.broker_apache, pytest.mark.compat]

Cluster = ApacheKafkaCluster | ExternalKafkaCluster


def test_aborted_records_are_invisible_to_read_committed(apache_node: Cluster) -> None:
    aborted_records_are_invisible_to_read_committed(apache_node.bootstrap, unique("txn-vis"), unique("tid"))


def test_a_zombie_producer_cannot_commit(apache_node: Cluster) -> None:
    zombie_is_fenced(apache_node.bootstrap, unique("txn-zombie"), unique("tid"))


@pytest.mark.parametrize("client", ["ours", "confluent"])
def test_consume_transform_produce_killed_9_outputs_each_record_once(apache_node: Cluster, client: str) -> None:
    killed_loop_outputs_every_record_once(apache_node.bootstrap, unique(f"txn-loop-{client}"), client)


def test_admin_and_cli_list_and_describe_transactions(apache_node: Cluster) -> None:
    admin_and_cli_show_open_transactions(apache_node.bootstrap, unique("txn-admin"), unique("tid"))


def test_a_stale_generation_makes_the_transaction_abortable(apache_node: Cluster) -> None:
    stale_group_metadata_makes_the_transaction_abortable(apache_node.bootstrap, unique("txn-gen"))


def test_a_sigstopped_zombie_cannot_commit_after_resuming(apache_node: Cluster) -> None:
    stopped_zombie_cannot_commit(apache_node.bootstrap, unique("txn-stop"), unique("tid"))
