"""The driver plans without a round trip per partition (issue 14): a batch read's plan and each micro-batch's
plan of a stream cost one Metadata request (there were two per micro-batch and three per batch read), and the offsets are asked of the leaders that answer names, one
ListOffsets per lookup (earliest, latest), whatever the number of partitions. Counted by our broker's own
request metrics (``/metrics``), with the source's real driver-side readers (no Spark session is needed to plan).
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows
from spark_kit import fill, new_topic

from groupstream.spark.options import parse_source_options
from groupstream.spark.source import BatchReader, StreamReader
from support.brokers import BrokerKind, BrokerProcess, free_port

PARTITIONS = 8


class CountingBroker(BrokerProcess):
    """Our broker with its HTTP port, whose ``/metrics`` count the requests it answered per API."""

    def __init__(self, workdir: Path) -> None:
        super().__init__(BrokerKind.GROUPSTREAM, workdir)
        self.http_port = free_port()

    def command(self) -> list[str]:
        return [*super().command(), "--http", f"127.0.0.1:{self.http_port}"]

    def requests(self) -> dict[str, float]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
        out: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name == "kafka_network_requestmetrics_requests_total":
                    out[s.labels["request"]] = out.get(s.labels["request"], 0) + s.value
        return out


@pytest.fixture(scope="module")
def counting_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CountingBroker]:
    with CountingBroker(tmp_path_factory.mktemp("plan-requests")) as b:
        yield b


def _asked(broker: CountingBroker, before: dict[str, float]) -> dict[str, float]:
    after = broker.requests()
    return {api: n - before.get(api, 0) for api, n in after.items() if n != before.get(api, 0)}


def test_a_batch_plan_costs_one_metadata_request(counting_broker: CountingBroker) -> None:
    topic = new_topic(counting_broker.bootstrap, PARTITIONS)
    fill(counting_broker.bootstrap, topic, 80)
    options = parse_source_options({"kafka.bootstrap.servers": counting_broker.bootstrap, "subscribe": topic}, False)
    before = counting_broker.requests()
    ranges = BatchReader(options).partitions()
    asked = _asked(counting_broker, before)
    assert sum(r.value.end - r.value.start for r in ranges) == 80
    # The plan's Admin opens its connection (ApiVersions, and one Metadata of the network core for the brokers);
    # the plan itself is one Metadata (it was three: the listing, then one before each offset lookup).
    assert asked.get("Metadata") == 2, asked
    assert asked.get("ListOffsets") == 2, asked  # earliest, then latest, each one request to the one leader


def test_each_micro_batch_plan_costs_one_metadata_request(counting_broker: CountingBroker) -> None:
    topic = new_topic(counting_broker.bootstrap, PARTITIONS)
    fill(counting_broker.bootstrap, topic, 80)
    options = parse_source_options(
        {"kafka.bootstrap.servers": counting_broker.bootstrap, "subscribe": topic, "maxOffsetsPerTrigger": "40"}, True
    )
    reader = StreamReader(options)
    try:
        before = counting_broker.requests()
        start = reader.initialOffset()  # the reader's Admin opens (a Metadata of its own), then the first plan
        assert _asked(counting_broker, before).get("Metadata") == 2
        for limit in (ReadMaxRows(40), ReadAllAvailable()):
            before = counting_broker.requests()
            end = reader.latestOffset(start, limit)
            reader.partitions(start, end)
            asked = _asked(counting_broker, before)
            assert asked.get("Metadata") == 1, (limit, asked)
            assert asked.get("ListOffsets") == 1, (limit, asked)  # latest (no partition is new: no earliest)
            start = end
        assert sum(start[topic].values()) == 80, start
    finally:
        reader.stop()
