"""A two-instance region pipeline on a Spark standalone cluster (issue 15): a Master and one Worker with 2 cores,
started by the test from the installed PySpark, run ``groupstream pipeline run --instances 2`` (each instance
asks for its share of the cores); the region catches up a backlog of 100,000 records within 3 minutes although
one instance is killed with SIGKILL on the way, the runner restarts it and exits 0 on SIGINT, and the Delta table
holds every record exactly once for DuckDB, as the region's ledger says.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import deltalake
import duckdb
import pytest
from spark_kit import new_topic

from groupstream.client.admin import Admin
from groupstream.client.producer import Producer
from groupstream.region.ledger import OffsetLedger
from groupstream.spark.delta_table import REGION_APP_ID, committed_version
from support.brokers import BrokerProcess, groupstream_command
from support.waiting import wait_until

pytestmark = [pytest.mark.compat, pytest.mark.slow]

PARTITIONS = 4
BACKLOG = 100_000
CATCH_UP_S = 180

PIPELINE = """
[source]
topic = "{topic}"
starting_offsets = "earliest"
group_id = "standalone"
options = {{ maxOffsetsPerTrigger = "4000", "kafka.session.timeout.ms" = "6000", "kafka.heartbeat.interval.ms" = "500" }}

[transform]
sql = "SELECT CAST(value AS STRING) AS v FROM source"

[sink]
path = "out/table"
format = "delta"
checkpoint = "out/checkpoints"
trigger = "1 second"

[region]
instances = 2
"""


def backlog(bootstrap: str, topic: str) -> None:
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as producer:
        for first in range(0, BACKLOG, 10_000):
            producer.produce_batch(topic, [(None, b"s%06d" % i) for i in range(first, first + 10_000)]).result(60)


def test_a_two_instance_region_on_a_standalone_cluster_catches_up_once_through_a_kill(
    broker: BrokerProcess, standalone: tuple[str, int], tmp_path: Path
) -> None:
    url, ui = standalone
    bs = broker.bootstrap
    topic = new_topic(bs, PARTITIONS, prefix="standalone")
    backlog(bs, topic)
    toml = tmp_path / "p.toml"
    toml.write_text(PIPELINE.format(topic=topic))
    log = tmp_path / "run.log"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1", COLUMNS="200")
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    started = time.monotonic()
    with log.open("wb") as out:
        proc = subprocess.Popen([*groupstream_command(), "pipeline", "run", str(toml), "--bootstrap-server", bs,
                                 "--master", url, "--conf", f"spark.master.ui.port={ui}", "--max-restarts", "2"],
                                cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip

    def text() -> str:
        return log.read_text(errors="replace")

    def events(who: str | None, kind: str) -> list[dict[str, Any]]:
        """JSON lines of the supervisor (None) or of an instance (``[iK] {...}``) of one kind."""
        out = []
        for line in text().splitlines():
            source, _, rest = line.partition(" ") if line.startswith("[i") else ("", "", line)
            if (source.strip("[]") or None) == who and rest.startswith("{") and rest.endswith("}"):
                event = json.loads(rest)
                if event.get("event") == kind:
                    out.append(event)
        return out

    def wait(condition: Any, timeout_s: float, what: str) -> None:
        def alive_and() -> bool:
            assert proc.poll() is None, f"the run exited early ({proc.returncode}):\n{text()[-4000:]}"
            return bool(condition())

        wait_until(alive_and, timeout_s, what, interval_s=0.5, explain=lambda: text()[-4000:])

    table = tmp_path / "out" / "table"
    ledger = OffsetLedger(table)
    with Admin({"bootstrap.servers": bs}) as admin:
        ends = admin.log_end_offsets([(topic, p) for p in range(PARTITIONS)])
    assert sum(ends.values()) == BACKLOG
    try:
        wait(lambda: events("i0", "published") and events("i1", "published"), CATCH_UP_S, "both instances to publish")
        assert [e["cores_max"] for name in ("i0", "i1") for e in events(name, "started")] == ["1", "1"]
        assert ledger.offsets() != ends, "the region caught up before an instance could be killed"
        os.kill([e for e in events(None, "instance-started") if e["member"] == "i1"][-1]["pid"], signal.SIGKILL)
        wait(lambda: [e for e in events(None, "instance-restart") if e["member"] == "i1"], 60,
             "the runner to restart i1")  # fmt: skip

        def caught_up() -> bool:
            latest = ledger.latest()
            return ledger.offsets() == ends and latest is not None and committed_version(table, REGION_APP_ID) == latest.seq

        wait(caught_up, CATCH_UP_S - (time.monotonic() - started), "the region to publish the backlog")
        elapsed = time.monotonic() - started
        wait(lambda: len([e for e in events(None, "instance-started") if e["member"] == "i1"]) == 2, 60,
             "i1 to start again")  # fmt: skip
        proc.send_signal(signal.SIGINT)
        assert proc.wait(180) == 0, text()[-4000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    print(f"backlog of {BACKLOG:,} records published by 2 instances on a standalone cluster in {elapsed:.0f} s")
    assert "all 2 instances stopped (1 restarts)" in text(), text()[-3000:]
    dataset = deltalake.DeltaTable(str(table)).to_pyarrow_dataset()  # noqa: F841 (DuckDB finds it by name)
    [(rows, distinct, low, high)] = duckdb.sql("SELECT count(*), count(DISTINCT v), min(v), max(v) FROM dataset").fetchall()
    assert (rows, distinct) == (BACKLOG, BACKLOG), f"{rows - distinct} records twice"
    assert (low, high) == ("s000000", f"s{BACKLOG - 1:06d}")
    import pyarrow.parquet as pq

    assert sum(pq.read_metadata(f).num_rows for f in ledger.files()) == BACKLOG  # the ledger's files: the same
