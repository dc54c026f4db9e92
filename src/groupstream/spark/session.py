"""The Spark session groupstream's own commands (demo, pipeline run) start: Python workers run this
interpreter, JVM logging is kept to errors, and the UI and console progress bars are off (the commands draw
their own progress). Settings given by the user (a pipeline's ``[spark]`` table, ``--conf``) come last and win.

Quiet logging must not hide that an application got no executors on a cluster: `ExecutorWatch` says so
itself, and Spark's own warning about it ("Initial job has not accepted any resources") is let through.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["QUIET_LOG4J", "ExecutorWatch", "cores_share", "is_local", "spark_session", "standalone_cores"]

QUIET_LOG4J = Path(__file__).resolve().parent / "log4j2-quiet.properties"


def is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[") or master.startswith("local-cluster[")


def spark_session(master: str, app_name: str, conf: Mapping[str, str] | None = None) -> Any:
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={QUIET_LOG4J}")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


class ExecutorWatch:
    """Notices, on a cluster master, that the application has had no executor for ``after_s`` seconds (the
    cluster has no free cores for it: another application holds them all, or no worker is registered), and
    again when executors join. ``poll()`` from the command's loop; ``say(text, executors)`` reports."""

    def __init__(self, spark: Any, master: str, say: Callable[[str, int], None], after_s: float = 20.0) -> None:
        self.spark, self.master, self.say, self.after_s = spark, master, say, after_s
        self.started = time.monotonic()
        self._next_poll = self.started
        self._starved = False
        self.active = not is_local(master)

    def executors(self) -> int:
        infos = self.spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()
        return max(len(infos) - 1, 0)  # the driver is listed too

    def poll(self) -> None:
        now = time.monotonic()
        if not self.active or now < self._next_poll:
            return
        self._next_poll = now + 2.0
        count = self.executors()
        if count == 0 and not self._starved and now - self.started >= self.after_s:
            self._starved = True
            self.say(
                f"no executor has joined after {now - self.started:.0f} s: the master {self.master} gives this "
                "application no cores (Spark: Initial job has not accepted any resources). Other applications may "
                "hold every core (give each a share with spark.cores.max), or no worker is registered", count)  # fmt: skip
        elif count > 0 and self._starved:
            self._starved = False
            self.say(f"{count} executor(s) joined; the pipeline runs", count)


def standalone_cores(master: str, ui_port: int = 8080, timeout_s: float = 3.0) -> int | None:
    """The cores of a standalone cluster's alive workers, from its master's web UI (``/json/``; the UI port is
    ``spark.master.ui.port``, 8080 by default); None when the master is not standalone or does not answer."""
    import json
    import urllib.request

    if not master.startswith("spark://"):
        return None
    for address in master[len("spark://"):].split(","):
        host = address.rsplit(":", 1)[0]
        try:
            with urllib.request.urlopen(f"http://{host}:{ui_port}/json/", timeout=timeout_s) as answer:
                state = json.loads(answer.read())
        except (OSError, ValueError):
            continue
        if state.get("status", "ALIVE") == "ALIVE":
            return int(state.get("cores", 0))
    return None


def cores_share(cluster_cores: int, instances: int) -> int:
    """Each of ``instances`` applications' share of a cluster's cores (at least one)."""
    return max(cluster_cores // max(instances, 1), 1)
