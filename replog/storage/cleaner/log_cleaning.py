"""One cleaning pass over one compacted `Log` (Kafka's `Cleaner.doClean`): build the key map
from the dirty section, then rewrite the segments below the map's reach group by group and
swap each group's cleaned segment in.

Rules:
- The map covers the records from the first dirty offset up to the first uncleanable one
  (never the active segment), in offset order, until it is full (`OffsetMap.max_entries`):
  its own transaction state skips aborted data and markers. The pass reaches the offset
  after the last one the map covered (`CleaningPass.end_offset`, at least the first dirty
  offset): the next pass starts there, so a log whose keys do not fit is cleaned in several
  passes.
- Plain segments: a segment wholly in the dirty section that the map read to its end, each of
  its batches neither control nor transactional and holding records, each with a key and a
  value, none superseded by a later put (`OffsetMap.watch`), keeps every batch as it is: the
  filter copies its batches without scanning their records again (`BatchFilter.filter`'s
  `plain`). In a log all dirty whose keys each appear once, that is every segment.
- Every non-active segment holding offsets below the reached offset is rewritten, the clean
  section too (its records superseded by dirty ones go), in groups (`grouping`); each
  group's batches go through one `BatchFilter` (one transaction state for the whole pass,
  one `now_ms`) into `<base>.log.cleaned`, indexed as it is written (Kafka's sparse rule,
  `index.interval.bytes`: `<base>.index.cleaned`, `<base>.timeindex.cleaned`); the three files
  are synced, so the swap under the log's lock builds and syncs nothing. A batch past the
  map's reach is copied as it is.
- A group of one segment whose every batch the filter keeps as it is (nothing removed,
  nothing rewritten) is left in place: its cleaned segment would hold the same bytes, so no
  `.cleaned` file is written and nothing is swapped (`CleaningPass.groups_kept`). Its
  `.cleaned` log file is made at the first batch that differs, the unchanged batches before it
  copied from the segment as they are; its indexes are built as the batches go by, in memory,
  and written only with a `.cleaned` log file. A group of several segments is always written:
  merging them is the point of the group.
- The cleaned groups are swapped in together (`Log.replace_with_cleaned`, `segment_swap`):
  once those written and not yet swapped hold `SWAP_BATCH_BYTES` or more, and at the pass's
  end. One swap, with its two directory syncs and two turns of the log's lock, serves many
  small groups (a log of small segments); a group of segments of Kafka's default size is a
  swap of its own, as Kafka swaps each group. So at most `SWAP_BATCH_BYTES` and a group of
  cleaned bytes wait on the disk beside the segments they replace.
- The segments are read without the log's lock (sealed segments do not change); if the log
  changed meanwhile (a truncation, a deletion, a close: a read fails or the swap is refused), or
  the caller asks it to stop (`should_stop`, Kafka's `checkDone`), the pass stops there,
  abandoned: what was swapped in stays, the cleaned groups not swapped yet are removed, nothing
  else changes, and the checkpoint must not move (`CleaningPass.abandoned`). A record that does
  not parse also abandons the pass, and `CleaningPass.corrupt` says where: the caller tells
  damage from a concurrent change (a truncation rewrote the bytes it read) by the log's
  truncation count.
- `on_read(bytes)` hears of every batch read, before it is used: the caller's I/O throttle
  (`log.cleaner.io.max.bytes.per.second`) sleeps there.
- A pass is planned from its log (`prepare_pass`: the sealed segments' paths and sizes, the
  log's settings, the offsets, each producer's last batch: a picklable `PassPlan`) and run
  over that plan (`run_pass`) with a way to open a segment's file, the file system the
  `.cleaned` files are written through, and the swap: `clean_log` runs both in the caller's
  thread; a cleaning process (`cleaning_process`) runs `run_pass` in a child with the swaps
  asked of the parent, which holds the log.
- Plain synchronous code: a caller runs it on a thread of its own, never on an event loop.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

from replog.errors import CorruptRecordError, InvalidRecordError, LogClosedError
from replog.record.batch import RecordBatch
from replog.record.control_record import marker_type
from replog.record.header import LOG_OVERHEAD, iter_frames, read_frame, read_header
from replog.record.record_spans import Span, span_is_tombstone, span_key
from replog.storage.aborted_transactions import AbortedTransaction
from replog.storage.cleaner.batch_filter import BatchFilter, FilterStats, ProducerLastBatch
from replog.storage.cleaner.grouping import GroupedSegment, group_segments_by_size
from replog.storage.cleaner.offset_map import OffsetMap
from replog.storage.cleaner.transactions import CleanedTransactions
from replog.storage.fs import FileSystem, SegmentFile
from replog.storage.index_builder import SparseIndexBuilder
from replog.storage.index_file import OffsetIndex, TimeIndex
from replog.storage.log import Log
from replog.storage.segment import LogSegment
from replog.storage.segment_swap import cleaned_paths, discard_cleaned

log = logging.getLogger("replog.storage.cleaner")

_READ_BYTES = 1 << 20
SWAP_BATCH_BYTES = 64 << 20
_OFFSET_INDEX_ENTRY_BYTES = 8
_TIME_INDEX_ENTRY_BYTES = 12


@dataclass(slots=True)
class CleaningPass:
    """What one pass did."""

    first_dirty: int
    end_offset: int  # the next pass's first dirty offset (the cleaner checkpoint's new value)
    map_entries: int = 0
    map_utilization: float = 0.0
    groups_swapped: int = 0
    groups_kept: int = 0  # single segments nothing changed in: neither written nor swapped
    abandoned: bool = False
    corrupt: str | None = None  # what did not parse, when that abandoned the pass
    stats: FilterStats = field(default_factory=FilterStats)


@dataclass(frozen=True, slots=True)
class SealedSegment:
    """What a pass reads of one non-active segment (sealed: it no longer changes)."""

    base_offset: int
    size: int
    log_path: str
    index_interval_bytes: int


@dataclass(frozen=True, slots=True)
class PassPlan:
    """One pass's input, taken from its log as the pass starts (module Rules)."""

    name: str  # the log's, for messages
    directory: str
    segments: tuple[SealedSegment, ...]  # every non-active segment, in offset order
    segment_bytes: int
    segment_index_bytes: int
    index_interval_bytes: int  # the cleaned segments' index rules, as the log's segments have
    offset_index_entries_max: int
    time_index_entries_max: int
    first_dirty: int
    first_uncleanable: int
    now_ms: int
    delete_retention_ms: int
    last_batches: Mapping[int, ProducerLastBatch]
    aborted: tuple[AbortedTransaction, ...] = ()


