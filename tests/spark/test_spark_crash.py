"""The Spark driver of a streaming query killed with SIGKILL ten times at random moments, restarted from its
checkpoint each time: the Parquet output holds every input record exactly once, and the consumer group's
committed offsets equal the end offsets after the last batch.

"The driver" is the whole process group the test started: the Python driver and the Spark JVM it launched, as
when the machine running them dies. Only the output Spark committed (read through its file sink log) counts.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from spark_kit import fill, new_topic

from groupstream.client.admin import Admin
from support.brokers import BrokerProcess
from support.waiting import wait_until

pytestmark = [pytest.mark.compat, pytest.mark.slow]

JOB = Path(__file__).with_name("stream_job.py")
KILLS = 10


def start_driver(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, str(JOB), *args], stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)  # fmt: skip


def wait_started(log: Path, before: int, proc: subprocess.Popen[bytes], timeout: float = 90) -> None:
    def started() -> bool:
        assert proc.poll() is None, f"the driver exited early:\n{log.read_text(errors='replace')[-3000:]}"
        return log.read_text(errors="replace").count("query started") > before

    wait_until(started, timeout, "the driver to start its query", 0.2)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


def test_the_driver_killed_ten_times_still_writes_every_record_exactly_once(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    bs = broker.bootstrap
    topic = new_topic(bs, 4, prefix="crash")
    produced = fill(bs, topic, 12_000)
    out, checkpoint, log = tmp_path / "out", tmp_path / "checkpoint", tmp_path / "driver.log"
    args = [bs, topic, str(out), str(checkpoint), "crash-group"]
    rng = random.Random(848)
    for i in range(KILLS):
        proc = start_driver(args, log)
        try:
            wait_started(log, i, proc)
            time.sleep(rng.uniform(0.0, 4.0))  # a random moment of the run is the point of this test
            assert proc.poll() is None, f"the driver died on its own:\n{log.read_text(errors='replace')[-3000:]}"
        finally:
            kill_group(proc)
        if i == KILLS // 2:
            produced |= fill(bs, topic, 3000, first=12_000)  # more records arrive while the job is down
    proc = start_driver([*args, "--until-caught-up"], log)
    try:
        assert proc.wait(240) == 0, log.read_text(errors="replace")[-3000:]
    finally:
        if proc.poll() is None:
            kill_group(proc)

    rows = spark.read.parquet(str(out)).select("partition", "offset", "key", "value").collect()
    positions = [(r.partition, r.offset) for r in rows]
    assert len(positions) == len(set(positions)) == len(produced)  # none twice, none missing
    assert {bytes(r.key): bytes(r.value) for r in rows} == produced
    with Admin({"bootstrap.servers": bs}) as admin:
        ends = {tp: o.offset for tp, o in admin.list_offsets({(topic, p): "latest" for p in range(4)}).items()}
        committed = {tp: om.offset for tp, om in admin.list_group_offsets("crash-group").items()}
    assert committed == ends
