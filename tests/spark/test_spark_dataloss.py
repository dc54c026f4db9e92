"""A topic deleted and created again under the same name while Spark reads it (issue 15): with failOnDataLoss
true the read fails with Spark's message (``Partition <tp>'s offset was changed from X to Y, some data may have
been missed``) naming the topic and the offsets; with false a warning is logged (one for a stream; one per
partition for a batch read, whose tasks each find out on their own) and every record of the new topic is read,
from its earliest offset. Streams and batch reads, on a real local Spark and our broker.

The drivers run as their own processes (`dataloss_job.py`), so the test sees every line the source logs.
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
from spark_kit import new_topic

from groupstream.client.admin import Admin, NewTopic
from groupstream.region.ledger import OffsetLedger
from support.brokers import BrokerProcess, groupstream_command
from support.records import Out, produce_records
from support.waiting import wait_until

pytestmark = [pytest.mark.compat, pytest.mark.slow]

JOB = Path(__file__).with_name("dataloss_job.py")
PARTITIONS = 2
OLD, NEW = 20_000, 30_000
WARNING = "failOnDataLoss=false, so"
"""What every data-loss warning says (an error says "set the source option failOnDataLoss to false")."""


class Driver:
    def __init__(self, mode: str, bootstrap: str, topic: str, work: Path) -> None:
        self.work = work
        self.log = work / f"{mode}.log"
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen([sys.executable, str(JOB), mode, bootstrap, topic, str(work)], stdout=out,
                                         stderr=subprocess.STDOUT, stdin=subprocess.PIPE, env=env,
                                         start_new_session=True)  # fmt: skip

    def tell(self, word: str) -> None:
        """The job waits for ``go`` (batch) or ``stop`` (stream) on its stdin."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{word}\n".encode())
        self.proc.stdin.flush()

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def events(self) -> list[dict[str, Any]]:
        """The driver's JSON lines (one object per line, keys sorted)."""
        out = []
        for line in self.text().splitlines():
            if line.startswith("{") and line.endswith("}") and '"event": ' in line:
                out.append(json.loads(line))
        return out

    def event(self, kind: str, query: str | None = None) -> dict[str, Any] | None:
        return next((e for e in self.events() if e["event"] == kind and e.get("query", query) == query), None)

    def alive(self) -> bool:
        assert self.proc.poll() is None, f"the driver exited early:\n{self.text()[-4000:]}"
        return True

    def warnings(self) -> list[str]:
        return [line for line in self.text().splitlines() if WARNING in line]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


def values(directory: Path) -> list[tuple[str, str]]:
    """(topic, value) of every row the query wrote, in files renamed into place once complete."""
    import pyarrow.parquet as pq

    rows: list[tuple[str, str]] = []
    for f in sorted(directory.glob("*.parquet")):
        t = pq.read_table(f)
        rows.extend(zip(t.column("topic").to_pylist(), t.column("value").to_pylist(), strict=True))
    return rows


def produce_values(bootstrap: str, topic: str, prefix: str, n: int) -> list[str]:
    out = [f"{prefix}{i:06d}" for i in range(n)]
    produce_records(bootstrap, topic, [Out(v.encode(), v.encode()) for v in out])
    return out


def recreate(bootstrap: str, topic: str) -> dict[int, int]:
    """Delete ``topic`` and create it again with as many partitions; returns the old partitions' end offsets."""
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        ends = admin.log_end_offsets([(topic, p) for p in range(PARTITIONS)])
        old_id = admin.describe_topics([topic])[topic].topic_id
        admin.delete_topics([topic])
        wait_until(lambda: topic not in admin.list_topics(), 30, f"topic {topic} to be deleted")
        admin.create_topics([NewTopic(topic, PARTITIONS)])
        assert admin.describe_topics([topic])[topic].topic_id != old_id
    return {p: o for (_t, p), o in ends.items()}


def check_error_names_the_loss(error: str, topic: str, ends: dict[int, int]) -> None:
    assert "some data may have been missed" in error, error
    assert "set the source option failOnDataLoss to false" in error, error
    for p, end in ends.items():  # each partition and the offset the query had reached in the old topic
        assert f"{topic}-{p}" in error and str(end) in error, (p, end, error)


