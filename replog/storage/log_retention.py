"""A log's start offset and retention: DeleteRecords moving the start, and the retention pass
that deletes whole segments (docs/design/storage.md#retention).

Rules: each public method holds the log's lock; the log start offset never passes the high
watermark; retention never deletes anything at or above it, and the active segment goes only
when it is not empty and wholly below it, after a new empty segment replaced it; deleting a
segment a cleaner's pending swap replaces cancels the swap first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from replog.errors import KafkaStorageError, OffsetOutOfRangeError
from replog.storage.log_cleaned_swap import LogCleanedSwap
from replog.storage.log_rolls import LogRolls
from replog.storage.segment import LogSegment

log = logging.getLogger("replog.storage")


class LogRetention(LogRolls, LogCleanedSwap):
    """The start offset and retention of a `Log` (log_state.py says why its parts share one
    state)."""

    def increment_log_start_offset(
        self, new_log_start_offset: int, reason: str = "delete records"
    ) -> bool:
        """Raise the log start offset (DeleteRecords, or a follower copying its leader's).

        Must not pass the high watermark. Whole segments below it are deleted by the next
        retention pass. Returns whether anything changed.
        """
        with self._lock:
            self._check_open()
            if new_log_start_offset > self._high_watermark:
                raise OffsetOutOfRangeError(
                    f"{self.name}: cannot move the log start offset to {new_log_start_offset}, "
                    f"beyond the high watermark {self._high_watermark} ({reason})"
                )
            if new_log_start_offset <= self._log_start_offset:
                return False
            log.info(
                "%s: log start offset %d -> %d (%s)",
                self.name,
                self._log_start_offset,
                new_log_start_offset,
                reason,
            )
            self._set_log_start_offset(new_log_start_offset)
            if self._persist_standalone_state is not None:
                self._persist_standalone_state(self, False)
            return True

    def _set_log_start_offset(self, value: int) -> None:
        self._log_start_offset = value
        self._high_watermark = max(self._high_watermark, value)
        self._recovery_point = max(self._recovery_point, min(value, self._log_end_offset))
        self._offset_moves.moved_all()
        self.leader_epoch_cache.truncate_from_start(value)

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """One retention pass (docs/design/storage.md#retention); returns how many segments it
        deleted.

        Order: segments wholly below the log start offset, then `retention.bytes`, then
        `retention.ms`. A segment goes only if the high watermark has passed its end, and the
        active segment only when it is not empty (a new empty one replaces it).
        """
        with self._lock:
            self._check_open()
            now = self._clock() if now_ms is None else now_ms
            deleted = self._delete_segments_while(
                lambda segment, upper: upper <= self._log_start_offset, "below the log start offset"
            )
            if not self.config.deletes_by_retention:
                return deleted
            if self.config.retention_bytes >= 0:
                excess = [self.size_in_bytes - self.config.retention_bytes]

                def over_size(segment: LogSegment, upper: int) -> bool:
                    if excess[0] - segment.size >= 0:
                        excess[0] -= segment.size
                        return True
                    return False

                deleted += self._delete_segments_while(
                    over_size, f"retention.bytes {self.config.retention_bytes}"
                )
            if self.config.retention_ms >= 0:
                deleted += self._delete_segments_while(
                    lambda segment, upper: (
                        now - segment.largest_timestamp() > self.config.retention_ms
                    ),
                    f"retention.ms {self.config.retention_ms}",
                )
            return deleted

    def _delete_segments_while(
        self, predicate: Callable[[LogSegment, int], bool], reason: str
    ) -> int:
        doomed: list[LogSegment] = []
        segments = list(self._segments.values())
        for i, segment in enumerate(segments):
            upper = segments[i + 1].base_offset if i + 1 < len(segments) else self._log_end_offset
            if self._high_watermark < upper or (i + 1 == len(segments) and segment.size == 0):
                break
            if not predicate(segment, upper):
                break
            doomed.append(segment)
        if not doomed:
            return 0
        self._cancel_pending_swap(doomed[-1].base_offset)
        if len(doomed) == len(segments):
            self._roll(self._log_end_offset)
        for segment in doomed:
            log.info("%s: deleting segment %s (%s)", self.name, segment.log_path, reason)
            self._active = None
            del self._segments[segment.base_offset]
            try:
                segment.delete()
            except OSError as exc:
                raise KafkaStorageError(
                    f"{self.name}: deleting {segment.log_path} failed: {exc}"
                ) from exc
        first_base = self._segments.peekitem(0)[0]
        if first_base > self._log_start_offset:
            self._set_log_start_offset(first_base)
        self._bound_cache = None
        if self._persist_standalone_state is not None:
            self._persist_standalone_state(self, False)
        return len(doomed)
