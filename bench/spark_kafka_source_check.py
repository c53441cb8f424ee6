"""Spark's own Kafka source (`format("kafka")`, the JVM connector and Apache Kafka's client jar
from Maven Central) against replog's (`format("replog")`), both reading one replog cluster: the
same rows and the same micro-batches. Bench only, never in CI (it needs Kafka's jars).

Starts a local 3-node replog cluster on a compact port range (kafka_apps.running_cluster:
gRPC at `base`.., Kafka listeners at `base+10`..), writes known records with replog's client,
and runs one check per row, printing PASS or FAIL with why; exits 1 if any failed:

- rows: a batch read through both sources returns exactly the same rows (key, value, topic,
  partition, offset, timestamp, timestampType, headers: null keys and values, empty values,
  null header values included) and the same schema;
- available-now: an availableNow run with `minOffsetsPerTrigger` 3 / `maxOffsetsPerTrigger` 4
  over 10 records makes the micro-batches [0-3], [4-7] through both, the last 2 held back
  below the minimum, as Spark's Kafka source applies its default limit in such a run.

    .venv/bin/python bench/spark_kafka_source_check.py [--base-port 27800] [--data-dir DIR]

The jars come from `replog.spark.kafka_jars` (cached in ~/.cache/replog-spark-kafka after the
first run).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kafka_apps import running_cluster

COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers")
# Recent timestamps: time-based retention (7 days by default) would delete older ones.
TS = int(time.time()) * 1000


def produce(
    bootstrap: str,
    topic: str,
    partition: int,
    values: Sequence[bytes],
    keys: Sequence[bytes | None] | None = None,
    headers: Sequence[list[tuple[str, bytes | None]]] | None = None,
    first_ts: int = TS,
) -> None:
    """Write `values` to one partition in order, acks=all, through replog's client."""
    from replog import Producer

    with Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=0) as producer:
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
        for future in futures:
            future.get(timeout=30)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Create `topic` (replication factor 3); returns once every broker shows it."""
    from replog import Admin, NewTopic

    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 3)])


def collected(df: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(row) for row in df.select(*COLUMNS).collect()), key=lambda r: (r[3], r[4]))


def check_rows(spark: Any, kafka: str, replog: str) -> str:
    topic = "kafka-jvm"
    create_topic(replog, topic, 2)
    produce(
        replog,
        topic,
        0,
        [b"v0", b"v1", b"v2", b""],
        keys=[b"k0", None, b"k2", b"k3"],
        headers=[[("h", b"x")], [], [("a", None), ("b", b"2")], [("h", b"\xff")]],
    )
    values = [b"w%03d" % i for i in range(300)]
    keys = [b"key-%d" % (i % 7) for i in range(300)]
    produce(replog, topic, 1, values, keys=keys, first_ts=TS + 1000)
    through_kafka = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", kafka)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .load()
    )
    through_replog = (
        spark.read.format("replog")
        .option("bootstrap.servers", replog)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .load()
    )
    if through_kafka.schema != through_replog.schema:
        raise AssertionError(f"schemas differ: {through_kafka.schema} / {through_replog.schema}")
    kafka_rows, replog_rows = collected(through_kafka), collected(through_replog)
    if len(replog_rows) != 304:
        raise AssertionError(f"format('replog') read {len(replog_rows)} rows, not 304")
    if kafka_rows != replog_rows:
        pairs = zip(kafka_rows, replog_rows, strict=False)
        first = next((i for i, (a, b) in enumerate(pairs) if a != b), min(len(kafka_rows), 304))
        raise AssertionError(
            f"{len(kafka_rows)} rows through kafka, 304 through replog; first difference at "
            f"row {first}: {kafka_rows[first : first + 1]} / {replog_rows[first : first + 1]}"
        )
    return "304 rows, the same through both"


def available_now_batches(
    spark: Any, source: str, servers: str, topic: str, checkpoint: Path, **options: str
) -> list[list[int]]:
    """One availableNow run from the earliest offsets: each micro-batch's offsets."""
    batches: list[list[int]] = []

    def record(df: Any, batch_id: int) -> None:
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
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    if not query.awaitTermination(120):
        query.stop()
        raise AssertionError(f"the availableNow run of {source} did not finish within 120 s")
    if query.exception() is not None:
        raise AssertionError(f"the availableNow run of {source} failed: {query.exception()}")
    return batches


def check_available_now(spark: Any, kafka: str, replog: str, work: Path) -> str:
    topic = "kafka-jvm-min-offsets"
    create_topic(replog, topic, 1)
    produce(replog, topic, 0, [b"%d" % i for i in range(10)])
    options = {"minOffsetsPerTrigger": "3", "maxOffsetsPerTrigger": "4", "maxTriggerDelay": "1h"}
    runs = {
        source: available_now_batches(spark, source, servers, topic, work / source, **options)
        for source, servers in {"kafka": kafka, "replog": replog}.items()
    }
    expected = [[0, 1, 2, 3], [4, 5, 6, 7]]  # then 2 < 3 before maxTriggerDelay: the run ends
    if runs != {"kafka": expected, "replog": expected}:
        raise AssertionError(f"micro-batches {runs}, expected {expected} through both")
    return f"micro-batches {expected} through both"


def run_check(name: str, check: Callable[[], str]) -> bool:
    try:
        detail = check()
    except Exception as exc:  # a check's failure is its row, named; the next check runs
        print(f"FAIL  {name}: {type(exc).__name__}: {exc}", flush=True)
        return False
    print(f"PASS  {name}: {detail}", flush=True)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-port", type=int, default=27800)
    parser.add_argument("--data-dir", type=Path, help="kept afterwards (default: a temp dir)")
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

    from replog.spark.kafka_jars import kafka_source_jars
    from replog.spark.local_session import local_session

    jars = [str(jar) for jar in kafka_source_jars()]  # typed errors name what Maven lacks
    with tempfile.TemporaryDirectory(prefix="spark-kafka-check-") as scratch:
        work = args.data_dir or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        spark = local_session("replog-spark-kafka-check", jars=jars, scratch_dir=str(work / "s"))
        try:
            with running_cluster(work / "cluster", args.base_port) as kafka:
                replog = kafka  # replog's client speaks Kafka's protocol too
                passed = [
                    run_check("rows", lambda: check_rows(spark, kafka, replog)),
                    run_check(
                        "available-now",
                        lambda: check_available_now(spark, kafka, replog, work / "runs"),
                    ),
                ]
        finally:
            spark.stop()
    return 0 if all(passed) else 1


if __name__ == "__main__":
    sys.exit(main())
