"""A log's truncations: cutting its end back (a follower diverging from its leader) or starting
it again, empty, at an offset (a follower far behind).

Rules: each public method holds the log's lock; a batch straddling the target goes whole; the
log start offset, high watermark and recovery point are pulled back to the new end; every
truncation cancels a cleaner's pending swap, counts in `truncation_count` (so an unlocked roll
flush or cleaner pass sees it) and tells the log manager (`on_truncate`).
"""

from __future__ import annotations

import logging

from replog.errors import KafkaStorageError
from replog.storage.log_cleaned_swap import LogCleanedSwap
from replog.storage.roll_jitter import random_roll_jitter
from replog.storage.segment import LogSegment

log = logging.getLogger("replog.storage")


class LogTruncation(LogCleanedSwap):
    """The truncations of a `Log` (log_state.py says why its parts share one state)."""

    def truncate_to(self, target_offset: int) -> bool:
        """Remove every offset >= `target_offset`. Returns False when there was nothing to cut.

        A batch straddling the target goes whole, so the log end offset may end below it.
        """
        if target_offset < 0:
            raise ValueError(f"{self.name}: cannot truncate to negative offset {target_offset}")
        with self._lock:
            self._check_open()
            if target_offset >= self._log_end_offset:
                # Drop a leader epoch a leader recorded before it wrote anything.
                self.leader_epoch_cache.truncate_from_end(self._log_end_offset)
                return False
            log.info("%s: truncating from %d to %d", self.name, self._log_end_offset, target_offset)
            if target_offset < self._log_start_offset:
                self._truncate_fully_and_start_at(target_offset)
            else:
                self._truncate_segments_to(target_offset)
            self._notify_truncated()
            return True

    def _truncate_segments_to(self, target_offset: int) -> None:
        self._cancel_pending_swap()  # truncations are rare: any one cancels it
        self._active = None
        try:
            for base in list(self._segments.irange(minimum=target_offset + 1)):
                self._segments.pop(base).delete()
            floor_base = next(self._segments.irange(maximum=target_offset, reverse=True))
            segment: LogSegment = self._segments[floor_base]
            if floor_base == target_offset and len(self._segments) > 1:
                # The whole floor segment lies at/above the target: drop it, keep its predecessor.
                self._segments.pop(floor_base).delete()
                segment = self.active_segment
            segment.truncate_to(target_offset)
        except OSError as exc:
            raise KafkaStorageError(
                f"{self.name}: truncation to {target_offset} failed: {exc}"
            ) from exc
        self._log_end_offset = segment.next_offset
        self._log_start_offset = min(self._log_start_offset, self._log_end_offset)
        self.leader_epoch_cache.truncate_from_end(self._log_end_offset)
        self._high_watermark = min(self._high_watermark, self._log_end_offset)
        self._recovery_point = min(self._recovery_point, self._log_end_offset)
        self._offset_moves.moved_all()
        self._bound_cache = None
        self._truncations += 1
        # Only segments below the active one can still wait for a roll flush.
        self._roll_flush_pending = min(self._roll_flush_pending, self.active_segment.base_offset)

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete everything and start an empty log at `new_offset` (a follower far behind)."""
        if new_offset < 0:
            raise ValueError(f"{self.name}: cannot start at negative offset {new_offset}")
        with self._lock:
            self._check_open()
            self._truncate_fully_and_start_at(new_offset)
            self._notify_truncated()

    def _truncate_fully_and_start_at(self, new_offset: int) -> None:
        log.info("%s: deleting all segments and starting at offset %d", self.name, new_offset)
        self._cancel_pending_swap()
        try:
            for segment in list(self._segments.values()):
                segment.delete()
            self._active = None
            self._segments.clear()
            segment = LogSegment(
                self.directory, new_offset, self.config, self._fs, self._clock(), create=True
            )
            segment.offset_index.reset()
            segment.time_index.reset()
            self._segments[new_offset] = segment
            self._roll_jitter_ms = random_roll_jitter(self.config, self._rng)
            self._fs.fsync_dir(self.directory)
        except OSError as exc:
            raise KafkaStorageError(
                f"{self.name}: restart at offset {new_offset} failed: {exc}"
            ) from exc
        self.leader_epoch_cache.clear_and_flush()
        self._log_start_offset = self._log_end_offset = new_offset
        self._high_watermark = self._recovery_point = new_offset
        self._offset_moves.moved_all()
        self._bound_cache = None
        self._truncations += 1
        self._roll_flush_pending = 0

    def _notify_truncated(self) -> None:
        if self._on_truncate is not None:
            self._on_truncate(self)
        if self._persist_standalone_state is not None:
            self._persist_standalone_state(self, False)
