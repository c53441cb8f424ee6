"""One task's read: exactly the records of one planned offset range, as Arrow batches.

Runs in a Spark executor's Python worker. It fetches the partition's raw RecordBatch bytes
(`partition_fetcher`, opened here, never when the reader is built: readers are pickled; its
connections are kept by the worker for its next task after a whole read, closed when the task
fails or is stopped early: `fetch_sessions`) and decodes each answer's batches whole into Arrow
columns (`batch_columns`): no Python object per record. One fetch answer (up to
`max.partition.fetch.bytes`, 8 MiB by default here) becomes one Arrow batch; the next fetch is
already under way while Spark takes that batch. A task's first fetch asks for 1 MiB and each
next one for twice the last, up to that size (`fetch_sizes`), so its first batch is not held
back by a whole 8 MiB answer.

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
- read_committed (the source's default, `options`): the range was planned below the last
  stable offset, the records of the aborted transactions each answer names are skipped as
  the consumer skips them (`replog/client/read_committed.py`) and move the position too, and
  nothing at or above the answer's last stable offset is returned.
- Offsets missing from the log are data loss, reported as `report_data_loss` says: with
  `failOnDataLoss=true` a `DataLossError` naming partition and offsets, with false a warning,
  and the read goes on where the log still has records. The cases, as Spark's Kafka source
  has them:
  - the fetch says OFFSET_OUT_OF_RANGE and the log start offset is above the position
    (retention, DeleteRecords): read on from the log start;
  - the fetch says OFFSET_OUT_OF_RANGE and the high watermark is at or below the position (an
    unclean election truncated the log, or the topic was re-created): the rest of the range
    is lost;
  - no progress for `pollTimeoutMs` while the fetch answers' high watermark is at or below
    the position and ListOffsets confirms it (a re-created topic whose log ends exactly
    there): the rest of the range is lost;
  - the topic or partition no longer exists (`UnknownTopicOrPartitionError`, deleted since
    planning) for `pollTimeoutMs`: the rest of the range is lost (a single such answer may be
    a broker behind on metadata, and is asked again).
  OFFSET_OUT_OF_RANGE with the position inside [log start, high watermark) (a leader change in
  between) is fetched again.
- Offsets missing inside the range because the log skips them (compaction: sparse batches,
  empty ones, whole batches removed) are not data loss: the position moves past each batch's
  last offset delta, not its record count, and the range ends once it reaches `end`, or once an
  answer's next batch starts at or after `end` (nothing in between is left in the log).
- `pollTimeoutMs` bounds each wait without progress, as Kafka's poll timeout bounds one poll:
  the timer restarts whenever the position moves and whenever Spark takes a batch (the time
  it spends with a batch is not the fetch's). When it runs out, `ReadTimeoutError` names the
  partition, the range, the offset reached and why the latest fetch attempt got no answer.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

import numpy as np
import pyarrow as pa

from replog.client.answer_batches import answer_batches
from replog.client.read_committed import AbortedTransactions
from replog.client.records import TopicPartition
from replog.clock import monotonic_ms
from replog.errors import OffsetOutOfRangeError, ReplogError, UnknownTopicOrPartitionError
from replog.record.header import BatchHeader, iter_frames, read_header
from replog.spark.arrow import ConstantColumns, columns_to_record_batch
from replog.spark.batch_columns import decode_batches
from replog.spark.errors import ReadTimeoutError, report_data_loss
from replog.spark.fetch_sessions import worker_sessions
from replog.spark.options import SourceOptions
from replog.spark.partition_fetcher import FetchAnswer, PartitionFetcher
from replog.spark.planning import OffsetRange
from replog.spark.worker_allocator import keep_freed_memory

# Larger fetches than the consumer's defaults: a task reads one known range as fast as it can.
READ_DEFAULTS = {
    "max.partition.fetch.bytes": "8388608",
    "fetch.max.bytes": "67108864",
}


UNKNOWN_TOPIC_BACKOFF_S = 0.1  # the first pause after an unknown-topic answer
# A task's first fetch asks for this much at most; each next one for twice the last, up to
# `max.partition.fetch.bytes` (`fetch_sizes`).
FIRST_FETCH_BYTES = 1 << 20


def fetch_sizes(limit: int) -> Iterator[int]:
    """The partition bytes a task's fetches ask for, in order: FIRST_FETCH_BYTES (at most
    `limit`), then twice the last each time, up to `limit`, then `limit` for good.

    Why: a task decodes nothing until its first answer is in, and an 8 MiB answer takes the
    leader and the socket about 10 ms, a 1 MiB one about 1; from then on each fetch runs while
    the answer before it is decoded, which takes longer than fetching the same bytes, so
    answers twice as large still arrive before they are needed.
    """
    size = min(FIRST_FETCH_BYTES, limit)
    while size < limit:
        yield size
        size = min(2 * size, limit)
    while True:
        yield limit


@dataclass(slots=True)
class _Cursor:
    """Where a range read is: the next offset, when it gives up without progress, the high
    watermark the latest fetch answer reported (-1: none, or no answer), and whether the latest
    attempt found the topic unknown."""

    position: int
    deadline: int  # monotonic ms
    high_watermark: int = -1
    # The last UNKNOWN_TOPIC_OR_PARTITION since the last progress: a broker behind on metadata
    # answers it for a topic it does not know yet, so it is data loss only if it lasts.
    unknown_topic: UnknownTopicOrPartitionError | None = None
    unknown_backoff_s: float = UNKNOWN_TOPIC_BACKOFF_S  # the next pause before asking again


def read_range(
    piece: OffsetRange, options: SourceOptions, schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """The records of `piece` as batches in `schema` (module docstring)."""
    if piece.end <= piece.start:
        return
    keep_freed_memory()  # each answer in the pages of the last one (worker_allocator)
    tp = TopicPartition(piece.topic, piece.partition)
    settings = {**READ_DEFAULTS, **options.consumer_settings()}
    fetcher = PartitionFetcher(tp, settings, worker_sessions())
    whole = False
    try:
        cursor = _Cursor(piece.start, monotonic_ms() + options.poll_timeout_ms)
        yield from _batches(fetcher, piece, options, schema, cursor)
        whole = True
    finally:
        # Kept for the worker's next task only after a whole read (`fetch_sessions`).
        fetcher.close(keep=whole)


def _batches(
    fetcher: PartitionFetcher,
    piece: OffsetRange,
    options: SourceOptions,
    schema: pa.Schema,
    cursor: _Cursor,
) -> Iterator[pa.RecordBatch]:
    """`read_range`'s loop; `cursor` says how far it got when it raises."""
    check_crcs = fetcher.config.check_crcs
    read_committed = fetcher.config.isolation_level == "read_committed"
    where = f"fetch of {piece.topic}-{piece.partition}"
    pending: concurrent.futures.Future[FetchAnswer | None] | None = None
    constants = ConstantColumns(piece.topic, piece.partition)
    sizes = fetch_sizes(fetcher.config.max_partition_fetch_bytes)
    while cursor.position < piece.end:
        position = cursor.position
        if monotonic_ms() >= cursor.deadline:
            cursor.position = _stalled(fetcher, piece, cursor, options)
            continue
        if pending is None:
            pending = fetcher.submit(position, cursor.deadline, next(sizes))
        try:
            answer = fetcher.wait(pending, cursor.deadline)
        except UnknownTopicOrPartitionError as exc:
            pending, cursor.unknown_topic = None, exc
            # Asked again (with fresh metadata) until it lasts pollTimeoutMs (`_stalled`), the
            # pause doubling up to a second: each ask costs a Metadata request.
            time.sleep(cursor.unknown_backoff_s)
            cursor.unknown_backoff_s = min(2 * cursor.unknown_backoff_s, 1.0)
            continue
        except OffsetOutOfRangeError:
            pending, cursor.high_watermark, cursor.unknown_topic = None, -1, None
            cursor.position = _checked_position(fetcher, piece, position, options, cursor.deadline)
            if cursor.position == position:
                time.sleep(0.05)  # the log says the offset is there: retry, not spin
            continue
        pending = None
        # Only the latest answer's word counts: a leader that stops answering is no sign that
        # the log ends here, nor that the topic is gone.
        cursor.high_watermark = -1 if answer is None else answer.high_watermark
        cursor.unknown_topic = None
        cursor.unknown_backoff_s = UNKNOWN_TOPIC_BACKOFF_S
        if answer is None:
            # The deadline passed (the check above words it), or a fetch submitted before Spark
            # took the last batch gave up on that older deadline: asked again.
            continue
        data = answer.records
        bound = piece.end
        if answer.high_watermark >= 0:
            bound = min(bound, answer.high_watermark)
        aborted = None
        if read_committed:  # a leader may name no aborted transactions as null or as none
            aborted = AbortedTransactions(answer.aborted_transactions or ())
            if answer.last_stable_offset >= 0:
                bound = min(bound, answer.last_stable_offset)
        batches, next_position = _batches_to_read(data, position, bound, check_crcs, where, aborted)
        if next_position > position:
            cursor.position = next_position
            cursor.deadline = monotonic_ms() + options.poll_timeout_ms
            if next_position < piece.end:
                # While this answer is decoded.
                pending = fetcher.submit(next_position, cursor.deadline, next(sizes))
        if batches:
            columns = decode_batches(data, batches, where=where)
            first = int(np.searchsorted(columns.offsets, position))
            stop = int(np.searchsorted(columns.offsets, bound))
            if stop > first:
                yield columns_to_record_batch(
                    piece.topic, piece.partition, columns.slice(first, stop), schema, constants
                )
                # Spark's time with the batch is not the fetch's (module docstring).
                cursor.deadline = monotonic_ms() + options.poll_timeout_ms