def test_a_stream_across_a_recreated_topic_fails_or_warns_once_and_reads_the_new_topic_from_its_start(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    bs = broker.bootstrap
    topic = new_topic(bs, PARTITIONS, prefix="recreated")
    old = produce_values(bs, topic, "old", OLD)
    driver = Driver("stream", bs, topic, tmp_path)
    try:
        wait_until(lambda: driver.alive() and len(values(tmp_path / "strict")) == OLD
                   and len(values(tmp_path / "lenient")) == OLD, 240, "both queries to read the first topic",
                   interval_s=0.5, explain=lambda: driver.text()[-4000:])  # fmt: skip
        ends = recreate(bs, topic)
        new = produce_values(bs, topic, "new", NEW)
        wait_until(lambda: driver.alive() and driver.event("terminated", "strict") is not None, 120,
                   "the strict query to fail", interval_s=0.5, explain=lambda: driver.text()[-4000:])  # fmt: skip
        wait_until(lambda: driver.alive() and len(values(tmp_path / "lenient")) >= OLD + NEW, 120,
                   "the lenient query to read the new topic", interval_s=0.5,
                   explain=lambda: f"{len(values(tmp_path / 'lenient'))} rows\n{driver.text()[-4000:]}")  # fmt: skip
        driver.tell("stop")
        assert driver.proc.wait(120) == 0, driver.text()[-4000:]
    finally:
        driver.close()

    failed = driver.event("terminated", "strict")
    assert failed is not None and failed["error"] is not None, driver.text()[-4000:]
    check_error_names_the_loss(failed["error"], topic, ends)
    assert driver.event("terminated", "lenient") is None, "the lenient query stopped on its own"
    lenient = [v for _t, v in values(tmp_path / "lenient")]
    assert sorted(lenient) == sorted(old + new), (
        f"{len(lenient)} rows, {len(set(new) - set(lenient))} of the {NEW} new records missing, "
        f"{len(lenient) - len(set(lenient))} duplicates"
    )
    warnings = driver.warnings()
    assert len(warnings) == 1 and topic in warnings[0], warnings  # one event, one warning


def test_a_batch_read_planned_before_a_topic_is_recreated_fails_or_reads_the_new_topic(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    bs = broker.bootstrap
    topic = new_topic(bs, PARTITIONS, prefix="recreated-batch")
    produce_values(bs, topic, "old", OLD)
    driver = Driver("batch", bs, topic, tmp_path)
    try:
        wait_until(lambda: driver.alive() and driver.event("planned") is not None, 180, "the reads to be planned",
                   interval_s=0.5, explain=lambda: driver.text()[-4000:])  # fmt: skip
        ends = recreate(bs, topic)
        new = produce_values(bs, topic, "new", NEW)
        driver.tell("go")
        assert driver.proc.wait(240) == 0, driver.text()[-4000:]
    finally:
        driver.close()

    failed = driver.event("failed", "strict")
    assert failed is not None, f"the strict read did not fail:\n{driver.text()[-4000:]}"
    error = failed["error"]
    assert "some data may have been missed" in error and "failOnDataLoss to false" in error, error
    # the first task to fail names its partition and the offsets it was to read: 0 to the old end
    assert any(f"{topic}-{p}" in error and f" {end - 1}" in error for p, end in ends.items()), (ends, error)
    lenient = [v for _t, v in values(tmp_path / "lenient")]
    assert sorted(lenient) == sorted(new), (
        f"{len(lenient)} rows, {len(set(new) - set(lenient))} of the {NEW} new records missing"
    )
    # each task finds its partition's topic recreated on its own (tasks cannot agree on who says it): one
    # warning per partition, each naming it
    warnings = driver.warnings()
    assert sorted(p for p in range(PARTITIONS) for w in warnings if f"{topic}-{p}'s" in w) == list(range(PARTITIONS))
    assert len(warnings) == PARTITIONS, warnings


def test_a_stream_whose_topic_is_deleted_fails_instead_of_idling(spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    bs = broker.bootstrap
    topic = new_topic(bs, PARTITIONS, prefix="deleted")
    produce_values(bs, topic, "r", 1000)
    query = (
        spark.readStream.format("groupstream").option("kafka.bootstrap.servers", bs).option("subscribe", topic)
        .option("startingOffsets", "earliest").load()
        .writeStream.format("parquet").option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "ck")).trigger(processingTime="500 milliseconds").start()
    )  # fmt: skip
    try:
        wait_until(lambda: sum(p["numInputRows"] for p in query.recentProgress) == 1000, 120,
                   "the query to read the topic", interval_s=0.5)  # fmt: skip
        with Admin({"bootstrap.servers": bs}) as admin:
            ends = admin.log_end_offsets([(topic, p) for p in range(PARTITIONS)])
            admin.delete_topics([topic])
        wait_until(lambda: not query.isActive, 60, "the query to fail on its deleted topic", interval_s=0.5)
    finally:
        query.stop()
    error = str(query.exception())
    assert f"topic {topic} was deleted" in error and "set the source option failOnDataLoss to false" in error, error
    for (_t, p), end in ends.items():
        assert f"{topic}-{p} (at offset {end})" in error, error


def _region_member(toml: Path, bootstrap: str, log: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1", COLUMNS="200")
    with log.open("wb") as out:
        return subprocess.Popen([*groupstream_command(), "pipeline", "run", str(toml), "--member", "i0",
                                 "--bootstrap-server", bootstrap, "--master", "local[1]"], cwd=toml.parent, env=env,
                                stdout=out, stderr=subprocess.STDOUT)  # fmt: skip


@pytest.mark.parametrize("fail_on_data_loss", [False, True], ids=["lenient", "strict"])
def test_a_region_pipeline_across_a_recreated_topic(broker: BrokerProcess, tmp_path: Path,
                                                    fail_on_data_loss: bool) -> None:  # fmt: skip
    bs = broker.bootstrap
    topic = new_topic(bs, PARTITIONS, prefix="recreated-region")
    old = produce_values(bs, topic, "old", 3000)
    toml = tmp_path / "p.toml"
    toml.write_text(f'''
[source]
topic = "{topic}"
starting_offsets = "earliest"
group_id = "recreated-region-{fail_on_data_loss}"
options = {{ failOnDataLoss = "{str(fail_on_data_loss).lower()}", maxOffsetsPerTrigger = "2000" }}

[transform]
sql = "SELECT CAST(value AS STRING) AS v FROM source"

[sink]
path = "out/table"
checkpoint = "out/checkpoints"
trigger = "500 milliseconds"
''')
    log = tmp_path / "i0.log"
    proc = _region_member(toml, bs, log)
    ledger = OffsetLedger(tmp_path / "out" / "table")

    def explain() -> str:
        return log.read_text(errors="replace")[-4000:]

    try:
        with Admin({"bootstrap.servers": bs}) as admin:
            ends = admin.log_end_offsets([(topic, p) for p in range(PARTITIONS)])
        wait_until(lambda: proc.poll() is None and ledger.offsets() == ends, 180, "the region to publish the topic",
                   interval_s=0.5, explain=explain)  # fmt: skip
        recreate(bs, topic)
        new = produce_values(bs, topic, "new", 4000)
        if fail_on_data_loss:
            assert proc.wait(120) == 2, explain()
            text = log.read_text(errors="replace")
            # the query fails on whichever it sees first: the topic gone ("Partitions t-0 (at offset N), t-1 ... are
            # gone ...: topic t was deleted") or its offsets gone back ("Partition t-0's offset was changed ...")
            assert "the pipeline's query failed: Partition" in text and "some data may have been missed" in text, text
            assert "Traceback" not in text.split("the pipeline's query failed")[1], text
            return
        with Admin({"bootstrap.servers": bs}) as admin:
            new_ends = admin.log_end_offsets([(topic, p) for p in range(PARTITIONS)])
            new_id = str(admin.describe_topics([topic])[topic].topic_id)
        wait_until(lambda: proc.poll() is None and ledger.offsets() == new_ends
                   and set(ledger.topic_ids().values()) == {new_id}, 120, "the region to publish the new topic",
                   interval_s=0.5, explain=explain)  # fmt: skip
        proc.send_signal(signal.SIGINT)
        assert proc.wait(120) == 0, explain()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    import pyarrow.parquet as pq

    table = [v for f in ledger.files() for v in pq.read_table(f).column("v").to_pylist()]
    assert sorted(table) == sorted(old + new), f"{len(table)} rows, {len(set(new) - set(table))} new ones missing"
    warnings = [line for line in log.read_text(errors="replace").splitlines() if WARNING in line]
    assert len(warnings) == 1 and topic in warnings[0], warnings
