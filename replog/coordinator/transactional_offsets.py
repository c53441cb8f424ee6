"""Offsets committed inside a transaction (TxnOffsetCommit), held back until the transaction
ends: staged per producer id when their records are in `__consumer_offsets`, applied on the
COMMIT marker, dropped on the ABORT marker (Kafka's group coordinator,
`OffsetMetadataManager.replayEndTransactionMarker`).

Rules:
- A staged offset of a key replaces the same producer's earlier staged offset of that key.
- On COMMIT each staged offset is applied as a commit made at its own record's log offset, so
  the cache keeps whichever of it and a plain commit of the key was written later
  (`OffsetsCache.replay` ignores an older record), whatever their order of application.
- On ABORT they are dropped; a marker of a producer with nothing staged changes nothing.
- `pending(group, topic, partition)`: whether a transaction holds an offset of that key, for
  OffsetFetch with require_stable (UNSTABLE_OFFSET_COMMIT, retriable).
Pure: the shell feeds records and markers in log order.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from replog.coordinator.offsets_records import OffsetCommitKey, OffsetCommitValue

__all__ = ["PendingTransactionalOffsets", "StagedOffset"]


@dataclass(frozen=True, slots=True)
class StagedOffset:
    key: OffsetCommitKey
    value: OffsetCommitValue
    record_offset: int


class PendingTransactionalOffsets:
    """The staged offsets of one `__consumer_offsets` partition (module Rules)."""

    def __init__(self) -> None:
        self._by_producer: dict[int, dict[OffsetCommitKey, StagedOffset]] = {}
        self._keys: Counter[OffsetCommitKey] = Counter()  # how many producers stage each key

    def stage(
        self, producer_id: int, key: OffsetCommitKey, value: OffsetCommitValue, record_offset: int
    ) -> None:
        staged = self._by_producer.setdefault(producer_id, {})
        if key not in staged:
            self._keys[key] += 1
        staged[key] = StagedOffset(key, value, record_offset)

    def end(self, producer_id: int, commit: bool) -> list[StagedOffset]:
        """The producer's transaction ended: the offsets to apply (none on abort)."""
        staged = self._by_producer.pop(producer_id, {})
        for key in staged:
            self._keys[key] -= 1
            if not self._keys[key]:
                del self._keys[key]
        return sorted(staged.values(), key=lambda s: s.record_offset) if commit else []

    def pending(self, group: str, topic: str, partition: int) -> bool:
        return OffsetCommitKey(group, topic, partition) in self._keys

    def producers(self) -> list[int]:
        return sorted(self._by_producer)
