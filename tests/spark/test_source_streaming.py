"""Streaming reads through `spark.readStream.format("replog")`: checkpoints, limits, restarts."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from client_cluster import ClientCluster
from pyspark.sql import SparkSession
from source_helpers import delivered, produce, run_available_now

from replog.client.sync_admin import Admin


def test_available_now_resumes_from_its_checkpoint_exactly_once(
    spark: SparkSession, replog_cluster: ClientCluster, tmp_path: Path
) -> None:
    topic = "s-resume"
    replog_cluster.create_topic(topic, 2, 3)
    produce(replog_cluster, topic, 0, [b"a%d" % i for i in range(30)])
    produce(replog_cluster, topic, 1, [b"b%d" % i for i in range(10)])
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"

    first = run_available_now(
        spark,
        replog_cluster,
        topic,
        out,
        ckpt,
        startingOffsets="earliest",
        maxOffsetsPerTrigger="15",
    )
    sizes = [p["numInputRows"] for p in first if p["numInputRows"]]
    assert sum(sizes) == 40 and len(sizes) >= 3 and max(sizes) <= 15, sizes
    # offsets are the Kafka source's shape, in a fixed order
    assert first[-1]["sources"][0]["endOffset"] == {topic: {"0": 30, "1": 10}}  # type: ignore[index]
    expected = [(0, i, b"a%d" % i) for i in range(30)] + [(1, i, b"b%d" % i) for i in range(10)]
    assert delivered(spark, out) == expected

    # more data, and a partition created while the query was down
    produce(replog_cluster, topic, 0, [b"a%d" % i for i in range(30, 35)])
    with Admin(bootstrap_servers=replog_cluster.bootstrap) as admin:
        admin.create_partitions({topic: 3})
    replog_cluster.wait_for_leaders(topic, 3, 30)
    produce(replog_cluster, topic, 2, [b"c%d" % i for i in range(4)])

    second = run_available_now(spark, replog_cluster, topic, out, ckpt, maxOffsetsPerTrigger="15")
    assert sum(p["numInputRows"] for p in second) == 9  # type: ignore[misc]
    expected += [(0, i, b"a%d" % i) for i in range(30, 35)] + [(2, i, b"c%d" % i) for i in range(4)]
    assert delivered(spark, out) == sorted(expected)

    # nothing new: a third run reads nothing and delivers nothing twice
    third = run_available_now(spark, replog_cluster, topic, out, ckpt)
    assert sum(p["numInputRows"] for p in third) == 0  # type: ignore[misc]
    assert delivered(spark, out) == sorted(expected)


def test_streaming_starts_at_latest_by_default(
    spark: SparkSession, replog_cluster: ClientCluster, tmp_path: Path
) -> None:
    topic = "s-latest"
    replog_cluster.create_topic(topic, 1, 3)
    produce(replog_cluster, topic, 0, [b"old"] * 3)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    run_available_now(spark, replog_cluster, topic, out, ckpt)
    produce(replog_cluster, topic, 0, [b"new0", b"new1"])
    run_available_now(spark, replog_cluster, topic, out, ckpt)
    assert delivered(spark, out) == [(0, 3, b"new0"), (0, 4, b"new1")]


def test_a_replayed_micro_batch_reads_exactly_its_logged_range(
    spark: SparkSession, replog_cluster: ClientCluster, tmp_path: Path
) -> None:
    topic = "s-replay"
    replog_cluster.create_topic(topic, 1, 3)
    produce(replog_cluster, topic, 0, [b"%d" % i for i in range(30)])
    ckpt = tmp_path / "ckpt"
    seen: list[tuple[int, list[int]]] = []

    def run() -> None:
        query = (
            spark.readStream.format("replog")
            .option("bootstrap.servers", replog_cluster.bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "10")
            .load()
            .writeStream.foreachBatch(
                lambda df, batch_id: seen.append(
                    (batch_id, sorted(r.offset for r in df.select("offset").collect()))
                )
            )
            .option("checkpointLocation", str(ckpt))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(120), "the availableNow run did not finish"
        assert query.exception() is None, query.exception()

    run()
    assert seen == [(b, list(range(10 * b, 10 * b + 10))) for b in range(3)]
    # A crash after batch 2 was planned and logged but before it was committed...
    (ckpt / "commits" / "2").unlink()
    (ckpt / "commits" / ".2.crc").unlink()
    # ...and more data since: the replay is the logged range [20, 30), not up to the new HW.
    produce(replog_cluster, topic, 0, [b"%d" % i for i in range(30, 35)])
    seen.clear()
    run()
    assert seen == [(2, list(range(20, 30))), (3, list(range(30, 35)))]


def test_processing_time_with_min_offsets_waits_for_enough_or_the_delay(
    spark: SparkSession, replog_cluster: ClientCluster, tmp_path: Path
) -> None:
    topic = "s-min-offsets"
    replog_cluster.create_topic(topic, 1, 3)
    produce(replog_cluster, topic, 0, [b"%d" % i for i in range(3)])
    batches: list[tuple[float, list[int]]] = []
    seen = threading.Condition()

    def record(df, batch_id):  # type: ignore[no-untyped-def]
        offsets = sorted(r.offset for r in df.select("offset").collect())
        with seen:
            batches.append((time.monotonic(), offsets))
            seen.notify_all()

    def wait_for(count: int, timeout_s: float) -> None:
        with seen:
            assert seen.wait_for(lambda: len(batches) >= count, timeout_s), batches

    query = (
        spark.readStream.format("replog")
        .option("bootstrap.servers", replog_cluster.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("minOffsetsPerTrigger", "5")
        .option("maxTriggerDelay", "4s")
        .load()
        .writeStream.foreachBatch(record)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    try:
        wait_for(1, 120)  # the first trigger after a start passes: the 3 records
        assert batches[0][1] == [0, 1, 2]
        # The first micro-batch (Python workers starting) may outlast the delay: the triggers
        # after it find nothing new and restart the delay (as in Spark's Kafka source).
        time.sleep(0.5)
        produce(replog_cluster, topic, 0, [b"x"] * 2)  # 2 < 5: held back...
        time.sleep(1.0)
        assert len(batches) == 1, batches
        enough_at = time.monotonic()
        produce(replog_cluster, topic, 0, [b"y"] * 3)  # ...until 5 are there, before the delay
        wait_for(2, 30)
        assert batches[1][1] == [3, 4, 5, 6, 7]
        produce(replog_cluster, topic, 0, [b"z"])  # 1 < 5: only once the delay has passed
        wait_for(3, 30)
        assert batches[2][1] == [8]
        # The second micro-batch was let through once the "y" records were there, so no sooner
        # than `enough_at`, and the third no sooner than the delay after it. (Measured from the
        # second one's foreachBatch would undercount: a loaded machine runs it seconds late.)
        assert batches[2][0] - enough_at >= 4.0, (enough_at, batches)
    finally:
        query.stop()
    assert query.exception() is None, query.exception()
