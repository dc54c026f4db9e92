"""The groupstream sink's exactly-once mode for topics (issue 17, ``spark/kafka_eos.py``): a streaming query
copying a topic into another, its driver (the Python driver and its Spark JVM, the whole process group) killed
with SIGKILL at random moments and restarted from its checkpoint, then run to completion: read_committed readers
(ours and confluent-kafka) of the output see every input record exactly once. A batch write is committed by the
driver as a whole."""

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
from support.read_committed import assert_exactly_once, read_committed_confluent, read_committed_ours
from support.waiting import wait_until

pytestmark = [pytest.mark.compat, pytest.mark.slow]

JOB = Path(__file__).with_name("kafka_eos_job.py")
KILLS = 3


def _start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, str(JOB), *args], stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)  # fmt: skip


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


def _wait_started(proc: subprocess.Popen[bytes], log: Path, before: int) -> None:
    wait_until(lambda: proc.poll() is not None or log.read_text(errors="replace").count("query started") > before,
               90, "the driver to start its query", 0.2)  # fmt: skip


def test_the_driver_killed_at_random_moments_writes_each_record_once(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    seed = int(os.environ.get("EOS_SEED", random.randrange(1 << 30)))
    print(f"seed {seed} (EOS_SEED={seed} repeats this run)")
    rng = random.Random(seed)
    bs = broker.bootstrap
    src, out = new_topic(bs, 4, prefix="eos-in"), new_topic(bs, 3, prefix="eos-out")
    produced = fill(bs, src, 4500)
    log = tmp_path / "driver.log"
    args = [bs, src, out, str(tmp_path / "checkpoint")]
    for i in range(KILLS):
        proc = _start(args, log)
        try:
            _wait_started(proc, log, i)
            assert proc.poll() is None, f"the driver exited early (seed {seed}):\n{log.read_text(errors='replace')[-3000:]}"
            time.sleep(rng.uniform(0.5, 5.0))  # a random moment of the run is the point of this test
            assert proc.poll() is None, f"the driver died on its own (seed {seed}):\n{log.read_text(errors='replace')[-3000:]}"
        finally:
            _kill_group(proc)
        if i == KILLS // 2:
            produced |= fill(bs, src, 1500, first=4500)  # more records arrive while the job is down
    proc = _start([*args, "--until-caught-up"], log)
    try:
        assert proc.wait(240) == 0, f"seed {seed}:\n{log.read_text(errors='replace')[-3000:]}"
    finally:
        if proc.poll() is None:
            _kill_group(proc)
    expected = set(produced.values())
    assert_exactly_once(read_committed_ours(bs, out, 3, len(expected)), expected)
    assert_exactly_once(read_committed_confluent(bs, out, 3, len(expected)), expected)


def test_a_batch_write_is_committed_by_the_driver(spark: Any, broker: BrokerProcess) -> None:
    batch_write_commits_one_transaction_per_task(spark, broker.bootstrap)


def batch_write_commits_one_transaction_per_task(spark: Any, bs: str) -> None:
    out = new_topic(bs, 2, prefix="eos-batch")
    rows = [(b"k%d" % i, b"b%d" % i) for i in range(500)]
    df = spark.createDataFrame(rows, "key binary, value binary").repartition(3)
    prefix = f"eos-batch-{time.monotonic_ns()}"
    (df.write.format("groupstream").option("kafka.bootstrap.servers", bs).option("topic", out)
     .option("exactlyOnce", "true").option("transactionalIdPrefix", prefix).mode("append").save())  # fmt: skip
    assert_exactly_once(read_committed_ours(bs, out, 2, 500), {v for _, v in rows})
    with Admin({"bootstrap.servers": bs}) as admin:
        mine = {t.transactional_id: t.state for t in admin.list_transactions() if t.transactional_id.startswith(prefix)}
    assert mine == {f"{prefix}-{p}": "CompleteCommit" for p in range(3)}  # one transaction per task, committed
