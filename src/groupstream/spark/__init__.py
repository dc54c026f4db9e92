"""Pipelines on Spark: the ``groupstream`` PySpark data source (batch and streaming reads, sink).

``groupstream.spark.register(spark)`` registers the format; installed with groupstream, PySpark also finds it on
its own through the ``pyspark_groupstream`` module, so ``spark.read.format("groupstream")`` works either way.
"""

from __future__ import annotations

from typing import Any

__all__ = ["FORMAT", "register"]

FORMAT = "groupstream"


def register(spark: Any) -> None:
    from groupstream.spark.source import GroupstreamDataSource

    spark.dataSource.register(GroupstreamDataSource)
