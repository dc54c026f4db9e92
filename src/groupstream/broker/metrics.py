"""The broker's metrics, in Prometheus text format, named as Prometheus' JMX exporter names Kafka's.

Users point the dashboards and alerts they have for Kafka at us, so the names are the JMX exporter's renderings
of Kafka's MBeans (``kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=T`` becomes
``kafka_server_brokertopicmetrics_bytesin_total{topic="T"}``), and the lag of consumer groups uses the names of
the lag exporters people run beside Kafka (kafka_exporter: ``kafka_consumergroup_lag``,
``kafka_consumergroup_current_offset``).

Two kinds: counters the request path bumps as it goes (bytes and messages in, bytes out, requests and their
time, rebalances, fsyncs), and gauges read from the broker's state when scraped (log sizes and offsets,
connections, groups by protocol and state, committed offsets and lag). Scrapes run on the event loop
(`groupstream.broker.http`), so the state they read is never changing under them.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from groupstream.protocol.consumer_group_records import GroupMetadataValue848
from groupstream.protocol.group_records import CoordinatorRecord, GroupMetadataValue

if TYPE_CHECKING:
    from groupstream.broker.node import Broker

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# request time in milliseconds, as Kafka's TotalTimeMs
_TIME_BUCKETS_MS = (0.5, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)


class BrokerMetrics:
    def __init__(self, broker: Broker) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        r = self.registry
        self.bytes_in = Counter("kafka_server_brokertopicmetrics_bytesin", "Bytes appended to a topic by Produce",
                                ["topic"], registry=r)  # fmt: skip
        self.messages_in = Counter("kafka_server_brokertopicmetrics_messagesin",
                                   "Records appended to a topic by Produce", ["topic"], registry=r)  # fmt: skip
        self.bytes_out = Counter("kafka_server_brokertopicmetrics_bytesout", "Bytes of a topic returned by Fetch",
                                 ["topic"], registry=r)  # fmt: skip
        self.requests = Counter("kafka_network_requestmetrics_requests", "Requests received, by API and version",
                                ["request", "version"], registry=r)  # fmt: skip
        self.request_time = Histogram("kafka_network_requestmetrics_totaltimems",
                                      "Time from a request's arrival to its answer, in ms", ["request"],
                                      buckets=_TIME_BUCKETS_MS, registry=r)  # fmt: skip
        self.rebalances = Counter("kafka_server_group_coordinator_metrics_group_rebalance",
                                  "Rebalances completed: new generations (classic) and group epochs (consumer)",
                                  ["protocol"], registry=r)  # fmt: skip
        self.log_flush = Histogram("kafka_log_logflushstats_logflushrateandtimems",
                                   "Time of each log flush (fsync) in ms", buckets=_TIME_BUCKETS_MS, registry=r)  # fmt: skip
        self.coordinator_load = Histogram("kafka_server_group_coordinator_metrics_partition_load_time_ms",
                                          "Time to load a coordinator partition (replay of its records) in ms",
                                          buckets=_TIME_BUCKETS_MS, registry=r)  # fmt: skip
        r.register(_StateCollector(broker))

    def request_done(self, api: str, version: int, elapsed_ms: float) -> None:
        self.requests.labels(api, str(version)).inc()
        self.request_time.labels(api).observe(elapsed_ms)

    def appended(self, topic: str, size: int, records: int) -> None:
        self.bytes_in.labels(topic).inc(size)
        self.messages_in.labels(topic).inc(records)

    def fetched(self, topic: str, size: int) -> None:
        if size:
            self.bytes_out.labels(topic).inc(size)

    def coordinator_records(self, records: Iterable[CoordinatorRecord]) -> None:
        """The coordinator wrote these: each new classic generation or consumer group epoch is a rebalance."""
        for protocol, n in rebalances_in(records).items():
            self.rebalances.labels(protocol).inc(n)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def rebalances_in(records: Iterable[CoordinatorRecord]) -> Tally[str]:
    out: Tally[str] = Tally()
    for rec in records:
        if isinstance(rec.value, GroupMetadataValue) and rec.value.generation > 0:
            out["classic"] += 1
        elif isinstance(rec.value, GroupMetadataValue848):
            out["consumer"] += 1
    return out


class _StateCollector(Collector):
    """Gauges read from the broker at scrape time."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def collect(self) -> Iterator[Metric]:
        yield from self._logs()
        yield from self._connections()
        yield from self._groups()

    def _logs(self) -> Iterator[Metric]:
        size = GaugeMetricFamily("kafka_log_log_size", "Bytes of a partition's log", labels=["topic", "partition"])
        start = GaugeMetricFamily("kafka_log_log_logstartoffset", "A partition's first offset",
                                  labels=["topic", "partition"])  # fmt: skip
        end = GaugeMetricFamily("kafka_log_log_logendoffset", "A partition's next offset",
                                labels=["topic", "partition"])  # fmt: skip
        for topic, partition, log in self._broker.catalog.logs():
            labels = [topic, str(partition)]
            size.add_metric(labels, log.size_bytes)
            start.add_metric(labels, log.log_start_offset)
            end.add_metric(labels, log.log_end_offset)
        yield from (size, start, end)

    def _connections(self) -> Iterator[Metric]:
        g = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count", "Open client connections")
        g.add_metric([], len(self._broker.connections))
        yield g

    def _groups(self) -> Iterator[Metric]:
        runtime = self._broker.coordinator
        catalog = self._broker.catalog
        by_protocol: Tally[str] = Tally()
        classic_states: Tally[str] = Tally()
        consumer_states: Tally[str] = Tally()
        current = GaugeMetricFamily("kafka_consumergroup_current_offset", "A group's committed offset",
                                    labels=["consumergroup", "topic", "partition"])  # fmt: skip
        lag = GaugeMetricFamily("kafka_consumergroup_lag", "Records between a group's committed offset and the end",
                                labels=["consumergroup", "topic", "partition"])  # fmt: skip
        for p in runtime.active_partitions():
            shard: Any = runtime.shard(p)
            if shard is None:
                continue
            for gid in shard.group_ids():
                classic, consumer = shard.group(gid), shard.consumer_group(gid)
                if consumer is not None:
                    by_protocol["consumer"] += 1
                    consumer_states[consumer.state.value] += 1
                elif classic is not None:
                    by_protocol["classic"] += 1
                    classic_states[classic.state.value] += 1
            for gid in shard.offset_groups():
                for topic, partition, offset in shard.committed_offsets(gid):
                    labels = [gid, topic, str(partition)]
                    current.add_metric(labels, offset)
                    info = catalog.get_topic(topic)
                    if info is not None and partition < info.partitions:
                        lag.add_metric(labels, max(0, catalog.log(topic, partition).log_end_offset - offset))
        count = GaugeMetricFamily("kafka_server_group_coordinator_metrics_group_count", "Groups, by protocol",
                                  labels=["protocol"])  # fmt: skip
        for protocol in ("classic", "consumer"):
            count.add_metric([protocol], by_protocol[protocol])
        classic = GaugeMetricFamily("kafka_server_group_coordinator_metrics_classic_group_count",
                                    "Classic groups, by state", labels=["state"])  # fmt: skip
        for state, n in sorted(classic_states.items()):
            classic.add_metric([state], n)
        consumer = GaugeMetricFamily("kafka_server_group_coordinator_metrics_consumer_group_count",
                                     "Consumer (KIP-848) groups, by state", labels=["state"])  # fmt: skip
        for state, n in sorted(consumer_states.items()):
            consumer.add_metric([state], n)
        yield from (count, classic, consumer, current, lag)
