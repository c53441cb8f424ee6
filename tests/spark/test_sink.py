"""The replog sink (`df.write/writeStream.format("replog")`): what it writes, what it refuses.

Planning checks (`plan_sink`) run without Spark; the rest writes through the shared local[2]
SparkSession into the shared 3-node cluster and reads back with the blocking Consumer, so the
sink is checked against the log itself, not against the source. Each test uses its own topics.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa
import pytest
from client_cluster import ClientCluster
from pyspark.errors import AnalysisException, PythonException
from pyspark.sql import SparkSession
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from replog import Consumer
from replog.client.records import ConsumerRecord, TopicPartition
from replog.spark.sink import _records
from replog.spark.sink_plan import SinkOptionError, SinkRecordError, SinkSchemaError, plan_sink

BOOT = {"bootstrap.servers": "127.0.0.1:9092"}
HEADERS = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)


def schema(**columns: object) -> StructType:
    return StructType([StructField(name, kind) for name, kind in columns.items()])  # type: ignore[arg-type]


def read_log(
    cluster: ClientCluster, topic: str, partitions: int
) -> dict[int, list[ConsumerRecord]]:
    """Every record of `topic` up to the high watermark, per partition, in offset order."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    found: dict[int, list[ConsumerRecord]] = {p: [] for p in range(partitions)}
    with Consumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False) as consumer:
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        deadline = time.monotonic() + 30
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, f"reading {topic} back did not reach {ends}"
            for tp, records in consumer.poll(timeout_ms=500).items():
                found[tp.partition].extend(records)
    return found


# --- planning, no Spark needed ---------------------------------------------------------------


def test_plan_maps_columns_and_forces_acks_all_with_idempotence() -> None:
    plan = plan_sink(
        {**BOOT, "topic": " t ", "kafka.linger.ms": "7", "checkpointLocation": "/x"},
        schema(Key=StringType(), value=BinaryType(), topic=StringType(), partition=LongType()),
        overwrite=False,
        streaming=False,
    )
    assert (plan.key_index, plan.key_is_string, plan.value_index) == (0, True, 1)
    assert plan.topic == "t" and plan.topic_index is None  # the option wins over the column
    assert plan.partition_index == 3 and plan.headers_index is None
    settings = plan.producer_settings
    assert settings["acks"] == "all" and settings["enable.idempotence"] == "true"
    assert settings["linger.ms"] == "7" and settings["bootstrap.servers"] == "127.0.0.1:9092"


HEADER_MESSAGE = "column 'headers' must be array<struct<key:string,value:binary>>, not array<s"


@pytest.mark.parametrize(
    ("columns", "options", "message"),
    [
        ({"key": BinaryType()}, {"topic": "t"}, "needs a 'value' column (binary or string); "
         "columns: key binary"),
        ({"value": IntegerType()}, {"topic": "t"}, "column 'value' must be binary or string, "
         "not int"),
        ({"value": BinaryType(), "key": LongType()}, {"topic": "t"}, "column 'key' must be "
         "binary or string, not bigint"),
        ({"value": BinaryType()}, {}, "needs the option 'topic' or a string column 'topic'"),
        ({"value": BinaryType(), "topic": BinaryType()}, {}, "column 'topic' must be string, "
         "not binary"),
        ({"value": BinaryType(), "partition": StringType()}, {"topic": "t"}, "column "
         "'partition' must be int"),
        ({"value": BinaryType(), "headers": ArrayType(StringType())}, {"topic": "t"},
         HEADER_MESSAGE),
        ({"value": BinaryType(), "VALUE": StringType()}, {"topic": "t"}, "two columns named "
         "'value'"),
    ],
)  # fmt: skip
def test_plan_rejects_bad_schemas_naming_the_column(
    columns: Mapping[str, object], options: Mapping[str, str], message: str
) -> None:
    with pytest.raises(SinkSchemaError, match=re.escape(message)):
        plan_sink({**BOOT, **options}, schema(**columns), overwrite=False, streaming=False)


