"""A log's rolls: a new active segment at an offset, and what happens to the old ones.

Rules (docs/design/storage.md#segment-roll, #log-recovery, #crash-scenarios, S8 item 4):
- A standalone log (the Raft metadata log) fsyncs the old segments on the roll, under its
  lock, so the recovery point reaches the new base at once.
- A log under a LogManager (`enable_async_roll_flush`) does as Kafka does: the roll only
  records the offset to reach and wakes the manager, whose background thread runs
  `flush_rolled_segments` (log_flush.py). A crash before that rescans from the old segment.
- Each new active segment draws its roll jitter again, from the log's `random.Random`.
- `roll` holds the log's lock; `_roll` is called with it held (the append path, retention).
"""

from __future__ import annotations

from replog.storage.log_flush import LogFlushing
from replog.storage.roll_jitter import random_roll_jitter
from replog.storage.segment import LogSegment


class LogRolls(LogFlushing):
    """The rolls of a `Log` (log_state.py says why its parts share one state)."""

    def _roll(self, new_base_offset: int) -> LogSegment:
        """Start a new active segment at `new_base_offset` and flush the old ones."""
        new_base = max(new_base_offset, self._log_end_offset)
        old = self.active_segment
        old.on_become_inactive()
        if old.size == 0 and old.base_offset == new_base:
            return old  # rolling an empty segment at the same base would change nothing
        segment = LogSegment(
            self.directory, new_base, self.config, self._fs, self._clock(), create=True
        )
        segment.offset_index.reset()
        segment.time_index.reset()
        self._active = None
        self._segments[new_base] = segment
        self._roll_jitter_ms = random_roll_jitter(self.config, self._rng)
        if (
            self._async_roll_flush
            and new_base > self._recovery_point
            and not self.config.flush_each_append
        ):
            # Kafka's way: the old segments are synced by `flush_rolled_segments`, off the
            # appending thread; until it returns the recovery point stays where it is, so a
            # crash meanwhile rescans them (docs/design/storage.md#crash-scenarios, S8 item 4).
            self._roll_flush_pending = max(self._roll_flush_pending, new_base)
            if self._on_roll_flush_pending is not None:
                self._on_roll_flush_pending(self)
            return segment
        # A standalone log flushes the old segments here, before the next append, so the
        # recovery point moves to the new base at once.
        if new_base <= self._recovery_point:
            # `_flush` has nothing to do then (flush.each.append synced every append, or a
            # truncation cut the log back to this base), but only the .log was synced: the old
            # segment's index entries, appended or cut in memory, must reach the disk too, or a
            # crash leaves its indexes missing or stale below the recovery point, where
            # recovery trusts them.
            old.flush()
        self._flush(new_base)
        self._fs.fsync_dir(self.directory)
        if self._persist_standalone_state is not None:
            self._persist_standalone_state(self, False)
        return segment

    def roll(self) -> LogSegment:
        """Force a new active segment at the log end offset (tests, operators)."""
        with self._lock:
            self._check_open()
            return self._roll(self._log_end_offset)
