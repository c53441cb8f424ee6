"""Spark's own Kafka source (`format("kafka")`, the JVM connector from Maven Central) reads a
replog topic through the nodes' Kafka listeners and gets exactly the rows `format("replog")`
gets: key, value, topic, partition, offset, timestamp, timestampType and headers.

Skipped only where Maven Central is unreachable (the conftest's `kafka_jars_missing` says why);
any other failure, resolution included, fails.
"""

from __future__ import annotations

from typing import Any

import pytest
from client_cluster import ClientCluster
from pyspark.sql import DataFrame, SparkSession
from source_helpers import TS, produce

from tests.local_ports import KAFKA_PORT_OFFSET

TOPIC = "kafka-jvm"
COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers")


def kafka_bootstrap(cluster: ClientCluster) -> str:
    base = cluster.loopback.base_port + KAFKA_PORT_OFFSET
    return ",".join(f"127.0.0.1:{base + i}" for i in range(cluster.loopback.node_count))


def collected(df: DataFrame) -> list[tuple[Any, ...]]:
    return sorted((tuple(row) for row in df.select(*COLUMNS).collect()), key=lambda r: (r[3], r[4]))


def test_spark_kafka_source_reads_the_committed_rows_replog_reads(
    spark: SparkSession, replog_cluster: ClientCluster, kafka_jars_missing: str | None
) -> None:
    if kafka_jars_missing is not None:
        pytest.skip(f"Spark's Kafka source jars not available: {kafka_jars_missing}")
    replog_cluster.create_topic(TOPIC, 2, 3)
    produce(
        replog_cluster,
        TOPIC,
        0,
        [b"v0", b"v1", b"v2", b""],
        keys=[b"k0", None, b"k2", b"k3"],
        headers=[[("h", b"x")], [], [("a", None), ("b", b"2")], [("h", b"\xff")]],
    )
    values = [b"w%03d" % i for i in range(300)]
    produce(
        replog_cluster, TOPIC, 1, values, keys=[b"key-%d" % (i % 7) for i in range(300)],
        first_ts=TS + 1000,
    )  # fmt: skip

    through_kafka = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", kafka_bootstrap(replog_cluster))
        .option("subscribe", TOPIC)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .load()
    )
    through_replog = (
        spark.read.format("replog")
        .option("bootstrap.servers", replog_cluster.bootstrap)
        .option("subscribe", TOPIC)
        .option("includeHeaders", "true")
        .load()
    )
    assert through_kafka.schema == through_replog.schema
    kafka_rows, replog_rows = collected(through_kafka), collected(through_replog)
    assert len(replog_rows) == 304
    assert kafka_rows == replog_rows
