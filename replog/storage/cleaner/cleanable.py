"""Which compacted log the cleaner cleans next, and the offsets a pass over it covers (Kafka's
`LogCleanerManager.cleanableOffsets`, `maxCompactionDelay` and `LogToClean`).

Rules:
- First dirty offset: the cleaner checkpoint's offset for the log, or the log start offset
  when there is none, when it is below the log start (records deleted since), or when it is
  past the log end (a truncation); the last two also ask for the checkpoint to be rewritten.
- First uncleanable offset: the smallest of the last stable offset (the high watermark while
  there are no transactions), the active segment's base offset (the active segment is never
  cleaned) and, with `min.compaction.lag.ms` > 0, the base offset of the first dirty
  non-active segment holding a record newer than now - lag. Never below the first dirty
  offset.
- Bytes (Kafka's, which count a segment holding the first dirty offset past its base in
  both): clean = the segments holding offsets below the first dirty offset, cleanable = those
  from the one holding it to the segment holding the first uncleanable offset (the active one
  if none), excluded; the dirty ratio is cleanable / (clean + cleanable).
- Compaction due time (`max.compaction.lag.ms`): the earliest first-batch timestamp of the
  dirty non-active segments plus the lag (`INT64_MAX` when there is no timestamp > 0); the
  delay is how long past it the time is (0 when not past it).
- Choice: among logs whose cleanable bytes are > 0 and whose delay is > 0, or whose ratio
  passes `min.cleanable.dirty.ratio`, the one with the highest ratio (the first such on a
  tie); none when none qualifies.
- Pure: sizes, offsets and timestamps in, decisions out; the time is given.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

INT64_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class SegmentSummary:
    """What the cleaner needs of one segment: its base offset, size in bytes, largest record
    timestamp and first batch's max timestamp (-1 when it has none)."""

    base_offset: int
    size: int
    largest_timestamp: int
    first_batch_timestamp: int


@dataclass(frozen=True, slots=True)
class CompactedLogSummary:
    """One compacted log as the cleaner sees it; `segments` in offset order, the active one
    last."""

    name: str
    segments: Sequence[SegmentSummary]
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int
    min_cleanable_dirty_ratio: float
    min_compaction_lag_ms: int
    max_compaction_lag_ms: int

    @property
    def active_base(self) -> int:
        return self.segments[-1].base_offset

    def floor_base(self, offset: int) -> int:
        """The base offset of the segment holding `offset` (the first one's if below it)."""
        base = self.segments[0].base_offset
        for segment in self.segments:
            if segment.base_offset > offset:
                break
            base = segment.base_offset
        return base

    def segments_between(self, start: int, end: int) -> list[SegmentSummary]:
        """The segments holding offsets in [start, end), Kafka's `logSegments(from, to)`."""
        if start >= end:
            return []
        floor = self.floor_base(start)
        return [s for s in self.segments if floor <= s.base_offset < end]

    def non_active_from(self, offset: int) -> list[SegmentSummary]:
        """The non-active segments holding offsets from `offset` on."""
        return self.segments_between(offset, self.active_base)


@dataclass(frozen=True, slots=True)
class CleanableOffsets:
    first_dirty: int
    first_uncleanable: int
    force_checkpoint_update: bool


@dataclass(frozen=True, slots=True)
class LogToClean:
    """A candidate: its offsets, byte counts, when it is due and how overdue it is."""

    log: CompactedLogSummary
    first_dirty: int
    first_uncleanable: int
    clean_bytes: int
    cleanable_bytes: int
    compaction_delay_ms: int
    compaction_due_ms: int
    force_checkpoint_update: bool

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def dirty_ratio(self) -> float:
        total = self.total_bytes
        return self.cleanable_bytes / total if total else 0.0

    @property
    def needs_compaction_now(self) -> bool:
        return self.compaction_delay_ms > 0

    @property
    def qualifies(self) -> bool:
        """Whether the cleaner would clean it now (module Rules)."""
        if self.needs_compaction_now and self.cleanable_bytes > 0:
            return True
        return self.dirty_ratio > self.log.min_cleanable_dirty_ratio


def cleanable_offsets(
    log: CompactedLogSummary, checkpoint_offset: int | None, now_ms: int
) -> CleanableOffsets:
    """The first dirty and first uncleanable offsets of `log` (module Rules)."""
    force = False
    if checkpoint_offset is None:
        first_dirty = log.log_start_offset
    elif checkpoint_offset < log.log_start_offset or checkpoint_offset > log.log_end_offset:
        first_dirty, force = log.log_start_offset, True
    else:
        first_dirty = checkpoint_offset
    uncleanable = min(log.last_stable_offset, log.active_base)
    lag = max(log.min_compaction_lag_ms, 0)
    if lag > 0:
        for segment in log.non_active_from(first_dirty):
            if segment.largest_timestamp > now_ms - lag:
                uncleanable = min(uncleanable, segment.base_offset)
                break
    return CleanableOffsets(first_dirty, max(first_dirty, uncleanable), force)


def compaction_due_ms(log: CompactedLogSummary, first_dirty: int) -> int:
    """When the earliest dirty non-active segment passes `max.compaction.lag.ms`."""
    stamps = [
        s.first_batch_timestamp
        for s in log.non_active_from(first_dirty)
        if s.first_batch_timestamp > 0
    ]
    if not stamps:
        return INT64_MAX
    return min(INT64_MAX, min(stamps) + max(log.max_compaction_lag_ms, 0))


def log_to_clean(
    log: CompactedLogSummary, checkpoint_offset: int | None, now_ms: int
) -> LogToClean:
    offsets = cleanable_offsets(log, checkpoint_offset, now_ms)
    first_dirty, first_uncleanable = offsets.first_dirty, offsets.first_uncleanable
    uncleanable_segment = next(
        (s.base_offset for s in log.non_active_from(first_uncleanable)), log.active_base
    )
    clean = sum(s.size for s in log.segments_between(-1, first_dirty))
    cleanable = sum(
        s.size for s in log.segments_between(first_dirty, max(first_dirty, uncleanable_segment))
    )
    due = compaction_due_ms(log, first_dirty)
    return LogToClean(
        log,
        first_dirty,
        first_uncleanable,
        clean,
        cleanable,
        now_ms - due if due < now_ms else 0,
        due,
        offsets.force_checkpoint_update,
    )


def filthiest(candidates: Iterable[LogToClean]) -> LogToClean | None:
    """The qualifying candidate with the highest dirty ratio, or None (module Rules)."""
    best: LogToClean | None = None
    for candidate in candidates:
        if candidate.qualifies and (best is None or candidate.dirty_ratio > best.dirty_ratio):
            best = candidate
    return best
