"""Batch reads through `spark.read.format("replog")` against a real cluster and local Spark."""

from __future__ import annotations

import signal
import time

import pytest
from client_cluster import ClientCluster
from pyspark.sql import Row, SparkSession
from source_helpers import (
    TS,
    bootstrap_without,
    high_watermarks,
    produce,
    reader,
    rows,
    when,
)

from replog.client.records import TopicPartition
from replog.client.sync_admin import Admin

KAFKA_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)


def test_exact_rows_offsets_and_schema(spark: SparkSession, replog_cluster: ClientCluster) -> None:
    replog_cluster.create_topic("b-exact", 2, 3)
    produce(
        replog_cluster,
        "b-exact",
        0,
        [b"v0", b"v1", b"v2"],
        keys=[b"k0", None, b"k2"],
        headers=[[("h", b"x")], [], [("a", None), ("b", b"2")]],
    )
    produce(replog_cluster, "b-exact", 1, [b"w0", b""], first_ts=TS + 100)

    df = reader(spark, replog_cluster, subscribe="b-exact")
    assert df.schema.simpleString() == spark.createDataFrame([], KAFKA_SCHEMA).schema.simpleString()
    assert rows(df) == [
        (b"k0", b"v0", "b-exact", 0, 0, when(TS), 0),
        (None, b"v1", "b-exact", 0, 1, when(TS + 1), 0),
        (b"k2", b"v2", "b-exact", 0, 2, when(TS + 2), 0),
        (None, b"w0", "b-exact", 1, 0, when(TS + 100), 0),
        (None, b"", "b-exact", 1, 1, when(TS + 101), 0),
    ]

    with_headers = reader(spark, replog_cluster, subscribe="b-exact", includeHeaders="true")
    assert with_headers.columns[-1] == "headers"
    assert [r[-1] for r in rows(with_headers)] == [  # no headers: null, as Kafka's source
        [Row(key="h", value=b"x")],
        None,
        [Row(key="a", value=None), Row(key="b", value=b"2")],
        None,
        None,
    ]


def test_explicit_offsets_min_partitions_and_assign(
    spark: SparkSession, replog_cluster: ClientCluster
) -> None:
    replog_cluster.create_topic("b-ranges", 2, 3)
    produce(replog_cluster, "b-ranges", 0, [b"a%d" % i for i in range(30)])
    produce(replog_cluster, "b-ranges", 1, [b"b%d" % i for i in range(10)])

    df = reader(
        spark,
        replog_cluster,
        subscribe="b-ranges",
        startingOffsets='{"b-ranges": {"0": 5, "1": -2}}',
        endingOffsets='{"b-ranges": {"0": 25, "1": -1}}',
        minPartitions="5",
    )
    assert df.rdd.getNumPartitions() >= 5
    got = [(r[3], r[4], r[1]) for r in rows(df)]
    assert got == [(0, i, b"a%d" % i) for i in range(5, 25)] + [
        (1, i, b"b%d" % i) for i in range(10)
    ]

    assigned = reader(spark, replog_cluster, assign='{"b-ranges": [1]}')
    assert [(r[3], r[4]) for r in rows(assigned)] == [(1, i) for i in range(10)]
    # an end beyond the high watermark is clamped: nothing uncommitted is planned
    clamped = reader(
        spark,
        replog_cluster,
        subscribe="b-ranges",
        endingOffsets='{"b-ranges": {"0": 1000, "1": 3}}',
    )
    assert clamped.count() == 33


def test_latest_is_the_high_watermark_when_the_query_is_planned(
    spark: SparkSession, replog_cluster: ClientCluster
) -> None:
    replog_cluster.create_topic("b-latest", 1, 3)
    produce(replog_cluster, "b-latest", 0, [b"x"] * 4)
    df = reader(spark, replog_cluster, subscribe="b-latest")
    produce(replog_cluster, "b-latest", 0, [b"y"] * 3)  # before the first action: included
    assert df.count() == 7
    produce(replog_cluster, "b-latest", 0, [b"z"] * 5)  # after planning: not in this snapshot
    assert df.count() == 7
    assert sorted(r.offset for r in df.select("offset").collect()) == list(range(7))
    assert reader(spark, replog_cluster, subscribe="b-latest").count() == 12


