"""Declarative pipelines: a small TOML file names a source topic, a transformation (SQL or a Python function)
and a sink, and ``groupstream pipeline run FILE`` runs it as a Spark Structured Streaming query.

```toml
[source]
topic = "page-views"               # or pattern = "events-.*"
starting_offsets = "earliest"      # earliest | latest | group (resume the group's commits)
group_id = "page-view-counts"      # progress is committed here, so lag tools see the pipeline
options = { maxOffsetsPerTrigger = "20000" }   # any other groupstream source option

[transform]
sql = "SELECT CAST(key AS STRING) AS user, value FROM source"   # the source is the view `source`
# or: python = "my_module:transform"  (or "path/to/file.py:transform"), a function DataFrame -> DataFrame

[sink]
path = "out/users"                 # a table directory; or topic = "..." to write to Kafka
format = "parquet"                 # parquet, json, csv, orc (file sinks: exactly-once with the checkpoint
                                   # for Spark readers), or delta (exactly-once for every reader of the table)
checkpoint = "out/users.checkpoint"
output_mode = "append"             # append, update, complete
trigger = "5 seconds"              # or "available-now": process what is there, then stop

[region]                           # optional: run as several instances that share the group and the table
instances = 2                      # how many `groupstream pipeline run FILE` starts on this machine

[spark]                            # optional: Spark settings of the pipeline's session (each instance's)
"spark.executor.memory" = "2g"     # also without the prefix: executor.memory = "2g"
```

``--conf KEY=VALUE`` on the command line adds Spark settings and overrides the file's.

With ``[region]`` (or ``--instances N`` / ``--member NAME`` on the command line) the pipeline is a consistent
region: its instances, on this machine or elsewhere, share ``source.group_id`` (the group splits the partitions
among them) and the Parquet or Delta table ``sink.path``, which they write through its ledger (see
`groupstream.spark.region_table`), so the table holds every record exactly once across rebalances and crashes
of instances. Each instance keeps its own Spark checkpoint, ``sink.checkpoint/<member>``. The transform must
work record by record (select, filter, explode, UDFs): an aggregation would only see its instance's share.

Everything is checked when the file is loaded, and every mistake names the key at fault.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "PipelineError",
    "PipelineSpec",
    "await_query",
    "build_query",
    "load_pipeline",
    "parse_conf",
    "query_error",
    "spark_rejects",
    "spark_settings",
]

FILE_FORMATS = ("parquet", "json", "csv", "orc", "delta")
DELTA = "delta"
OUTPUT_MODES = ("append", "update", "complete")
AVAILABLE_NOW = "available-now"


class PipelineError(ValueError):
    """The pipeline definition is wrong; the message names the key."""


@dataclass(frozen=True)
class PipelineSpec:
    topic: str | None
    pattern: str | None
    starting_offsets: str
    group_id: str | None
    source_options: Mapping[str, str]
    sql: str | None
    python: str | None
    sink_path: Path | None
    sink_topic: str | None
    sink_format: str
    checkpoint: Path
    output_mode: str
    trigger: str
    base_dir: Path = field(default=Path("."))
    instances: int | None = None  # [region] instances: run as a region of this many local instances
    spark_conf: Mapping[str, str] = field(default_factory=dict)  # [spark]: settings of the Spark session


def _table(doc: Mapping[str, Any], name: str, required: bool) -> Mapping[str, Any]:
    value = doc.get(name)
    if value is None:
        if required:
            raise PipelineError(f"the table [{name}] is missing")
        return {}
    if not isinstance(value, dict):
        raise PipelineError(f"[{name}] must be a table")
    return value


def _str(table: Mapping[str, Any], section: str, key: str, default: str | None = None) -> str | None:
    value = table.get(key, default)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise PipelineError(f"{section}.{key} must be a non-empty string, got {value!r}")
    return value.strip()


def _check_keys(table: Mapping[str, Any], section: str, allowed: set[str]) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise PipelineError(f"unknown key {section}.{unknown[0]} (known: {', '.join(sorted(allowed))})")


def load_pipeline(path: Path) -> PipelineSpec:
    try:
        doc = tomllib.loads(Path(path).read_text())
    except FileNotFoundError:
        raise PipelineError(f"no pipeline file {path}") from None
    except tomllib.TOMLDecodeError as e:
        raise PipelineError(f"{path} is not valid TOML: {e}") from None
    _check_keys(doc, "pipeline", {"source", "transform", "sink", "region", "spark"})
    base = Path(path).resolve().parent
    src = _table(doc, "source", required=True)
    _check_keys(src, "source", {"topic", "pattern", "starting_offsets", "group_id", "options"})
    topic, pattern = _str(src, "source", "topic"), _str(src, "source", "pattern")
    if (topic is None) == (pattern is None):
        raise PipelineError("give exactly one of source.topic and source.pattern")
    starting = _str(src, "source", "starting_offsets", "latest") or "latest"
    group_id = _str(src, "source", "group_id")
    if starting == "group" and group_id is None:
        raise PipelineError("source.starting_offsets = \"group\" needs source.group_id")
    options = src.get("options", {})
    if not isinstance(options, dict) or not all(isinstance(v, str | int | bool) for v in options.values()):
        raise PipelineError("source.options must be a table of option names to values")
    tr = _table(doc, "transform", required=False)
    _check_keys(tr, "transform", {"sql", "python"})
    sql, python = _str(tr, "transform", "sql"), _str(tr, "transform", "python")
    if sql is not None and python is not None:
        raise PipelineError("give transform.sql or transform.python, not both")
    if python is not None and ":" not in python:
        raise PipelineError(f"transform.python must be module:function or file.py:function, got {python!r}")
    sink = _table(doc, "sink", required=True)
    _check_keys(sink, "sink", {"path", "topic", "format", "checkpoint", "output_mode", "trigger"})
    sink_path, sink_topic = _str(sink, "sink", "path"), _str(sink, "sink", "topic")
    if (sink_path is None) == (sink_topic is None):
        raise PipelineError("give exactly one of sink.path (a table) and sink.topic (a Kafka topic)")
    fmt = (_str(sink, "sink", "format", "parquet") or "parquet").lower()
    if sink_path is not None and fmt not in FILE_FORMATS:
        raise PipelineError(f"sink.format must be one of {', '.join(FILE_FORMATS)}, got {fmt!r}")
    if fmt == DELTA and sink_path is None:
        raise PipelineError("sink.format = \"delta\" writes a table: give sink.path")
    checkpoint = _str(sink, "sink", "checkpoint")
    if checkpoint is None:
        raise PipelineError("sink.checkpoint is required (where Spark keeps the query's progress)")
    mode = (_str(sink, "sink", "output_mode", "append") or "append").lower()
    if mode not in OUTPUT_MODES:
        raise PipelineError(f"sink.output_mode must be one of {', '.join(OUTPUT_MODES)}, got {mode!r}")
    if fmt == DELTA and mode != "append":
        raise PipelineError(f"a Delta sink appends: sink.output_mode must be \"append\", got {mode!r}")
    trigger = _str(sink, "sink", "trigger", "5 seconds") or "5 seconds"
    region = _table(doc, "region", required=False)
    _check_keys(region, "region", {"instances"})
    instances = region.get("instances")
    if "region" in doc:
        if not isinstance(instances, int) or isinstance(instances, bool) or instances < 1:
            raise PipelineError(f"region.instances must be a positive integer, got {instances!r}")
        check_region(group_id, sink_path, fmt)
    return PipelineSpec(
        topic=topic,
        pattern=pattern,
        starting_offsets=starting,
        group_id=group_id,
        source_options={str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in options.items()},
        sql=sql,
        python=python,
        sink_path=None if sink_path is None else base / sink_path,
        sink_topic=sink_topic,
        sink_format=fmt,
        checkpoint=base / checkpoint,
        output_mode=mode,
        trigger=trigger,
        base_dir=base,
        instances=instances,
        spark_conf=spark_settings(_table(doc, "spark", required=False)),
    )


def spark_settings(table: Mapping[str, Any], section: str = "spark") -> dict[str, str]:
    """The ``[spark]`` table as Spark properties: nested tables are joined with dots (TOML reads
    ``executor.memory = "2g"`` as a table ``executor``), and ``spark.`` is prefixed where missing, so both
    ``"spark.executor.memory" = "2g"`` and ``executor.memory = "2g"`` mean Spark's ``spark.executor.memory``."""
    out: dict[str, str] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
            return
        if isinstance(value, bool):
            text = str(value).lower()
        elif isinstance(value, int | float | str):
            text = str(value)
        else:
            raise PipelineError(f"{section}.{prefix} must be a string, number or boolean, got {value!r}")
        key = prefix if prefix.startswith("spark.") else f"spark.{prefix}"
        out[key] = text

    walk("", table)
    return out


