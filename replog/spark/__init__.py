"""replog as a Spark data source (`format("replog")`), for pyspark >= 4.2.

    import replog.spark
    replog.spark.register(spark)
    df = spark.read.format("replog").option("bootstrap.servers", "127.0.0.1:9092") \\
        .option("subscribe", "orders").load()

`register(spark)` registers the source with one SparkSession. Without it, Spark finds the
source by itself through the top-level module `pyspark_replog` (Spark imports every module
named `pyspark_*` on the Python path and registers its `DefaultSource`), as long as replog is
installed where Spark's Python runs.

Rules: importing this package needs pyspark, pyarrow and numpy (the `spark` extra); the rest
of replog imports it only lazily (the Spark step of `replog demo`, `replog/cli/demo_spark.py`).
"""

from __future__ import annotations

from typing import Any

from replog.spark.errors import DataLossError, ReadTimeoutError, SourceOptionError
from replog.spark.source import ReplogDataSource

__all__ = [
    "DataLossError",
    "ReadTimeoutError",
    "ReplogDataSource",
    "SourceOptionError",
    "register",
]


def register(spark: Any) -> None:
    """Make `format("replog")` available in this SparkSession."""
    spark.dataSource.register(ReplogDataSource)
