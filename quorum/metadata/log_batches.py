"""What the Raft metadata log hands its readers (the controller, a broker's metadata loader):
a committed batch's records and a snapshot's records, decoded.

Offsets here are inclusive (the offset of a record), unlike Raft's exclusive end offsets.
"""

from __future__ import annotations

from dataclasses import dataclass

from replog.quorum.metadata.records import MetadataRecord


@dataclass(frozen=True, slots=True)
class CommittedRecords:
    """One committed batch: `records` at offsets base_offset.. (none for a control batch)."""

    base_offset: int
    last_offset: int
    quorum_epoch: int
    records: tuple[MetadataRecord, ...]

    def __post_init__(self) -> None:
        if self.last_offset < self.base_offset:
            raise ValueError(f"batch {self.base_offset}..{self.last_offset} ends before it starts")
        if self.records and len(self.records) != self.last_offset - self.base_offset + 1:
            raise ValueError(
                f"batch {self.base_offset}..{self.last_offset} spans "
                f"{self.last_offset - self.base_offset + 1} offsets but holds "
                f"{len(self.records)} records"
            )


@dataclass(frozen=True, slots=True)
class SnapshotRecords:
    """A Raft snapshot: the state after every record up to `last_contained_offset`."""

    last_contained_offset: int
    quorum_epoch: int
    records: tuple[MetadataRecord, ...]