def _batches_to_read(
    data: bytes | memoryview,
    position: int,
    bound: int,
    check_crcs: bool,
    where: str,
    aborted: AbortedTransactions | None = None,
) -> tuple[list[tuple[int, BatchHeader]], int]:
    """The checked, non-control batches of a fetch answer that hold offsets in
    [position, bound), but those of the `aborted` transactions (read_committed), and the
    position after the last complete batch (at most `bound`)."""
    found: list[tuple[int, BatchHeader]] = []
    next_position = position
    after = 0  # the byte after the last batch read
    # answer_batches reads through struct and crc32c, which take a view as they take bytes.
    for batch_position, header in answer_batches(
        cast(bytes, data), position, bound, check_crcs=check_crcs, name=where, where=where
    ):
        next_position = min(header.next_offset, bound)
        after = batch_position + header.size_in_bytes
        if aborted is not None and aborted.hides(data, batch_position, header, where):
            continue
        if not header.is_control:
            found.append((batch_position, header))
    if next_position < bound and _next_batch_base(data, after, next_position) >= bound:
        # The leader answers from the position with the next batch it holds: none holds an
        # offset in [position, bound) (the log cleaner removed them), and the range is read.
        next_position = bound
    return found, next_position


def _next_batch_base(data: bytes | memoryview, start: int, position: int) -> int:
    """The base offset of the first whole batch from byte `start` that ends after `position`
    (-1: none)."""
    for batch_position, _ in iter_frames(data, start):
        header = read_header(data, batch_position)
        if header.next_offset > position:
            return header.base_offset
    return -1


