"""``groupstream console --bootstrap-server``: the web console for any Kafka cluster, against our broker and
against Apache Kafka 4.4, loaded in headless Chromium. Two confluent-kafka members share a topic; the
group's page must list both client ids and the lag, and its rebalance timeline (read from
``__consumer_offsets`` as a client reads it) must show the second member's join and the partitions it took."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from support.apache_kafka import ApacheKafkaCluster, ExternalKafkaCluster
from support.brokers import BrokerProcess, free_port, groupstream_command
from support.waiting import wait_until

pytestmark = [pytest.mark.compat]


class ConsoleProcess:
    """``groupstream console`` on a free port, for one test."""

    def __init__(self, bootstrap: str, log: Path) -> None:
        self.port = free_port()
        self._log = log.open("w")
        self.proc = subprocess.Popen([*groupstream_command(), "console", "--bootstrap-server", bootstrap, "--http",
                                      f"127.0.0.1:{self.port}"], stdout=self._log, stderr=subprocess.STDOUT,
                                     env=dict(os.environ, PYTHONUNBUFFERED="1"), start_new_session=True)  # fmt: skip
        self.log = log

        def listening() -> bool:
            assert self.proc.poll() is None, log.read_text()
            return "console for" in log.read_text()

        wait_until(listening, 30, "the console to listen")

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)
        self._log.close()


def dump_dom(url: str) -> str:
    chromium = shutil.which("chromium")
    assert chromium is not None, "chromium is not installed: run `make system-deps` (apt-get install chromium)"
    return subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,900",
                           "--dump-dom", url], capture_output=True, text=True, timeout=120, check=True).stdout  # fmt: skip


def console_scenario(bootstrap: str, log: Path) -> None:
    topic, group = f"cons-{uuid.uuid4().hex[:6]}", f"cg-{uuid.uuid4().hex[:6]}"
    conf = {"bootstrap.servers": bootstrap}
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 4, 1)])[topic].result(30)
    producer = Producer(conf)
    for i in range(40):
        producer.produce(topic, b"v", partition=i % 4)
    assert producer.flush(30) == 0
    members = {name: Consumer({**conf, "group.id": group, "client.id": name, "enable.auto.commit": False,
                               "session.timeout.ms": 6000}) for name in ("alpha", "beta")}  # fmt: skip
    console = ConsoleProcess(bootstrap, log)
    try:
        members["alpha"].subscribe([topic])
        wait_until(lambda: members["alpha"].poll(0.1) is None and len(members["alpha"].assignment()) == 4, 60,
                   "alpha to hold 4 partitions")  # fmt: skip
        members["alpha"].commit(offsets=[TopicPartition(topic, p, 4) for p in range(4)], asynchronous=False)
        members["beta"].subscribe([topic])

        def shared() -> bool:
            for m in members.values():
                m.poll(0.1)
            return all(len(m.assignment()) == 2 for m in members.values())

        wait_until(shared, 60, "both members to hold two partitions")
        betas = sorted(f"{tp.topic}-{tp.partition}" for tp in members["beta"].assignment())

        front = dump_dom(console.url("/"))
        assert f'href="/groups/{group}"' in front and topic in front, front[-3000:]
        page = dump_dom(console.url(f"/groups/{group}"))
        assert "<td>alpha</td>" in page and "<td>beta</td>" in page, page[-3000:]
        assert "lag <strong>24</strong>" in page, page[-3000:]  # 4 partitions x (10 - 4)
        spans = re.findall(r'<rect class="span" data-partition="([^"]+)" data-owner="([^"]+)"', page)
        owners = dict(spans)  # the last span of each partition's row is its owner now
        assert sorted(p for p, o in owners.items() if o.startswith("beta")) == betas, spans
        assert sum(o.startswith("alpha") for _, o in spans) == 4, "alpha held all four before beta joined"
    finally:
        for m in members.values():
            m.close()
        console.close()


def test_console_for_our_broker(groupstream_broker: BrokerProcess, tmp_path: Path) -> None:
    console_scenario(groupstream_broker.bootstrap, tmp_path / "console.log")


@pytest.mark.broker_apache
def test_console_for_apache_kafka(apache_node: ApacheKafkaCluster | ExternalKafkaCluster, tmp_path: Path) -> None:
    console_scenario(apache_node.bootstrap, tmp_path / "console.log")

