"""A real local Spark (``local[2]``) shared by the Spark tests, and a groupstream broker process for it to read.

Spark's Python workers run the interpreter named by PYSPARK_PYTHON, so it is pointed at this venv's python;
``spark.sql.shuffle.partitions`` is small because every test here handles thousands of rows, not millions.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.brokers import BrokerKind, BrokerProcess, free_port
from support.waiting import wait_until


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("groupstream-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    settings = {"group.initial.rebalance.delay.ms": "0", "auto.create.topics.enable": "false"}
    with BrokerProcess(BrokerKind.GROUPSTREAM, Path(tmp_path_factory.mktemp("spark-broker")), settings=settings) as b:
        yield b


def _spark_class() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def master_state(ui: int) -> dict[str, Any]:
    """The standalone master's state from its web UI's JSON ({} while it does not answer)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as answer:
            return dict(json.loads(answer.read()))
    except (OSError, ValueError):
        return {}


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a Spark daemon this fixture started (its own session: the JVM and anything it launched)."""
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)


@pytest.fixture
def master(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """A standalone Master with no worker: ``(spark://host:port, web UI port)``."""
    spark_class = _spark_class()
    port, ui = free_port(), free_port()
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", SPARK_NO_DAEMONIZE="1")
    with (tmp_path / "master.log").open("wb") as log:
        proc = subprocess.Popen([str(spark_class), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                 "--port", str(port), "--webui-port", str(ui)], stdout=log, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)  # fmt: skip

    def alive() -> bool:
        assert proc.poll() is None, (tmp_path / "master.log").read_text()[-3000:]
        return bool(master_state(ui).get("status") == "ALIVE")

    try:
        wait_until(alive, 90, "the standalone master to answer", interval_s=0.5)
        yield f"spark://127.0.0.1:{port}", ui
    finally:
        _stop(proc)


@pytest.fixture
def standalone(master: tuple[str, int], tmp_path: Path) -> Iterator[tuple[str, int]]:
    """A standalone cluster: the ``master`` and one Worker with 2 cores (its own work and log directories, on
    loopback), started from the installed PySpark; yields what ``master`` does once the worker has joined."""
    url, ui = master
    work = tmp_path / "spark-worker"
    work.mkdir()
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", SPARK_NO_DAEMONIZE="1", SPARK_WORKER_DIR=str(work),
               SPARK_LOG_DIR=str(work))  # fmt: skip
    with (tmp_path / "worker.log").open("wb") as log:
        proc = subprocess.Popen([str(_spark_class()), "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                 "--cores", "2", "--memory", "4g", "--work-dir", str(work), "--webui-port",
                                 str(free_port()), url], stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)  # fmt: skip

    def joined() -> bool:
        assert proc.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
        return master_state(ui).get("aliveworkers") == 1 and master_state(ui).get("cores") == 2

    try:
        wait_until(joined, 90, "the worker to join the master", interval_s=0.5)
        yield url, ui
    finally:
        _stop(proc)
