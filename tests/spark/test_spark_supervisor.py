"""``groupstream pipeline run --instances N`` supervises its instances (issue 15): an instance killed with
SIGKILL is started again after a backoff and takes part in the region again; SIGINT then stops every instance at
a batch boundary and the run exits 0, with no traceback; the table holds every record exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from spark_kit import new_topic

from groupstream.client.admin import Admin
from groupstream.region.ledger import OffsetLedger
from support.brokers import BrokerProcess, groupstream_command
from support.feed import Feed
from support.waiting import wait_until

pytestmark = [pytest.mark.compat, pytest.mark.slow]

PARTITIONS = 4


class Run:
    """The supervisor process and the lines it printed: its own JSON lines, and its instances' as ``[iK] ...``."""

    def __init__(self, toml: Path, bootstrap: str, *extra: str) -> None:
        self.log = toml.parent / "run.log"
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1", COLUMNS="200")
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [*groupstream_command(), "pipeline", "run", str(toml), "--instances", "2", "--bootstrap-server",
                 bootstrap, "--master", "local[1]", *extra],
                cwd=toml.parent, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def lines(self) -> list[tuple[str | None, dict[str, Any]]]:
        """(instance or None for the supervisor, JSON object) of every JSON line, in order."""
        out: list[tuple[str | None, dict[str, Any]]] = []
        for line in self.text().splitlines():
            source, _, rest = line.partition(" ") if line.startswith("[i") else ("", "", line)
            if rest.startswith("{") and rest.endswith("}"):
                out.append((source.strip("[]") or None, json.loads(rest)))
        return out

    def supervisor(self, event: str, member: str) -> list[dict[str, Any]]:
        return [e for who, e in self.lines() if who is None and e["event"] == event and e.get("member") == member]

    def published_since(self, member: str, nth_start: int) -> bool:
        """Whether ``member`` published a batch after its ``nth_start`` start (1: the first)."""
        starts = 0
        for who, e in self.lines():
            if who is None and e["event"] == "instance-started" and e["member"] == member:
                starts += 1
            elif who == member and e["event"] == "published" and starts >= nth_start:
                return True
        return False

    def alive(self) -> bool:
        assert self.proc.poll() is None, f"the run exited early ({self.proc.returncode}):\n{self.text()[-4000:]}"
        return True


def test_a_killed_instance_is_restarted_and_sigint_stops_the_run_with_exit_0(broker: BrokerProcess,
                                                                             tmp_path: Path) -> None:  # fmt: skip
    bs = broker.bootstrap
    topic = new_topic(bs, PARTITIONS, prefix="supervised")
    toml = tmp_path / "p.toml"
    toml.write_text(f'''
[source]
topic = "{topic}"
starting_offsets = "earliest"
group_id = "supervised"
options = {{ maxOffsetsPerTrigger = "400", "kafka.session.timeout.ms" = "6000", "kafka.heartbeat.interval.ms" = "500" }}

[transform]
sql = "SELECT CAST(value AS STRING) AS v FROM source"

[sink]
path = "out/table"
checkpoint = "out/checkpoints"
trigger = "1 second"
''')
    feeder = Feed(bs, topic, value_format=b"s%06d")
    run = Run(toml, bs, "--max-restarts", "2")

    def wait(condition: Any, timeout_s: float, what: str) -> None:
        wait_until(lambda: run.alive() and condition(), timeout_s, what, interval_s=0.5,
                   explain=lambda: run.text()[-4000:])  # fmt: skip

    try:
        feeder.start()
        wait(lambda: run.published_since("i0", 1) and run.published_since("i1", 1), 240, "both instances to publish")
        pid = run.supervisor("instance-started", "i1")[-1]["pid"]
        os.kill(pid, signal.SIGKILL)
        wait(lambda: run.supervisor("instance-restart", "i1"), 60, "the supervisor to restart i1")
        exited = run.supervisor("instance-exited", "i1")[0]
        assert exited["status"] == "SIGKILL" and run.supervisor("instance-restart", "i1")[0]["in_s"] == 1.0
        wait(lambda: run.published_since("i1", 2), 240, "the restarted i1 to publish")
        feeder.stop_event.set()
        feeder.join(timeout=60)
        with Admin({"bootstrap.servers": bs}) as admin:
            ends = admin.log_end_offsets([(topic, p) for p in range(PARTITIONS)])
        ledger = OffsetLedger(tmp_path / "out" / "table")
        wait(lambda: ledger.offsets() == ends, 180, "the region to publish every record")
        run.proc.send_signal(signal.SIGINT)
        assert run.proc.wait(180) == 0, run.text()[-4000:]
    finally:
        feeder.stop_event.set()
        if run.proc.poll() is None:
            os.killpg(run.proc.pid, signal.SIGKILL)
            run.proc.wait(30)

    text = run.text()
    stopping = text[text.index('{"event": "stopping"'):]  # what the instances printed once asked to stop
    assert "Traceback" not in stopping and "py4j" not in stopping.lower(), stopping[-4000:]
    assert "all 2 instances stopped (1 restarts)" in text, text[-2000:]
    for name in ("i0", "i1"):
        assert [e["code"] for e in run.supervisor("instance-exited", name)][-1] == 0, text[-3000:]
    import pyarrow.parquet as pq

    values = [v for f in ledger.files() for v in pq.read_table(f).column("v").to_pylist()]
    expected = [f"s{i:06d}" for i in range(feeder.produced)]
    assert len(values) == len(set(values)), f"{len(values) - len(set(values))} records twice"
    assert sorted(values) == expected, f"{len(set(expected) - set(values))} records missing"
