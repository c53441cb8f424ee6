"""The committed offsets of the groups kept by one `__consumer_offsets` partition, in memory,
and their replay from the partition's log.

Rules:
- The log is compacted by key at read time: replaying it from the log start to its end leaves
  the latest record of each key (group, topic, partition); a tombstone (null value) deletes
  the key. Every entry remembers the log offset of the record that set it, and a record
  older than that changes nothing, so a commit acknowledged out of order (two commits of the
  same partition racing through acks=all) cannot undo a later one.
- A replayed tombstone leaves a mark (its log offset) so that an older commit of the key
  applied after it changes nothing. `loaded()` drops the marks when a load has replayed the log
  to its end: every record applied afterwards (this leader's commits) is newer than the whole
  log, so none is needed any more, and a log holding many tombstones (expired or deleted
  topics' offsets) would otherwise keep one per key in memory until the key commits again.
- `remove` and `remove_topics` take entries out (expired offsets, a deleted topic's): the
  removed keys come back for the shell to append tombstones of. They leave no mark behind
  (unlike a replayed tombstone), so a removed key costs no memory: the shell never replays an
  older record of a removed key afterwards (a commit waiting for acks=all is never expired,
  and one acknowledged after its topic was deleted is not put back). An index by topic (how many
  entries each group has of it) lets `remove_topics` scan only the entries of the groups that
  committed a deleted topic; `remove` scans every entry.
- Expiry (KIP-211, for a group without members, which every replog group is): an entry
  expires once the wall clock is `offsets.retention.minutes` or more past its commit
  timestamp (`expired`). Kafka uses a value's own expire timestamp (value version 1) instead;
  replog reads that field but expires by the commit timestamp for every version.
- Replay skips what is not an offset commit: control batches, records without a key, group
  membership records (key version 2; handed to `on_group` when given: the classic groups'
  replay; key versions 3 to 8, handed to `on_consumer_group`: the consumer-protocol groups'
  replay), and records that do not decode (counted, the first
  reasons kept, so the shell can log them: one corrupt record must not take every group of the
  partition offline).
- Given a `PendingTransactionalOffsets`, the offset commits of a transactional batch are staged
  under its producer id and applied (as of their own record offsets) or dropped at its
  end-transaction marker (`transactional_offsets`); without one, they replay as plain commits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from replog.common import TopicPartitionKey
from replog.coordinator import consumer_group_records as cgr
from replog.coordinator.group_records import GroupMetadataValue, decode_group_value
from replog.coordinator.offsets_records import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_key,
    decode_value,
)
from replog.coordinator.transactional_offsets import PendingTransactionalOffsets
from replog.errors import CorruptRecordError
from replog.record.batch import iter_batches
from replog.record.control_record import decode_marker
from replog.record.record import Record

REASONS_KEPT = 5


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    value: OffsetCommitValue
    record_offset: int  # the log offset of the record that committed it


class OffsetsCache:
    """Group -> (topic, partition) -> its latest committed offset (module docstring)."""

    def __init__(self) -> None:
        self._groups: dict[str, dict[TopicPartitionKey, CommittedOffset]] = {}
        # Topic -> group -> how many partitions of the topic the group has an entry of.
        self._topics: dict[str, dict[str, int]] = {}
        # Log offset of the latest tombstone replayed per key: a tombstone of a key that is not
        # in the cache must still beat an older commit replayed after it (records out of order).
        self._deleted: dict[tuple[str, str, int], int] = {}

    def __len__(self) -> int:
        """How many committed offsets the cache holds."""
        return sum(len(offsets) for offsets in self._groups.values())

    def groups(self) -> list[str]:
        return sorted(self._groups)

    def has(self, key: OffsetCommitKey) -> bool:
        """Whether `key` has a committed offset here."""
        offsets = self._groups.get(key.group)
        return offsets is not None and (key.topic, key.partition) in offsets

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
                self._drop(key.group, offsets, tp)
            return True
        if deleted_at is not None:
            del self._deleted[deleted_key]
        if offsets is None:
            offsets = self._groups[key.group] = {}
        if current is None:
            by_group = self._topics.get(key.topic)
            if by_group is None:
                by_group = self._topics[key.topic] = {}
            by_group[key.group] = by_group.get(key.group, 0) + 1
        offsets[tp] = CommittedOffset(value, offset)
        return True

    def loaded(self) -> None:
        """The log was replayed to its end: drop the tombstones' marks (module docstring)."""
        self._deleted.clear()

    def _drop(
        self, group: str, offsets: dict[TopicPartitionKey, CommittedOffset], tp: TopicPartitionKey
    ) -> None:
        """Delete the entry of `tp` from `group`'s `offsets` and from the index."""
        del offsets[tp]
        if not offsets:
            del self._groups[group]
        by_group = self._topics[tp[0]]
        left = by_group[group] - 1
        if left:
            by_group[group] = left
        else:
            del by_group[group]
            if not by_group:
                del self._topics[tp[0]]

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
        """Remove every entry `predicate` holds for (module docstring); the removed keys, in
        the cache's order (a scan of every entry)."""
        removed: list[OffsetCommitKey] = []
        for group, offsets in self._groups.items():
            for (topic, partition), entry in offsets.items():
                key = OffsetCommitKey(group, topic, partition)
                if predicate(key, entry):
                    removed.append(key)
        self._remove_keys(removed)
        return removed

    def remove_topics(self, topics: Iterable[str]) -> list[OffsetCommitKey]:
        """Remove every entry of `topics` (module docstring); the removed keys, topic by topic
        in name order. Scans only the entries of the groups with an entry of one of them."""
        removed: list[OffsetCommitKey] = []
        for topic in sorted(topics):
            for group in self._topics.get(topic, {}):
                removed.extend(
                    OffsetCommitKey(group, topic, tp[1])
                    for tp in self._groups[group]
                    if tp[0] == topic
                )
        self._remove_keys(removed)
        return removed

    def _remove_keys(self, keys: Iterable[OffsetCommitKey]) -> None:
        for key in keys:
            self._drop(key.group, self._groups[key.group], (key.topic, key.partition))


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