def parse_conf(items: list[str] | None) -> dict[str, str]:
    """``--conf KEY=VALUE`` arguments as Spark properties (``spark.`` prefixed where missing)."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise PipelineError(f"--conf takes KEY=VALUE (a Spark property), got {item!r}")
        out[key if key.startswith("spark.") else f"spark.{key}"] = value
    return out


_PYTHON_ERROR = re.compile(r"^(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception): (.+)$")


def query_error(error: object) -> str:
    """One line for a failed query: the Python exception a source or a UDF raised inside Spark (its message,
    not the traceback around it, e.g. a data-loss error), else the first line of Spark's own message."""
    text = str(error).split("=== Streaming Query ===")[0]
    lines = text.splitlines()
    found = [m.group(1) for line in lines if (m := _PYTHON_ERROR.match(line.strip()))]
    line = found[-1] if found else (lines[0] if lines else repr(error))
    if "No module named 'groupstream'" in text or "No module named 'pyspark_groupstream'" in text:
        line += _MISSING_PACKAGE.format(python=os.environ.get("PYSPARK_PYTHON", "python3"))
    return line


_MISSING_PACKAGE = (
    " (groupstream must be installed in the Python that Spark runs, PYSPARK_PYTHON={python}, on the driver and on "
    "every executor: pip install 'groupstream[spark]' there, or point PYSPARK_PYTHON at a Python that has it)"
)


