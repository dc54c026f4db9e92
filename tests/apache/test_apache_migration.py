"""Online migration on Apache Kafka 4.4 (one node), for comparison with ours (tests/compat/groups/
test_group_migration.py, where the rolling upgrade runs with cooperative-sticky classic members).

- Kafka refuses to convert a group whose classic assignments carry user data ("userData from a custom
  assignor would be lost", in its log; GROUP_ID_NOT_FOUND to the member), and librdkafka's do (it echoes each member's subscription
  user data, the sticky assignors' state): the first confluent-kafka ``group.protocol=consumer`` member of a
  cooperative-sticky confluent-kafka group fails fatally, and the group stays classic. Ours converts it.
- With ``range`` classic members (no user data) Kafka runs the rolling upgrade and back, as ours does.
- A classic process taking the last ``consumer``-protocol static member's place (its ``group.instance.id``)
  makes the group classic again at once, without a rebalance, as ours does in a settled group; and a
  ``consumer``-protocol process taking a stopped classic static member's place converts the group at once.
"""

from __future__ import annotations

import pytest
from group_harness import Members, create_topic, unique, wait_for
from test_group_migration import (
    CLASSIC,
    CONSUMER,
    _group_type,
    rolling_upgrade,
    static_replacement,
    static_upgrade,
)

from support.apache_kafka import ApacheKafkaCluster, ExternalKafkaCluster

pytestmark = [pytest.mark.broker_apache, pytest.mark.compat, pytest.mark.slow]


def test_kafka_refuses_to_upgrade_a_cooperative_sticky_librdkafka_group(
    apache_node: ApacheKafkaCluster | ExternalKafkaCluster, members: Members
) -> None:
    bs = apache_node.bootstrap
    topic, group = unique("migrate-refused"), unique("g-migrate-refused")
    create_topic(bs, topic, 6)
    members.common.update(bootstrap=bs, group=group, topics=[topic], max_records=200, batch_delay_s=0)
    live = [members.start(f"C{i}", **CLASSIC) for i in range(3)]
    members.wait_split(live, {(topic, p) for p in range(6)}, timeout=60)
    new = members.start("N0", **CONSUMER)
    wait_for(lambda: bool(new.of("fatal")), 60, "the consumer member's fatal error")
    errors = [e["msg"] for e in new.of("error")]
    assert any("The group id does not exist" in m for m in errors), errors  # GROUP_ID_NOT_FOUND
    assert _group_type(bs, group) == "classic"


def test_rolling_upgrade_of_range_members_on_apache_kafka(
    apache_node: ApacheKafkaCluster | ExternalKafkaCluster, members: Members
) -> None:
    worst = rolling_upgrade(apache_node.bootstrap, members, split_timeout=90,
                            classic={"client": "confluent", "protocol": "classic", "strategy": "range"})  # fmt: skip
    print(f"\nworst gap of a partition under one owner during the migrations: {worst * 1000:.0f} ms")


def test_a_classic_process_replacing_the_last_consumer_static_member_on_apache_kafka(
    apache_node: ApacheKafkaCluster | ExternalKafkaCluster, members: Members
) -> None:
    static_replacement(apache_node.bootstrap, members, classic={**CLASSIC, "strategy": "range"}, timeout=90,
                       describe_groups=False)  # fmt: skip


def test_a_consumer_process_taking_a_classic_static_members_place_on_apache_kafka(
    apache_node: ApacheKafkaCluster | ExternalKafkaCluster, members: Members
) -> None:
    static_upgrade(apache_node.bootstrap, members, classic={**CLASSIC, "strategy": "range"}, timeout=90)
