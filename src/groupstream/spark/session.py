"""The Spark session groupstream's own commands (demo, pipeline run) start: Python workers run this
interpreter, JVM logging is kept to errors, and the UI and console progress bars are off (the commands draw
their own progress)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

__all__ = ["QUIET_LOG4J", "spark_session"]

QUIET_LOG4J = Path(__file__).resolve().parent / "log4j2-quiet.properties"


def spark_session(master: str, app_name: str) -> Any:
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={QUIET_LOG4J}")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark
