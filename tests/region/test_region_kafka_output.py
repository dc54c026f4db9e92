"""A consistent region writing a Kafka topic exactly once (issue 17, ``region/kafka_output.py``): two group
consumer operators (``groupstream region member --output-topic``) and a controller on our broker, a feed of
unique records throughout; one operator is killed (``kill -9``) mid-run and started again. A read_committed
reader (our Consumer) of the output topic sees every input record exactly once, and confluent-kafka's agrees."""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from groupstream import Consumer
from groupstream.client.admin import Admin, NewTopic
from support.brokers import BrokerProcess
from support.feed import Feed
from support.read_committed import assert_exactly_once, read_committed_confluent
from support.region_process import RegionProcess
from support.waiting import wait_until

pytestmark = [pytest.mark.broker_ours, pytest.mark.slow]

PARTITIONS = 6
OUT_PARTITIONS = 3


class Reader:
    """Our read_committed consumer of the output, assigned from offset 0, reading as the test goes."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rk-{uuid.uuid4().hex[:6]}",
                           "isolation.level": "read_committed", "enable.auto.commit": False})  # fmt: skip
        self.c.assign([(topic, p) for p in range(OUT_PARTITIONS)],
                      offsets={(topic, p): 0 for p in range(OUT_PARTITIONS)})  # fmt: skip
        self.values: list[bytes] = []

    def read(self) -> int:
        self.values.extend(r.value for r in self.c.poll(0.3))
        return len(self.values)


def test_two_operators_write_a_topic_exactly_once_through_a_kill(
    groupstream_broker: BrokerProcess, tmp_path: Path
) -> None:
    bs = groupstream_broker.bootstrap
    topic, out = f"rk-{uuid.uuid4().hex[:6]}", f"rk-out-{uuid.uuid4().hex[:6]}"
    group, region = f"g-{uuid.uuid4().hex[:6]}", f"r{uuid.uuid4().hex[:6]}"
    with Admin({"bootstrap.servers": bs}) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS), NewTopic(out, OUT_PARTITIONS)])
    common = ["--bootstrap-server", bs, "--region", region, "--group", group, "--reset-timeout-ms", "8000"]
    procs: list[RegionProcess] = []

    def member(name: str) -> RegionProcess:
        p = RegionProcess(name, ["member", *common, "--topic", topic, "--member", name, "--output", "state",
                        "--output-topic", out, "--checkpoints", "ck"], tmp_path)  # fmt: skip
        procs.append(p)
        return p

    def logs() -> str:
        return "\n".join(f"--- {p.log.name} (exit {p.proc.poll()})\n{p.text()[-2500:]}" for p in procs)

    def wait(condition: Any, timeout_s: float, what: str) -> None:
        wait_until(condition, timeout_s, what, interval_s=0.3, explain=logs)

    def checkpointed(p: RegionProcess) -> int:
        return sum(1 for e in p.events() if str(e.get("event", "")).startswith("checkpoint "))

    def resets_issued() -> int:
        return sum(1 for e in controller.events() if e.get("kind") == "reset")

    controller = RegionProcess("controller", ["controller", *common, "--period-ms", "1500"], tmp_path)
    procs.append(controller)
    feed = Feed(bs, topic, batch=120)
    reader = Reader(bs, out)
    try:
        a, b = member("a"), member("b")
        feed.start()
        wait(lambda: all(checkpointed(p) >= 2 for p in (a, b)), 120, "two operators to checkpoint twice")
        wait(lambda: reader.read() > 0, 60, "committed output to be visible to read_committed")
        b.proc.kill()  # kill -9 mid-interval: its open transaction is fenced when it comes back
        b.proc.wait()
        resets = resets_issued()
        wait(lambda: resets_issued() > resets, 60, "the region to reset after the killed operator")
        b = member("b")
        wait(lambda: checkpointed(b) >= 2, 120, "the restarted operator to checkpoint")
        feed.stop_event.set()
        feed.join(30)
        wait(lambda: reader.read() >= feed.produced, 120, f"read_committed to see all {feed.produced} records")
        end = time.monotonic() + 2.0
        while time.monotonic() < end:  # nothing more may arrive: a duplicate would show now
            reader.read()
    finally:
        feed.stop_event.set()
        reader.c.close()
        for p in procs:
            if p.proc.poll() is None:
                p.proc.terminate()
        for p in procs:
            try:
                p.proc.wait(60)
            except subprocess.TimeoutExpired:
                p.proc.kill()
    assert_exactly_once(reader.values, feed.values())
    assert_exactly_once(read_committed_confluent(bs, out, OUT_PARTITIONS, feed.produced, 60), feed.values())
    with Admin({"bootstrap.servers": bs}) as admin:
        mine = [t for t in admin.list_transactions() if t.transactional_id.startswith(f"groupstream-region-{region}-")]
    assert mine, "the operators wrote no transactions"
    # the stopped operators left nothing open (SIGTERM aborts the open interval; the killed one's was fenced)
    assert [t.transactional_id for t in mine if t.state not in ("CompleteCommit", "CompleteAbort", "Empty")] == []
