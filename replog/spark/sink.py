"""The replog sink: `df.write.format("replog")` (`ReplogWriter`) and
`df.writeStream.format("replog")` (`ReplogStreamWriter`).

    (df.selectExpr("CAST(id AS STRING) AS key", "payload AS value")
       .write.format("replog").option("bootstrap.servers", "127.0.0.1:19092")
       .option("topic", "orders").mode("append").save())

What is written (columns, options, save modes) is checked at planning by
`replog.spark.sink_plan`; this module does the writing. `replog.spark.source`'s DataSource
returns these writers from `writer()` and `streamWriter()`.

Rules:
- Each Spark task with rows opens one blocking `replog.Producer` (acks=all, idempotence on),
  sends its rows in input order, flushes, closes it, and only then returns its commit
  message: a task that succeeded has every row acknowledged by every in-sync replica. A task
  without rows (an empty partition of a micro-batch) does not connect.
- A produce that fails fails the task with the client's typed error, the broker's own answer
  where there is one (`MessageSizeTooLargeError`, `UnknownTopicOrPartitionError`,
  `NotEnoughReplicasError`, `KafkaTimeoutError` naming the last cause, ...), with a note
  saying how many rows the task had sent. The task stops sending after the Arrow batch during
  which a send failed (failures are checked once per batch).
- Rows arrive as Arrow record batches (the Arrow writer classes), converted a column at a
  time: no per-row Spark `Row` objects.
- Delivery is at least once, as with Spark's Kafka sink: records of a task that failed after
  some were acknowledged, of a task Spark retries, or of a micro-batch a restarted query
  replays are written again. Idempotence removes duplicates only within one producer (one
  task attempt). `commit` and `abort` therefore only log; nothing can be taken back.
- Writers are pickled to the executors: they hold only the frozen `SinkPlan`; the producer
  is created inside `write`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from replog.client.sync_producer import Producer
from replog.spark.sink_plan import SinkPlan, SinkRecordError, plan_sink

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

__all__ = ["ReplogStreamWriter", "ReplogWriter", "SinkCommitMessage", "write_batches"]

log = logging.getLogger("replog.spark")


@dataclass(frozen=True)
class SinkCommitMessage(WriterCommitMessage):
    """What one task wrote: every record acknowledged (acks=all)."""

    records: int


class ReplogWriter(DataSourceArrowWriter):
    """The batch sink (module docstring); `mode("append")` only."""

    def __init__(self, options: Any, schema: StructType, overwrite: bool) -> None:
        self.plan = plan_sink(options, schema, overwrite=overwrite, streaming=False)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return write_batches(self.plan, iterator)

    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        log.info("%s: wrote %d records", self.plan.description, _count(messages))

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        log.warning(
            "%s: the write failed; %d records of tasks that succeeded stay in the log",
            self.plan.description,
            _count(messages),
        )


class ReplogStreamWriter(DataSourceStreamArrowWriter):
    """The streaming sink (module docstring): each micro-batch's rows are appended."""

    def __init__(self, options: Any, schema: StructType, overwrite: bool) -> None:
        self.plan = plan_sink(options, schema, overwrite=overwrite, streaming=True)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return write_batches(self.plan, iterator)

    def commit(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        log.info("%s: batch %d wrote %d records", self.plan.description, batchId, _count(messages))

    def abort(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        log.warning(
            "%s: batch %d failed; %d records of tasks that succeeded stay in the log "
            "(a replay writes them again)",
            self.plan.description,
            batchId,
            _count(messages),
        )


def _count(messages: Sequence[WriterCommitMessage | None]) -> int:
    return sum(m.records for m in messages if isinstance(m, SinkCommitMessage))


class _FirstFailure:
    """The errback of every send: keeps the first error (later ones are its consequences)."""

    __slots__ = ("error",)

    def __init__(self) -> None:
        self.error: BaseException | None = None

    def __call__(self, error: BaseException) -> None:
        if self.error is None:
            self.error = error


def write_batches(plan: SinkPlan, batches: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
    """Produce every row of `batches` (one task's input) and wait for all of them (module
    docstring); raises the first failure. A task without rows never connects."""
    failure = _FirstFailure()
    sent = 0
    producer: Producer | None = None
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            if producer is None:
                producer = Producer(dict(plan.producer_settings))
            send = producer.send
            for topic, value, key, headers, partition in _records(plan, batch, sent):
                send(topic, value, key, headers, partition).add_errback(failure)
                sent += 1
            if failure.error is not None:
                break
        if producer is not None and failure.error is None:
            producer.flush()
    except BaseException as exc:
        exc.add_note(f"{plan.description}: the task had sent {sent} records")
        if producer is not None:
            producer.close(0)
        raise
    if failure.error is not None:
        assert producer is not None
        producer.close(0)
        error = failure.error
        error.add_note(
            f"{plan.description}: a produce failed; the task had sent {sent} records, "
            "some of them may be in the log"
        )
        raise error
    if producer is not None:
        producer.close()
    return SinkCommitMessage(records=sent)


Record = tuple[str, bytes | None, bytes | None, list[tuple[str, bytes | None]] | None, int | None]


def _records(plan: SinkPlan, batch: pa.RecordBatch, first_row: int) -> Iterator[Record]:
    """The batch's rows as `send` arguments; strings become UTF-8 bytes in Arrow (C), not
    per row in Python."""
    rows = batch.num_rows
    values = _bytes_column(batch, plan.value_index, plan.value_is_string)
    keys = (
        _bytes_column(batch, plan.key_index, plan.key_is_string)
        if plan.key_index is not None
        else [None] * rows
    )
    if plan.topic is not None:
        topics: list[str | None] = [plan.topic] * rows
    else:
        assert plan.topic_index is not None  # sink_plan requires one or the other
        topics = batch.column(plan.topic_index).to_pylist()
    partitions = (
        batch.column(plan.partition_index).to_pylist()
        if plan.partition_index is not None
        else [None] * rows
    )
    headers = (
        _headers_column(batch, plan.headers_index, plan.header_value_is_string)
        if plan.headers_index is not None
        else [None] * rows
    )
    for row, (topic, value, key, header, partition) in enumerate(
        zip(topics, values, keys, headers, partitions, strict=True)
    ):
        if topic is None:
            raise SinkRecordError(
                f"row {first_row + row} of the task has a null 'topic' column; "
                "set option('topic', ...) or fill the column"
            )
        yield topic, value, key, header, partition


def _bytes_column(batch: pa.RecordBatch, index: int, is_string: bool) -> list[bytes | None]:
    column = batch.column(index)
    if is_string:
        column = column.cast(pa.binary())
    values: list[bytes | None] = column.to_pylist()
    return values


def _headers_column(
    batch: pa.RecordBatch, index: int, value_is_string: bool
) -> list[list[tuple[str, bytes | None]] | None]:
    column = batch.column(index)
    # sink_plan matched the struct's field names without case; find their real spelling.
    names = {field.name.lower(): field.name for field in column.type.value_type}
    key_name, value_name = names["key"], names["value"]
    out: list[list[tuple[str, bytes | None]] | None] = []
    for row in column.to_pylist():
        if not row:
            out.append(None)
            continue
        pairs: list[tuple[str, bytes | None]] = []
        for header in row:
            data = header[value_name]
            if value_is_string and data is not None:
                data = data.encode()
            pairs.append((header[key_name], data))
        out.append(pairs)
    return out
