"""A real local Spark (``local[2]``) shared by the Spark tests, and a groupstream broker process for it to read.

Spark's Python workers run the interpreter named by PYSPARK_PYTHON, so it is pointed at this venv's python;
``spark.sql.shuffle.partitions`` is small because every test here handles thousands of rows, not millions.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.brokers import BrokerKind, BrokerProcess


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