OpenSegment = Callable[[SealedSegment], AbstractContextManager[SegmentFile]]
# A cleaned group: the segments it replaces and its `.cleaned` log file.
CleanedGroup = tuple[Sequence[SealedSegment], str]
Swap = Callable[[Sequence[CleanedGroup]], bool]


@dataclass(frozen=True, slots=True)
class LogPass:
    """A plan with the log it was taken from: the segments it names and the swap."""

    plan: PassPlan
    target: Log
    segments: Mapping[int, LogSegment]  # by base offset
    truncations: int  # the log's truncation count before its segments were listed

    @contextlib.contextmanager
    def open_segment(self, segment: SealedSegment) -> Iterator[SegmentFile]:
        """The log's own open file of `segment` (not closed here)."""
        yield self.segments[segment.base_offset].log_file

    def swap(self, groups: Sequence[CleanedGroup]) -> bool:
        """Swap each group's cleaned segment in for the segments it replaces, all at once
        (`Log.replace_with_cleaned`); False when the log changed since the plan was taken,
        and the `.cleaned` files are removed."""
        swapped = self.target.replace_with_cleaned(
            [
                ([self.segments[s.base_offset] for s in replaced], cleaned)
                for replaced, cleaned in groups
            ],
            truncation_count=self.truncations,
        )
        return swapped is not None


def prepare_pass(
    target: Log,
    *,
    first_dirty: int,
    first_uncleanable: int,
    now_ms: int,
    delete_retention_ms: int,
    last_batches: Mapping[int, ProducerLastBatch] | None = None,
    aborted: Iterable[AbortedTransaction] = (),
) -> LogPass:
    """The plan of a pass over `target` from `first_dirty` (module Rules)."""
    truncations = target.truncation_count
    segments = target.segments()[:-1]  # never the active segment
    config = target.config
    plan = PassPlan(
        name=target.name,
        directory=target.directory,
        segments=tuple(
            SealedSegment(s.base_offset, s.size, s.log_path, s.config.index_interval_bytes)
            for s in segments
        ),
        segment_bytes=config.segment_bytes,
        segment_index_bytes=config.segment_index_bytes,
        index_interval_bytes=config.index_interval_bytes,
        offset_index_entries_max=config.offset_index_entries_max,
        time_index_entries_max=config.time_index_entries_max,
        first_dirty=first_dirty,
        first_uncleanable=first_uncleanable,
        now_ms=now_ms,
        delete_retention_ms=delete_retention_ms,
        last_batches=dict(last_batches or {}),
        aborted=tuple(aborted),
    )
    return LogPass(plan, target, {s.base_offset: s for s in segments}, truncations)