GroupReplay = Callable[[GroupMetadataKey, GroupMetadataValue | None], None]
ConsumerGroupReplay = Callable[[cgr.ConsumerGroupKey, cgr.ConsumerGroupValue | None], None]


def replay_batches(
    cache: OffsetsCache,
    data: bytes,
    stats: ReplayStats,
    where: str,
    on_group: GroupReplay | None = None,
    on_consumer_group: ConsumerGroupReplay | None = None,
    pending: PendingTransactionalOffsets | None = None,
) -> int:
    """Replay whole batches read from the log into `cache` (group records into `on_group`);
    returns the offset after the last batch (the next offset to read). `CorruptRecordError`
    for bytes that are not batches. With `pending`, a transactional batch's offset commits are
    staged under its producer id and applied or dropped at its end-transaction marker."""
    next_offset = -1
    # `__consumer_offsets` is compacted: a cleaned batch holds fewer records than its offsets.
    for batch in iter_batches(data, where=where, sparse=True):
        header = batch.header
        next_offset = header.next_offset
        if batch.is_control:
            if pending is not None:
                _end_transaction(cache, pending, batch.records(), header.producer_id, stats, where)
            continue
        staging = pending if pending is not None and header.is_transactional else None
        for record in batch.records():
            stats.records += 1
            if staging is not None:
                _stage(staging, header.producer_id, record.offset, record.key, record.value, stats)
                continue
            replay_record(
                cache, record.offset, record.key, record.value, stats, on_group, on_consumer_group
            )
    return next_offset


def _stage(
    pending: PendingTransactionalOffsets,
    producer_id: int,
    offset: int,
    key_bytes: bytes | None,
    value_bytes: bytes | None,
    stats: ReplayStats,
) -> None:
    """A transactional offset commit record: staged until its transaction ends."""
    try:
        key = decode_key(key_bytes) if key_bytes is not None else None
        if not isinstance(key, OffsetCommitKey) or value_bytes is None:
            stats.skip(f"offset {offset}: a transactional record that is no offset commit")
            return
        pending.stage(producer_id, key, decode_value(value_bytes), offset)
    except CorruptRecordError as error:
        stats.skip(f"offset {offset}: {error}")


def _end_transaction(
    cache: OffsetsCache,
    pending: PendingTransactionalOffsets,
    records: Iterable[Record],
    producer_id: int,
    stats: ReplayStats,
    where: str,
) -> None:
    """A control batch: its one record is the end-transaction marker (none: already cleaned)."""
    record = next(iter(records), None)
    if record is None:
        return
    try:
        marker = decode_marker(record.key, record.value, f"{where} at {record.offset}")
    except CorruptRecordError as error:
        stats.skip(f"offset {record.offset}: {error}")
        return
    for staged in pending.end(producer_id, commit=not marker.aborted):
        if cache.replay(staged.key, staged.value, staged.record_offset):
            stats.applied += 1


def replay_record(
    cache: OffsetsCache,
    offset: int,
    key_bytes: bytes | None,
    value_bytes: bytes | None,
    stats: ReplayStats,
    on_group: GroupReplay | None = None,
    on_consumer_group: ConsumerGroupReplay | None = None,
) -> None:
    """Replay one `__consumer_offsets` record (module docstring for what is skipped)."""
    if key_bytes is None:
        stats.skip(f"offset {offset}: a record without a key")
        return
    try:
        version = int.from_bytes(key_bytes[:2], "big", signed=True) if len(key_bytes) >= 2 else -1
        if version in cgr.CONSUMER_GROUP_KEY_VERSIONS:
            consumer_key = cgr.decode_consumer_group_key(version, key_bytes)
            if on_consumer_group is None:
                stats.skip(f"offset {offset}: consumer group record of {consumer_key.group!r}")
                return
            on_consumer_group(
                consumer_key,
                None
                if value_bytes is None
                else cgr.decode_consumer_group_value(version, value_bytes),
            )
            stats.applied += 1
            return
        key = decode_key(key_bytes)
        if isinstance(key, GroupMetadataKey):
            if on_group is None:
                stats.skip(f"offset {offset}: group membership record of group {key.group!r}")
            else:
                on_group(key, None if value_bytes is None else decode_group_value(value_bytes))
                stats.applied += 1
            return
        value = None if value_bytes is None else decode_value(value_bytes)
    except CorruptRecordError as error:
        stats.skip(f"offset {offset}: {error}")
        return
    if cache.replay(key, value, offset):
        stats.applied += 1
