"""Spark pipeline instances as one consistent region (issue 7): separate processes, each its own Spark, sharing
one consumer group and one output table.

A feed of unique records runs throughout while instances are killed (``kill -9``) and restarted, added and
removed, and a micro-batch fails before its checkpoint. The table must then hold every record exactly once,
and the instances' logs must show every partition's published ranges back to back: after each rebalance a
partition resumes exactly where its published output (the merged checkpoint) ended.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from spark_kit import new_topic, run_cli

from groupstream import Producer
from groupstream.client.admin import Admin
from groupstream.region.ledger import OffsetLedger
from support.brokers import BrokerProcess, groupstream_command
from support.feed import Feed
from support.waiting import wait_until

pytestmark = [pytest.mark.compat, pytest.mark.slow]

PARTITIONS = 6


class Instance:
    """One ``groupstream pipeline run --member NAME`` process and the JSON lines it printed."""

    def __init__(self, name: str, toml: Path, bootstrap: str, log_dir: Path) -> None:
        self.name = name
        self.log = log_dir / f"{name}-{len(list(log_dir.glob(name + '-*')))}.log"
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
        with self.log.open("w") as out:
            self.proc = subprocess.Popen(
                [*groupstream_command(), "pipeline", "run", str(toml), "--member", name, "--bootstrap-server",
                 bootstrap, "--master", "local[1]"],
                cwd=toml.parent, env=env, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        out = []
        for line in self.log.read_text().splitlines():
            if line.startswith("{"):
                event = json.loads(line)
                if kind is None or event["event"] == kind:
                    out.append(event)
        return out

    def published_partitions(self) -> set[int]:
        return {p for e in self.events("published") for _t, p, s, end in e["ranges"] if end > s}

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            self.proc.wait(timeout=120)


def test_two_spark_instances_share_a_group_and_write_every_record_once(broker: BrokerProcess, tmp_path: Path) -> None:
    bs = broker.bootstrap
    topic = new_topic(bs, PARTITIONS, prefix="region")
    marker = tmp_path / "fail-once"
    (tmp_path / "transform.py").write_text(f'''
import os
from pyspark.sql import functions as F

def transform(df):
    @F.udf("string")
    def value(v):
        if v is not None and v.endswith("7"):
            try:
                os.unlink({str(marker)!r})
            except FileNotFoundError:
                return v
            raise RuntimeError("injected failure: this micro-batch fails before its checkpoint")
        return v
    return df.select(value(F.col("value").cast("string")).alias("v"), "partition", "offset")
''')
    toml = tmp_path / "region.toml"
    toml.write_text(f'''
[source]
topic = "{topic}"
starting_offsets = "earliest"
group_id = "region-pipeline"
options = {{ maxOffsetsPerTrigger = "400", "kafka.session.timeout.ms" = "6000", "kafka.heartbeat.interval.ms" = "500" }}

[transform]
python = "transform.py:transform"

[sink]
path = "out/table"
checkpoint = "out/checkpoints"
trigger = "1 second"
''')
    logs = tmp_path / "logs"
    logs.mkdir()
    feeder = Feed(bs, topic, value_format=b"r%06d")
    instances: list[Instance] = []

    def start(name: str) -> Instance:
        inst = Instance(name, toml, bs, logs)
        instances.append(inst)
        return inst

    def instance_logs() -> str:
        return "\n".join(f"--- {i.log.name} (exit {i.proc.poll()})\n{i.log.read_text()[-3000:]}" for i in instances)

    def wait(condition: Any, timeout_s: float, what: str) -> None:
        wait_until(condition, timeout_s, what, interval_s=0.5, explain=instance_logs)

    try:
        i0, i1 = start("i0"), start("i1")
        feeder.start()
        wait(lambda: i0.published_partitions() and i1.published_partitions(), 180, "both instances to publish")
        # kill -9 one: after its session times out the other one takes all partitions
        i1.kill()
        wait(lambda: len(i0.published_partitions()) == PARTITIONS, 120, "i0 to take over")
        i1 = start("i1")
        wait(lambda: i1.published_partitions(), 180, "the restarted i1 to publish")
        # one more instance joins, then the first one leaves
        i2 = start("i2")
        wait(lambda: i2.published_partitions(), 180, "i2 to publish")
        i0.stop()
        # a micro-batch fails before its checkpoint: that instance's query stops; it is started again
        marker.write_text("fail once")
        wait(lambda: not marker.exists() and any(i.proc.poll() not in (None, 0) for i in (i1, i2)), 120,
             "the injected failure to stop an instance")  # fmt: skip
        failed = next(i for i in (i1, i2) if i.proc.poll() not in (None, 0))
        assert "injected failure" in failed.log.read_text(), failed.log.read_text()[-3000:]
        restarted = start(failed.name)
        wait(lambda: restarted.published_partitions(), 180, "the failed instance, restarted, to publish")
        feeder.stop_event.set()
        feeder.join(timeout=60)
        assert not feeder.is_alive()
        with Admin({"bootstrap.servers": bs}) as admin:
            ends = admin.log_end_offsets([(topic, p) for p in range(PARTITIONS)])
        ledger = OffsetLedger(tmp_path / "out" / "table")
        wait(lambda: ledger.offsets() == ends, 180, "the region to publish every record")
    finally:
        feeder.stop_event.set()
        for inst in instances:
            if inst.proc.poll() is None:
                inst.stop()

    _check_exactly_once(tmp_path / "out" / "table", feeder.produced)
    _check_contiguous_ranges(instances, ends)


def _check_exactly_once(table: Path, produced: int) -> None:
    import pyarrow.parquet as pq

    values = [v for f in sorted(table.glob("part-*.parquet")) for v in pq.read_table(f).column("v").to_pylist()]
    expected = [f"r{i:06d}" for i in range(produced)]
    dupes = len(values) - len(set(values))
    assert dupes == 0, f"{dupes} records are in the table more than once"
    missing = sorted(set(expected) - set(values))
    assert not missing, f"{len(missing)} records never reached the table, e.g. {missing[:5]}"
    assert sorted(values) == expected


def _check_contiguous_ranges(instances: list[Instance], ends: dict[tuple[str, int], int]) -> None:
    """From the logs: each partition's published ranges, in ledger order, run from 0 to its end back to back,
    and where the owner changed (a reset) the new owner started exactly at the previous owner's end."""
    by_partition: dict[int, list[tuple[int, str, int, int]]] = {}
    for inst in instances:
        for e in inst.events("published"):
            for _t, p, s, end in e["ranges"]:
                by_partition.setdefault(p, []).append((e["seq"], inst.name, s, end))
    handovers = 0
    for (_t, p), end in sorted(ends.items()):
        ranges = sorted(by_partition.get(p, []))
        position = 0
        owner = None
        for _seq, name, s, e in ranges:
            assert s == position, f"partition {p}: {name} published from {s}, the table ended at {position}"
            if owner is not None and name != owner:
                handovers += 1
            position, owner = e, name
        assert position == end, f"partition {p}: published up to {position}, the log ends at {end}"
    assert handovers >= PARTITIONS // 2, f"only {handovers} handovers between instances: the scenario did not happen"


