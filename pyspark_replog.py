"""Spark's discovery hook for the `replog` data source.

Spark imports every top-level module whose name starts with `pyspark_` and registers its
`DefaultSource`, so `spark.read.format("replog")` works without `replog.spark.register(spark)`
wherever replog is installed. The source itself is `replog.spark.source.ReplogDataSource`.
"""

from __future__ import annotations

from replog.spark.source import ReplogDataSource as DefaultSource

__all__ = ["DefaultSource"]