T = {**BOOT, "topic": "t"}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"topic": "t"}, "option 'bootstrap.servers' is required"),
        ({**T, "subscribe": "x"}, "unknown option 'subscribe' for writing to format 'replog' "
         "('subscribe' is a read option)"),
        ({**T, "linger.ms": "5"}, "unknown option 'linger.ms'"),
        ({**T, "kafka.acks": "1"}, "option 'kafka.acks=1' is not supported"),
        ({**T, "kafka.enable.idempotence": "false"}, "option 'kafka.enable.idempotence=false'"),
        ({**T, "kafka.value.serializer": "x"}, "option 'kafka.value.serializer' is not "
         "supported"),
        ({**T, "kafka.linger.ms": "soon"}, "not a valid producer setting: "),
        ({**T, "kafka.no.such": "1"}, "not a valid producer setting: "),
        ({**BOOT, "topic": "  "}, "option 'topic' must not be empty"),
    ],
)  # fmt: skip
def test_plan_rejects_bad_options_naming_the_option(
    options: Mapping[str, str], message: str
) -> None:
    with pytest.raises(SinkOptionError, match=re.escape(message)) as raised:
        plan_sink(options, schema(value=BinaryType()), overwrite=False, streaming=False)
    bad = [k for k in options if k not in ("bootstrap.servers", "topic")]
    assert all(k in str(raised.value) for k in bad)  # the message names the option


def test_plan_refuses_overwrite_for_batch_but_not_for_streaming() -> None:
    options = {**BOOT, "topic": "t"}
    with pytest.raises(SinkOptionError, match="save mode 'overwrite' is not supported"):
        plan_sink(options, schema(value=BinaryType()), overwrite=True, streaming=False)
    assert plan_sink(options, schema(value=BinaryType()), overwrite=True, streaming=True).topic


def test_a_null_topic_without_the_option_names_the_row() -> None:
    plan = plan_sink(
        BOOT, schema(topic=StringType(), value=BinaryType()), overwrite=False, streaming=False
    )
    batch = pa.record_batch(
        [pa.array(["t", None], pa.string()), pa.array([b"a", b"b"], pa.binary())],
        names=["topic", "value"],
    )
    records = _records(plan, batch, first_row=10)
    assert next(records) == ("t", b"a", None, None, None)
    with pytest.raises(SinkRecordError, match="row 11 of the task has a null 'topic' column"):
        next(records)


# --- through Spark ---------------------------------------------------------------------------


def test_batch_round_trip_keeps_keys_headers_partitions_and_order(
    spark: SparkSession, replog_cluster: ClientCluster
) -> None:
    replog_cluster.create_topic("sink-batch", partitions=2)
    rows = [
        (
            f"k{i}",
            b"v%d" % i,
            i % 2,
            [("n", b"%d" % i), ("none", None)] if i % 3 == 0 else [],
        )
        for i in range(40)
    ]
    df = spark.createDataFrame(
        rows, schema(key=StringType(), value=BinaryType(), partition=IntegerType(), headers=HEADERS)
    ).coalesce(1)  # one task: send order is row order
    (
        df.write.format("replog")
        .option("bootstrap.servers", replog_cluster.bootstrap)
        .option("topic", "sink-batch")
        .mode("append")
        .save()
    )
    log = read_log(replog_cluster, "sink-batch", 2)
    for partition in (0, 1):
        records = log[partition]
        expected = [r for r in rows if r[2] == partition]
        assert [r.offset for r in records] == list(range(len(expected)))
        assert [(r.key, r.value, r.headers) for r in records] == [
            (k.encode(), v, tuple(h)) for k, v, _, h in expected
        ]


