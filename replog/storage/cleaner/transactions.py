"""What a cleaning pass knows of transactions while it reads a log in offset order (Kafka's
`CleanedTransactionMetadata`).

Rules:
- An aborted transaction (the transaction index's entry, `aborted_transactions`, which the
  cleaner collects from the segments' `.txnindex` over the range it rewrites) becomes ongoing
  once the pass reaches its first offset. A transactional data batch of a producer with an
  ongoing aborted transaction is discarded; one of any other producer marks that producer's
  transaction as committed data seen.
- An ABORT marker is discarded unless the pass saw batches of the transaction it ends (they
  are removed in this pass, and the marker must outlive them); a COMMIT marker is discarded
  when the pass saw no data batch of its transaction. An empty control batch (already
  cleaned) may always go. "Discardable" markers still go only after their delete horizon
  (`batch_filter`).
- Pure: decisions from the batches given, in offset order.
"""

from __future__ import annotations

from collections.abc import Iterable

from replog.record.control_record import CONTROL_ABORT, CONTROL_COMMIT
from replog.record.header import BatchHeader
from replog.storage.aborted_transactions import AbortedTransaction

__all__ = ["CleanedTransactions"]


class CleanedTransactions:
    """The transaction state of one pass over a log, fed its batches in offset order."""

    __slots__ = ("_aborted", "_committed", "_next_aborted", "_ongoing_aborted")

    def __init__(self, aborted: Iterable[AbortedTransaction] = ()) -> None:
        self._aborted = sorted(aborted, key=lambda txn: txn.first_offset)
        self._next_aborted = 0
        # producer id -> whether a batch of its aborted transaction was seen
        self._ongoing_aborted: dict[int, bool] = {}
        self._committed: set[int] = set()

    def _consume_aborted_up_to(self, offset: int) -> None:
        aborted = self._aborted
        while (
            self._next_aborted < len(aborted) and aborted[self._next_aborted].first_offset <= offset
        ):
            self._ongoing_aborted[aborted[self._next_aborted].producer_id] = False
            self._next_aborted += 1

    def on_batch_read(self, header: BatchHeader) -> bool:
        """A data batch: whether it belongs to an aborted transaction (discard it)."""
        self._consume_aborted_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        if header.producer_id in self._ongoing_aborted:
            self._ongoing_aborted[header.producer_id] = True
            return True
        self._committed.add(header.producer_id)
        return False

    def on_control_batch_read(self, header: BatchHeader, kind: int | None) -> bool:
        """A control batch whose first record is of type `kind` (None: unknown): whether it
        may be discarded (an unknown marker never is)."""
        self._consume_aborted_up_to(header.last_offset)
        if header.records_count == 0:
            return True
        producer_id = header.producer_id
        if kind == CONTROL_ABORT:
            saw_data = self._ongoing_aborted.pop(producer_id, False)
            return not saw_data
        if kind == CONTROL_COMMIT:
            if producer_id in self._committed:
                self._committed.discard(producer_id)
                return False
            return True
        return False