def test_records_at_or_above_the_high_watermark_are_never_returned(
    spark: SparkSession, replog_cluster: ClientCluster
) -> None:
    topic = "b-committed"
    replog_cluster.create_topic(topic, 1, 3)
    produce(replog_cluster, topic, 0, [b"c0", b"c1", b"c2"])
    assert reader(spark, replog_cluster, subscribe=topic).count() == 3  # warm Spark first
    with Admin(bootstrap_servers=replog_cluster.bootstrap) as admin:
        state = admin.describe_topics([topic])[topic].partitions[0]
    quorum_leader = replog_cluster.loopback.describe().leader_id
    # Stop a follower that is not the metadata leader, so planning stays fast; acks=1 writes
    # then land on the partition leader only, and its log end runs ahead of the HW.
    follower = next(r for r in state.replicas if r not in (state.leader, quorum_leader))
    # The clients below keep away from it: a frozen node accepts connections but never answers,
    # and a client asking it for metadata can lose more than the window below to it.
    elsewhere = bootstrap_without(replog_cluster, follower)
    replog_cluster.loopback.signal(follower, signal.SIGSTOP)
    try:
        written = produce(replog_cluster, topic, 0, [b"u3", b"u4"], acks="1", bootstrap=elsewhere)
        assert written == [3, 4]
        assert high_watermarks(replog_cluster, topic, 1, bootstrap=elsewhere) == [3]
        got = rows(reader(spark, replog_cluster, bootstrap=elsewhere, subscribe=topic))
        # still not committed after the read, else the check above proved nothing (the window
        # is short: the stopped broker is fenced, and leaves the ISR, after 9 s)
        assert high_watermarks(replog_cluster, topic, 1, bootstrap=elsewhere) == [3]
    finally:
        replog_cluster.loopback.signal(follower, signal.SIGCONT)
    assert [(r[4], r[1]) for r in got] == [(0, b"c0"), (1, b"c1"), (2, b"c2")]
    deadline = time.monotonic() + 30
    while high_watermarks(replog_cluster, topic, 1) != [5]:
        assert time.monotonic() < deadline, "the follower never caught up"
        time.sleep(0.2)
    assert [r[1] for r in rows(reader(spark, replog_cluster, subscribe=topic))][3:] == [
        b"u3",
        b"u4",
    ]


def test_deleted_offsets_fail_the_query_unless_fail_on_data_loss_is_false(
    spark: SparkSession, replog_cluster: ClientCluster
) -> None:
    topic = "b-loss"
    replog_cluster.create_topic(topic, 1, 3)
    produce(replog_cluster, topic, 0, [b"%d" % i for i in range(10)])
    with Admin(bootstrap_servers=replog_cluster.bootstrap) as admin:
        admin.delete_records({TopicPartition(topic, 0): 4})
    from_zero = f'{{"{topic}": {{"0": 0}}}}'
    with pytest.raises(Exception, match=r"b-loss-0: offsets \[0, 4\) .* no longer in the log"):
        reader(spark, replog_cluster, subscribe=topic, startingOffsets=from_zero).collect()
    skipped = reader(
        spark, replog_cluster, subscribe=topic, startingOffsets=from_zero, failOnDataLoss="false"
    )
    assert [r[4] for r in rows(skipped)] == list(range(4, 10))
    # "earliest" is the log start offset: nothing is lost
    assert [r[4] for r in rows(reader(spark, replog_cluster, subscribe=topic))] == list(
        range(4, 10)
    )


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"subscribe": "b-bad", "startingOffsets": "latest"}, "'startingOffsets' cannot be"),
        ({"subscribe": "b-bad", "minPartitions": "-1"}, "'minPartitions' must be >= 1"),
        ({"subscribe": "b-bad", "startingOfsets": "earliest"}, "unknown option 'startingofsets'"),
        ({"subscribe": "b-missing"}, "'subscribe': topic 'b-missing' does not exist"),
        ({"assign": '{"b-bad": [3]}'}, "partition b-bad-3 does not exist"),
        ({"subscribe": "b-bad", "startingOffsets": '{"b-bad": {"0": 0}}'}, "missing: b-bad-1"),
        ({"subscribe": "b-bad", "startingOffsets": '{"b-bad": {"0": 1, "1": 0}}'}, "after its"),
    ],
)
def test_bad_options_fail_at_planning_naming_the_option(
    spark: SparkSession, replog_cluster: ClientCluster, options: dict[str, str], named: str
) -> None:
    replog_cluster.create_topic("b-bad", 2, 3)
    with pytest.raises(Exception, match=named):
        reader(spark, replog_cluster, **options).collect()
