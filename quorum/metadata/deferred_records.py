"""Metadata records made when read: a state taken in one event-loop turn as references, its
partition records made a batch at a time by whoever reads them.

Why: a controller's snapshot at a clean stop takes its state between two whole items, in one
turn, and encodes it a batch a turn (`snapshot_before_stop`); making the 10,000 partition
records of a 10,000-partition state in that one turn held the loop 56-83 ms of CPU
(docs/benchmarks.md, "The stalls: waits for a core"). Taken as (topic id, partition id,
registration) references it costs a tuple a partition, and each record is made with the batch
that encodes it.

Rules:
- A registration is immutable (a frozen dataclass of tuples), so the record made later is the
  one `PartitionRegistration.to_record` would have made when the state was taken.
- Reading a record makes it anew each time (nothing is kept): read each once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple, overload
from uuid import UUID

from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.quorum.metadata.records import MetadataRecord


class PartitionRecordOf(NamedTuple):
    """The PartitionRecord of `registration`, not made yet."""

    topic_id: UUID
    partition_id: int
    registration: PartitionRegistration

    def record(self) -> MetadataRecord:
        return self.registration.to_record(self.topic_id, self.partition_id)


DeferredItem = MetadataRecord | PartitionRecordOf


def _made(item: DeferredItem) -> MetadataRecord:
    return item.record() if isinstance(item, PartitionRecordOf) else item


class DeferredRecords(Sequence[MetadataRecord]):
    """A sequence of records, some of them made only when read (module Rules)."""

    __slots__ = ("_items",)

    def __init__(self, *parts: Iterable[DeferredItem]) -> None:
        self._items: list[DeferredItem] = []
        for part in parts:
            self._items.extend(part)

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> MetadataRecord: ...

    @overload
    def __getitem__(self, index: slice) -> list[MetadataRecord]: ...

    def __getitem__(self, index: int | slice) -> MetadataRecord | list[MetadataRecord]:
        if isinstance(index, slice):
            return [_made(item) for item in self._items[index]]
        return _made(self._items[index])

    def __iter__(self) -> Iterator[MetadataRecord]:
        return map(_made, self._items)

    def items(self) -> list[DeferredItem]:
        """The records and the references they will be made from, in order."""
        return self._items
