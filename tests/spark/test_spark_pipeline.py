"""``groupstream pipeline run``: declarative pipelines (SQL or a Python function) run by the console script
against our broker, and definitions with mistakes rejected in one line that names the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spark_kit import fill, new_topic, run_cli

from groupstream.client.admin import Admin
from groupstream.spark.pipeline import PipelineError, load_pipeline
from support.brokers import BrokerProcess

pytestmark = pytest.mark.compat


def test_a_sql_pipeline_runs_until_caught_up_and_commits_to_its_group(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    bs = broker.bootstrap
    topic = new_topic(bs, 3)
    produced = fill(bs, topic, 1500)
    (tmp_path / "p.toml").write_text(f'''
[source]
topic = "{topic}"
starting_offsets = "earliest"
group_id = "sql-pipeline"
options = {{ maxOffsetsPerTrigger = "500" }}

[transform]
sql = "SELECT CAST(key AS STRING) AS k, CAST(value AS STRING) AS v, partition FROM source WHERE value IS NOT NULL"

[sink]
path = "out/table"
checkpoint = "out/checkpoint"
''')
    proc = run_cli("pipeline", "run", "p.toml", "--bootstrap-server", bs, "--until-caught-up", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1,500 records read" in proc.stdout
    rows = spark.read.parquet(str(tmp_path / "out" / "table")).collect()
    assert sorted((r.k.encode(), r.v.encode()) for r in rows) == sorted(produced.items())
    with Admin({"bootstrap.servers": bs}) as admin:
        committed = admin.list_group_offsets("sql-pipeline")
    assert sum(om.offset for om in committed.values()) == 1500


def test_a_python_pipeline_writes_to_a_topic(spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    bs = broker.bootstrap
    source, target = new_topic(bs, 2), new_topic(bs, 1)
    produced = fill(bs, source, 300)
    (tmp_path / "shout.py").write_text('''
from pyspark.sql import functions as F

def transform(df):
    return df.select("key", F.upper(F.col("value").cast("string")).alias("value"))
''')
    (tmp_path / "p.toml").write_text(f'''
[source]
topic = "{source}"
starting_offsets = "earliest"

[transform]
python = "shout.py:transform"

[sink]
topic = "{target}"
checkpoint = "ck"
trigger = "available-now"
''')
    proc = run_cli("pipeline", "run", "p.toml", "--bootstrap-server", bs, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = spark.read.format("groupstream").option("kafka.bootstrap.servers", bs).option(
        "subscribe", target).load().collect()  # fmt: skip
    assert sorted((bytes(r.key), bytes(r.value)) for r in out) == sorted((k, v.upper()) for k, v in produced.items())


def test_a_bad_query_is_one_line_not_a_traceback(broker: BrokerProcess, tmp_path: Path) -> None:
    (tmp_path / "p.toml").write_text('''
[source]
topic = "x"
[transform]
sql = "SELECT no_such_column FROM source"
[sink]
path = "out"
checkpoint = "ck"
''')
    proc = run_cli("pipeline", "run", "p.toml", "--bootstrap-server", broker.bootstrap, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert "Spark cannot run this pipeline" in proc.stderr and "no_such_column" in proc.stderr


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[sink]\npath='o'\ncheckpoint='c'", "the table [source] is missing"),
        ("[source]\ntopic='t'\npattern='x'\n[sink]\npath='o'\ncheckpoint='c'", "exactly one of source.topic"),
        ("[source]\ntopic='t'\ntypo=1\n[sink]\npath='o'\ncheckpoint='c'", "unknown key source.typo"),
        ("[source]\ntopic='t'\nstarting_offsets='group'\n[sink]\npath='o'\ncheckpoint='c'", "needs source.group_id"),
        ("[source]\ntopic='t'\n[transform]\nsql='x'\npython='m:f'\n[sink]\npath='o'\ncheckpoint='c'", "not both"),
        ("[source]\ntopic='t'\n[transform]\npython='m'\n[sink]\npath='o'\ncheckpoint='c'", "module:function"),
        ("[source]\ntopic='t'\n[sink]\npath='o'\ntopic='x'\ncheckpoint='c'", "exactly one of sink.path"),
        ("[source]\ntopic='t'\n[sink]\npath='o'", "sink.checkpoint is required"),
        ("[source]\ntopic='t'\n[sink]\npath='o'\ncheckpoint='c'\nformat='xls'", "sink.format must be one of"),
        ("[source]\ntopic='t'\n[sink]\npath='o'\ncheckpoint='c'\noutput_mode='all'", "sink.output_mode must be"),
        ("[source]\ntopic=3\n[sink]\npath='o'\ncheckpoint='c'", "source.topic must be a non-empty string"),
        ("[source\n", "is not valid TOML"),
        ("[source]\ntopic='t'\n[sink]\npath='o'\ncheckpoint='c'\n[region]\ninstances=2", "a region needs source.group_id"),
        ("[source]\ntopic='t'\ngroup_id='g'\n[sink]\ntopic='o'\ncheckpoint='c'\n[region]\ninstances=2",
         "a region writes a Parquet or Delta table"),
        ("[source]\ntopic='t'\ngroup_id='g'\n[sink]\npath='o'\ncheckpoint='c'\n[region]\ninstances=0",
         "region.instances must be a positive integer"),
        ("[source]\ntopic='t'\ngroup_id='g'\n[sink]\npath='o'\ncheckpoint='c'\n[region]\nmembers=2", "unknown key region.members"),
    ],
)
def test_definition_mistakes_name_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(PipelineError) as err:
        load_pipeline(path)
    assert message in str(err.value)


def test_the_cli_reports_a_bad_definition_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "p.toml").write_text("[source]\ntopic='t'\n[sink]\npath='o'")
    proc = run_cli("pipeline", "run", "p.toml", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "p.toml: sink.checkpoint is required" in proc.stderr
