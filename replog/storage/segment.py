"""One log segment: a `.log` file of concatenated batches plus its `.index`, `.timeindex` and
`.txnindex` (aborted transactions, `transaction_index`).

Rules:
- A segment covers [base_offset, next segment's base_offset). Its first batch starts at byte 0
  and has base offset == base_offset; batches follow each other with dense offsets, so a gap
  or an overlap is corruption. In a log whose policy has `compact` (`LogConfig.compacts`),
  the log cleaner removes records and batches without renumbering: there offsets only
  increase (the first batch at or past base_offset), a batch may hold fewer records than
  its offset range, or none (`validate_batch`'s `sparse`).
- The broker path never decodes records: segments frame batches by their headers only. Full
  validation (CRC-32C) happens on the way in (the log validates appends) and in `recover`.
- Indexes are sparse: once more than `index.interval.bytes` were appended since the last entry,
  the next batch gets one, (its last offset, its start), also inside an append of several
  batches (Kafka's `LogSegment.append`); the time index's largest timestamp so far is per batch
  too. An index replog wrote with entries per append instead may name a multi-batch append's
  last offset at its first byte: lookups take both (either entry is at or before the batch
  holding its offset, all a lookup needs).
- Indexes load lazily on first use (an append, a read below the end, a lookup by time; finding
  the end of a segment no longer than `index.interval.bytes` reads none); one that fails its
  sanity check is rebuilt from the `.log`.

Theory of operation: the hot reads (`translate_offset`, `read`) look up the offset index. When
the batch sought is the one indexed next (the usual case for a reader going on where it
stopped), one header read finds it; otherwise they walk batch headers forward from the entry below,
reading the file through a small window so a walk over many small batches costs a few system
calls, not one per batch. A header reached through an index entry must match the entry, else
the index is corrupt and is rebuilt. `read` finds where its whole batches end before reading
them (the offset index also lists batch starts by byte position), so the data comes in one
read of exactly the bytes returned, never a read that is then cut (which would copy the data
a second time).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from replog.errors import CorruptIndexError, CorruptRecordError, InvalidRecordError
from replog.record.header import (
    LOG_OVERHEAD,
    MAGIC_V2,
    MIN_BATCH_LENGTH,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    read_frame,
    read_header,
    validate_batch,
)
from replog.storage.file_region import Region
from replog.storage.fs import Buffer, FileSystem
from replog.storage.index_builder import SparseIndexBuilder
from replog.storage.index_file import OffsetIndex, TimeIndex
from replog.storage.log_config import LogConfig
from replog.storage.transaction_index import TXN_INDEX_SUFFIX, TransactionIndex

log = logging.getLogger("replog.storage")

INT32_MAX = 2**31 - 1
# A file a segment no longer owns, to be removed (opening a log removes any left).
DELETED_SUFFIX = ".deleted"
_WINDOW_BYTES = 64 * 1024  # read-ahead when walking headers of small batches
# Read-ahead of the short walks `read` does from an index entry: the batch sought is usually
# within an index interval (4 KiB by default), so reading 64 KiB there would copy mostly payload.
_LOOKUP_WINDOW_BYTES = 8 * 1024
_RECOVERY_CHUNK_BYTES = 8 * 1024 * 1024  # read size when validating a whole segment


def _failure(buf: bytes, position: int, where: str, sparse: bool = False) -> str:
    """Why the batch at `position` fails `validate_batch`, naming it by `where`."""
    try:
        validate_batch(buf, position, where=where, sparse=sparse)
    except (CorruptRecordError, InvalidRecordError) as exc:
        return str(exc)
    raise AssertionError(f"{where}: the batch failed validation only once")


def segment_file_prefix(base_offset: int) -> str:
    """Kafka's file name stem: the base offset zero-padded to 20 digits."""
    return f"{base_offset:020d}"


@dataclass(frozen=True, slots=True)
class SegmentRecovery:
    """What `LogSegment.recover` found: how much was valid and why it stopped."""

    valid_bytes: int
    truncated_bytes: int
    next_offset: int
    reason: str | None  # None when the whole file was valid


