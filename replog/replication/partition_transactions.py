"""The transactions of one partition's log: which are open, where the last stable offset (LSO)
is, and what an ABORT marker adds to the aborted transaction index (Kafka's
`ProducerStateManager` ongoing / unreplicated transactions and `lastStableOffset`).

Rules (Kafka's):
- A producer's transaction opens at its first transactional data batch (`first_offset`) and
  closes at its COMMIT or ABORT marker (`CompletedTransaction`, with the marker's offset as
  `last_offset`). A marker with no open transaction (its data already cleaned, or a
  transaction version 2 abort with no partition) completes nothing.
- A closed transaction stays *unreplicated* until the high watermark passes its marker.
- The first unstable offset is the lowest first offset of an open or unreplicated
  transaction; the LSO is min(first unstable offset, high watermark): a read_committed fetch
  reads below it only.
- An aborted transaction's index entry carries the LSO as it stood once the marker was written:
  the first offset of the lowest other open transaction, or the marker's offset + 1.
- After a truncation the state is rebuilt: `reset`, then the log's batches replayed in offset
  order, as a new replica's is.
Pure: no I/O or clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from sortedcontainers import SortedDict

from replog.storage.aborted_transactions import AbortedTransaction

__all__ = ["CompletedTransaction", "PartitionTransactions"]


@dataclass(frozen=True, slots=True)
class CompletedTransaction:
    producer_id: int
    first_offset: int
    last_offset: int  # the marker's
    aborted: bool


# The sorted maps of a partition that has no transaction: one empty map shared by all of them,
# never written (a partition's own map is made at its first transaction). Most partitions
# never see one, and two sorted maps made per replica cost about 3% of a simulated
# cluster's CPU (and 100,000 replicas' worth of objects for the collector to walk).
_NONE: SortedDict = SortedDict()


class PartitionTransactions:
    """Open and unreplicated transactions of one partition (module Rules)."""

    def __init__(self) -> None:
        self._open: SortedDict[int, int] = _NONE  # first offset -> producer id
        self._open_by_producer: dict[int, int] = {}  # producer id -> first offset
        self._unreplicated: SortedDict[int, CompletedTransaction] = _NONE  # by first

    @property
    def idle(self) -> bool:
        """No open or unreplicated transaction: the LSO is the HW."""
        return not self._open and not self._unreplicated

    def open_first_offset(self, producer_id: int) -> int | None:
        return self._open_by_producer.get(producer_id)

    def on_data_batch(self, producer_id: int, base_offset: int, transactional: bool) -> None:
        """A data batch is in the log (leader, follower or rebuild)."""
        if transactional and producer_id not in self._open_by_producer:
            self._open_by_producer[producer_id] = base_offset
            if self._open is _NONE:
                self._open = SortedDict()
            self._open[base_offset] = producer_id

    def on_marker(
        self, producer_id: int, offset: int, aborted: bool
    ) -> tuple[CompletedTransaction | None, AbortedTransaction | None]:
        """A COMMIT or ABORT marker is in the log at `offset`: the transaction it completes
        (None if none was open) and, for an abort, its index entry."""
        first = self._open_by_producer.pop(producer_id, None)
        if first is None:
            return None, None
        del self._open[first]
        completed = CompletedTransaction(producer_id, first, offset, aborted)
        if self._unreplicated is _NONE:
            self._unreplicated = SortedDict()
        self._unreplicated[first] = completed
        if not aborted:
            return completed, None
        lso = self._open.peekitem(0)[0] if self._open else offset + 1
        return completed, AbortedTransaction(producer_id, first, offset, lso)

    def on_high_watermark(self, high_watermark: int) -> None:
        """Closed transactions whose marker is below `high_watermark` are replicated."""
        done = [f for f, t in self._unreplicated.items() if t.last_offset < high_watermark]
        for first in done:
            del self._unreplicated[first]

    def first_unstable_offset(self) -> int | None:
        firsts = [d.peekitem(0)[0] for d in (self._open, self._unreplicated) if d]
        return min(firsts) if firsts else None

    def last_stable_offset(self, high_watermark: int) -> int:
        first = self.first_unstable_offset()
        return high_watermark if first is None else min(first, high_watermark)

    def reset(self) -> None:
        """Forget everything (the log was truncated or replaced: the shell replays what is left)."""
        self._open = _NONE
        self._open_by_producer.clear()
        self._unreplicated = _NONE
