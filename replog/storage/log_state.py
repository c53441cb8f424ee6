"""The state a partition's log keeps, which every part of `Log` (log.py) reads and changes:
its segments, its offsets, its lock, its flags; and the accessors of that state.

Rules:
- One `threading.RLock` per log: every public method of `Log` and of the classes it is built
  from holds it, so a log can be shared by threads; a private method (`_name`) is called with
  it held, unless its docstring says otherwise. Properties that read one field
  (`log_start_offset`, `high_watermark`, `segment_count`, `closed`, ...) take no lock (a field
  is read whole); `report_offset_moves_to` takes none either: a log manager calls it as it
  adopts the log, before the log is anyone else's.
- `log_start_offset <= high_watermark <= log_end_offset` at every release of the lock.
- Whatever changes `_segments` sets `_active` to None first (the cached last segment).

The parts of the log (appends in log.py; reads, timestamps, aborted transactions, truncation,
retention, the cleaner's swap, flushes, rolls, closing, the topic id in `log_*.py`) are classes
over this one state that `Log` inherits. They share one `self` rather than holding each other:
every part reads and moves the same offsets under the same lock, and the append path, where a
call costs about 0.3 µs of the ~25 µs a 16 KiB append takes, reaches every field in one step.
"""

from __future__ import annotations

import os
import random
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from replog.clock import Clock
from replog.errors import LogClosedError
from replog.storage.fs import FileSystem
from replog.storage.log_config import LogConfig
from replog.storage.log_dir_names import parse_topic_partition
from replog.storage.offset_moves import OffsetMoves
from replog.storage.roll_jitter import random_roll_jitter
from replog.storage.segment import LogSegment
from replog.storage.segment_map import SegmentMap

if TYPE_CHECKING:
    from replog.storage.leader_epoch_cache import LeaderEpochCache


