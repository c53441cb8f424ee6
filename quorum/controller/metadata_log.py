"""The controller's view of the Raft metadata log: how it writes, and what it hears back.

Writing: the active controller hands each batch of records to `MetadataLog.prepare_append`,
which assigns their offsets at once (Raft's accumulator: `RaftNode.propose`) and returns the
last one; the records reach the log later. The shell adapts a `RaftNode` to this protocol,
encoding records with `quorum.metadata.record_codec`.

Hearing: the shell turns Raft's `to_apply` items into controller calls:
`CommittedBatch` -> `CommittedRecords` (records decoded; a control batch has none) ->
`QuorumController.handle_commit`; `LoadSnapshot` -> `SnapshotRecords` ->
`handle_load_snapshot`; `LeaderChange` -> `handle_leader_change`.

Rules:
- The shell never calls the controller while a Raft `ready()`/`advance()` cycle is open:
  handing a Raft event to the controller may call `prepare_append` or `resign` (a new leader
  writes its bootstrap records; a confused one resigns), which Raft forbids inside the cycle.
  Queue the `to_apply` items and hand them over after `advance`, as Kafka re-queues Raft
  callbacks onto the controller thread.
- `prepare_append(quorum_epoch, records)` raises `NotControllerError` when this node is not
  the Raft leader in `quorum_epoch` (the shell translates Raft's NOT_LEADER_OR_FOLLOWER); any
  other error means nothing was appended.
- `resign(quorum_epoch)` gives up Raft leadership of that epoch, if still held: the
  controller renounces after an unexpected failure, so another node takes over.
- Committed batches arrive in offset order, without gaps, each exactly once.
- Offsets here are inclusive (the offset of a record), unlike Raft's exclusive end offsets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from quorum.metadata.records import MetadataRecord


class MetadataLog(Protocol):
    def prepare_append(self, quorum_epoch: int, records: Sequence[MetadataRecord]) -> int:
        """Assign offsets to `records` (one batch) and return the last one."""
        ...

    def resign(self, quorum_epoch: int) -> None:
        """Give up leadership of `quorum_epoch`, if this node still holds it."""
        ...


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
