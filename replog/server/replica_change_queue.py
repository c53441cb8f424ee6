"""The local changes a broker has yet to apply to its replicas, in the order it must apply them.

Rules:
- Each partition (topic name, partition id) has its own sequence of changes, applied strictly
  in arrival order; different partitions are independent, so they are taken round by round,
  the first waiting change of each partition per round.
- A leader or follower change overtaken, before it was taken, by another leader or follower
  change of the same topic id is dropped: the later one names the newer registration, and
  roles are declarative. Deletes are never merged: a delete of an older topic id stays ahead
  of a change for a new topic id of the same name (the old log must go first), and a delete
  after a change keeps that change (whatever replica it replaces goes with it).
- A partition whose change is being carried out off the event loop (its log is being created)
  is held: none of its later changes is taken until it is released, so they apply in order.
- A round may take its changes one at a time (`taking`) and stop early, when its time is up:
  a deletion's rename is file work on the loop, 4-20 ms each on a busy file system.

Pure: no I/O, no clock; `ReplicaManager` drives it (docs/storage.md, "Creating many replicas").
"""

from __future__ import annotations

from collections import deque
from collections.abc import Generator
from typing import NamedTuple

from quorum.metadata.local_changes import DELETE, FOLLOWER, LEADER, LocalChanges, LocalPartition
from replog.common import TopicPartitionKey

__all__ = ["DELETE", "FOLLOWER", "LEADER", "ReplicaChange", "ReplicaChangeQueue"]


class ReplicaChange(NamedTuple):
    """One local change: `kind` is DELETE, LEADER or FOLLOWER."""

    kind: str
    local: LocalPartition

    @property
    def key(self) -> TopicPartitionKey:
        return (self.local.topic_name, self.local.partition_id)


class ReplicaChangeQueue:
    """Per-partition sequences of changes not yet applied (module docstring)."""

    __slots__ = ("_count", "_held", "_waiting")

    def __init__(self) -> None:
        self._waiting: dict[TopicPartitionKey, deque[ReplicaChange]] = {}
        self._held: set[TopicPartitionKey] = set()
        # Kept as changes come and go: a metrics scrape reads it from another thread, often,
        # and walking 10,000 partitions' queues there raced with the loop changing them.
        self._count = 0

    def __len__(self) -> int:
        """How many changes wait (held partitions' changes under way not counted)."""
        return self._count

    @property
    def idle(self) -> bool:
        """Nothing waits and nothing is under way."""
        return not self._waiting and not self._held

    def add(self, changes: LocalChanges) -> None:
        """Queue a delta's changes: deletes first, then leaders, then followers."""
        for kind, locals_ in (
            (DELETE, changes.deletes),
            (LEADER, changes.leaders),
            (FOLLOWER, changes.followers),
        ):
            for local in locals_:
                self._add(ReplicaChange(kind, local))

    def _add(self, change: ReplicaChange) -> None:
        entries = self._waiting.setdefault(change.key, deque())
        if change.kind != DELETE:
            topic_id = change.local.topic_id
            while entries and entries[-1].kind != DELETE and entries[-1].local.topic_id == topic_id:
                entries.pop()
                self._count -= 1
        entries.append(change)
        self._count += 1

    def take(self, limit: int) -> list[ReplicaChange]:
        """Up to `limit` changes: the first waiting change of each partition not held, in the
        order partitions first got a change."""
        # Visits only the partitions it takes and the held ones before them, never the whole
        # queue: a broker creating 100,000 replicas takes 400 rounds of 250 from it.
        return list(self.taking(limit))

    def taking(self, limit: int) -> Generator[ReplicaChange, None, None]:
        """`take`, one change at a time: the caller applies each before the next is taken and
        may stop early (`close()` the generator; what it did not take stays queued, in order).
        Nothing may queue changes while it runs."""
        emptied: list[TopicPartitionKey] = []
        taken = 0
        try:
            for key, entries in self._waiting.items():
                if taken >= limit:
                    break
                if key in self._held:
                    continue
                change = entries.popleft()
                taken += 1
                self._count -= 1
                if not entries:
                    emptied.append(key)
                yield change
        finally:
            for key in emptied:
                del self._waiting[key]

    def hold(self, key: TopicPartitionKey) -> None:
        """`key`'s taken change is under way: take none of its later ones until `release`."""
        self._held.add(key)

    def release(self, key: TopicPartitionKey) -> None:
        self._held.discard(key)

    def is_held(self, key: TopicPartitionKey) -> bool:
        return key in self._held
