"""PySpark looks for modules named ``pyspark_*`` with a ``DefaultSource`` and registers them by name at start,
so an installed groupstream makes ``spark.read.format("groupstream")`` work without a register call."""

from groupstream.spark.source import GroupstreamDataSource as DefaultSource

__all__ = ["DefaultSource"]
