"""Spark's own Kafka source (`format("kafka")`, the JVM connector from Maven Central) reads a
replog topic through the nodes' Kafka listeners and gets exactly the rows `format("replog")`
gets: key, value, topic, partition, offset, timestamp, timestampType and headers; and an
availableNow run with `minOffsetsPerTrigger` makes the same micro-batches through both.

Skipped only where Maven Central is unreachable (the conftest's `kafka_jars_missing` says why);
any other failure, resolution included, fails.
"""

from __future__ import annotations

from pathlib import Path
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


def available_now_batches(
    spark: SparkSession, source: str, servers: str, topic: str, ckpt: Path, **options: str
) -> list[list[int]]:
    """One availableNow run from the earliest offsets: each micro-batch's offsets."""
    batches: list[list[int]] = []

    def record(df: DataFrame, batch_id: int) -> None:
        batches.append(sorted(r.offset for r in df.select("offset").collect()))

    servers_option = "kafka.bootstrap.servers" if source == "kafka" else "bootstrap.servers"
    stream = (
        spark.readStream.format(source)
        .option(servers_option, servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .options(**options)
        .load()
    )
    query = (
        stream.writeStream.foreachBatch(record)
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120), f"the availableNow run of {source} did not finish"
    assert query.exception() is None, query.exception()
    return batches


def test_an_available_now_run_holds_back_as_spark_kafka_source_does(
    spark: SparkSession,
    replog_cluster: ClientCluster,
    kafka_jars_missing: str | None,
    tmp_path: Path,
) -> None:
    """minOffsetsPerTrigger in an availableNow run: Spark's Kafka source gets Spark's default
    limit (min and max) there too and holds back the rest of the run's snapshot once it is below
    the minimum, so the run ends with it unread; replog's source does the same."""
    if kafka_jars_missing is not None:
        pytest.skip(f"Spark's Kafka source jars not available: {kafka_jars_missing}")
    topic = "kafka-jvm-min-offsets"
    replog_cluster.create_topic(topic, 1, 3)
    produce(replog_cluster, topic, 0, [b"%d" % i for i in range(10)])
    options = {"minOffsetsPerTrigger": "3", "maxOffsetsPerTrigger": "4", "maxTriggerDelay": "1h"}
    servers = {"kafka": kafka_bootstrap(replog_cluster), "replog": replog_cluster.bootstrap}
    runs = {
        source: available_now_batches(spark, source, address, topic, tmp_path / source, **options)
        for source, address in servers.items()
    }
    # 4, then 4 (6 were left: enough), then 2 < 3 before maxTriggerDelay: the run ends.
    assert runs == {"kafka": [[0, 1, 2, 3], [4, 5, 6, 7]], "replog": [[0, 1, 2, 3], [4, 5, 6, 7]]}
