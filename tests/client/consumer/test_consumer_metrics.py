"""``Consumer.metrics()``: the window arithmetic with a manual clock, then against our broker: the lag seen by
the consumer's own fetches falls as it reads, rebalances are counted as members join (both group
protocols), commits are timed, and ``last-poll-seconds-ago`` counts from the last poll."""

from __future__ import annotations

import uuid

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from groupstream import Consumer, Producer
from groupstream.client.admin import Admin, NewTopic
from groupstream.client.consumer.metrics import WINDOW_MS, ConsumerMetrics
from groupstream.client.prometheus import register
from support.brokers import BrokerProcess
from support.waiting import wait_until


def test_windows_with_a_manual_clock() -> None:
    now = [1_000]
    m = ConsumerMetrics(lambda: now[0])
    m.rebalance_started(1_000)
    now[0] = 1_500
    m.rebalance_done(1_500)
    m.fetched(20, 100, 1_500)
    m.fetched(40, 300, 2_000)
    m.polled(10, 2_000)
    now[0] = 3_000
    s = m.snapshot()
    assert (s["rebalance-total"], s["rebalance-latency-avg"]) == (1, 500)
    assert (s["fetch-latency-avg"], s["fetch-latency-max"], s["fetch-total"]) == (30, 40, 2)
    assert s["records-consumed-total"] == 10 and s["records-consumed-rate"] == pytest.approx(10 / 2.0)
    assert s["last-poll-seconds-ago"] == pytest.approx(1.0)
    m.rebalance_done(3_000)  # an assignment without a revocation first (a partition added): counted, not timed
    now[0] = 3_000 + WINDOW_MS + 1  # the window has passed: averages start again, totals stay
    s = m.snapshot()
    assert (s["fetch-latency-avg"], s["rebalance-latency-avg"]) == (0, 0)
    assert (s["fetch-total"], s["rebalance-total"]) == (2, 2)


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_lag_rebalances_and_commits_against_our_broker(kip848_broker: BrokerProcess, protocol: str) -> None:
    bs = kip848_broker.bootstrap
    topic, group = f"met-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    with Admin({"bootstrap.servers": bs}) as admin:
        admin.create_topics([NewTopic(topic, 2)])
    with Producer({"bootstrap.servers": bs}) as p:
        for i in range(1000):
            p.produce(topic, b"v", partition=i % 2)
        assert p.flush(30) == 0
    conf = {"bootstrap.servers": bs, "group.id": group, "group.protocol": protocol, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "max.poll.records": 100, "fetch.max.bytes": 1024}  # fmt: skip
    first = Consumer(conf)
    second: Consumer | None = None
    try:
        first.subscribe([topic])
        got = 0

        def assigned() -> bool:
            nonlocal got
            got += len(first.poll(0.2))
            return bool(first.assignment())

        wait_until(assigned, 30, "the first member's assignment")
        wait_until(lambda: first.metrics()["records-lag-max"] > 0, 30, "a fetch that saw the log ends")
        early = first.metrics()
        assert early["rebalance-total"] >= 1 and early["rebalance-latency-avg"] > 0
        assert early["records-lag-max"] <= 500 and early["fetch-total"] >= 1

        def read_all() -> bool:
            nonlocal got
            got += len(first.poll(0.2))
            return got >= 1000 and first.metrics()["records-lag-max"] == 0

        wait_until(read_all, 60, "every record read and no lag left", explain=lambda: f"{got} read, {first.metrics()}")
        first.commit()
        done = first.metrics()
        assert done["records-consumed-total"] == got >= 1000
        assert done["commit-total"] == 1 and done["commit-latency-avg"] > 0
        assert 0 <= done["last-poll-seconds-ago"] < 5

        before = done["rebalance-total"]
        second = Consumer(conf)
        second.subscribe([topic])

        def shared() -> bool:
            first.poll(0.1)
            assert second is not None
            second.poll(0.1)
            return len(first.assignment()) == 1 and len(second.assignment()) == 1

        wait_until(shared, 60, "the two members to share the partitions")
        assert first.metrics()["rebalance-total"] > before, "the second member's join is not counted"
    finally:
        first.close()
        if second is not None:
            second.close()


def test_exported_to_prometheus_as_the_jmx_exporter_names_the_java_clients(kip848_broker: BrokerProcess) -> None:
    bs = kip848_broker.bootstrap
    topic = f"prom-{uuid.uuid4().hex[:8]}"
    with Admin({"bootstrap.servers": bs}) as admin:
        admin.create_topics([NewTopic(topic, 1)])
    registry = CollectorRegistry()
    with Producer({"bootstrap.servers": bs, "client.id": "p1"}) as p, \
            Consumer({"bootstrap.servers": bs, "client.id": "c1", "auto.offset.reset": "earliest"}) as c:  # fmt: skip
        register(p, registry)
        register(c, registry)
        for _ in range(50):
            p.produce(topic, b"v", partition=0)
        assert p.flush(30) == 0
        c.assign([(topic, 0)])
        seen = 0

        def read_all() -> bool:
            nonlocal seen
            seen += len(c.poll(0.2))
            return seen >= 50

        wait_until(read_all, 30, "50 records read")
        samples = {(s.name, s.labels.get("client_id")): s.value for fam in
                   text_string_to_metric_families(generate_latest(registry).decode()) for s in fam.samples}  # fmt: skip
    assert samples[("kafka_producer_producer_metrics_record_send_total", "p1")] == 50
    assert samples[("kafka_consumer_consumer_fetch_manager_metrics_records_consumed_total", "c1")] == 50
    assert ("kafka_consumer_consumer_fetch_manager_metrics_records_lag_max", "c1") in samples
    assert ("kafka_consumer_consumer_coordinator_metrics_rebalance_total", "c1") in samples
