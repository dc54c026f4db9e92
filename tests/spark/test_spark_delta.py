"""The Delta sink (issue 15): a pipeline with ``format = "delta"`` whose driver is killed with SIGKILL several
times at random moments leaves a table that DuckDB and ``deltalake`` read with every record exactly once, although
files of killed batches lie in its directory; the region's publisher commits each ledger entry to the Delta log
exactly once, also when its publisher died between the ledger and the log.
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

import deltalake
import duckdb
import pytest
from spark_kit import fill, new_topic

from groupstream.client.admin import Admin
from groupstream.region.ledger import OffsetLedger
from groupstream.spark.delta_table import REGION_APP_ID, DeltaRegionPublisher, commit_files, committed_version
from groupstream.spark.pipeline import PipelineError, load_pipeline
from support.brokers import BrokerProcess, groupstream_command
from support.waiting import wait_until

KILLS = 3

PIPELINE = """
[source]
topic = "{topic}"
starting_offsets = "earliest"
group_id = "{group}"
options = {{ maxOffsetsPerTrigger = "700" }}

[transform]
sql = "SELECT partition, offset, CAST(key AS STRING) AS k, CAST(value AS STRING) AS v FROM source"

[sink]
path = "out/table"
format = "delta"
checkpoint = "out/checkpoint"
trigger = "200 milliseconds"
"""


def read_with_duckdb(table: Path) -> list[tuple[int, int, str, str]]:
    """The table as DuckDB reads it: through the Delta log (deltalake's Arrow dataset), not a glob."""
    dataset = deltalake.DeltaTable(str(table)).to_pyarrow_dataset()  # noqa: F841 (DuckDB finds it by name)
    rows = duckdb.sql("SELECT partition, \"offset\", k, v FROM dataset").fetchall()
    return [(int(p), int(o), str(k), str(v)) for p, o, k, v in rows]


@pytest.mark.compat
@pytest.mark.slow
def test_a_delta_pipeline_whose_driver_is_killed_holds_every_record_once_for_duckdb(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    bs = broker.bootstrap
    topic = new_topic(bs, 4, prefix="delta")
    produced = fill(bs, topic, 8000)
    (tmp_path / "p.toml").write_text(PIPELINE.format(topic=topic, group="delta-crash"))
    log = tmp_path / "driver.log"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1", COLUMNS="200")
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    seed = int(os.environ.get("GROUPSTREAM_TEST_SEED") or random.randrange(1 << 30))
    rng = random.Random(seed)
    table = tmp_path / "out" / "table"

    def start(*extra: str) -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            return subprocess.Popen([*groupstream_command(), "pipeline", "run", "p.toml", "--bootstrap-server", bs,
                                     "--master", "local[2]", *extra], cwd=tmp_path, env=env, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip

    def committed() -> int:
        return -1 if not (table / "_delta_log").is_dir() else len(deltalake.DeltaTable(str(table)).history())

    for i in range(KILLS):
        proc = start()
        try:
            before = committed()
            # a kill after the query committed at least once since this start, at a random moment after that
            wait_until(lambda p=proc, b=before: p.poll() is None and committed() > b, 120,  # type: ignore[misc]
                       f"run {i} to commit a batch (seed {seed})", interval_s=0.1,
                       explain=lambda: log.read_text(errors="replace")[-3000:])  # fmt: skip
            time.sleep(rng.uniform(0.0, 2.0))  # a random moment of the run is the point of this test
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        if i == KILLS // 2:
            produced |= fill(bs, topic, 2000, first=8000)  # more records arrive while the driver is down
    proc = start("--until-caught-up")
    try:
        assert proc.wait(240) == 0, log.read_text(errors="replace")[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)

    rows = read_with_duckdb(table)
    positions = [(p, o) for p, o, _k, _v in rows]
    assert len(positions) == len(set(positions)), f"{len(positions) - len(set(positions))} records twice (seed {seed})"
    assert {k.encode(): v.encode() for _p, _o, k, v in rows} == produced, f"seed {seed}"
    in_log = {Path(f).name for f in deltalake.DeltaTable(str(table)).file_uris()}
    on_disk = {f.name for f in table.rglob("*.parquet")}
    assert in_log <= on_disk
    print(f"seed {seed}: {len(rows)} rows in {len(in_log)} files of the log; {len(on_disk - in_log)} files of killed "
          "batches in the directory")  # fmt: skip
    with Admin({"bootstrap.servers": bs}) as admin:
        ends = {tp: o.offset for tp, o in admin.list_offsets({(topic, p): "latest" for p in range(4)}).items()}
        group = {tp: om.offset for tp, om in admin.list_group_offsets("delta-crash").items()}
    assert group == ends


def _staged_file(ledger: OffsetLedger, member: str, batch: str, values: list[str]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = ledger.staging_path(member, batch) / "part-0.parquet"
    pq.write_table(pa.table({"v": values}), path)
    return path


def test_the_region_publisher_commits_each_ledger_entry_to_the_delta_log_once(tmp_path: Path) -> None:
    table = tmp_path / "table"
    ledger = OffsetLedger(table)
    publisher = DeltaRegionPublisher(table)
    assert publisher.catch_up() == 0 and committed_version(table, REGION_APP_ID) is None
    ledger.publish("i0", "b1", {("t", 0): (0, 2)}, [_staged_file(ledger, "i0", "b1", ["a", "b"])])
    ledger.publish("i1", "b1", {("t", 1): (0, 0)}, [])  # an entry with no rows
    # the publisher of the next entry dies after its ledger entry, before the Delta commit: a later member commits it
    ledger.publish("i1", "b2", {("t", 1): (0, 1)}, [_staged_file(ledger, "i1", "b2", ["c"])])
    assert publisher.catch_up() == 3
    assert publisher.catch_up() == 0  # a second member recovering at the same point commits nothing again
    assert committed_version(table, REGION_APP_ID) == 3
    entry = ledger.publish("i0", "b2", {("t", 0): (2, 3)}, [_staged_file(ledger, "i0", "b2", ["d"])])
    back = ledger.staging_dir / entry.files[0][1]  # as if its publisher died before moving its file into the table
    back.parent.mkdir(parents=True)
    (table / entry.files[0][0]).replace(back)
    assert DeltaRegionPublisher(table).catch_up() == 1 and publisher.catch_up() == 0
    dataset = deltalake.DeltaTable(str(table)).to_pyarrow_dataset()  # noqa: F841
    assert sorted(v for (v,) in duckdb.sql("SELECT v FROM dataset").fetchall()) == ["a", "b", "c", "d"]
    assert len(deltalake.DeltaTable(str(table)).history()) == 5  # the create, 3 commits with rows, the empty one
    assert committed_version(table, REGION_APP_ID) == 4


def test_a_replayed_batch_is_not_committed_twice(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = tmp_path / "table"
    table.mkdir()
    pq.write_table(pa.table({"v": ["a"]}), table / "part-1.parquet")
    pq.write_table(pa.table({"v": ["b"]}), table / "part-2.parquet")
    assert commit_files(table, [table / "part-1.parquet"], "q", 0)
    assert not commit_files(table, [table / "part-2.parquet"], "q", 0)  # batch 0 again, after a crash
    assert commit_files(table, [table / "part-2.parquet"], "other-query", 0)  # another query's batch 0 is its own
    assert committed_version(table, "q") == 0 and committed_version(table, "other-query") == 0
    assert sorted(deltalake.DeltaTable(str(table)).to_pyarrow_table().column("v").to_pylist()) == ["a", "b"]


_WRITER = """
import sys, time
from pathlib import Path
import pyarrow as pa, pyarrow.parquet as pq
from groupstream.spark.delta_table import commit_files
root, name, meet = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
for t in range({tables}):
    table = root / f"t{{t}}"
    table.mkdir(exist_ok=True)
    f = table / f"part-{{name}}.parquet"
    pq.write_table(pa.table({{"v": [f"{{name}}"]}}), f)
    (meet / f"{{t}}-{{name}}").touch()  # every writer commits to the new table at once
    deadline = time.monotonic() + 60
    while len(list(meet.glob(f"{{t}}-*"))) < {writers} and not (meet / "failed").exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"writer {{name}}: the other writers did not reach table {{t}} within 60 s")
        time.sleep(0.001)  # polls the barrier's condition above, with the deadline
    try:
        assert commit_files(table, [f], f"writer-{{name}}", 0)
    except BaseException:
        (meet / "failed").touch()  # the others stop waiting for this writer
        raise
"""


def test_writers_in_several_processes_commit_to_one_new_table(tmp_path: Path) -> None:
    """Region members commit their own files to one table at the same time (issue 15's region ``--format delta``):
    without the table's commit lock, two writers creating the table at once failed ("Metadata changed since last
    commit", "Protocol changed since last commit") and the region member died with a traceback. Each round is a
    new table, since that race is at the table's creation (without the lock, about half of the runs of one round failed)."""
    writers, tables = 4, 6
    (tmp_path / "meet").mkdir()
    script = _WRITER.format(tables=tables, writers=writers)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path), str(i), str(tmp_path / "meet")],
                              stderr=subprocess.PIPE, text=True) for i in range(writers)]  # fmt: skip
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * writers, "\n".join(errors)
    for t in range(tables):
        table = tmp_path / f"t{t}"
        values = deltalake.DeltaTable(str(table)).to_pyarrow_table().column("v").to_pylist()
        assert sorted(values) == [str(i) for i in range(writers)], table
        assert all(committed_version(table, f"writer-{i}") == 0 for i in range(writers))


@pytest.mark.parametrize(
    ("sink", "error"),
    [
        ('topic = "t"\nformat = "delta"', "sink.format = \"delta\" writes a table"),
        ('path = "x"\nformat = "delta"\noutput_mode = "complete"', "a Delta sink appends"),
    ],
)
def test_delta_sink_mistakes_are_named(tmp_path: Path, sink: str, error: str) -> None:
    (tmp_path / "p.toml").write_text(f'[source]\ntopic = "t"\n[sink]\n{sink}\ncheckpoint = "c"\n')
    with pytest.raises(PipelineError, match=error):
        load_pipeline(tmp_path / "p.toml")


def test_a_region_may_write_a_delta_table(tmp_path: Path) -> None:
    (tmp_path / "p.toml").write_text('[source]\ntopic = "t"\ngroup_id = "g"\n[sink]\npath = "x"\nformat = "delta"\n'
                                     'checkpoint = "c"\n[region]\ninstances = 2\n')  # fmt: skip
    spec: Any = load_pipeline(tmp_path / "p.toml")
    assert spec.sink_format == "delta" and spec.instances == 2
