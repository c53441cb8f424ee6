"""Records as `pyarrow.RecordBatch`es in the exact schema Spark expects from the source.

Spark checks the first batch a reader yields against `to_arrow_schema(schema,
timezone="UTC")`: `binary` key and value, `string` topic, `int32` partition, `int64` offset,
`timestamp[us, tz=UTC]` timestamp, `int32` timestampType and, with `includeHeaders`,
`list<struct<key: string, value: binary>>` headers, all nullable. A mismatch (ms instead of
us, a naive timestamp, `large_binary`) fails the query, so every batch is built against the
Arrow schema derived from the Spark schema the reader was given.

Rules:
- The range reader's batches come from `BatchColumns` (`columns_to_record_batch`): numpy
  columns and Arrow binary arrays, wrapped without a Python object per record.
  `to_record_batch` builds the same from `ConsumerRecord`s (one `pa.array` per column), never
  row by row: yielding tuples makes Spark convert each value, about 3x slower. A batch holds
  one partition's records, so `topic` and `partition` are constant columns, built by numpy
  (`constant_array`, what `pa.repeat` gives); a task keeps them (`ConstantColumns`) and
  slices them for each batch.
- Timestamps are the record's milliseconds times 1000 (microseconds; multiplied by the
  decoder for `columns_to_record_batch`, in C as it writes them, see `batch_columns`; by
  Arrow in `to_record_batch`), as int64, cast to the timestamp type without going through
  `datetime`.
- `headers` as Spark's Kafka source has it: null for a record without headers (not an empty
  list); a header key whose bytes are not valid UTF-8 (the decoders keep such bytes as
  surrogate escapes, losslessly) gets U+FFFD for each malformed sequence, as Java's UTF-8
  decoding gives it, instead of failing the batch.
- Columns the user's schema does not name are not built; a column the source cannot fill is
  an error naming it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from replog.client.records import ConsumerRecord
from replog.record.record import Header
from replog.spark.batch_columns import BatchColumns

KAFKA_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType")
SCHEMA_DDL = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
HEADERS_DDL = ", headers array<struct<key: string, value: binary>>"


def schema_ddl(include_headers: bool) -> str:
    """The source's schema, as Spark's Kafka source has it."""
    return SCHEMA_DDL + (HEADERS_DDL if include_headers else "")


def to_record_batch(
    topic: str, partition: int, records: Sequence[ConsumerRecord], schema: pa.Schema
) -> pa.RecordBatch:
    """One RecordBatch of `records`, all of partition `topic`-`partition`, in `schema`."""
    columns = [_column(f, topic, partition, records) for f in schema]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _column(
    arrow_field: pa.Field, topic: str, partition: int, records: Sequence[ConsumerRecord]
) -> pa.Array:
    name = arrow_field.name
    kind = arrow_field.type
    count = len(records)
    values: list[Any]
    if name == "key":
        values = [r.key for r in records]
    elif name == "value":
        values = [r.value for r in records]
    elif name == "topic":
        # One partition per batch: constant columns, not built per row.
        return constant_array(topic, kind, count)
    elif name == "partition":
        return constant_array(partition, kind, count)
    elif name == "offset":
        values = [r.offset for r in records]
    elif name == "timestamp":
        millis = pa.array([r.timestamp for r in records], type=pa.int64())
        return pc.multiply(millis, 1000).cast(kind)
    elif name == "timestampType":
        values = [r.timestamp_type for r in records]
    elif name == "headers":
        return _headers([r.headers for r in records], kind)
    else:
        raise ValueError(
            f"column {name!r} of the requested schema is not a column of the replog source "
            f"(columns: {', '.join((*KAFKA_COLUMNS, 'headers'))})"
        )
    return pa.array(values, type=kind)


class ConstantColumns:
    """The `topic` and `partition` columns of one partition's batches: built once, at the
    longest batch's length so far and an eighth more (`HEADROOM`), and sliced to each
    batch's (building them per batch costs about 3 ns per row and column with `pa.repeat`, as
    much as a quarter of the Arrow batch's building). Why the eighth: a task's full-size
    answers differ by a few rows (whole batches), so a column built at exactly the longest
    so far was built again for most answers longer than all before it (the two columns:
    1.6 ns of a task's CPU per row read, 1.2 with the eighth, the rest their growth over a
    task's first answers of 1, 2, 4 and 8 MiB; bench/spark_fetch_path.py's reader)."""

    HEADROOM = 8  # built at count + count // HEADROOM rows

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self._built: dict[tuple[str, pa.DataType], pa.Array] = {}

    def column(self, name: str, kind: pa.DataType, count: int) -> pa.Array:
        """Column `name` ("topic" or "partition") of `count` rows, of type `kind`."""
        built = self._built.get((name, kind))
        if built is None or len(built) < count:
            value = self.topic if name == "topic" else self.partition
            built = constant_array(value, kind, count + count // self.HEADROOM)
            self._built[(name, kind)] = built
        return built if len(built) == count else built.slice(0, count)


def constant_array(value: str | int, kind: pa.DataType, count: int) -> pa.Array:
    """`count` times `value`, of type `kind`: what `pa.repeat` gives, built by numpy for the
    types the source's constant columns have (a string, a 32- or 64-bit integer), else by
    `pa.repeat`. Why: a task builds its two constant columns anew as its batches grow (1, 2, 4,
    8 MiB answers), each time among the fresh pages of a new answer: there `pa.repeat` costs
    about 3.3 ns of worker CPU per row read, numpy 1.2 (docs/benchmarks.md, "Where a row's CPU
    goes")."""
    if isinstance(value, str) and kind == pa.string():
        data = value.encode("utf-8")
        if len(data) * count < 1 << 31:  # int32 offsets
            offsets = np.arange(count + 1, dtype=np.int32)
            offsets *= len(data)
            buffers = [None, pa.py_buffer(offsets), pa.py_buffer(data * count)]
            return pa.Array.from_buffers(kind, count, buffers)
    elif isinstance(value, int) and kind in (pa.int32(), pa.int64()):
        return pa.array(np.full(count, value, dtype=kind.to_pandas_dtype()), type=kind)
    return pa.repeat(pa.scalar(value, type=kind), count)


def columns_to_record_batch(
    topic: str,
    partition: int,
    columns: BatchColumns,
    schema: pa.Schema,
    constants: ConstantColumns | None = None,
) -> pa.RecordBatch:
    """One RecordBatch of decoded `columns`, all of partition `topic`-`partition`, in `schema`;
    `constants` (of that partition) keeps the constant columns from one batch to the next."""
    if constants is None:
        constants = ConstantColumns(topic, partition)
    arrays = [_from_columns(f, constants, columns) for f in schema]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _from_columns(
    arrow_field: pa.Field, constants: ConstantColumns, columns: BatchColumns
) -> pa.Array:
    name = arrow_field.name
    kind = arrow_field.type
    count = len(columns)
    if name == "key":
        return columns.keys
    if name == "value":
        return columns.values
    if name in ("topic", "partition"):
        return constants.column(name, kind, count)
    if name == "offset":
        return pa.array(columns.offsets, type=kind)
    if name == "timestamp":
        return pa.array(columns.timestamps_us, type=pa.int64()).cast(kind)
    if name == "timestampType":
        return pa.array(columns.timestamp_types, type=kind)
    if name == "headers":
        if columns.headers is None:  # no record has headers: all null, built by Arrow
            return pa.nulls(count, type=kind)
        return _headers(columns.headers, kind)
    raise ValueError(
        f"column {name!r} of the requested schema is not a column of the replog source "
        f"(columns: {', '.join((*KAFKA_COLUMNS, 'headers'))})"
    )


def _headers(per_record: Sequence[Sequence[Header]], kind: pa.DataType) -> pa.Array:
    """The `headers` column: null where a record has none (module docstring)."""
    values = [
        [{"key": _spark_string(k), "value": v} for k, v in headers] if headers else None
        for headers in per_record
    ]
    return pa.array(values, type=kind)


def _spark_string(key: str) -> str:
    """`key` as Java would have decoded its bytes: each malformed UTF-8 sequence (a surrogate
    escape here) as U+FFFD (module docstring)."""
    if key.isascii():
        return key
    return key.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