def _timeout(
    piece: OffsetRange, options: SourceOptions, position: int, fetcher: PartitionFetcher
) -> ReadTimeoutError:
    why = fetcher.last_failure
    return ReadTimeoutError(
        f"reading {piece.topic}-{piece.partition} offsets [{piece.start}, {piece.end}) made no "
        f"progress within pollTimeoutMs={options.poll_timeout_ms}: reached offset {position}"
        + ("" if why is None else f"; the latest fetch attempt: {why}")
    )


def _lost(piece: OffsetRange, lost_from: int, lost_to: int, why: str) -> str:
    return (
        f"{piece.topic}-{piece.partition}: offsets [{lost_from}, {lost_to}) of the planned range "
        f"[{piece.start}, {piece.end}) are {why}"
    )


def _rest_lost(piece: OffsetRange, position: int, why: str, options: SourceOptions) -> int:
    """`piece.end`, once the rest of the range from `position` is reported lost for `why`."""
    report_data_loss(_lost(piece, position, piece.end, why), options.fail_on_data_loss)
    return piece.end


def _log_ends_before(
    piece: OffsetRange, position: int, high_watermark: int, options: SourceOptions
) -> int:
    """`_rest_lost`: the log now ends at `high_watermark`, at or before `position` (module
    docstring)."""
    why = (
        f"no longer in the log (its high watermark is now {high_watermark}: the log was "
        "truncated by an unclean leader election, or the topic re-created)"
    )
    return _rest_lost(piece, position, why, options)


def _stalled(
    fetcher: PartitionFetcher, piece: OffsetRange, cursor: _Cursor, options: SourceOptions
) -> int:
    """Where to go on after `pollTimeoutMs` without progress (module docstring): data loss
    if the topic stayed unknown the whole time, or if the fetch answers put the log's end at or
    before the position and ListOffsets confirms it (a new leader's fetch answers can carry
    the lower HW it inherited until its followers catch up; ListOffsets refuses to answer
    that one); else `ReadTimeoutError`."""
    position = cursor.position
    if cursor.unknown_topic is not None:
        why = f"no longer in the cluster (topic deleted since planning?): {cursor.unknown_topic}"
        return _rest_lost(piece, position, why, options)
    if 0 <= cursor.high_watermark <= position:
        try:
            high_watermark = fetcher.high_watermark(options.poll_timeout_ms)
        except ReplogError as exc:
            raise _timeout(piece, options, position, fetcher) from exc
        if high_watermark <= position:
            return _log_ends_before(piece, position, high_watermark, options)
    raise _timeout(piece, options, position, fetcher)


def _checked_position(
    fetcher: PartitionFetcher,
    piece: OffsetRange,
    position: int,
    options: SourceOptions,
    deadline: int,
) -> int:
    """Where to read on after OFFSET_OUT_OF_RANGE at `position` (module docstring): the log
    start offset, `piece.end` if the log now ends at or before `position`, or `position` if
    the log still holds it."""
    earliest = fetcher.log_start_offset(max(1, deadline - monotonic_ms()))
    if position < earliest:
        why = (
            f"no longer in the log (log start offset {earliest}; retention or DeleteRecords "
            "removed them)"
        )
        lost = _lost(piece, position, min(earliest, piece.end), why)
        report_data_loss(lost, options.fail_on_data_loss)
        return earliest
    high_watermark = fetcher.high_watermark(max(1, deadline - monotonic_ms()))
    if high_watermark <= position:
        return _log_ends_before(piece, position, high_watermark, options)
    return position
