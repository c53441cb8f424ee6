"""The controller's view of the Raft metadata log: how it writes, and what it hears back.

Writing: the active controller hands each batch of records to `MetadataLog.prepare_append`,
which assigns their offsets at once (Raft's accumulator: `RaftNode.propose`) and returns the
last one; the records reach the log later. The shell adapts a `RaftNode` to this protocol,
encoding records with `replog.quorum.metadata.record_codec`.

Hearing: the shell turns Raft's `to_apply` items into controller calls:
`CommittedBatch` -> `CommittedRecords` (records decoded; a control batch has none;
`replog.quorum.metadata.log_batches`, which the broker's metadata loader reads too) ->
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
from typing import Protocol

from replog.quorum.metadata.records import MetadataRecord


class MetadataLog(Protocol):
    def prepare_append(self, quorum_epoch: int, records: Sequence[MetadataRecord]) -> int:
        """Assign offsets to `records` (one batch) and return the last one."""
        ...

    def resign(self, quorum_epoch: int) -> None:
        """Give up leadership of `quorum_epoch`, if this node still holds it."""
        ...