def test_pipeline_run_instances_starts_a_region_that_stops_once_caught_up(broker: BrokerProcess, tmp_path: Path) -> None:
    region_of_two_until_caught_up(broker.bootstrap, tmp_path)


def region_of_two_until_caught_up(bs: str, tmp_path: Path) -> None:
    """``pipeline run --until-caught-up`` of a ``[region] instances = 2`` pipeline over 2000 keyed records on 4
    partitions: both instances run as members of the region and stop once it has caught up, and the table
    holds each record once. The records are written by our Producer, which finds each partition's leader on
    a cluster of several nodes."""
    topic = new_topic(bs, 4, prefix="region-n")
    with Producer({"bootstrap.servers": bs, "acks": "all"}) as producer:
        for i in range(2000):
            producer.produce(topic, b"n%05d" % i, key=b"k%d" % i)
        assert producer.flush(60) == 0, f"{topic}: records not acknowledged after 60 s"
    (tmp_path / "p.toml").write_text(f'''
[source]
topic = "{topic}"
starting_offsets = "earliest"
group_id = "region-instances"
options = {{ maxOffsetsPerTrigger = "500" }}

[transform]
sql = "SELECT CAST(value AS STRING) AS v, partition, offset FROM source"

[sink]
path = "out/table"
checkpoint = "out/checkpoints"
trigger = "1 second"

[region]
instances = 2
''')
    proc = run_cli("pipeline", "run", "p.toml", "--bootstrap-server", bs, "--master", "local[1]",
                   "--until-caught-up", cwd=tmp_path, timeout_s=400)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "a region of 2 instances (i0, i1)" in proc.stdout
    for name in ("i0", "i1"):  # both ran as members of the region, and each stopped once the region caught up
        lines = [x for x in proc.stdout.splitlines() if x.startswith(f"[{name}] {{")]
        events = [json.loads(x.split(" ", 1)[1])["event"] for x in lines]
        assert "started" in events and "stopped" in events, proc.stdout[-2000:]
    assert "all 2 instances stopped" in proc.stdout
    import pyarrow.parquet as pq

    values = [v for f in sorted((tmp_path / "out" / "table").glob("part-*.parquet"))
              for v in pq.read_table(f).column("v").to_pylist()]  # fmt: skip
    assert sorted(values) == [f"n{i:05d}" for i in range(2000)]
