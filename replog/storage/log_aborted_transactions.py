"""A log's aborted transactions: the `.txnindex` entries of its segments, written as ABORT
markers are appended, collected for read_committed fetches, rebuilt after recovery
(docs/storage.md, "Transactions in the log").

Rules: every method holds the log's lock; an entry goes to the index of the segment holding its
marker; a failed read or write of an index is a KafkaStorageError naming the log.
"""

from __future__ import annotations

from collections.abc import Iterable

from replog.errors import KafkaStorageError
from replog.storage.aborted_transactions import AbortedTransaction
from replog.storage.log_state import LogState


class LogAbortedTransactions(LogState):
    """The aborted-transaction index of a `Log` (log_state.py says why its parts share one
    state)."""

    def append_aborted_transactions(self, entries: Iterable[AbortedTransaction]) -> None:
        """Add ABORT markers' entries, in marker order, to the `.txnindex` of the segments
        holding the markers (`transaction_index`)."""
        with self._lock:
            self._check_open()
            segments = self._segments
            try:
                for entry in entries:
                    base = next(segments.irange(maximum=entry.last_offset, reverse=True))
                    segments[base].txn_index.append(entry)
            except OSError as exc:
                raise KafkaStorageError(
                    f"{self.name}: aborted transaction index not written: {exc}"
                ) from exc

    def collect_aborted_transactions(
        self, fetch_offset: int, upper_bound_offset: int
    ) -> list[AbortedTransaction]:
        """The aborted transactions a read_committed fetch of [fetch_offset,
        upper_bound_offset) must be told of: the segments' indexes from the one holding
        `fetch_offset` on, until one says no later one can hold more (Kafka's
        `collectAbortedTransactions`)."""
        with self._lock:
            self._check_open()
            segments = self._segments
            first = next(segments.irange(maximum=fetch_offset, reverse=True), None)
            found: list[AbortedTransaction] = []
            try:
                for base in segments.irange(minimum=first):
                    result = segments[base].txn_index.collect(fetch_offset, upper_bound_offset)
                    found.extend(result.found)
                    if result.complete:
                        break
            except OSError as exc:
                raise KafkaStorageError(
                    f"{self.name}: aborted transaction index not read: {exc}"
                ) from exc
            return found

    def segment_base_of(self, offset: int) -> int:
        """The base offset of the segment holding `offset` (the first segment's, below it)."""
        with self._lock:
            segments = self._segments
            return next(segments.irange(maximum=offset, reverse=True), segments.peekitem(0)[0])

    def rebuild_aborted_transactions(
        self, from_offset: int, entries: Iterable[AbortedTransaction]
    ) -> None:
        """Replace the `.txnindex` of every segment from the one holding `from_offset` with
        `entries` (those of its markers, from a replay of the log: recovery)."""
        with self._lock:
            self._check_open()
            segments = self._segments
            first = next(segments.irange(maximum=from_offset, reverse=True), None)
            for base in segments.irange(minimum=first):
                segments[base].txn_index.reset()
            self.append_aborted_transactions(
                entry for entry in entries if first is None or entry.last_offset >= first
            )
            self.txn_index_rebuild_from = None
