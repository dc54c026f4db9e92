"""Helpers of the Spark tests: topics with known records, and reading a data source into plain tuples."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from groupstream.client.admin import Admin, NewTopic
from support.brokers import groupstream_command
from support.records import Out, produce_records


def new_topic(bootstrap: str, partitions: int, prefix: str = "sp") -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(name, partitions)])
    return name


def fill(bootstrap: str, topic: str, n: int, first: int = 0, *, timestamp_ms: int | None = None,
         partition: int | None = None) -> dict[bytes, bytes]:
    """Produce ``n`` keyed records (key ``k<i>``, value ``v<i>``, one header) and return them by key."""
    records = [
        Out(b"v%d" % i, b"k%d" % i, partition, None if timestamp_ms is None else timestamp_ms + i, (("i", b"%d" % i),))
        for i in range(first, first + n)
    ]  # fmt: skip
    produce_records(bootstrap, topic, records)
    return {r.key: r.value for r in records if r.key is not None and r.value is not None}


def source(spark: Any, bootstrap: str, **options: str) -> Any:
    reader = spark.read.format("groupstream").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def offsets_by_partition(rows: list[Any]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for r in rows:
        out.setdefault(r.partition, []).append(r.offset)
    return {p: sorted(os) for p, os in sorted(out.items())}


def run_cli(*args: str, cwd: Path, timeout_s: float = 240) -> subprocess.CompletedProcess[str]:
    """``groupstream ARGS`` as a user runs it, with Spark's Python workers on this interpreter."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1", COLUMNS="200")
    return subprocess.run([*groupstream_command(), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout_s, check=False)  # fmt: skip