class _LogChanged(Exception):
    """The log changed under the pass, or the pass was asked to stop (module Rules)."""


class _Corrupt(_LogChanged):
    """A batch or record of the log did not parse (module Rules)."""


def _never() -> bool:
    return False


def _ignore(size: int) -> None:
    pass


def clean_log(
    target: Log,
    offset_map: OffsetMap,
    *,
    first_dirty: int,
    first_uncleanable: int,
    now_ms: int,
    delete_retention_ms: int,
    last_batches: Mapping[int, ProducerLastBatch] | None = None,
    aborted: Iterable[AbortedTransaction] = (),
    should_stop: Callable[[], bool] = _never,
    on_read: Callable[[int], None] = _ignore,
) -> CleaningPass:
    """Clean `target` from `first_dirty` in this thread (module Rules). `offset_map` is
    cleared first. `should_stop` is asked between batches (`CleaningStates.is_aborted`): once
    it answers True the pass is abandoned there. `on_read` hears each batch's size as it is
    read."""
    prepared = prepare_pass(
        target,
        first_dirty=first_dirty,
        first_uncleanable=first_uncleanable,
        now_ms=now_ms,
        delete_retention_ms=delete_retention_ms,
        last_batches=last_batches,
        aborted=aborted,
    )
    return run_pass(
        prepared.plan,
        offset_map,
        fs=target.file_system,
        open_segment=prepared.open_segment,
        swap=prepared.swap,
        should_stop=should_stop,
        on_read=on_read,
    )


def run_pass(
    plan: PassPlan,
    offset_map: OffsetMap,
    *,
    fs: FileSystem,
    open_segment: OpenSegment,
    swap: Swap,
    should_stop: Callable[[], bool] = _never,
    on_read: Callable[[int], None] = _ignore,
) -> CleaningPass:
    """Run the pass `plan` describes (module Rules): its segments opened by `open_segment`,
    its `.cleaned` files written through `fs`, each swapped in by `swap`."""
    first_dirty = plan.first_dirty
    first_uncleanable = plan.first_uncleanable
    segments = plan.segments
    offset_map.clear()
    result = CleaningPass(first_dirty, first_dirty)
    read = _Reader(open_segment, should_stop, on_read)
    try:
        plain = _build_offset_map(
            segments, offset_map, first_dirty, first_uncleanable, list(plan.aborted), read
        )
    except _LogChanged as exc:
        log.info("%s: cleaning abandoned while reading its dirty section: %s", plan.name, exc)
        result.abandoned = True
        result.corrupt = str(exc) if isinstance(exc, _Corrupt) else None
        return result
    end_offset = max(offset_map.latest_offset + 1, first_dirty)
    result.end_offset = end_offset
    result.map_entries = len(offset_map)
    result.map_utilization = offset_map.utilization
    to_clean = [s for s in segments if s.base_offset < end_offset]
    if not to_clean:
        return result
    batch_filter = BatchFilter(
        offset_map,
        now_ms=plan.now_ms,
        delete_retention_ms=plan.delete_retention_ms,
        last_batches=plan.last_batches,
        transactions=CleanedTransactions(list(plan.aborted)),
    )
    result.stats = batch_filter.stats
    summaries = [
        GroupedSegment(
            s.base_offset,
            s.size,
            _index_bytes(s, _OFFSET_INDEX_ENTRY_BYTES),
            _index_bytes(s, _TIME_INDEX_ENTRY_BYTES),
        )
        for s in to_clean
    ]
    groups = group_segments_by_size(
        summaries, plan.segment_bytes, plan.segment_index_bytes, first_uncleanable
    )
    unswapped: list[CleanedGroup] = []  # written, synced, not swapped in yet
    unswapped_bytes = 0
    try:
        for number, group in enumerate(groups, 1):
            replaced = [to_clean[i] for i in group]
            written = _write_cleaned(fs, plan, replaced, batch_filter, read, plain)
            if written is None:
                result.groups_kept += 1
            else:
                unswapped.append((replaced, written[0]))
                unswapped_bytes += written[1]
            if not unswapped or (unswapped_bytes < SWAP_BATCH_BYTES and number < len(groups)):
                continue
            batch, unswapped, unswapped_bytes = unswapped, [], 0
            if not swap(batch):
                log.info("%s: cleaning abandoned: the log changed during the pass", plan.name)
                result.abandoned = True
                return result
            result.groups_swapped += len(batch)
    except _LogChanged as exc:
        log.info("%s: cleaning abandoned: %s", plan.name, exc)
        result.abandoned = True
        result.corrupt = str(exc) if isinstance(exc, _Corrupt) else None
        return result
    finally:
        for _, cleaned in unswapped:  # abandoned, or failed: never swapped in
            discard_cleaned(fs, cleaned)
    return result


