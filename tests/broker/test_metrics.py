"""The broker's ``/metrics`` (``--http``), read with prometheus_client's own parser while confluent-kafka
produces, commits and joins groups: bytes and messages in per topic count what was produced, bytes out what
was fetched, a group's committed offsets and lag per partition are the true ones after commits at known
offsets, the rebalance counter moves when a member joins, and requests are counted per API."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from http_broker import HttpBroker
from prometheus_client.parser import text_string_to_metric_families

from support.waiting import wait_until

pytestmark = [pytest.mark.compat, pytest.mark.broker_ours]


class MetricsBroker(HttpBroker):
    def samples(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        status, content_type, text = self.get("/metrics")
        assert status == 200 and content_type.startswith("text/plain; version=0.0.4"), (status, content_type)
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MetricsBroker]:
    with MetricsBroker(tmp_path_factory.mktemp("metrics")) as b:
        yield b


def value(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def test_bytes_messages_offsets_and_lag(broker: MetricsBroker) -> None:
    topic, group = f"m-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    conf = {"bootstrap.servers": broker.bootstrap}
    admin = AdminClient(conf)  # kept: librdkafka fails the futures of a client that is garbage-collected
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    p = Producer({**conf, "linger.ms": 0, "compression.type": "none"})
    for i in range(300):
        p.produce(topic, b"x" * 100, partition=i % 2)
    assert p.flush(30) == 0

    s = broker.samples()
    assert value(s, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 300
    bytes_in = value(s, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic)
    assert bytes_in is not None and bytes_in >= 300 * 100  # values plus batch and record framing
    for partition in ("0", "1"):
        assert value(s, "kafka_log_log_logendoffset", topic=topic, partition=partition) == 150
        assert value(s, "kafka_log_log_logstartoffset", topic=topic, partition=partition) == 0
        size = value(s, "kafka_log_log_size", topic=topic, partition=partition)
        assert size is not None and size >= 150 * 100
    produce_requests = sum(v for (name, labels), v in s.items()
                           if name == "kafka_network_requestmetrics_requests_total" and ("request", "Produce") in labels)  # fmt: skip
    assert produce_requests >= 1
    timed = sum(v for (name, labels), v in s.items()
                if name == "kafka_network_requestmetrics_totaltimems_count" and ("request", "Produce") in labels)  # fmt: skip
    assert timed == produce_requests

    # every acknowledged produce was flushed first (flush.policy=always), and each coordinator shard was loaded
    flushes = value(s, "kafka_log_logflushstats_logflushrateandtimems_count")
    assert flushes is not None and flushes >= 1
    loads = value(s, "kafka_server_group_coordinator_metrics_partition_load_time_ms_count")
    assert loads == 50, loads  # offsets.topic.num.partitions

    # commits at known offsets: the lag is the rest of each partition
    c = Consumer({**conf, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 100), TopicPartition(topic, 1, 30)], asynchronous=False)
    c.close()
    s = broker.samples()
    assert value(s, "kafka_consumergroup_current_offset", consumergroup=group, topic=topic, partition="0") == 100
    assert value(s, "kafka_consumergroup_lag", consumergroup=group, topic=topic, partition="0") == 50
    assert value(s, "kafka_consumergroup_lag", consumergroup=group, topic=topic, partition="1") == 120

    # a read of everything shows in bytes out
    reader = Consumer({**conf, "group.id": f"{group}-r", "enable.auto.commit": False})
    reader.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)])
    got = 0
    deadline = time.monotonic() + 30
    while got < 300 and time.monotonic() < deadline:
        got += sum(1 for m in reader.consume(500, 0.5) if m.error() is None)
    reader.close()
    assert got == 300
    bytes_out = value(broker.samples(), "kafka_server_brokertopicmetrics_bytesout_total", topic=topic)
    assert bytes_out is not None and bytes_out >= 300 * 100


def test_rebalances_and_groups_by_state_move_as_members_join(broker: MetricsBroker) -> None:
    topic, group = f"r-{uuid.uuid4().hex[:8]}", f"rg-{uuid.uuid4().hex[:8]}"
    conf = {"bootstrap.servers": broker.bootstrap}
    admin = AdminClient(conf)  # kept: librdkafka fails the futures of a client that is garbage-collected
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)

    def rebalances() -> float:
        return value(broker.samples(), "kafka_server_group_coordinator_metrics_group_rebalance_total",
                     protocol="classic") or 0.0  # fmt: skip

    before = rebalances()
    members = [Consumer({**conf, "group.id": group, "session.timeout.ms": 6000}) for _ in range(2)]
    try:
        members[0].subscribe([topic])
        wait_until(lambda: members[0].poll(0.2) is None and bool(members[0].assignment()), 30, "the first member")
        after_first = rebalances()
        assert after_first > before
        members[1].subscribe([topic])

        def both_assigned() -> bool:
            for m in members:
                m.poll(0.1)
            return all(len(m.assignment()) == 1 for m in members)

        wait_until(both_assigned, 30, "both members to hold a partition")
        assert rebalances() > after_first
        stable = value(broker.samples(), "kafka_server_group_coordinator_metrics_classic_group_count", state="Stable")
        assert stable is not None and stable >= 1
    finally:
        for m in members:
            m.close()


def test_other_paths_and_methods_get_clear_errors(broker: MetricsBroker) -> None:
    status, _, text = broker.get("/nothing")
    assert status == 404 and "/metrics" in text
    request = urllib.request.Request(f"http://127.0.0.1:{broker.http_port}/metrics", data=b"x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 405
