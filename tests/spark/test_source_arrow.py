"""Records as Arrow batches in exactly the schema Spark checks (no Spark session needed)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from replog.client.records import ConsumerRecord
from replog.spark.arrow import to_record_batch

SPARK_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
        StructField(
            "headers",
            ArrayType(
                StructType([StructField("key", StringType()), StructField("value", BinaryType())])
            ),
        ),
    ]
)
RECORDS = [
    ConsumerRecord("t", 3, 7, 1_700_000_000_123, 0, b"k", b"v", (("h", b"1"), ("n", None))),
    ConsumerRecord("t", 3, 9, 1_700_000_000_456, 1, None, None, ()),
]


def test_batches_match_the_arrow_schema_spark_derives_and_hold_the_records() -> None:
    schema = to_arrow_schema(SPARK_SCHEMA, timezone="UTC")
    batch = to_record_batch("t", 3, RECORDS, schema)
    assert batch.schema.equals(schema)
    assert batch.schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert batch.to_pylist() == [
        {
            "key": b"k",
            "value": b"v",
            "topic": "t",
            "partition": 3,
            "offset": 7,
            "timestamp": dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=dt.UTC),
            "timestampType": 0,
            "headers": [{"key": "h", "value": b"1"}, {"key": "n", "value": None}],
        },
        {
            "key": None,
            "value": None,
            "topic": "t",
            "partition": 3,
            "offset": 9,
            "timestamp": dt.datetime(2023, 11, 14, 22, 13, 20, 456000, tzinfo=dt.UTC),
            "timestampType": 1,
            "headers": None,  # no headers: null, as in Spark's Kafka source
        },
    ]


def test_a_user_schema_with_fewer_columns_is_served_and_an_unknown_column_named() -> None:
    narrow = to_arrow_schema(StructType([StructField("offset", LongType())]), timezone="UTC")
    assert to_record_batch("t", 3, RECORDS, narrow).to_pylist() == [{"offset": 7}, {"offset": 9}]
    odd = to_arrow_schema(StructType([StructField("payload", BinaryType())]), timezone="UTC")
    with pytest.raises(ValueError, match=r"column 'payload' .* not a column"):
        to_record_batch("t", 3, RECORDS, odd)
