"""The log cleaner's swap of cleaned segments into a log (`replace_with_cleaned`), in
`segment_swap`'s steps (docs/storage.md, "The log cleaner").

Rules: under the log's lock only renames and the segment map change; the directory's syncs and
the removal of the replaced files run without it. A swap decided but not completed is pending
(`_pending_swap`) between its two locked steps, and any truncation or deletion of the segments
it replaces cancels it (`_cancel_pending_swap`, called with the lock held): a pass is never
applied to segments other than those it read.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from replog.errors import CorruptIndexError, KafkaStorageError
from replog.storage.aborted_transactions import AbortedTransaction
from replog.storage.fs import FileSystem
from replog.storage.log_state import LogState
from replog.storage.segment import LogSegment
from replog.storage.segment_swap import (
    cancel_swaps,
    complete_swap,
    discard_cleaned,
    finish_swap,
    mark_swap,
)

log = logging.getLogger("replog.storage")


class LogCleanedSwap(LogState):
    """The cleaner's swap of a `Log` (log_state.py says why its parts share one state)."""

    @property
    def file_system(self) -> FileSystem:
        return self._fs

    @property
    def truncation_count(self) -> int:
        """How many truncations the log has had since it was opened: a cleaner compares it
        before and after a pass (`replace_with_cleaned`)."""
        return self._truncations

    def replace_with_cleaned(
        self, groups: Sequence[tuple[list[LogSegment], str]], *, truncation_count: int
    ) -> list[LogSegment] | None:
        """Swap each group's synced cleaned segment, whose log file is its `str`
        (`segment_swap.cleaned_paths` of its first replaced base) with its synced indexes
        beside it, in for its replaced segments, consecutive non-active segments of this log
        (the groups disjoint, in offset order), all in `segment_swap`'s steps at once; returns
        the new segments. Under the log's lock only renames and the segment map change; the
        directory's two syncs (one each for all the groups) and the removal of the replaced
        files run without it. When the log changed since the cleaner read them
        (`truncation_count` is no longer the log's, a group's segments are no longer
        consecutive non-active segments, or a truncation or a deletion cancelled the swap
        while the directory synced), no group is swapped, every group's cleaned files are
        removed and the answer is None: a pass is never applied to segments other than those
        it read."""
        if not groups:
            return []
        cleaned = tuple(path for _, path in groups)
        directory = os.path.dirname(cleaned[0])
        with self._lock:
            if (
                self._closed
                or truncation_count != self._truncations
                or not all(self._still_consecutive(replaced) for replaced, _ in groups)
            ):
                for path in cleaned:
                    discard_cleaned(self._fs, path)
                return None
            try:
                for path in cleaned:
                    mark_swap(self._fs, path)
            except OSError as exc:
                raise KafkaStorageError(
                    f"{self.name}: swapping in the cleaned segments {list(cleaned)} failed: {exc}"
                ) from exc
            self._pending_swap = (cleaned, groups[0][0][0].base_offset)
        try:
            self._fs.fsync_dir(directory)  # the decisions durable (segment_swap's Rules)
        except OSError as exc:
            raise KafkaStorageError(
                f"{self.name}: syncing {directory} to swap in {list(cleaned)} failed: {exc}"
            ) from exc
        with self._lock:
            if self._pending_swap is None or self._pending_swap[0] != cleaned:
                return None  # cancelled (`_cancel_pending_swap`)
            if self._closed:
                self._pending_swap = None
                return None  # its `.swap` files stay: opening completes it (nothing changed)
            if truncation_count != self._truncations or not all(
                self._still_consecutive(replaced) for replaced, _ in groups
            ):
                self._cancel_pending_swap()  # every change cancels it first; never complete it
                return None
            self._pending_swap = None
            self._active = None
            self._bound_cache = None
            swapped: list[LogSegment] = []
            retired: list[str] = []
            try:
                for replaced, path in groups:
                    base = replaced[0].base_offset
                    carried = self._aborted_transactions_of(replaced)
                    retired += complete_swap(self._fs, path, replaced)
                    for segment in replaced:
                        del self._segments[segment.base_offset]
                    segment = LogSegment(
                        self.directory, base, self.config, self._fs, self._clock(), create=False
                    )
                    self._segments[base] = segment
                    # Kafka's cleaner keeps the entry of every ABORT marker it keeps.
                    for entry in carried:
                        found = segment.translate_offset(entry.last_offset)
                        if found is not None and found[1].base_offset == entry.last_offset:
                            segment.txn_index.append(entry)
                    swapped.append(segment)
            except OSError as exc:
                raise KafkaStorageError(
                    f"{self.name}: swapping in the cleaned segment {path} failed: {exc}"
                ) from exc
        try:
            finish_swap(self._fs, directory, retired)
            for segment in swapped:  # not under the lock: a sealed segment's, written once
                segment.flush_txn_index()
        except OSError as exc:
            raise KafkaStorageError(
                f"{self.name}: removing the segments the cleaned {list(cleaned)} replaced "
                f"failed: {exc}"
            ) from exc
        return swapped

    def _aborted_transactions_of(self, segments: list[LogSegment]) -> list[AbortedTransaction]:
        """The `.txnindex` entries of `segments`; an unreadable index gives none (its
        transactions' data went with this pass or an earlier one: only a later pass's
        knowledge of them is lost)."""
        entries: list[AbortedTransaction] = []
        for segment in segments:
            try:
                entries += segment.txn_index.entries()
            except (OSError, CorruptIndexError) as exc:
                log.warning(
                    "%s: aborted transactions not carried into the cleaned segment: %s",
                    self.name,
                    exc,
                )
        return entries

    def _cancel_pending_swap(self, highest_changed: int | None = None) -> None:
        """Cancel a cleaner's swap decided but not completed (`replace_with_cleaned`) before
        a truncation (`highest_changed` None) or a deletion of the segments up to the one at
        `highest_changed` changes what it replaces: a crash after that change must not
        complete the swap (`segment_swap`'s Rules). Called under the log's lock."""
        pending = self._pending_swap
        if pending is None or (highest_changed is not None and highest_changed < pending[1]):
            return
        cleaned = list(pending[0])
        self._pending_swap = None
        log.info("%s: cancelling the swap of the cleaned %s", self.name, cleaned)
        try:
            cancel_swaps(self._fs, cleaned)
        except OSError as exc:
            raise KafkaStorageError(
                f"{self.name}: cancelling the swap of the cleaned {cleaned} failed: {exc}"
            ) from exc

    def _still_consecutive(self, replaced: list[LogSegment]) -> bool:
        """Whether `replaced` are still, in order, consecutive non-active segments of the log."""
        if not replaced:
            return False
        bases = list(self._segments.irange(replaced[0].base_offset, replaced[-1].base_offset))
        if len(bases) != len(replaced) or bases[-1] == self._segments.peekitem(-1)[0]:
            return False
        return all(self._segments.get(segment.base_offset) is segment for segment in replaced)