class LogState:
    """A partition log's state and its accessors; `Log` is the class to use."""

    # Callbacks given the log itself, a `Log` (log.py's signatures say so); typed by their
    # arguments' count only here, since the parts that call them are not `Log`s.
    _on_truncate: Callable[..., None] | None
    _persist_standalone_state: Callable[..., None] | None
    _on_roll_flush_pending: Callable[..., None] | None

    def __init__(
        self,
        directory: str,
        config: LogConfig,
        segments: SegmentMap[LogSegment],
        leader_epoch_cache: LeaderEpochCache,
        *,
        log_start_offset: int,
        recovery_point: int,
        high_watermark: int,
        fs: FileSystem,
        clock: Clock,
        on_truncate: Callable[..., None] | None,
        persist_standalone_state: Callable[..., None] | None,
        rng: random.Random | None = None,
    ) -> None:
        """`rng`: where the log's random choices come from (its roll jitter, the id of its
        directory's name when renamed aside); None: a fresh source (a simulation passes
        its seeded one)."""
        self.directory = directory
        self._rng = rng
        self.config = config
        self._segments = segments  # base offset -> LogSegment
        # The last segment, cached: `peekitem(-1)` costs about 0.4 µs and every append and read
        # asks. Whatever changes `_segments` sets this to None first; `active_segment` refills it.
        self._active: LogSegment | None = None
        self.leader_epoch_cache = leader_epoch_cache
        self._fs = fs
        self._clock = clock
        self._lock = threading.RLock()
        self._closed = False
        self._on_truncate = on_truncate
        self._persist_standalone_state = persist_standalone_state
        active: LogSegment = segments.peekitem(-1)[1]
        self._log_end_offset = active.next_offset
        self._log_start_offset = log_start_offset
        self._recovery_point = min(recovery_point, self._log_end_offset)
        self._high_watermark = max(log_start_offset, min(high_watermark, self._log_end_offset))
        # Told of every move of the three (a LogManager's, shared by its logs: offset_moves.py).
        self._offset_moves = OffsetMoves()
        self._last_flush_ms = clock()
        # Made by `create` in a directory that did not exist: it holds no records, no producer
        # snapshot and no epoch, so nothing of it needs reading.
        self.created_empty = False
        # `partition.metadata`'s topic id once read or written, in a 1-tuple (None: not yet).
        self._known_topic_id: tuple[uuid.UUID | None] | None = None
        # The segment holding the recovery point when the standalone state was last written.
        self._persisted_recovery_base = -2
        # Asynchronous roll flush (off for a standalone log; a LogManager turns it on): a roll
        # only records the offset the next `flush_rolled_segments` must bring the recovery
        # point to, and `_on_roll_flush_pending` wakes whoever runs it.
        self._async_roll_flush = False
        self._on_roll_flush_pending = None
        self._roll_flush_pending = 0
        # Counts truncations, so an unlocked roll flush can tell that one happened meanwhile.
        self._truncations = 0
        # A cleaner's swap between its two locked steps (`replace_with_cleaned`): its cleaned
        # log files and its first replaced segment's base offset.
        self._pending_swap: tuple[tuple[str, ...], int] | None = None
        # segment.jitter.ms: drawn again for every new active segment, as Kafka does.
        self._roll_jitter_ms = random_roll_jitter(config, rng)
        # (bound offset, segment base, byte position) of the last upper bound a read resolved.
        self._bound_cache: tuple[int, int, int] | None = None
        # The base of the first segment recovery rescanned, whose `.txnindex` and later ones'
        # wait for a replay of the log's transactions (`rebuild_aborted_transactions`); None
        # when every index stands.
        self.txn_index_rebuild_from: int | None = None
        tp = parse_topic_partition(directory)
        self.topic_partition = tp
        self.name = f"{tp[0]}-{tp[1]}" if tp else os.path.basename(os.path.normpath(directory))
        assert self._log_start_offset <= self._high_watermark <= self._log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, value: int) -> None:
        self.update_high_watermark(value)

    def update_high_watermark(self, value: int) -> int:
        """Set the high watermark, clamped to [log_start_offset, log_end_offset]; returns it."""
        with self._lock:
            new = max(self._log_start_offset, min(value, self._log_end_offset))
            if new != self._high_watermark:
                self._high_watermark = new
                self._offset_moves.high_watermarks = True
            return new

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def has_no_retention_to_do(self) -> bool:
        """Whether a retention pass would find nothing to delete because the log is one empty
        segment (the active segment goes only when it is not empty). Under the log's lock:
        `active_segment` may refill the cache a roll is changing."""
        with self._lock:
            return len(self._segments) == 1 and self.active_segment.size == 0

    @property
    def size_in_bytes(self) -> int:
        with self._lock:
            return sum(segment.size for segment in self._segments.values())

    def segments(self) -> list[LogSegment]:
        with self._lock:
            return list(self._segments.values())

    @property
    def active_segment(self) -> LogSegment:
        segment = self._active
        if segment is None:
            segment = self._active = self._segments.peekitem(-1)[1]
        return segment

    @property
    def latest_leader_epoch(self) -> int | None:
        return self.leader_epoch_cache.latest_epoch

    def __repr__(self) -> str:
        return (
            f"Log({self.name!r}, start={self._log_start_offset}, hw={self._high_watermark}, "
            f"end={self._log_end_offset}, segments={len(self._segments)})"
        )

    def report_offset_moves_to(self, moves: OffsetMoves) -> None:
        """Tell `moves` of every move of this log's high watermark, recovery point or log start
        offset from now on (offset_moves.py); a log manager's logs share one. A log joining at
        offsets other than 0 is a move of them (a new log's entries at 0 say nothing a
        checkpoint needs)."""
        self._offset_moves = moves
        if self._high_watermark:
            moves.high_watermarks = True
        if self._recovery_point:
            moves.recovery_points = True
        if self._log_start_offset:
            moves.log_start_offsets = True

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"{self.name}: the log is closed")

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the log's lock across several calls (e.g. read a consistent set of offsets)."""
        with self._lock:
            yield
