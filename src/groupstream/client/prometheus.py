"""Our clients' ``metrics()`` for Prometheus, named as Prometheus' JMX exporter names the Java client's
(``kafka.consumer:type=consumer-fetch-manager-metrics,client-id=c`` ``records-lag-max`` becomes
``kafka_consumer_consumer_fetch_manager_metrics_records_lag_max{client_id="c"}``), so the dashboards made for
Java applications read ours. ``register(consumer)`` adds one to a registry (prometheus_client's default, which
``prometheus_client.start_http_server`` serves)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["ClientCollector", "register"]

# The Java client's metric group of each of our metric names.
_CONSUMER_GROUPS = {
    "commit-": "consumer-coordinator-metrics",
    "rebalance-": "consumer-coordinator-metrics",
    "last-poll-": "consumer-metrics",
}


def _group(kind: str, metric: str) -> str:
    if kind == "producer":
        return "producer-metrics"
    return next((g for prefix, g in _CONSUMER_GROUPS.items() if metric.startswith(prefix)),
                "consumer-fetch-manager-metrics")  # fmt: skip


def exporter_name(kind: str, metric: str) -> str:
    return f"kafka_{kind}_{_group(kind, metric)}_{metric}".replace("-", "_")


class ClientCollector(Collector):
    def __init__(self, kind: str, client_id: str, metrics: Callable[[], dict[str, float]]) -> None:
        self._kind, self._client_id, self._metrics = kind, client_id, metrics

    def collect(self) -> Iterator[Metric]:
        for metric, value in sorted(self._metrics().items()):
            name = exporter_name(self._kind, metric)
            family: Metric
            if metric.endswith("-total"):
                family = CounterMetricFamily(name, f"{metric} of the {self._kind}", labels=["client_id"])
            else:
                family = GaugeMetricFamily(name, f"{metric} of the {self._kind}", labels=["client_id"])
            family.add_metric([self._client_id], value)
            yield family


def register(client: Any, registry: CollectorRegistry = REGISTRY) -> ClientCollector:
    """Export ``client.metrics()`` (a Consumer or a Producer) through ``registry``; returns the collector, for
    ``registry.unregister`` when the client is closed."""
    kind = "consumer" if hasattr(client, "poll_arrow") else "producer"
    collector = ClientCollector(kind, client.config.network.client_id, client.metrics)
    registry.register(collector)
    return collector
