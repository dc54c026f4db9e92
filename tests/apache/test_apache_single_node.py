"""One Apache Kafka node (KRaft, combined controller and broker, replication factor 1): the smallest shape a
user moves to from our embedded broker, and the fixture's own check of kill -9 and restart on the same ports
and data directory.

Our idempotent ``acks=all`` Producer writes a live feed while the node is killed with SIGKILL and started
again: the producer holds its batches while the node is down, reconnects, and continues its sequences on the
restarted node (which rebuilt its producer state from the log). Every acknowledged record is read back
exactly once, by our Consumer and by an independent reader, at offsets with no gap and no duplicate.
"""

from __future__ import annotations

import time

import pytest
from apache_helpers import Feeder, create_topic, unique

from groupstream import Consumer
from support.apache_kafka import ApacheKafkaCluster, ExternalKafkaCluster
from support.compat import Consumed, check_read_equals_acked, confluent_read
from support.waiting import wait_until

pytestmark = [pytest.mark.broker_apache, pytest.mark.compat, pytest.mark.slow]


def test_idempotent_feed_survives_kill9_and_restart_of_a_single_node(
    apache_node: ApacheKafkaCluster | ExternalKafkaCluster,
) -> None:
    if not isinstance(apache_node, ApacheKafkaCluster):
        pytest.skip("kills the Kafka node: needs the node the tests start, not --kafka-bootstrap")
    node, bs, partitions = apache_node.nodes[0], apache_node.bootstrap, 3
    topic = unique("single-kill9")
    create_topic(bs, topic, partitions)
    feeder = Feeder(bs, topic)
    feeder.start()
    try:
        wait_until(lambda: len(feeder.done) >= 2_000, 60, "records acknowledged before the kill")
        apache_node.kill9(node)
        acked_at_kill = len(feeder.done)
        assert node.probe(timeout=0.5) is None, "the node still answers after kill -9"
        apache_node.start_node(node)
        wait_until(
            lambda: len(feeder.done) >= acked_at_kill + 2_000, 60, "records acknowledged after the restart"
        )
    finally:
        feeder.stop()
    feeder.check_all_acknowledged()
    acked = feeder.acked()
    assert acked_at_kill < len(acked), "nothing was produced across the restart"

    with Consumer({"bootstrap.servers": bs, "auto.offset.reset": "earliest"}) as c:
        c.assign([(topic, p) for p in range(partitions)])
        got: list[Consumed] = []
        deadline = time.monotonic() + 60
        while len(got) < len(acked) and time.monotonic() < deadline:
            got += [Consumed(r.partition, r.offset, r.key, r.value) for r in c.poll(0.5)]
        got += [Consumed(r.partition, r.offset, r.key, r.value) for r in c.poll(0.3)]
    check_read_equals_acked(feeder.sent, acked, got, partitions)
    logged, ends = confluent_read(bs, topic, partitions, len(acked))
    check_read_equals_acked(feeder.sent, acked, logged, partitions, end_offsets=ends)
