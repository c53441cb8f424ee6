"""One task's read: exactly the records of one planned offset range, as Arrow batches.

Runs in a Spark executor's Python worker. It fetches the partition's raw RecordBatch bytes
(`partition_fetcher`, opened here, never when the reader is built: readers are pickled, and
closed when the range is done or the task fails) and decodes each answer's batches whole into
Arrow columns (`batch_columns`): no Python object per record. One fetch answer (up to
`max.partition.fetch.bytes`, 8 MiB by default here) becomes one Arrow batch; the next fetch is
already under way while Spark takes that batch.

Rules:
- The range [start, end) was planned below the high watermark, so every offset in it was
  committed when the query was planned; the leader serves a consumer fetch only below its
  current high watermark, and records at or above the high watermark the answer reports are
  dropped too. Records the fetch returns at or after `end` (committed since planning) are
  dropped: a task returns its planned range and nothing else, so a replayed micro-batch holds
  exactly the same records.
- Batches are checked as the consumer checks them: framing, magic and record count always,
  the CRC-32C unless `kafka.check.crcs=false` (a mismatch is a `CorruptRecordError` naming the
  partition and offset); a partial batch at the end of an answer is fetched again next time;
  batches wholly before the position are skipped undecoded; control batches are skipped but
  move the position; the records themselves are checked by the decoder (`batch_columns`).
- Offsets missing from the log are data loss (retention, DeleteRecords). The fetch says so
  (OFFSET_OUT_OF_RANGE); the log start offset is then looked up. With `failOnDataLoss=true`
  that is a `DataLossError` naming partition and offsets; with false the read continues from
  the log start offset and a warning is logged. If the log start offset says the position is
  still there (a leader change in between), the fetch is retried.
- Offsets missing inside the range because the log skips them (compaction) are not data loss:
  the range ends once the position (after the last batch read) reaches `end`.
- The whole range must be read within `pollTimeoutMs`, else `ReadTimeoutError` names the
  partition, the range and the offset reached.
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from collections.abc import Iterator
from typing import cast

import numpy as np
import pyarrow as pa

from replog.client.answer_batches import answer_batches
from replog.client.records import TopicPartition
from replog.clock import monotonic_ms
from replog.errors import OffsetOutOfRangeError
from replog.record.header import (
    BatchHeader,
)
from replog.spark.arrow import columns_to_record_batch
from replog.spark.batch_columns import decode_batches
from replog.spark.errors import DataLossError, ReadTimeoutError
from replog.spark.options import SourceOptions
from replog.spark.partition_fetcher import FetchAnswer, PartitionFetcher
from replog.spark.planning import OffsetRange

log = logging.getLogger(__name__)

# Larger fetches than the consumer's defaults: a task reads one known range as fast as it can.
READ_DEFAULTS = {
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
    deadline = monotonic_ms() + options.poll_timeout_ms
    where = f"fetch of {piece.topic}-{piece.partition}"
    with PartitionFetcher(tp, settings) as fetcher:
        check_crcs = fetcher.config.check_crcs
        position = piece.start
        pending: concurrent.futures.Future[FetchAnswer | None] | None = None
        while position < piece.end:
            if monotonic_ms() >= deadline:
                raise _timeout(piece, options, position)
            if pending is None:
                pending = fetcher.submit(position, deadline)
            try:
                answer = fetcher.wait(pending, deadline)
            except OffsetOutOfRangeError:
                pending = None
                moved = _checked_start(fetcher, tp, piece, position, options, deadline)
                if moved == position:
                    time.sleep(0.05)  # the log start says the offset is there: retry, not spin
                position = moved
                continue
            pending = None
            if answer is None:
                raise _timeout(piece, options, position)
            data = answer.records
            bound = piece.end
            if answer.high_watermark >= 0:
                bound = min(bound, answer.high_watermark)
            batches, next_position = _batches_to_read(data, position, bound, check_crcs, where)
            if position < next_position < piece.end:
                pending = fetcher.submit(next_position, deadline)  # while this one is decoded
            if batches:
                columns = decode_batches(data, batches, where=where)
                first = int(np.searchsorted(columns.offsets, position))
                stop = int(np.searchsorted(columns.offsets, bound))
                if stop > first:
                    yield columns_to_record_batch(
                        piece.topic, piece.partition, columns.slice(first, stop), schema
                    )
            position = max(position, next_position)


def _batches_to_read(
    data: bytes | memoryview, position: int, bound: int, check_crcs: bool, where: str
) -> tuple[list[tuple[int, BatchHeader]], int]:
    """The checked, non-control batches of a fetch answer that hold offsets in
    [position, bound), and the position after the last complete batch (at most `bound`)."""
    found: list[tuple[int, BatchHeader]] = []
    next_position = position
    # answer_batches reads through struct and crc32c, which take a view as they take bytes.
    for batch_position, header in answer_batches(
        cast(bytes, data), position, bound, check_crcs=check_crcs, name=where, where=where
    ):
        next_position = min(header.next_offset, bound)
        if not header.is_control:
            found.append((batch_position, header))
    return found, next_position


def _timeout(piece: OffsetRange, options: SourceOptions, position: int) -> ReadTimeoutError:
    return ReadTimeoutError(
        f"reading {piece.topic}-{piece.partition} offsets [{piece.start}, {piece.end}) did "
        f"not finish within pollTimeoutMs={options.poll_timeout_ms}: reached offset {position}"
    )


def _checked_start(
    fetcher: PartitionFetcher,
    tp: TopicPartition,
    piece: OffsetRange,
    position: int,
    options: SourceOptions,
    deadline: int,
) -> int:
    """`position`, or the log start offset if the log no longer holds it (data loss rule)."""
    earliest = fetcher.log_start_offset(max(1, deadline - monotonic_ms()))
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
