"""A log's flushes: the flush policy after each append (`flush.messages`, `flush.ms`,
`flush.each.append`), explicit flushes, the log manager's periodic flush, and the sync of the
segments a roll left unsynced (docs/design/storage.md#flush-and-defaults, #log-recovery).

Rules:
- The recovery point moves only after an fsync returned: everything below it is on disk.
- Every public method holds the log's lock, except `has_pending_roll_flush` (it reads two
  fields) and `flush_rolled_segments`, which runs on the log manager's background thread: it
  chooses its segments under the lock, fsyncs them and the directory without it (appends go
  on), and takes the lock again to move the recovery point, only if no truncation, deletion
  or close came in between.
- `_flush` and `_after_append` are called with the lock held (the append path).
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise

from replog.errors import KafkaStorageError
from replog.storage.log_state import LogState
from replog.storage.segment import LogSegment


class LogFlushing(LogState):
    """The flushes of a `Log` (log_state.py says why its parts share one state)."""

    def _after_append(self, now_ms: int) -> None:
        """Apply the flush policy (docs/design/storage.md#flush-and-defaults: flush.messages,
        flush.ms)."""
        if self.config.flush_each_append and self._roll_flush_pending > self._recovery_point:
            # Rolled segments are not synced yet (flush.each.append was turned on after an
            # asynchronous roll): sync them with the active segment.
            self._flush(self._log_end_offset)
        elif self.config.flush_each_append:
            try:
                self.active_segment.log_file.fdatasync()
            except OSError as exc:
                raise KafkaStorageError(
                    f"{self.name}: fsync of the active segment failed: {exc}"
                ) from exc
            # Everything before the active segment was flushed when it rolled.
            if self._recovery_point != self._log_end_offset:
                self._recovery_point = self._log_end_offset
                self._offset_moves.recovery_points = True
        elif (
            self._log_end_offset - self._recovery_point >= self.config.flush_interval_messages
            or now_ms - self._last_flush_ms >= self.config.flush_interval_ms
        ):
            self._flush(self._log_end_offset)

    def flush(self) -> None:
        """fsync everything appended so far and move the recovery point to the log end."""
        with self._lock:
            self._check_open()
            self._flush(self._log_end_offset)
            # Recovery rescans from the segment holding the recovery point, so the state file
            # needs rewriting only when that segment changed (rolls persist it too). Rewriting
            # it on every flush cost two more fsyncs per flush (the Raft log flushes per commit).
            if self._persist_standalone_state is not None:
                base = self._recovery_segment_base()
                if base != self._persisted_recovery_base:
                    self._persist_standalone_state(self, False)
                    self._persisted_recovery_base = base

    def enable_async_roll_flush(self, on_pending: Callable[..., None] | None = None) -> None:
        """Let rolls leave the old segments' fsync to `flush_rolled_segments` (a LogManager
        does this for its logs); `on_pending(log)` is called, under the log's lock, after a
        roll that left work for it. A standalone log never turns this on."""
        with self._lock:
            self._async_roll_flush = True
            self._on_roll_flush_pending = on_pending

    @property
    def has_pending_roll_flush(self) -> bool:
        """Whether a roll left old segments for `flush_rolled_segments` to sync."""
        return self._roll_flush_pending > self._recovery_point and not self._closed

    def flush_rolled_segments(self) -> bool:
        """Sync the segments rolls left unsynced and move the recovery point past them;
        returns whether it moved. Call it from a background thread: the fsyncs run without
        the log's lock, so appends to the active segment go on meanwhile.

        The segments chosen (those wholly below the pending offset, from the one holding the
        recovery point) are fixed under the lock, with their index entries written out; then
        their files and the directory are fsynced unlocked. The recovery point moves only if,
        meanwhile, the log was neither closed nor truncated and none of those segments was
        deleted; otherwise the next call starts again from the segments left.
        """
        with self._lock:
            pending = self._roll_flush_pending
            if self._closed or pending <= self._recovery_point:
                return False
            floor = self._recovery_segment_base()
            bases = list(self._segments.irange(minimum=max(floor, 0)))
            chosen: list[LogSegment] = []
            target = self._recovery_point
            for base, next_base in pairwise(bases):
                if next_base > pending:
                    break
                chosen.append(self._segments[base])
                target = next_base
            if not chosen:
                self._roll_flush_pending = 0  # a truncation took away what was pending
                return False
            truncations = self._truncations
            for segment in chosen:
                for index in (segment.offset_index, segment.time_index):
                    try:
                        index.flush(fsync=False)
                    except OSError as exc:
                        raise KafkaStorageError(
                            f"{self.name}: flush failed: writing {index.path}: {exc}"
                        ) from exc
        # ValueError: a file closed under us (its descriptor is then -1).
        failure: tuple[LogSegment | None, OSError | ValueError] | None = None
        synced_to: int | None = None  # set only once every fsync below returned
        for segment in chosen:
            try:
                segment.log_file.fdatasync()
                for path in (segment.offset_index.path, segment.time_index.path):
                    index_file = self._fs.open_segment_file(path, create=False)
                    try:
                        index_file.fdatasync()
                    finally:
                        index_file.close()
                # Recovery will not rescan it: its aborted transactions must be durable too
                # (a sealed segment takes no more entries, so nothing writes it meanwhile).
                segment.flush_txn_index()
            except (OSError, ValueError) as exc:
                failure = (segment, exc)
                break
        if failure is None:
            try:
                self._fs.fsync_dir(self.directory)
                # The epochs of those segments' records too (`_flush`).
                self.leader_epoch_cache.make_durable()
            except (OSError, KafkaStorageError) as exc:
                failure = (None, OSError(str(exc)) if isinstance(exc, KafkaStorageError) else exc)
            else:
                synced_to = target
        with self._lock:
            gone = (
                self._closed
                or self._truncations != truncations
                or any(self._segments.get(s.base_offset) is not s for s in chosen)
            )
            if failure is not None:
                if gone:
                    return False  # a deleted segment or a removed log cannot be synced: fine
                raise KafkaStorageError(f"{self.name}: flush failed: {failure[1]}") from failure[1]
            if gone:
                return False
            # Every segment below `target` was fsynced above (or, below the old recovery
            # point, before): only now may the recovery point move.
            new_point = min(target, self._log_end_offset)
            assert synced_to is not None and new_point <= synced_to
            if new_point <= self._recovery_point:
                return False
            self._recovery_point = new_point
            self._offset_moves.recovery_points = True
            if self._persist_standalone_state is not None:
                self._persist_standalone_state(self, False)
            return True

    def _recovery_segment_base(self) -> int:
        floor = next(self._segments.irange(maximum=self._recovery_point, reverse=True), None)
        return -1 if floor is None else int(floor)

    def maybe_flush(self, now_ms: int) -> bool:
        """Flush if `flush.ms` has passed since the last flush (the log manager's flusher)."""
        with self._lock:
            if self._closed or now_ms - self._last_flush_ms < self.config.flush_interval_ms:
                return False
            if self._recovery_point < self._log_end_offset:
                self._flush(self._log_end_offset)
            self._last_flush_ms = now_ms
            return True

    def _flush(self, up_to_offset: int, *, indexes_of_last: bool = False) -> None:
        """fsync the segments from the one holding the recovery point up to `up_to_offset`.

        Segments that end at or below `up_to_offset` are synced whole (log and indexes: they
        fall below the new recovery point, where indexes are trusted). The segment that will
        hold the new recovery point syncs only its data unless `indexes_of_last`: recovery
        rescans that segment and rebuilds its indexes anyway, and syncing them on every flush
        doubled its cost (a Raft log flushes on every commit).
        """
        if up_to_offset <= self._recovery_point:
            return
        floor = self._recovery_segment_base()
        # The epochs of the records the recovery point is about to pass must be durable too:
        # recovery re-derives them only above it.
        self.leader_epoch_cache.make_durable()
        try:
            if self._roll_flush_pending > self._recovery_point:
                # An asynchronous roll has not synced the directory yet: the new segments'
                # entries must be durable before the recovery point passes into them.
                self._fs.fsync_dir(self.directory)
            bases = list(self._segments.irange(minimum=max(floor, 0)))
            for i, base in enumerate(bases):
                if base >= up_to_offset and base != floor:
                    break
                segment = self._segments[base]
                ends_below = i + 1 < len(bases) and bases[i + 1] <= up_to_offset
                if ends_below or indexes_of_last:
                    segment.flush()
                else:
                    segment.log_file.fdatasync()
        except OSError as exc:
            raise KafkaStorageError(f"{self.name}: flush failed: {exc}") from exc
        new_point = min(up_to_offset, self._log_end_offset)
        if new_point > self._recovery_point:
            self._recovery_point = new_point
            self._offset_moves.recovery_points = True
        self._last_flush_ms = self._clock()
