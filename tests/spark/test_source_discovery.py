"""`format("replog")` works without `replog.spark.register(spark)`, and with it.

Spark imports every top-level module named `pyspark_*` on its Python workers' path at the
first data-source lookup of its JVM and registers its `DefaultSource`. The shared session
(conftest) never calls register(), so its queries find the source that way; the last test here
registers it explicitly, which must work too (and wins over the discovered one).
"""

from __future__ import annotations

from client_cluster import ClientCluster
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource
from source_helpers import produce, reader

import pyspark_replog
import replog.spark
from replog.spark.source import ReplogDataSource


def test_the_discovery_module_exports_the_source() -> None:
    assert pyspark_replog.DefaultSource is ReplogDataSource
    assert issubclass(pyspark_replog.DefaultSource, DataSource)
    assert pyspark_replog.DefaultSource.name() == "replog"


def test_spark_finds_the_source_without_register_then_register_works_too(
    spark: SparkSession, replog_cluster: ClientCluster
) -> None:
    replog_cluster.create_topic("d-found", 1, 3)
    produce(replog_cluster, "d-found", 0, [b"x"] * 3)
    # this module's only register() call comes after: the source was discovered
    assert reader(spark, replog_cluster, subscribe="d-found").count() == 3
    replog.spark.register(spark)
    produce(replog_cluster, "d-found", 0, [b"y"] * 2)
    assert reader(spark, replog_cluster, subscribe="d-found").count() == 5
