"""Our transactional producer and read_committed consumer against our broker (issue 17): the scenarios Apache
Kafka passes in ``tests/apache/test_apache_transactions.py``, run unchanged."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from txn_scenarios import (
    aborted_records_are_invisible_to_read_committed,
    admin_and_cli_show_open_transactions,
    killed_loop_outputs_every_record_once,
    stale_group_metadata_makes_the_transaction_abortable,
    stopped_zombie_cannot_commit,
    zombie_is_fenced,
)

from support.brokers import BrokerFactory, BrokerProcess
from support.cluster_topics import unique

_CLI = Path(__file__).resolve().parents[2] / "cli"
if str(_CLI) not in sys.path:
    sys.path.insert(0, str(_CLI))  # cli_runner, for the CLI scenario

pytestmark = [pytest.mark.broker_ours]


def test_aborted_records_are_invisible_to_read_committed(groupstream_broker: BrokerProcess) -> None:
    aborted_records_are_invisible_to_read_committed(groupstream_broker.bootstrap, unique("txn-vis"), unique("tid"))


def test_a_zombie_producer_cannot_commit(groupstream_broker: BrokerProcess) -> None:
    zombie_is_fenced(groupstream_broker.bootstrap, unique("txn-zombie"), unique("tid"))


def test_admin_and_cli_list_and_describe_transactions(groupstream_broker: BrokerProcess) -> None:
    admin_and_cli_show_open_transactions(groupstream_broker.bootstrap, unique("txn-admin"), unique("tid"))


@pytest.mark.parametrize("client", ["ours", "confluent"])
def test_consume_transform_produce_killed_9_outputs_each_record_once(
    groupstream_broker: BrokerProcess, client: str
) -> None:
    killed_loop_outputs_every_record_once(groupstream_broker.bootstrap, unique(f"txn-loop-{client}"), client)


def test_a_stale_generation_makes_the_transaction_abortable(groupstream_broker: BrokerProcess) -> None:
    stale_group_metadata_makes_the_transaction_abortable(groupstream_broker.bootstrap, unique("txn-gen"))


def test_the_loop_survives_a_broker_kill_9(broker_factory: BrokerFactory) -> None:
    """Besides the loop's own kills, our broker is killed -9 once (open transactions, the coordinator's state
    and the group's offsets recovered from its logs) while the loop runs: the loop's client rides it out."""
    broker = broker_factory("groupstream")

    def kill_broker() -> None:
        broker.restart(kill=True)

    killed_loop_outputs_every_record_once(broker.bootstrap, unique("txn-loop-broker"), "ours", kill_broker=kill_broker)


def test_a_sigstopped_zombie_cannot_commit_after_resuming(groupstream_broker: BrokerProcess) -> None:
    stopped_zombie_cannot_commit(groupstream_broker.bootstrap, unique("txn-stop"), unique("tid"))