_SEP = os.sep
_LAZY_INDEXES = frozenset(("offset_index", "time_index"))


class LogSegment:
    """A segment of one partition's log. Not thread-safe: the owning `Log` serialises calls."""

    def __init__(
        self,
        directory: str,
        base_offset: int,
        config: LogConfig,
        fs: FileSystem,
        now_ms: int,
        *,
        create: bool,
        made_empty: bool = False,
    ) -> None:
        """`made_empty`: the `.log` file exists, empty (`FileSystem.create_empty_file`), and
        is not opened here (`FileSystem.empty_segment_file`)."""
        self.base_offset = base_offset
        self.config = config
        self._fs = fs
        prefix = (
            directory + _SEP + segment_file_prefix(base_offset)  # os.path.join's, in a third
            if directory and not directory.endswith(_SEP)
            else os.path.join(directory, segment_file_prefix(base_offset))
        )
        self.log_path = prefix + ".log"
        self.log_file = (
            fs.empty_segment_file(self.log_path)
            if made_empty
            else fs.open_segment_file(self.log_path, create=create)
        )
        # Only the active segment is appended to, and only appends hint (see fs.py).
        self.log_file.tune_for_appends(config.page_cache_tail_bytes)
        # A new empty segment's indexes (no entries, no files) are made on first use
        # (`__getattr__`): most new replicas' logs stay empty for long, some for good.
        if not made_empty:
            self._make_indexes(prefix)
        self.created_ms = now_ms
        self._bytes_since_last_index_entry = 0
        self._max_timestamp_so_far: int | None = None  # lazily loaded for old segments
        self._offset_of_max_timestamp_so_far = -1
        self._rolling_based_timestamp: int | None = None
        self._next_offset: int | None = None
        if self.log_file.size == 0:
            # Nothing to load: without this the first append would read its own batch back to
            # learn the largest timestamp.
            self._next_offset = base_offset
            self._max_timestamp_so_far = -1
        self._indexes_loaded = False  # ensure_indexes ran (the indexes never unload)

    def _make_indexes(self, prefix: str) -> None:
        self.offset_index = OffsetIndex(
            prefix + ".index", self.base_offset, self.config.offset_index_entries_max, self._fs
        )
        self.time_index = TimeIndex(
            prefix + ".timeindex", self.base_offset, self.config.time_index_entries_max, self._fs
        )

    if TYPE_CHECKING:
        txn_index: TransactionIndex  # made on first use (`__getattr__`)
    else:  # hidden from mypy, which would then take any attribute

        def __getattr__(self, name: str) -> object:
            """Called only for an attribute not set: the `.txnindex`, and a `made_empty`
            segment's indexes, made on first use as that segment's (empty: `start_empty`),
            whatever was appended since (entries are added on reaching
            `index_interval_bytes` only)."""
            if name == "txn_index" and "log_path" in self.__dict__:
                # Made on first use: most segments never hold an ABORT marker (no file).
                txn_index = TransactionIndex(
                    self.log_path[: -len(".log")] + TXN_INDEX_SUFFIX, self.base_offset, self._fs
                )
                self.txn_index = txn_index
                return txn_index
            if name not in _LAZY_INDEXES or "log_path" not in self.__dict__:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            self._make_indexes(self.log_path[: -len(".log")])
            self.offset_index.start_empty()
            self.time_index.start_empty()
            return self.__dict__[name]

    # --- sizes and bounds ---------------------------------------------------------------------

    @property
    def size(self) -> int:
        return self.log_file.size

    @property
    def next_offset(self) -> int:
        """The offset after this segment's last batch (its base offset when empty)."""
        if self._next_offset is None:
            self._load_tail_state()
        assert self._next_offset is not None
        return self._next_offset

    def _load_tail_state(self) -> None:
        """Find the next offset and the largest timestamp from the last index entry onwards.

        A segment of at most `index.interval.bytes` is walked from its start without reading
        its indexes: an entry is added only at a position past that many bytes, so the offset
        index would say "from byte 0" anyway, and the walk sees every batch's timestamp. Its
        indexes are read when something first needs them (a restart after a clean stop reads
        thousands of logs whose segments are that small, and two index files a log were a
        fifth of the load).
        """
        if not self._indexes_loaded and self.size <= self.config.index_interval_bytes:
            position, max_ts, max_ts_offset = 0, -1, -1
        else:
            self.ensure_indexes()
            _, position = self.offset_index.lookup(2**63 - 1)
            last_ts_entry = self.time_index.last_entry()
            max_ts, max_ts_offset = last_ts_entry if last_ts_entry else (-1, -1)
        next_offset = self.base_offset
        end = position
        for end_position, header in self._walk_headers(position):
            next_offset = header.next_offset
            end = end_position + header.size_in_bytes
            if header.max_timestamp > max_ts:
                max_ts, max_ts_offset = header.max_timestamp, header.last_offset
        if end != self.size:
            raise CorruptRecordError(
                f"{self.log_path}: batches end at byte {end} but the file has {self.size} bytes"
            )
        self._next_offset = next_offset
        self._max_timestamp_so_far = max_ts
        self._offset_of_max_timestamp_so_far = max_ts_offset

    @property
    def max_timestamp_so_far(self) -> int:
        if self._max_timestamp_so_far is None:
            self._load_tail_state()
        assert self._max_timestamp_so_far is not None
        return self._max_timestamp_so_far

    def largest_timestamp(self) -> int:
        """Largest record timestamp in the segment, or the file's mtime if it has none."""
        if self.max_timestamp_so_far >= 0:
            return self.max_timestamp_so_far
        return self._fs.mtime_ms(self.log_path)

    def max_timestamp_between(self, start_offset: int, end_offset: int) -> tuple[int, int]:
        """(largest timestamp, last offset of the first batch carrying it) over the batches
        holding an offset in [`start_offset`, `end_offset`), or (-1, -1) if none has one.

        The segment's own maximum answers when its batch lies in the range (every sealed
        segment below a high watermark); otherwise the time index's last entry below the end
        answers for everything before it, and only the batches after it are read.
        """
        max_ts = self.max_timestamp_so_far  # loads the indexes and the tail state
        max_offset = self._offset_of_max_timestamp_so_far
        if start_offset <= max_offset < end_offset:
            return max_ts, max_offset
        best_ts, best_offset = -1, -1
        walk_from = max(start_offset, self.base_offset)
        entry = self.time_index.last_entry_below(end_offset)
        if entry is not None and entry[1] >= start_offset:
            (best_ts, best_offset), walk_from = entry, entry[1] + 1
        _, position = self.offset_index.lookup(walk_from)
        for _, header in self._walk_headers(position):
            if header.base_offset >= end_offset:
                break
            if header.last_offset >= walk_from and header.max_timestamp > best_ts:
                best_ts, best_offset = header.max_timestamp, header.last_offset
        return best_ts, best_offset

    def ensure_indexes(self) -> None:
        """Load both indexes; rebuild them from the log if either fails its sanity check."""
        if self._indexes_loaded:
            return  # every append and read asks; once loaded, indexes stay loaded
        try:
            self.offset_index.load(self.size)
            self.time_index.load(self.size)
        except CorruptIndexError as exc:
            log.warning("rebuilding indexes of %s: %s", self.log_path, exc)
            self.rebuild_indexes()
        self._indexes_loaded = True

    # --- walking batches ----------------------------------------------------------------------

    def _walk_headers(
        self,
        position: int,
        end: int | None = None,
        window_bytes: int = _WINDOW_BYTES,
        first_read: int | None = None,
    ) -> Iterator[tuple[int, BatchHeader]]:
        """Yield (position, header) of each complete batch from `position`, by framing only.

        A batch counts if it ends at or before byte `end` (default: the end of the file).
        Reads go through a window of `window_bytes` (the first one `first_read` bytes, if
        given), or fetch just the next header after a big batch.
        """
        end = self.size if end is None else end
        window = b""
        window_start = position
        read_ahead = window_bytes if first_read is None else min(first_read, window_bytes)
        while end - position >= RECORD_BATCH_OVERHEAD:
            relative = position - window_start
            if relative < 0 or relative + RECORD_BATCH_OVERHEAD > len(window):
                window = self.log_file.read(position, min(read_ahead, end - position))
                window_start, relative = position, 0
            header = read_header(window, relative)
            size = header.batch_length + LOG_OVERHEAD
            if header.batch_length < MIN_BATCH_LENGTH or position + size > end:
                return
            yield position, header
            # Big batches: read just the next header instead of a window of payload.
            read_ahead = RECORD_BATCH_OVERHEAD if size > window_bytes // 2 else window_bytes
            position += size

    def translate_offset(
        self, offset: int, start_position: int = 0
    ) -> tuple[int, BatchHeader] | None:
        """(position, header) of the first batch whose last offset is >= `offset`, or None."""
        if not self._indexes_loaded:  # (a call saved per read)
            self.ensure_indexes()
        # First try the batch the index lists next at or after `offset` (an entry's key is its
        # batch's last offset): when that batch holds `offset`, one header read finds it. That
        # is the usual case for a reader going on where its last read ended; otherwise walk
        # from the entry below.
        ceiling = self.offset_index.ceiling_entry(offset)
        if ceiling is not None and ceiling[1] >= start_position:
            position = ceiling[1]
            raw = self.log_file.read(position, RECORD_BATCH_OVERHEAD)
            if len(raw) == RECORD_BATCH_OVERHEAD:
                header = read_header(raw)
                if (
                    header.magic == MAGIC_V2
                    and self.base_offset <= header.base_offset <= offset
                    and header.base_offset + header.last_offset_delta >= offset
                ):
                    return position, header
        indexed_offset, indexed_position = self.offset_index.lookup(offset)
        position = max(start_position, indexed_position)
        # The first header must be a batch the entry can point at (an entry's key is at or
        # past that batch's base offset: its last offset, or in an older index the last offset
        # of the append starting there); a later header follows from framing.
        first_at_most = indexed_offset if position == indexed_position > 0 else None
        first = True
        for batch_position, header in self._walk_headers(position, None, _LOOKUP_WINDOW_BYTES):
            if first:
                first = False
                if (
                    header.magic != MAGIC_V2
                    or header.base_offset < self.base_offset
                    or (first_at_most is not None and header.base_offset > first_at_most)
                ):
                    raise CorruptIndexError(
                        f"{self.offset_index.path}: entry points at byte {batch_position}, which "
                        f"holds no batch of offset {first_at_most} (magic {header.magic}, base "
                        f"offset {header.base_offset}, segment base {self.base_offset})"
                    )
            if header.last_offset >= offset:
                return batch_position, header
        if first and first_at_most is not None and position < self.size:
            raise CorruptIndexError(
                f"{self.offset_index.path}: entry points at byte {position}, where no whole "
                "batch starts"
            )
        return None

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        max_position: int | None = None,
        *,
        min_one_message: bool,
        region_min_bytes: int | None = None,
    ) -> tuple[bytes | Region, int] | None:
        """Whole batches from the one holding `start_offset`, within `max_bytes` (the first batch
        whole when `min_one_message`) and below byte `max_position`; left in the file as a
        `Region` when they are `region_min_bytes` or more (None: always read).

        Returns (data, start position), or None when `start_offset` is past this segment's end.
        """
        try:
            return self._read(
                start_offset, max_bytes, max_position, min_one_message, region_min_bytes
            )
        except CorruptIndexError as exc:
            log.warning("rebuilding indexes of %s: %s", self.log_path, exc)
            self.rebuild_indexes()
            return self._read(
                start_offset, max_bytes, max_position, min_one_message, region_min_bytes
            )

    def _read(
        self,
        start_offset: int,
        max_bytes: int,
        max_position: int | None,
        min_one_message: bool,
        region_min_bytes: int | None,
    ) -> tuple[bytes | Region, int] | None:
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        position, header = found
        limit = self.size if max_position is None else min(max_position, self.size)
        if position >= limit:
            return b"", position
        first_end = position + header.batch_length + LOG_OVERHEAD
        target = min(limit, position + max_bytes)
        if first_end > target:
            if not min_one_message or first_end > limit:
                return b"", position
            end = first_end
        else:
            end = self._last_batch_end(first_end, target)
        if region_min_bytes is not None and end - position >= region_min_bytes:
            return self.log_file.region(position, end - position), position
        data = self.log_file.read_fully(position, end - position)
        if len(data) != end - position:
            raise CorruptRecordError(
                f"{self.log_path}: read {len(data)} of {end - position} bytes at position "
                f"{position}"
            )
        return data, position

    def _last_batch_end(self, batch_end: int, target: int) -> int:
        """The end of the last whole batch ending at or before byte `target`; `batch_end` is the
        end of one that does.

        Walks batch headers from the indexed batch start nearest below `target`, so finding
        where 1 MiB of small batches ends costs a lookup and a read of a few headers. The first
        header there must match its index entry, else the index is corrupt.
        """
        position, indexed_offset = batch_end, None
        entry = self.offset_index.floor_entry_by_position(target)
        if entry is not None and entry[1] > batch_end:
            indexed_offset, position = entry
        end = position
        # Only headers of batches starting at or before `target` matter: read no further first.
        first_read = target - position + RECORD_BATCH_OVERHEAD
        headers = self._walk_headers(position, None, _LOOKUP_WINDOW_BYTES, first_read)
        for batch_position, header in headers:
            if indexed_offset is not None:
                if header.magic != MAGIC_V2 or not (
                    self.base_offset <= header.base_offset <= indexed_offset
                ):
                    break
                indexed_offset = None
            next_end = batch_position + header.batch_length + LOG_OVERHEAD
            if next_end > target:
                return end
            end = next_end
        if indexed_offset is not None and position < self.size:
            raise CorruptIndexError(
                f"{self.offset_index.path}: entry for offset {indexed_offset} points at byte "
                f"{position}, where no batch holding that offset starts"
            )
        return end

    # --- appends ------------------------------------------------------------------------------

    def can_hold_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    def should_roll(
        self, append_bytes: int, max_timestamp: int, last_offset: int, now_ms: int, jitter_ms: int
    ) -> bool:
        """Kafka's roll rule, checked before every append (docs/design/storage.md#segment-roll)."""
        if not self._indexes_loaded:
            self.ensure_indexes()
        config = self.config
        size = self.log_file.size
        if size > config.segment_bytes - append_bytes:
            return True
        if size > 0:
            rolling_based = self._rolling_based_timestamp
            if rolling_based is not None and rolling_based >= 0:
                waited = max_timestamp - rolling_based  # the usual case, without a call
            else:
                waited = self._time_waited_for_roll(now_ms, max_timestamp)
            if waited > config.segment_ms - jitter_ms:
                return True
        return (
            self.offset_index.is_full
            or self.time_index.is_full
            or not 0 <= last_offset - self.base_offset <= INT32_MAX  # `can_hold_offset`
        )

    def _time_waited_for_roll(self, now_ms: int, max_timestamp: int) -> int:
        if self._rolling_based_timestamp is None and self.size > 0:
            first = read_header(self.log_file.read(0, RECORD_BATCH_OVERHEAD))
            self._rolling_based_timestamp = first.max_timestamp
        if self._rolling_based_timestamp is not None and self._rolling_based_timestamp >= 0:
            return max_timestamp - self._rolling_based_timestamp
        return now_ms - self.created_ms

    def append(
        self,
        data: Buffer | Sequence[Buffer],
        last_offset: int,
        max_timestamp: int,
        offset_of_max_timestamp: int,
        next_offset: int,
        verify: Callable[[], None] | None = None,
        batches: Sequence[BatchHeader] | None = None,
    ) -> None:
        """Write validated, stamped batches and index them. The log checked everything else.

        `data` is one buffer or a list of buffers written back to back (see `SegmentFile`).
        `batches`: the headers of the batches written, in order, when there are several
        (None: one batch). `verify`, if given, runs after the write and before anything
        records it; if it raises, the bytes are cut off again and the segment is as before.
        """
        assert 0 <= last_offset - self.base_offset <= INT32_MAX, (self.log_path, last_offset)
        if not self._indexes_loaded:
            self.ensure_indexes()
        log_file = self.log_file
        position = log_file.size
        if position == 0:
            self._rolling_based_timestamp = max_timestamp
        log_file.append(data)
        if verify is not None:
            try:
                verify()
            except BaseException:
                log_file.truncate(position)
                if position == 0:
                    self._rolling_based_timestamp = None
                raise
        written = log_file.size - position
        assert written > 0
        self._next_offset = next_offset
        max_so_far = self._max_timestamp_so_far
        if max_so_far is None:
            max_so_far = self.max_timestamp_so_far  # loads it
        if batches is not None:
            max_so_far = self._index_batches(batches, position, written, max_so_far)
            if max_timestamp > max_so_far:  # in batches it did not look at
                self._max_timestamp_so_far = max_timestamp
                self._offset_of_max_timestamp_so_far = offset_of_max_timestamp
            return
        if max_timestamp > max_so_far:
            self._max_timestamp_so_far = max_so_far = max_timestamp
            self._offset_of_max_timestamp_so_far = offset_of_max_timestamp
        if self._bytes_since_last_index_entry > self.config.index_interval_bytes:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(max_so_far, self._offset_of_max_timestamp_so_far)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += written

    def _index_batches(
        self, batches: Sequence[BatchHeader], position: int, written: int, max_so_far: int
    ) -> int:
        """Kafka's `LogSegment.append` for the `written` bytes of several batches from byte
        `position`: the interval rule per batch, an entry being (that batch's last offset, its
        own position) and a time entry the largest timestamp up to that batch. Returns the
        largest timestamp so far as of the last batch looked at (the caller adds the rest)."""
        interval = self.config.index_interval_bytes
        since = self._bytes_since_last_index_entry
        # The bytes since the last entry only grow until an entry: if they are still within the
        # interval before the last batch, no batch gets one (a caught-up follower's appends are
        # mostly smaller than the interval).
        if since + written - (batches[-1][1] + LOG_OVERHEAD) <= interval:
            self._bytes_since_last_index_entry = since + written
            return max_so_far
        offset_of_max = self._offset_of_max_timestamp_so_far
        # Fields by index (base_offset 0, batch_length 1, last_offset_delta 6, max_timestamp
        # 8): one iteration per batch, and a named tuple's attribute costs more than a
        # subscript.
        for header in batches:
            batch_max = header[8]
            if batch_max > max_so_far:
                max_so_far, offset_of_max = batch_max, header[0] + header[6]
            if since > interval:
                self.offset_index.append(header[0] + header[6], position)
                self.time_index.maybe_append(max_so_far, offset_of_max)
                since = 0
            size = header[1] + LOG_OVERHEAD
            position += size
            since += size
        self._bytes_since_last_index_entry = since
        self._max_timestamp_so_far = max_so_far
        self._offset_of_max_timestamp_so_far = offset_of_max
        return max_so_far

    # --- recovery and rebuilding --------------------------------------------------------------

    def recover(self, on_batch: Callable[[BatchHeader], None] | None = None) -> SegmentRecovery:
        """Validate every batch (framing, magic, CRC, dense offsets, non-decreasing leader epoch),
        rebuild both indexes, and cut the file at the first invalid or partial batch.

        `on_batch` sees each valid batch's header (the log uses it to rebuild leader epochs).
        """
        self.offset_index.reset()
        self.time_index.reset()
        self._bytes_since_last_index_entry = 0
        self._max_timestamp_so_far = -1
        self._offset_of_max_timestamp_so_far = -1
        self._rolling_based_timestamp = None
        # A compacted log's cleaned batches have gaps between and within them (module Rules).
        sparse = self.config.compacts
        size = self.size
        position = 0
        expected_offset = self.base_offset
        leader_epoch_floor = -1
        reason: str | None = None
        chunk = b""
        chunk_start = 0
        while position < size:
            remaining = size - position
            if remaining < LOG_OVERHEAD:
                reason = f"partial batch of {remaining} bytes at the end"
                break
            relative = position - chunk_start
            if relative + LOG_OVERHEAD > len(chunk):
                chunk = self.log_file.read(position, min(_RECOVERY_CHUNK_BYTES, remaining))
                chunk_start, relative = position, 0
            _, batch_size = read_frame(chunk, relative)
            if batch_size - LOG_OVERHEAD < MIN_BATCH_LENGTH:
                reason = f"batch_length {batch_size - LOG_OVERHEAD} below {MIN_BATCH_LENGTH}"
                break
            if batch_size > remaining:
                reason = f"partial batch: {batch_size} bytes declared, {remaining} present"
                break
            if relative + batch_size > len(chunk):
                chunk = self.log_file.read(
                    position, max(batch_size, min(_RECOVERY_CHUNK_BYTES, remaining))
                )
                chunk_start, relative = position, 0
            try:
                header = validate_batch(chunk, relative, where=self.log_path, sparse=sparse)
            except (CorruptRecordError, InvalidRecordError):
                # Name the byte only for the bad batch: formatting it for every batch costs
                # about as much as checking a small one. The same check fails again.
                reason = _failure(chunk, relative, f"{self.log_path} at byte {position}", sparse)
                break
            if header.base_offset != expected_offset and not (
                sparse and header.base_offset > expected_offset
            ):
                reason = (
                    f"{self.log_path} at byte {position}: base offset {header.base_offset}, "
                    f"expected {expected_offset}"
                )
                break
            if header.partition_leader_epoch < leader_epoch_floor:
                reason = (
                    f"{self.log_path} at byte {position}: leader epoch "
                    f"{header.partition_leader_epoch} after {leader_epoch_floor}"
                )
                break
            leader_epoch_floor = header.partition_leader_epoch
            if position == 0:
                self._rolling_based_timestamp = header.max_timestamp
            if header.max_timestamp > self._max_timestamp_so_far:
                self._max_timestamp_so_far = header.max_timestamp
                self._offset_of_max_timestamp_so_far = header.last_offset
            if self._bytes_since_last_index_entry > self.config.index_interval_bytes:
                self.offset_index.append(header.last_offset, position)
                self.time_index.maybe_append(
                    self._max_timestamp_so_far, self._offset_of_max_timestamp_so_far
                )
                self._bytes_since_last_index_entry = 0
            self._bytes_since_last_index_entry += batch_size
            if on_batch is not None:
                on_batch(header)
            expected_offset = header.next_offset
            position += batch_size
        truncated = size - position
        if truncated:
            self.log_file.truncate(position)
        self._next_offset = expected_offset
        # Kafka's recover ends as a roll or a close does: the final time-index entry records
        # the largest timestamp (docs/design/storage.md#log-recovery, step 3), so it is not lost
        # between entries.
        self._append_final_time_entry(
            self._max_timestamp_so_far, self._offset_of_max_timestamp_so_far
        )
        return SegmentRecovery(position, truncated, expected_offset, reason)

    def rebuild_indexes(self) -> None:
        """Rebuild both indexes by framing the file (no CRC: the data itself is trusted)."""
        self.offset_index.reset()
        self.time_index.reset()
        builder = SparseIndexBuilder(
            self.offset_index, self.time_index, self.config.index_interval_bytes
        )
        for position, header in self._walk_headers(0):
            builder.add(position, header)
        self._bytes_since_last_index_entry = builder.bytes_since_last_entry
        builder.finish()  # as `recover` does

    def _append_final_time_entry(self, max_timestamp: int, offset_of_max_timestamp: int) -> None:
        """Add the time-index entry of the segment's largest timestamp (may use the spare slot)."""
        if max_timestamp >= 0:
            self.time_index.maybe_append(max_timestamp, offset_of_max_timestamp, final=True)

    # --- truncation, flushing, lifecycle ------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Remove every batch holding an offset >= `offset` (a batch straddling it goes whole).

        Returns the number of bytes removed.
        """
        found = self.translate_offset(offset)
        if found is None:
            return 0
        position, _ = found
        removed = self.size - position
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.log_file.truncate(position)
        # Recompute the tail state from what remains.
        self._next_offset = None
        self._max_timestamp_so_far = None
        self._bytes_since_last_index_entry = 0
        if position == 0:
            self._rolling_based_timestamp = None
            self._next_offset = self.base_offset
            self._max_timestamp_so_far = -1
        return removed

    def on_become_inactive(self) -> None:
        """A newer segment took over: add the final time-index entry (Kafka's roll step 2) and
        let the next sync drop all of its page cache (fs.py)."""
        self.log_file.finish_appends()
        self.ensure_indexes()
        if self.max_timestamp_so_far >= 0:
            self.time_index.maybe_append(
                self.max_timestamp_so_far, self._offset_of_max_timestamp_so_far, final=True
            )

    def flush(self) -> None:
        """Make the log and its indexes durable."""
        self.log_file.fdatasync()
        self.offset_index.flush(fsync=True)
        self.time_index.flush(fsync=True)
        self.flush_txn_index()

    def flush_txn_index(self) -> None:
        """Make the aborted transactions written since the last flush durable (none if the
        index was never used)."""
        txn_index: TransactionIndex | None = self.__dict__.get("txn_index")
        if txn_index is not None:
            txn_index.flush()

    def close(self) -> None:
        """Add the final time-index entry, write pending index entries (without fsync) and
        close the file; the file is closed even when an index write fails (a full disk), and
        that failure is then raised."""
        try:
            if self.offset_index._loaded:
                # Kafka's LogSegment.close appends the final time-index entry, as a roll does
                # (docs/design/storage.md#time-index), so a cleanly closed active segment's
                # .timeindex holds its largest timestamp. Only when the tail state is known: closing
                # must not read the file.
                if self._max_timestamp_so_far is not None:
                    self._append_final_time_entry(
                        self._max_timestamp_so_far, self._offset_of_max_timestamp_so_far
                    )
                # An empty segment's indexes have nothing to say, and loading reads a missing
                # index of an empty segment as empty: no files are made for them (an idle new
                # replica's log would otherwise create two at every stop of its broker). Files
                # already there are still cut to match (a log truncated to empty).
                if (
                    self.size > 0
                    or self.offset_index.file_exists()
                    or self.time_index.file_exists()
                ):
                    self.offset_index.flush(fsync=False)
                    self.time_index.flush(fsync=False)
        finally:
            self.log_file.close()

    def delete(self) -> None:
        self.log_file.close()
        self._fs.remove(self.log_path)
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()

    def retire(self) -> list[str]:
        """Close the segment and rename its files to `<name>.deleted` (Kafka's asynchronous
        delete): renames only, which a swap can afford under the log's lock, where removing
        the files costs the disk's time. Returns the renamed paths, which the caller removes;
        a file that is not there (an index never written) is skipped."""
        self.log_file.close()
        renamed = []
        paths = (self.log_path, self.offset_index.path, self.time_index.path, self.txn_index.path)
        for path in paths:
            try:
                self._fs.rename(path, path + DELETED_SUFFIX)
            except FileNotFoundError:
                continue
            renamed.append(path + DELETED_SUFFIX)
        return renamed
