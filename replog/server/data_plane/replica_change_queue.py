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
- A partition whose first waiting change makes this broker its leader may be *hurried*: a
  follower (or a client) already asks for it (the answer is NOT_LEADER_OR_FOLLOWER meanwhile,
  a round trip a second per partition: 425,000 of them from one follower while the active
  controller's node created 100,000 replicas 25 s behind the others). Hurried partitions are
  taken first, in the order hurried, still one change per partition per round; their later
  changes keep their order. Demand, not kind, decides: taking every leadership first would
  leave followers uncreated past `replica.lag.time.max.ms` behind leaders that count them.
- A round may take its changes one at a time (`taking`) and stop early, when its time is up:
  a deletion's rename is file work on the loop, 4-20 ms each on a busy file system.
- A large delta may be queued in steps: `stage_in_steps` builds its per-partition sequences
  apart from the queue, `STAGE_STEP_CHANGES` changes a step, and `add_staged` queues them in
  one step as `add` would have queued the delta then. A restart's first image names every
  replica the broker holds (10,000 at the benchmark's restart): queued by `add` in the one step
  that acts on the image, it held the loop 12-21 ms of CPU on a quiet machine and 40 ms on a
  loaded one (docs/benchmarks.md, "The stalls: waits for a core"); staged, that step only links the
  sequences into the queue, one dict update when no partition of the delta has a change
  waiting (a first image always).

Pure: no I/O, no clock; `ReplicaManager` drives it (docs/storage.md, "Creating many replicas").
"""

from __future__ import annotations

from collections import deque
from collections.abc import Generator, Iterator
from typing import NamedTuple

from replog.common import TopicPartitionKey
from replog.quorum.metadata.local_changes import (
    DELETE,
    FOLLOWER,
    LEADER,
    LocalChanges,
    LocalPartition,
)
from replog.quorum.metadata.steps import Steps

__all__ = [
    "DELETE",
    "FOLLOWER",
    "LEADER",
    "ReplicaChange",
    "ReplicaChangeQueue",
    "StagedChanges",
    "stage_in_steps",
]

# Changes one step of `stage_in_steps` stages: about a millisecond of CPU.
STAGE_STEP_CHANGES = 1000


class ReplicaChange(NamedTuple):
    """One local change: `kind` is DELETE, LEADER or FOLLOWER."""

    kind: str
    local: LocalPartition

    @property
    def key(self) -> TopicPartitionKey:
        return (self.local.topic_name, self.local.partition_id)


Sequences = dict[TopicPartitionKey, deque[ReplicaChange]]


def _in_order(changes: LocalChanges) -> Iterator[ReplicaChange]:
    """A delta's changes in the order they are queued: deletes, then leaders, then followers."""
    for kind, locals_ in (
        (DELETE, changes.deletes),
        (LEADER, changes.leaders),
        (FOLLOWER, changes.followers),
    ):
        for local in locals_:
            yield ReplicaChange(kind, local)


def _append(waiting: Sequences, change: ReplicaChange) -> int:
    """Append `change` to its partition's sequence, dropping the changes it overtakes (module
    Rules); how many more changes wait."""
    entries = waiting.setdefault(change.key, deque())
    dropped = 0
    if change.kind != DELETE:
        topic_id = change.local.topic_id
        while entries and entries[-1].kind != DELETE and entries[-1].local.topic_id == topic_id:
            entries.pop()
            dropped += 1
    entries.append(change)
    return 1 - dropped


class StagedChanges:
    """A delta's changes as per-partition sequences, built apart from the queue
    (`stage_in_steps`) and queued by `ReplicaChangeQueue.add_staged`, once."""

    __slots__ = ("count", "waiting")

    def __init__(self) -> None:
        self.waiting: Sequences = {}
        self.count = 0


def stage_in_steps(changes: LocalChanges, per_step: int | None = None) -> Steps[StagedChanges]:
    """`changes` staged for `add_staged`, `per_step` (`STAGE_STEP_CHANGES`) changes a step.
    Pure: the queue is not touched."""
    limit = STAGE_STEP_CHANGES if per_step is None else per_step
    staged = StagedChanges()
    waiting = staged.waiting
    done = 0
    for change in _in_order(changes):
        staged.count += _append(waiting, change)
        done += 1
        if done >= limit:
            done = 0
            yield
    return staged


class ReplicaChangeQueue:
    """Per-partition sequences of changes not yet applied (module docstring)."""

    __slots__ = ("_count", "_held", "_hurried", "_waiting")

    def __init__(self) -> None:
        self._waiting: dict[TopicPartitionKey, deque[ReplicaChange]] = {}
        self._held: set[TopicPartitionKey] = set()
        self._hurried: dict[TopicPartitionKey, None] = {}  # taken first, in this order
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
        waiting = self._waiting
        for change in _in_order(changes):
            self._count += _append(waiting, change)

    def add_staged(self, staged: StagedChanges) -> None:
        """Queue a delta's changes staged by `stage_in_steps`, as `add` would queue them now
        (module Rules): a partition with no change waiting takes its staged sequence as it
        is, in one dict update when none of them has; the others' changes are appended one by
        one. `staged` is used up."""
        waiting = self._waiting
        if waiting.keys().isdisjoint(staged.waiting):
            waiting.update(staged.waiting)
            self._count += staged.count
        else:
            for key, entries in staged.waiting.items():
                if key not in waiting:
                    waiting[key] = entries
                    self._count += len(entries)
                    continue
                for change in entries:
                    self._count += _append(waiting, change)
        staged.waiting = {}
        staged.count = 0

    def take(self, limit: int) -> list[ReplicaChange]:
        """Up to `limit` changes: the first waiting change of each partition not held, hurried
        partitions first, then in the order partitions first got a change."""
        return list(self.taking(limit))

    def taking(self, limit: int) -> Generator[ReplicaChange, None, None]:
        """`take`, one change at a time: the caller applies each before the next is taken and
        may stop early (`close()` the generator; what it did not take stays queued, in order).
        Nothing may queue changes while it runs."""
        emptied: list[TopicPartitionKey] = []
        taken: set[TopicPartitionKey] = set()
        waiting, held, hurried = self._waiting, self._held, self._hurried
        try:
            for key in list(hurried) if hurried else ():
                if len(taken) >= limit:
                    return
                if key in held:
                    continue  # its change under way is the one hurried
                del hurried[key]
                entries = waiting.get(key)
                if entries is None:
                    continue
                yield self._take_first(key, entries, taken, emptied)
            # Visits only the partitions it takes and the held ones before them, never the
            # whole queue: a broker creating 100,000 replicas takes 400 rounds of 250 from it.
            for key, entries in waiting.items():
                if len(taken) >= limit:
                    break
                if key in held or key in taken:
                    continue
                yield self._take_first(key, entries, taken, emptied)
        finally:
            for key in emptied:
                del waiting[key]

    def _take_first(
        self,
        key: TopicPartitionKey,
        entries: deque[ReplicaChange],
        taken: set[TopicPartitionKey],
        emptied: list[TopicPartitionKey],
    ) -> ReplicaChange:
        taken.add(key)
        self._count -= 1
        if len(entries) == 1:
            emptied.append(key)
        return entries.popleft()

    def hurry(self, key: TopicPartitionKey) -> bool:
        """A follower fetches `key` from this broker: if its first waiting change makes this
        broker the leader, take it before the others (module docstring). Whether it was."""
        entries = self._waiting.get(key)
        if entries is None or entries[0].kind != LEADER or key in self._hurried:
            return False
        self._hurried[key] = None
        return True

    def hold(self, key: TopicPartitionKey) -> None:
        """`key`'s taken change is under way: take none of its later ones until `release`."""
        self._held.add(key)

    def release(self, key: TopicPartitionKey) -> None:
        self._held.discard(key)

    def is_held(self, key: TopicPartitionKey) -> bool:
        return key in self._held