def test_topic_column_routes_rows_and_strings_are_utf8(
    spark: SparkSession, replog_cluster: ClientCluster
) -> None:
    for name in ("sink-route-a", "sink-route-b"):
        replog_cluster.create_topic(name, partitions=1)
    rows = [("sink-route-a" if i % 2 else "sink-route-b", f"é{i}", None) for i in range(10)]
    df = spark.createDataFrame(rows, "topic string, value string, key binary")
    df.write.format("replog").option("bootstrap.servers", replog_cluster.bootstrap).mode(
        "append"
    ).save()
    a = read_log(replog_cluster, "sink-route-a", 1)[0]
    b = read_log(replog_cluster, "sink-route-b", 1)[0]
    assert sorted(r.value or b"" for r in a) == sorted(f"é{i}".encode() for i in range(1, 10, 2))
    assert sorted(r.value or b"" for r in b) == sorted(f"é{i}".encode() for i in range(0, 10, 2))
    assert all(r.key is None for r in a + b)


def test_streaming_round_trip_with_restart_writes_every_row_once(
    spark: SparkSession, replog_cluster: ClientCluster, tmp_path: Path
) -> None:
    replog_cluster.create_topic("sink-stream", partitions=2)
    inbox, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    inbox.mkdir()

    def drop_file(name: str, first: int, count: int) -> None:
        lines = [
            json.dumps({"key": f"k{i}", "value": f"v{i}"}) for i in range(first, first + count)
        ]
        (inbox / name).write_text("\n".join(lines) + "\n")

    def run_once() -> None:
        query = (
            spark.readStream.schema("key string, value string")
            .json(str(inbox))
            .writeStream.format("replog")
            .option("bootstrap.servers", replog_cluster.bootstrap)
            .option("topic", "sink-stream")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(120), "the availableNow query did not finish"
        assert query.exception() is None

    drop_file("1.json", 0, 30)
    drop_file("2.json", 30, 20)
    run_once()
    drop_file("3.json", 50, 25)  # after the restart from the checkpoint: only this file
    run_once()
    log = read_log(replog_cluster, "sink-stream", 2)
    values = sorted(r.value or b"" for records in log.values() for r in records)
    assert values == sorted(b"v%d" % i for i in range(75))  # each exactly once
    assert all(r.key == b"k" + (r.value or b"")[1:] for rs in log.values() for r in rs)


def test_bad_schema_and_options_fail_at_planning(
    spark: SparkSession, replog_cluster: ClientCluster
) -> None:
    df = spark.createDataFrame([(1, b"x")], "id int, payload binary")
    writer = df.write.format("replog").option("bootstrap.servers", replog_cluster.bootstrap)
    with pytest.raises(
        AnalysisException,
        match="SinkSchemaError: writing to format 'replog' needs a 'value' column",
    ):
        writer.option("topic", "t").mode("append").save()
    ok = df.withColumnRenamed("payload", "value").write.format("replog")
    with pytest.raises(
        AnalysisException, match="SinkOptionError: unknown option 'startingoffsets'"
    ):
        ok.option("bootstrap.servers", replog_cluster.bootstrap).option("topic", "t").option(
            "startingOffsets", "earliest"
        ).mode("append").save()
    with pytest.raises(AnalysisException, match="SinkOptionError: save mode 'overwrite'"):
        ok.option("bootstrap.servers", replog_cluster.bootstrap).option("topic", "t").mode(
            "overwrite"
        ).save()


def test_failed_produce_fails_the_job_with_the_brokers_error(
    spark: SparkSession, replog_cluster: ClientCluster
) -> None:
    replog_cluster.create_topic("sink-small", partitions=1, configs={"max.message.bytes": "1000"})
    df = spark.createDataFrame([(b"x" * 5000,)], "value binary")
    with pytest.raises(PythonException) as failed:
        df.write.format("replog").option("bootstrap.servers", replog_cluster.bootstrap).option(
            "topic", "sink-small"
        ).mode("append").save()
    text = str(failed.value)
    assert "replog.errors.MessageSizeTooLargeError" in text and "max.message.bytes 1000" in text
    assert "replog sink to topic 'sink-small'" in text
    assert read_log(replog_cluster, "sink-small", 1)[0] == []
    with pytest.raises(PythonException, match="UnknownTopicOrPartitionError"):
        df.write.format("replog").option("bootstrap.servers", replog_cluster.bootstrap).option(
            "topic", "sink-no-such-topic"
        ).mode("append").save()
