"""The committed offsets of the groups kept by one `__consumer_offsets` partition, in memory,
and their replay from the partition's log.

Rules:
- The log is compacted by key at read time: replaying it from the log start to its end leaves
  the latest record of each key (group, topic, partition); a tombstone (null value) deletes
  the key. Every entry remembers the log offset of the record that set it, and a record
  older than that changes nothing, so a commit acknowledged out of order (two commits of the
  same partition racing through acks=all) cannot undo a later one.
- `remove` takes entries out as tombstones at their own log offsets would (a deleted topic's
  offsets, expired ones): the removed keys come back for the shell to append tombstones of,
  and a record of a removed key at or below the removed entry's offset, replayed later (a
  commit acknowledged late), still changes nothing; a newer one is committed as usual.
- Expiry (KIP-211, for a group without members, which every replog group is): an entry
  expires once the wall clock is `offsets.retention.minutes` or more past its commit
  timestamp (`expired`). Kafka uses a value's own expire timestamp (value version 1) instead;
  replog reads that field but expires by the commit timestamp for every version.
- Replay skips what is not an offset commit: control batches, records without a key, group
  membership records (key version 2), and records that do not decode (counted, the first
  reasons kept, so the shell can log them: one corrupt record must not take every group of the
  partition offline).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from replog.coordinator.offsets_records import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_key,
    decode_value,
)
from replog.errors import CorruptRecordError
from replog.record.batch import iter_batches

TopicPartitionKey = tuple[str, int]
REASONS_KEPT = 5


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    value: OffsetCommitValue
    record_offset: int  # the log offset of the record that committed it


class OffsetsCache:
    """Group -> (topic, partition) -> its latest committed offset (module docstring)."""

    def __init__(self) -> None:
        self._groups: dict[str, dict[TopicPartitionKey, CommittedOffset]] = {}
        # Log offset of the latest tombstone per key: a tombstone of a key that is not in the
        # cache must still beat an older commit replayed after it (records out of order).
        self._deleted: dict[tuple[str, str, int], int] = {}

    def __len__(self) -> int:
        """How many committed offsets the cache holds."""
        return sum(len(offsets) for offsets in self._groups.values())

    def groups(self) -> list[str]:
        return sorted(self._groups)

    def replay(self, key: OffsetCommitKey, value: OffsetCommitValue | None, offset: int) -> bool:
        """Apply the record at log `offset`; False if a later record of the key won already."""
        tp = (key.topic, key.partition)
        deleted_key = (key.group, key.topic, key.partition)
        offsets = self._groups.get(key.group)
        current = offsets.get(tp) if offsets is not None else None
        if current is not None and current.record_offset >= offset:
            return False
        deleted_at = self._deleted.get(deleted_key)
        if deleted_at is not None and deleted_at >= offset:
            return False
        if value is None:
            self._deleted[deleted_key] = offset
            if offsets is not None and current is not None:
                del offsets[tp]
                if not offsets:
                    del self._groups[key.group]
            return True
        self._deleted.pop(deleted_key, None)
        if offsets is None:
            offsets = self._groups[key.group] = {}
        offsets[tp] = CommittedOffset(value, offset)
        return True

    def committed(
        self, group: str, partitions: Iterable[TopicPartitionKey] | None = None
    ) -> dict[TopicPartitionKey, OffsetCommitValue | None]:
        """The group's committed offsets of `partitions` (None: nothing committed there), or of
        every partition it committed when `partitions` is None."""
        offsets = self._groups.get(group, {})
        if partitions is None:
            return {tp: entry.value for tp, entry in sorted(offsets.items())}
        answer: dict[TopicPartitionKey, OffsetCommitValue | None] = {}
        for tp in partitions:
            entry = offsets.get(tp)
            answer[tp] = entry.value if entry is not None else None
        return answer

    def remove(
        self, predicate: Callable[[OffsetCommitKey, CommittedOffset], bool]
    ) -> list[OffsetCommitKey]:
        """Remove every entry `predicate` holds for (module docstring); the removed keys, by
        group, topic and partition."""
        removed: list[OffsetCommitKey] = []
        for group in sorted(self._groups):
            offsets = self._groups[group]
            for tp, entry in sorted(offsets.items()):
                key = OffsetCommitKey(group, tp[0], tp[1])
                if predicate(key, entry):
                    removed.append(key)
                    del offsets[tp]
                    self._deleted[(group, tp[0], tp[1])] = entry.record_offset
            if not offsets:
                del self._groups[group]
        return removed


def expired(entry: CommittedOffset, now_ms: int, retention_ms: int) -> bool:
    """Whether `entry` expired at wall clock `now_ms` (module docstring)."""
    return now_ms - entry.value.commit_timestamp_ms >= retention_ms


@dataclass(slots=True)
class ReplayStats:
    """What a replay did, for the shell's log line."""

    records: int = 0
    applied: int = 0
    skipped: int = 0
    reasons: list[str] = field(default_factory=list)

    def skip(self, reason: str) -> None:
        self.skipped += 1
        if len(self.reasons) < REASONS_KEPT:
            self.reasons.append(reason)


def replay_batches(cache: OffsetsCache, data: bytes, stats: ReplayStats, where: str) -> int:
    """Replay whole batches read from the log into `cache`; returns the offset after the last
    batch (the next offset to read). `CorruptRecordError` for bytes that are not batches."""
    next_offset = -1
    for batch in iter_batches(data, where=where):
        next_offset = batch.header.next_offset
        if batch.is_control:
            continue
        for record in batch.records():
            stats.records += 1
            replay_record(cache, record.offset, record.key, record.value, stats)
    return next_offset


def replay_record(
    cache: OffsetsCache,
    offset: int,
    key_bytes: bytes | None,
    value_bytes: bytes | None,
    stats: ReplayStats,
) -> None:
    """Replay one `__consumer_offsets` record (module docstring for what is skipped)."""
    if key_bytes is None:
        stats.skip(f"offset {offset}: a record without a key")
        return
    try:
        key = decode_key(key_bytes)
        if isinstance(key, GroupMetadataKey):
            stats.skip(f"offset {offset}: group membership record of group {key.group!r}")
            return
        value = None if value_bytes is None else decode_value(value_bytes)
    except CorruptRecordError as error:
        stats.skip(f"offset {offset}: {error}")
        return
    if cache.replay(key, value, offset):
        stats.applied += 1
