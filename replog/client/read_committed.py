"""Which batches of one read_committed fetch answer belong to aborted transactions (Kafka's
`CompletedFetch.abortedProducerIds` / `consumeAbortedTransactionsUpTo`).

A read_committed Fetch answer lists, per partition, the aborted transactions its records
overlap, as (producer id, first offset). The reader walks the answer's batches in offset
order:
- before a batch of a producer id is judged, every aborted transaction whose first offset is
  at or below that batch's last offset becomes ongoing for its producer id;
- a transactional data batch of a producer id with an ongoing aborted transaction is aborted
  data: its records are never returned (the position still moves past them);
- the ABORT control batch of a producer id closes its ongoing aborted transaction, so that
  producer's later transactions in the same answer are read again;
- batches without a producer id (-1) are never aborted data and consume no entry.
Control batches themselves are never returned, whatever the isolation level (callers skip
them). The state lives for one answer only: the broker names every aborted transaction a
fetch overlaps, so a transaction a fetch boundary splits is named again by the next fetch.
Pure: decisions from the entries and the batch headers given.
"""

from __future__ import annotations

from collections.abc import Iterable

from replog.errors import ReplogError
from replog.record.batch import RecordBatch
from replog.record.control_record import CONTROL_ABORT, marker_type
from replog.record.header import BatchHeader

__all__ = ["AbortedTransactions", "control_batch_type"]


class AbortedTransactions:
    """The aborted transactions of one fetch answer, consumed in the answer's offset order."""

    __slots__ = ("_entries", "_next", "_ongoing")

    def __init__(self, entries: Iterable[tuple[int, int]]) -> None:
        # (first offset, producer id), oldest first: Kafka's priority queue by first offset.
        self._entries = sorted((first, pid) for pid, first in entries)
        self._next = 0
        self._ongoing: set[int] = set()

    def is_aborted(self, header: BatchHeader, control_type: int | None = None) -> bool:
        """Whether `header`'s batch is data of an aborted transaction (its records hidden).
        `control_type` is a control batch's marker type (`control_batch_type`); an ABORT
        marker ends its producer's ongoing aborted transaction."""
        producer_id = header.producer_id
        if producer_id < 0:
            return False
        last_offset = header.base_offset + header.last_offset_delta
        entries = self._entries
        while self._next < len(entries) and entries[self._next][0] <= last_offset:
            self._ongoing.add(entries[self._next][1])
            self._next += 1
        if header.is_control:
            if control_type == CONTROL_ABORT:
                self._ongoing.discard(producer_id)
            return False
        return header.is_transactional and producer_id in self._ongoing

    def hides(
        self, data: bytes | memoryview, batch_position: int, header: BatchHeader, where: str
    ) -> bool:
        """`is_aborted` for the checked batch at `batch_position` of an answer's `data`,
        reading a control batch's marker type when it has a producer id."""
        if header.producer_id < 0:
            return False
        kind = (
            control_batch_type(data, batch_position, header, where) if header.is_control else None
        )
        return self.is_aborted(header, kind)


def control_batch_type(
    data: bytes | memoryview, batch_position: int, header: BatchHeader, where: str
) -> int | None:
    """The marker type of a checked control batch (its first record's key), or None when it
    holds no readable marker (an empty batch the log cleaner left, a record that does not
    parse: read leniently, as Kafka's cleaner reads markers)."""
    # Only this batch's bytes are copied out of a view of the answer: markers are tiny.
    raw = bytes(data[batch_position : batch_position + header.size_in_bytes])
    try:
        for record in RecordBatch(header, raw, 0, where).records():
            return marker_type(record.key)
    except ReplogError:  # a damaged control record ends nothing: no marker
        return None
    return None
