"""Helpers of the source tests: write known records, read them back through Spark."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from client_cluster import ClientCluster
from pyspark.sql import DataFrame, SparkSession

from replog import Producer
from replog.client.admin_results import OffsetSpec
from replog.client.records import TopicPartition
from replog.client.sync_admin import Admin

# Record timestamps are recent: time-based retention (7 days by default) deletes records whose
# timestamps are older, which a fixed date in the past would trigger within the test.
TS = int(time.time()) * 1000


def produce(
    cluster: ClientCluster,
    topic: str,
    partition: int,
    values: Sequence[bytes],
    *,
    keys: Sequence[bytes | None] | None = None,
    headers: Sequence[list[tuple[str, bytes | None]]] | None = None,
    first_ts: int = TS,
    acks: str = "all",
    bootstrap: str | None = None,
) -> list[int]:
    """Write `values` to one partition, in order; their offsets. `bootstrap` (default: every
    node) is where the producer looks for metadata."""
    servers = bootstrap or cluster.bootstrap
    with Producer(bootstrap_servers=servers, acks=acks, linger_ms=0) as producer:
        futures = [
            producer.send(
                topic,
                value,
                key=None if keys is None else keys[i],
                headers=None if headers is None else headers[i],
                partition=partition,
                timestamp_ms=first_ts + i,
            )
            for i, value in enumerate(values)
        ]
        return [f.get(timeout=30).offset for f in futures]


def high_watermarks(
    cluster: ClientCluster, topic: str, partitions: int, *, bootstrap: str | None = None
) -> list[int]:
    with Admin(bootstrap_servers=bootstrap or cluster.bootstrap) as admin:
        found = admin.list_offsets(
            {TopicPartition(topic, p): OffsetSpec.LATEST for p in range(partitions)}
        )
    return [found[TopicPartition(topic, p)].offset for p in range(partitions)]  # type: ignore[union-attr]


def reader(
    spark: SparkSession, cluster: ClientCluster, *, bootstrap: str | None = None, **options: str
) -> DataFrame:
    servers = bootstrap or cluster.bootstrap
    source = spark.read.format("replog").option("bootstrap.servers", servers)
    for key, value in options.items():
        source = source.option(key, value)
    return source.load()


def bootstrap_without(cluster: ClientCluster, node_id: int) -> str:
    """`bootstrap.servers` naming every node but `node_id`, for a test that freezes that node
    (SIGSTOP): it accepts connections but never answers, and a new client that asks it first
    for metadata may wait out a connection or request timeout there before trying the next
    (12.9 s in one trial, where the other nodes answered at once)."""
    return ",".join(a for n, a in sorted(cluster.kafka_addresses.items()) if n != node_id)


def rows(df: DataFrame) -> list[tuple[Any, ...]]:
    """Every row as a plain tuple, sorted by (topic, partition, offset)."""
    found = [tuple(r) for r in df.collect()]
    return sorted(found, key=lambda r: (r[2], r[3], r[4]))


def when(ms: int) -> dt.datetime:
    """A record timestamp as Spark returns it (naive, in the session's UTC)."""
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).replace(tzinfo=None)


def run_available_now(
    spark: SparkSession, cluster: ClientCluster, topic: str, out: Path, ckpt: Path, **options: str
) -> list[dict[str, object]]:
    """One availableNow run into a parquet sink; the progress of each micro-batch."""
    stream = (
        spark.readStream.format("replog")
        .option("bootstrap.servers", cluster.bootstrap)
        .option("subscribe", topic)
    )
    for key, value in options.items():
        stream = stream.option(key, value)
    query = (
        stream.load()
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120), "the availableNow run did not finish"
    assert query.exception() is None, query.exception()
    return [json.loads(p.json) if hasattr(p, "json") else p for p in query.recentProgress]


def delivered(spark: SparkSession, out: Path) -> list[tuple[int, int, bytes]]:
    return sorted(
        (r.partition, r.offset, r.value)
        for r in spark.read.parquet(str(out)).select("partition", "offset", "value").collect()
    )