def _index_bytes(segment: SealedSegment, entry_bytes: int) -> int:
    """An estimate of a segment's index size: one entry per `index.interval.bytes`."""
    interval = max(segment.index_interval_bytes, 1)
    return (segment.size // interval + 1) * entry_bytes


def _build_offset_map(
    segments: Sequence[SealedSegment],
    offset_map: OffsetMap,
    start: int,
    end: int,
    aborted: list[AbortedTransaction],
    read: _Reader,
) -> set[int]:
    """Fill `offset_map` from the dirty section; returns the plain segments' base offsets
    (module Rules)."""
    transactions = CleanedTransactions(aborted)
    bases = [segment.base_offset for segment in segments]
    offset_map.watch(bases)
    read_whole: list[int] = []  # the indexes of the segments read whole that may be plain
    for index, segment in enumerate(segments):
        upper = segments[index + 1].base_offset if index + 1 < len(segments) else None
        if upper is not None and upper <= start:
            continue  # wholly below the dirty section
        if segment.base_offset >= end:
            break
        may_be_plain = _put_segment(segment, offset_map, transactions, start, end, read)
        if may_be_plain is None:
            break
        if may_be_plain and segment.base_offset >= start:
            read_whole.append(index)
    return {bases[i] for i in read_whole if not offset_map.superseded(i)}


def _put_segment(
    segment: SealedSegment,
    offset_map: OffsetMap,
    transactions: CleanedTransactions,
    start: int,
    end: int,
    read: _Reader,
) -> bool | None:
    """Put the keyed records of `segment` from `start` into `offset_map`: None when the map
    stops in it (full, or at `end`), else whether each of its batches was plain (module
    Rules) as far as its records tell."""
    plain = True
    for batch in read.batches(segment):
        header = read_header(batch)
        if header.last_offset >= end:
            return None
        if header.is_control:
            spans = _spans(batch)
            transactions.on_control_batch_read(header, marker_type(spans[0][2]) if spans else None)
            plain = False
        elif transactions.on_batch_read(header):
            plain = False
        else:
            spans = _spans(batch)
            if plain and (
                header.is_transactional
                or not spans
                or any(map(span_is_tombstone, spans))
                or None in map(span_key, spans)
            ):
                plain = False
            if not offset_map.put_records(header.base_offset, spans, start):
                return None  # full: the pass reaches the last offset the map took
        if header.last_offset >= start:
            offset_map.update_latest_offset(header.last_offset)
    return plain


def _spans(batch: bytes) -> list[Span]:
    """Each record's span (`record_spans`: its offset delta and key; no `Record` built, no
    value copied: the map needs no more)."""
    try:
        return RecordBatch.parse(batch, where="cleaner", sparse=True).spans()[1]
    except (CorruptRecordError, InvalidRecordError) as exc:
        raise _Corrupt(str(exc)) from exc


def _write_cleaned(
    fs: FileSystem,
    plan: PassPlan,
    replaced: list[SealedSegment],
    batch_filter: BatchFilter,
    read: _Reader,
    plain: set[int],
) -> tuple[str, int] | None:
    """Filter `replaced`'s batches into their `.cleaned` segment, indexed as it is written
    (`SparseIndexBuilder`), and sync its three files; returns the log file's path and size,
    or None when `replaced` is one segment the filter left as it is (module Rules). The
    segments whose base offsets are in `plain` are plain (module Rules)."""
    base = replaced[0].base_offset
    path, index_path, time_index_path = cleaned_paths(plan.directory, base)
    discard_cleaned(fs, path)  # stale ones of an earlier, interrupted pass
    offset_index = OffsetIndex(index_path, base, plan.offset_index_entries_max, fs)
    time_index = TimeIndex(time_index_path, base, plan.time_index_entries_max, fs)
    offset_index.start_empty()
    time_index.start_empty()
    indexes = SparseIndexBuilder(offset_index, time_index, plan.index_interval_bytes)
    # None while every batch so far is kept as it is in a group of one segment: those
    # batches are the segment's first `unchanged` bytes, at the same positions.
    out: SegmentFile | None = (
        None if len(replaced) == 1 else fs.open_segment_file(path, create=True)
    )
    unchanged = 0
    try:
        for segment in replaced:
            is_plain = segment.base_offset in plain
            for batch in read.batches(segment):
                try:
                    kept = batch_filter.filter(batch, plain=is_plain)
                except (CorruptRecordError, InvalidRecordError) as exc:
                    raise _Corrupt(f"{segment.log_path}: {exc}") from exc
                if out is None:
                    if kept is batch:
                        indexes.add(unchanged, read_header(kept))
                        unchanged += len(kept)
                        continue
                    out = fs.open_segment_file(path, create=True)
                    read.copy(segment, unchanged, out)
                if kept is not None:
                    indexes.add(out.size, read_header(kept))
                    out.append(kept)
        if out is None:
            return None
        indexes.finish()
        out.fsync()
        offset_index.flush(fsync=True)
        time_index.flush(fsync=True)
    except BaseException:
        if out is not None:
            out.close()
            discard_cleaned(fs, path)
        raise
    size = out.size
    out.close()
    return path, size


class _Reader:
    """Reads a pass's segments: each whole batch, `_READ_BYTES` at a time."""

    __slots__ = ("_on_read", "_open", "_should_stop")

    def __init__(
        self,
        open_segment: OpenSegment,
        should_stop: Callable[[], bool],
        on_read: Callable[[int], None],
    ) -> None:
        self._open = open_segment
        self._should_stop = should_stop
        self._on_read = on_read

    def batches(self, segment: SealedSegment) -> Iterator[bytes]:
        """Each whole batch of the sealed `segment`, in order; `_LogChanged` once
        `should_stop` says so, or when the file is not as the plan says."""
        size = segment.size
        position = 0
        on_read, should_stop = self._on_read, self._should_stop
        try:
            with self._open(segment) as file:
                while position < size:
                    chunk = file.read_fully(position, min(_READ_BYTES, size - position))
                    if len(chunk) < LOG_OVERHEAD:
                        raise _LogChanged(
                            f"{segment.log_path}: {len(chunk)} bytes at byte {position}"
                        )
                    _, batch_size = read_frame(chunk, 0)
                    if batch_size > len(chunk):  # one batch larger than a chunk
                        chunk = file.read_fully(position, batch_size)
                    consumed = 0
                    for at, length in iter_frames(chunk):
                        on_read(length)
                        if should_stop():
                            raise _LogChanged(f"{segment.log_path}: the pass was asked to stop")
                        yield chunk[at : at + length]
                        consumed = at + length
                    if consumed == 0:
                        raise _LogChanged(f"{segment.log_path}: no whole batch at byte {position}")
                    position += consumed
        except (OSError, LogClosedError) as exc:
            raise _LogChanged(f"{segment.log_path}: {exc}") from exc

    def copy(self, segment: SealedSegment, size: int, out: SegmentFile) -> None:
        """Append the first `size` bytes of the sealed `segment` to `out` (batches the pass
        read already: not reported to `on_read` again)."""
        try:
            with self._open(segment) as file:
                for position in range(0, size, _READ_BYTES):
                    length = min(_READ_BYTES, size - position)
                    data = file.read_fully(position, length)
                    if len(data) < length:
                        raise _LogChanged(
                            f"{segment.log_path}: {len(data)} bytes at byte {position}"
                        )
                    out.append(data)
        except (OSError, LogClosedError) as exc:
            raise _LogChanged(f"{segment.log_path}: {exc}") from exc