def spark_rejects(error: object) -> str:
    """One line for a pipeline Spark cannot start: Spark's own message (not py4j's "An error occurred while
    calling ..." around it); a data source Spark cannot find is groupstream missing from the Python that Spark
    runs, which the hint names."""
    lines = str(error).splitlines() or [repr(error)]
    line = lines[0]
    if line.startswith("An error occurred while calling") and len(lines) > 1:
        line = _JAVA_ERROR.sub("", lines[1].lstrip(": "))
    if "DATA_SOURCE_NOT_FOUND" in line or "No module named 'groupstream'" in str(error):
        line += _MISSING_PACKAGE.format(python=os.environ.get("PYSPARK_PYTHON", "python3"))
    return line


_JAVA_ERROR = re.compile(r"^(?:[a-z_][\w]*\.)+[A-Z]\w*(?:Exception|Error): ")


def await_query(query: Any, timeout_s: float) -> None:
    """Wait up to ``timeout_s`` for the query to end. Spark raises the query's error from here when it
    failed; the caller reads it from ``query.exception()`` instead, to report it in one line."""
    from pyspark.errors import StreamingQueryException

    with contextlib.suppress(StreamingQueryException):
        query.awaitTermination(timeout_s)


def check_region(group_id: str | None, sink_path: str | Path | None, fmt: str) -> None:
    """What running as a region needs of the pipeline."""
    if group_id is None:
        raise PipelineError("a region needs source.group_id: the group its instances share")
    if sink_path is None or fmt not in ("parquet", DELTA):
        raise PipelineError("a region writes a Parquet or Delta table: give sink.path with sink.format = "
                            "\"parquet\" or \"delta\"")


def _python_transform(ref: str, base: Path) -> Callable[[Any], Any]:
    module_ref, _, name = ref.rpartition(":")
    try:
        if module_ref.endswith(".py"):
            file = (base / module_ref).resolve()
            spec = importlib.util.spec_from_file_location(file.stem, file)
            if spec is None or spec.loader is None or not file.is_file():
                raise PipelineError(f"transform.python: no file {file}")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_ref)
    except ImportError as e:
        raise PipelineError(f"transform.python: cannot import {module_ref!r}: {e}") from None
    fn = getattr(module, name, None)
    if not callable(fn):
        raise PipelineError(f"transform.python: {module_ref!r} has no function {name!r}")
    return fn  # type: ignore[no-any-return]


def build_query(
    spark: Any,
    spec: PipelineSpec,
    bootstrap: str,
    member: str | None = None,
    on_event: Callable[[str, dict[str, Any]], None] | None = None,
) -> Any:
    """Start the streaming query the pipeline describes; returns the StreamingQuery. With ``member`` it is
    that instance of the pipeline's region."""
    if member is not None:
        check_region(spec.group_id, spec.sink_path, spec.sink_format)
    reader = spark.readStream.format("groupstream").option("kafka.bootstrap.servers", bootstrap)
    reader = reader.option("subscribe", spec.topic) if spec.topic else reader.option("subscribePattern", spec.pattern)
    reader = reader.option("startingOffsets", spec.starting_offsets)
    if spec.group_id:
        reader = reader.option("group.id", spec.group_id)
    for k, v in spec.source_options.items():
        reader = reader.option(k, v)
    if member is not None:
        reader = reader.option("region.table", str(spec.sink_path)).option("region.member", member)
    df = reader.load()
    if spec.sql is not None:
        df.createOrReplaceTempView("source")
        df = spark.sql(spec.sql)
    elif spec.python is not None:
        df = _python_transform(spec.python, spec.base_dir)(df)
    checkpoint = spec.checkpoint if member is None else spec.checkpoint / member
    writer = df.writeStream.outputMode(spec.output_mode).option("checkpointLocation", str(checkpoint))
    if member is not None:
        from groupstream.spark.region_table import RegionTable

        assert spec.sink_path is not None
        writer = writer.foreachBatch(RegionTable(spec.sink_path, member, on_event, delta=spec.sink_format == DELTA))
    elif spec.sink_topic is not None:
        writer = writer.format("groupstream").option("kafka.bootstrap.servers", bootstrap).option(
            "topic", spec.sink_topic)  # fmt: skip
    elif spec.sink_format == DELTA:
        from groupstream.spark.delta_table import DeltaBatchSink

        assert spec.sink_path is not None
        writer = writer.foreachBatch(DeltaBatchSink(spec.sink_path, checkpoint))
    else:
        writer = writer.format(spec.sink_format).option("path", str(spec.sink_path))
    if spec.trigger == AVAILABLE_NOW:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=spec.trigger)
    return writer.start()
