"""What the cleaner's choice (`cleanable`) needs of a `Log`: its segments' sizes and timestamps
and its offsets, read under the log's lock.

Rules:
- A segment's largest timestamp is its largest record timestamp (the file's mtime when it has
  none, as Kafka's `largestTimestamp`); its first batch timestamp is its first batch's max
  timestamp (-1 when empty), Kafka's `getFirstBatchTimestampForSegments`.
- The last stable offset is the high watermark unless the caller knows better (the cleaner
  passes the first open transaction's offset, when one is open).
- `dirty_ratio` is a log's ratio now, with its own config's lags (what the cleaner would
  compute for it: `cleanable.log_to_clean`), for reports (log dirs, metrics).
- Reads batch headers only (one per segment); plain synchronous code, for a cleaner's thread.
"""

from __future__ import annotations

from replog.record.header import RECORD_BATCH_OVERHEAD, read_header
from replog.storage.cleaner.cleanable import CompactedLogSummary, SegmentSummary, log_to_clean
from replog.storage.log import Log
from replog.storage.segment import LogSegment


def summarize_log(
    log: Log,
    *,
    min_cleanable_dirty_ratio: float,
    min_compaction_lag_ms: int,
    max_compaction_lag_ms: int,
    last_stable_offset: int | None = None,
) -> CompactedLogSummary:
    with log.locked():
        segments = [_summary(segment) for segment in log.segments()]
        return CompactedLogSummary(
            log.name,
            segments,
            log.log_start_offset,
            log.log_end_offset,
            log.high_watermark if last_stable_offset is None else last_stable_offset,
            min_cleanable_dirty_ratio,
            min_compaction_lag_ms,
            max_compaction_lag_ms,
        )


def summarize_with_config(log: Log, last_stable_offset: int | None = None) -> CompactedLogSummary:
    """`summarize_log` with the cleaner settings of the log's own config."""
    config = log.config
    return summarize_log(
        log,
        min_cleanable_dirty_ratio=config.min_cleanable_dirty_ratio,
        min_compaction_lag_ms=config.min_compaction_lag_ms,
        max_compaction_lag_ms=config.max_compaction_lag_ms,
        last_stable_offset=last_stable_offset,
    )


def dirty_ratio(log: Log, checkpoint_offset: int | None, now_ms: int) -> float:
    """The dirty ratio of `log` now (Kafka's `cleanableRatio`): its cleanable bytes over its
    clean plus cleanable bytes, from `checkpoint_offset` (its entry in the log dir's
    `cleaner-offset-checkpoint`, None when it has none). Whatever its policy: a log that
    does not compact has everything dirty below its active segment."""
    return log_to_clean(summarize_with_config(log), checkpoint_offset, now_ms).dirty_ratio


def _summary(segment: LogSegment) -> SegmentSummary:
    first = -1
    if segment.size >= RECORD_BATCH_OVERHEAD:
        first = read_header(segment.log_file.read(0, RECORD_BATCH_OVERHEAD)).max_timestamp
    largest = segment.largest_timestamp() if segment.size else -1
    return SegmentSummary(segment.base_offset, segment.size, largest, first)
