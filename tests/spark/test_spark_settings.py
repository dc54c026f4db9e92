"""Spark settings of pipelines and running them on a cluster master (issue 15): the ``[spark]`` table and
``--conf`` reach the session (``--conf`` wins); a run that gets no executors says so within 30 s, and with
``--instances N`` on a standalone master each instance asks for its share of the cores; a data source Spark
cannot find names the Python it runs. The master is a real standalone Master started from the installed PySpark,
with no worker, so no application ever gets an executor."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from spark_kit import fill, new_topic, run_cli

from groupstream.spark.pipeline import PipelineError, load_pipeline, parse_conf
from support.brokers import BrokerProcess, groupstream_command
from support.waiting import wait_until

pytestmark = pytest.mark.compat

PIPELINE = '''
[source]
topic = "{topic}"
starting_offsets = "earliest"
group_id = "{group}"

[transform]
python = "transform.py:transform"

[sink]
path = "out/table"
checkpoint = "out/checkpoint"
trigger = "1 second"
'''

TRANSFORM = '''
import json

def transform(df):
    conf = df.sparkSession.conf
    with open("seen.json", "w") as f:
        json.dump({k: conf.get(k, None) for k in ("spark.groupstream.test.a", "spark.groupstream.test.b",
                                                    "spark.sql.shuffle.partitions")}, f)
    return df.selectExpr("CAST(value AS STRING) AS v")
'''


def test_the_spark_table_is_read_with_or_without_the_prefix(tmp_path: Path) -> None:
    (tmp_path / "p.toml").write_text(PIPELINE.format(topic="t", group="g") + '''
[spark]
"spark.executor.memory" = "2g"
sql.shuffle.partitions = 4
spark.dynamicAllocation.enabled = false
''')
    spec = load_pipeline(tmp_path / "p.toml")
    assert spec.spark_conf == {
        "spark.executor.memory": "2g", "spark.sql.shuffle.partitions": "4", "spark.dynamicAllocation.enabled": "false",
    }  # fmt: skip
    (tmp_path / "bad.toml").write_text(PIPELINE.format(topic="t", group="g") + '[spark]\n"spark.jars" = ["a", "b"]\n')
    with pytest.raises(PipelineError, match=r"spark\.spark\.jars must be a string, number or boolean"):
        load_pipeline(tmp_path / "bad.toml")
    assert parse_conf(["spark.a=1", "b.c=x=y"]) == {"spark.a": "1", "spark.b.c": "x=y"}
    with pytest.raises(PipelineError, match="--conf takes KEY=VALUE"):
        parse_conf(["spark.a"])


def test_settings_from_the_file_and_conf_reach_the_session_and_conf_wins(broker: BrokerProcess, tmp_path: Path) -> None:
    bs = broker.bootstrap
    topic = new_topic(bs, 2)
    fill(bs, topic, 200)
    (tmp_path / "transform.py").write_text(TRANSFORM)
    (tmp_path / "p.toml").write_text(PIPELINE.format(topic=topic, group="settings") + '''
[spark]
groupstream.test.a = "from the file"
"spark.groupstream.test.b" = "from the file"
sql.shuffle.partitions = 3
''')
    bad = run_cli("pipeline", "run", "p.toml", "--bootstrap-server", bs, "--conf", "spark.nothing", cwd=tmp_path)
    assert bad.returncode == 2 and "--conf takes KEY=VALUE" in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
    proc = run_cli("pipeline", "run", "p.toml", "--bootstrap-server", bs, "--until-caught-up",
                   "--conf", "spark.groupstream.test.b=from the command line", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert json.loads((tmp_path / "seen.json").read_text()) == {
        "spark.groupstream.test.a": "from the file",
        "spark.groupstream.test.b": "from the command line",
        "spark.sql.shuffle.partitions": "3",  # the user's setting over groupstream's own default (2)
    }


def test_a_data_source_spark_cannot_find_names_the_python_it_runs(broker: BrokerProcess, tmp_path: Path) -> None:
    # A fresh virtual environment of the base interpreter, without its site-packages: a Python that certainly
    # lacks groupstream, as an executor's would when the package was installed on the driver only.
    subprocess.run([str(Path(sys.base_prefix) / "bin" / "python3"), "-m", "venv", "--without-pip",
                    str(tmp_path / "bare")], check=True)  # fmt: skip
    base = tmp_path / "bare" / "bin" / "python3"
    (tmp_path / "transform.py").write_text(TRANSFORM)
    (tmp_path / "p.toml").write_text(PIPELINE.format(topic="t", group="g"))
    env = dict(os.environ, PYSPARK_PYTHON=str(base), SPARK_LOCAL_IP="127.0.0.1", COLUMNS="200")
    # The session fixture of earlier tests set PYSPARK_DRIVER_PYTHON in this process; Spark plans Python data
    # sources (and, in local mode, runs every Python worker) with it when set, which would find groupstream
    # and run the pipeline for ever instead.
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    proc = subprocess.run([*groupstream_command(), "pipeline", "run", "p.toml", "--bootstrap-server", broker.bootstrap],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240, check=False)  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    error = proc.stderr.strip().splitlines()[-1]
    assert "DATA_SOURCE_NOT_FOUND" in error and f"PYSPARK_PYTHON={base}" in error, proc.stderr[-3000:]
    assert "every executor" in error and "Traceback" not in proc.stderr, proc.stderr[-3000:]


@pytest.mark.slow
def test_instances_on_a_master_without_cores_ask_for_a_share_and_say_they_get_no_executors(
    broker: BrokerProcess, master: tuple[str, int], tmp_path: Path
) -> None:
    url, ui = master
    bs = broker.bootstrap
    topic = new_topic(bs, 2)
    fill(bs, topic, 100)
    (tmp_path / "transform.py").write_text(TRANSFORM)
    (tmp_path / "p.toml").write_text(PIPELINE.format(topic=topic, group="starved"))
    log = tmp_path / "run.log"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1", COLUMNS="200")
    with log.open("wb") as out:
        proc = subprocess.Popen([*groupstream_command(), "pipeline", "run", "p.toml", "--instances", "2",
                                 "--bootstrap-server", bs, "--master", url, "--conf", f"spark.master.ui.port={ui}"],
                                cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip

    def text() -> str:
        return log.read_text(errors="replace")

    def events(name: str) -> list[dict[str, Any]]:
        return [json.loads(line.split(" ", 1)[1]) for line in text().splitlines() if line.startswith(f"[{name}] {{")]

    def event(name: str, kind: str) -> dict[str, Any]:
        return next(e for e in events(name) if e["event"] == kind)

    def starved(name: str) -> dict[str, Any] | None:
        return next((e for e in events(name) if e["event"] == "executors" and e["executors"] == 0), None)

    try:
        wait_until(lambda: proc.poll() is None and "the cluster has 0 cores for 2 instances" in text(), 60,
                   "the supervisor to ask the master for its cores", interval_s=0.5, explain=lambda: text()[-3000:])  # fmt: skip
        # each instance says it has no executor within 30 s of its session starting
        wait_until(lambda: proc.poll() is None and starved("i0") and starved("i1"), 120,
                   "both instances to say they have no executor", interval_s=0.5, explain=lambda: text()[-3000:])  # fmt: skip
        for name in ("i0", "i1"):
            note = starved(name)
            assert note is not None, name
            seconds = re.search(r"no executor has joined after (\d+) s", note["note"])
            assert seconds is not None and int(seconds.group(1)) < 30, note
            assert event(name, "started")["cores_max"] == "1"  # its share of the cores: spark.cores.max
        assert "Initial job has not accepted any resources" in text()  # Spark's own warning is let through
        # their micro-batches wait for cores forever: a second Ctrl-C stops them without waiting for a boundary
        proc.send_signal(signal.SIGINT)
        wait_until(lambda: '"event": "stopping"' in text(), 30, "the supervisor to stop", interval_s=0.2)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(120) == 0, text()[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    assert "Traceback" not in text() and "Exception" not in text(), text()[-4000:]
    with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=5) as answer:
        apps = json.loads(answer.read())["completedapps"]
    assert sorted(a["name"] for a in apps) == ["groupstream-pipeline-p-i0", "groupstream-pipeline-p-i1"], apps
