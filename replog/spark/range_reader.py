"""One task's read: exactly the records of one planned offset range, as Arrow batches.

Runs in a Spark executor's Python worker with the blocking `Consumer`, opened here (never when
the reader is built: readers are pickled) and closed when the range is done or the task fails.

Rules:
- The range [start, end) was planned below the high watermark, so every offset in it was
  committed when the query was planned; the consumer never returns a record at or above the
  current high watermark either. Records the fetch returns at or after `end` (committed since
  planning) are dropped: a task returns its planned range and nothing else, so a replayed
  micro-batch holds exactly the same records.
- Offsets missing from the log are data loss (retention, DeleteRecords). The fetch says so
  (OFFSET_OUT_OF_RANGE: the consumer runs with `auto.offset.reset=none`); the log start offset
  is then looked up. With `failOnDataLoss=true` that is a `DataLossError` naming partition and
  offsets; with false the read continues from the log start offset and a warning is logged.
  If the log start offset says the position is still there (a leader change in between), the
  fetch is retried.
- Offsets missing inside the range because the log skips them (compaction) are not data loss:
  the range ends once the consumer's position reaches `end`.
- The whole range must be read within `pollTimeoutMs`, else `ReadTimeoutError` names the
  partition, the range and the offset reached.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pyarrow as pa

from replog.client.records import ConsumerRecord, TopicPartition
from replog.client.sync_consumer import Consumer
from replog.errors import OffsetOutOfRangeError
from replog.spark.arrow import to_record_batch
from replog.spark.errors import DataLossError, ReadTimeoutError
from replog.spark.options import SourceOptions
from replog.spark.planning import OffsetRange

log = logging.getLogger(__name__)

BATCH_ROWS = 65_536  # rows per yielded Arrow batch: large enough to amortise, small in memory
POLL_MS = 500
# Larger fetches than the consumer's defaults: a task reads one known range as fast as it can.
READ_DEFAULTS = {
    "max.poll.records": "100000",
    "max.partition.fetch.bytes": "8388608",
    "fetch.max.bytes": "67108864",
}


def read_range(
    piece: OffsetRange, options: SourceOptions, schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """The records of `piece` as batches in `schema` (module docstring)."""
    if piece.end <= piece.start:
        return
    tp = TopicPartition(piece.topic, piece.partition)
    settings = {**READ_DEFAULTS, **options.consumer_settings()}
    deadline = time.monotonic() + options.poll_timeout_ms / 1000
    with Consumer(config=settings) as consumer:
        consumer.assign([tp])
        # No log-start lookup up front: the fetch itself answers OFFSET_OUT_OF_RANGE when the
        # offsets are gone, and that answer comes from the leader's log, not a separate view.
        position = piece.start
        consumer.seek(tp, position)
        pending: list[ConsumerRecord] = []
        while position < piece.end:
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            if remaining_ms <= 0:
                raise ReadTimeoutError(
                    f"reading {piece.topic}-{piece.partition} offsets [{piece.start}, "
                    f"{piece.end}) did not finish within pollTimeoutMs="
                    f"{options.poll_timeout_ms}: reached offset {position}"
                )
            try:
                polled = consumer.poll(timeout_ms=min(POLL_MS, remaining_ms))
            except OffsetOutOfRangeError:
                moved = _checked_start(consumer, tp, piece, position, options)
                if moved == position:
                    time.sleep(0.05)  # the log start says the offset is there: retry, not spin
                position = moved
                if position >= piece.end:
                    break
                consumer.seek(tp, position)
                continue
            for record in polled.get(tp, ()):
                if record.offset >= piece.end:
                    break
                pending.append(record)
            position = consumer.position(tp)
            if len(pending) >= BATCH_ROWS:
                yield to_record_batch(piece.topic, piece.partition, pending, schema)
                pending = []
        if pending:
            yield to_record_batch(piece.topic, piece.partition, pending, schema)


def _checked_start(
    consumer: Consumer,
    tp: TopicPartition,
    piece: OffsetRange,
    position: int,
    options: SourceOptions,
) -> int:
    """`position`, or the log start offset if the log no longer holds it (data loss rule)."""
    earliest = consumer.beginning_offsets([tp])[tp]
    if position >= earliest:
        return position
    lost_to = min(earliest, piece.end)
    message = (
        f"{tp.topic}-{tp.partition}: offsets [{position}, {lost_to}) of the planned range "
        f"[{piece.start}, {piece.end}) are no longer in the log (log start offset {earliest}; "
        "retention or DeleteRecords removed them)"
    )
    if options.fail_on_data_loss:
        raise DataLossError(message + "; set failOnDataLoss=false to skip them")
    log.warning("%s; skipped (failOnDataLoss=false)", message)
    return earliest
