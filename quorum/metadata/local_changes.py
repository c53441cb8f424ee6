"""The partition changes one broker must act on after a metadata delta (Kafka's
TopicDelta.localChanges, docs/design/kraft.md#brokers-react-to-metadata).

Brokers receive no commands: each compares the partitions before and after a delta and reaches
the state the image describes. For broker `b`, a partition whose registration changed is:
- a delete when `b` was a replica before and is not now, or its topic was removed (the
  replica manager stops and deletes these first, because the name may come back with a new id);
- a leader when `b` is its leader now and the partition is new or its partition epoch moved;
  an elected leader when, in addition, the leader epoch moved (or the partition is new);
- a follower when `b` is a replica but not the leader, and the partition is new or its partition
  epoch moved. The leader to fetch from is `registration.leader` (-1: none yet).
Everything else needs nothing from `b`. Because changes are found by comparing epochs, not by
replaying every step, a broker that skipped images (a snapshot load) still reaches the right
state: `local_changes_between(old, new)` gives the same answer as the deltas in between merged.

Each list is sorted by topic name, topic id, partition id, so the result is deterministic
(topic ids in the order of their canonical text, which is their integers' order).

A broker's first image at a restart changes every partition it holds (thousands), so the
changes can be found in steps (`local_changes_in_steps`, `local_changes_between_in_steps`) of
about `CLASSIFY_STEP_PARTITIONS` partitions each (whole topics), the topics first listed
`LIST_STEP_TOPICS` a step, for a caller on an event loop; the result, the generator's value,
is the whole computation's, and nothing outside the generator changes meanwhile.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple
from uuid import UUID

from replog.quorum.metadata.delta import MetadataDelta
from replog.quorum.metadata.image import MetadataImage
from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.quorum.metadata.steps import Steps, run_to_end

# Partitions one step of `local_changes_in_steps` looks at: about a millisecond.
CLASSIFY_STEP_PARTITIONS = 1_000
# Topics one step lists before the partitions are looked at: a delta or an image of 10,000
# topics listed in one step (a broker's first image, a controlled shutdown's moves) held the
# loop for tens of milliseconds with the collection it set off.
LIST_STEP_TOPICS = 2_000


class LocalPartition(NamedTuple):
    """One partition of a local change.

    `registration` is the partition after the delta (for a removed topic, its last state) and
    `previous` before it (None: the partition is new). A `NamedTuple`: one is built per
    partition a delta changes for this broker, on every node (a frozen dataclass's `__init__`
    cost three times as much).
    """

    topic_name: str
    topic_id: UUID
    partition_id: int
    registration: PartitionRegistration
    previous: PartitionRegistration | None

    @property
    def leader_epoch_changed(self) -> bool:
        """New partition or new leader epoch: a leader was elected, a follower must (re)start
        fetching from it."""
        return self.previous is None or self.previous.leader_epoch != self.registration.leader_epoch

    def _sort_key(self) -> tuple[str, int, int]:
        # A UUID's canonical text is its integer in fixed-width lowercase hex (dashes at fixed
        # places), so both order alike; the integer costs no string per partition.
        return (self.topic_name, self.topic_id.int, self.partition_id)


@dataclass(frozen=True, slots=True)
class LocalChanges:
    deletes: tuple[LocalPartition, ...] = ()
    leaders: tuple[LocalPartition, ...] = ()
    followers: tuple[LocalPartition, ...] = ()

    @property
    def elected_leaders(self) -> tuple[LocalPartition, ...]:
        """Leaders whose leader epoch moved: they start a new leadership term."""
        return tuple(p for p in self.leaders if p.leader_epoch_changed)

    def is_empty(self) -> bool:
        return not (self.deletes or self.leaders or self.followers)


@dataclass(frozen=True, slots=True)
class _TopicChange:
    """One topic to look at: its partitions before and after, and which ids may differ."""

    name: str
    topic_id: UUID
    before: Mapping[int, PartitionRegistration]
    after: Mapping[int, PartitionRegistration]
    partition_ids: Iterable[int]

    def sort_key(self) -> tuple[str, int]:
        """The order of its partitions' `LocalPartition._sort_key`, less the partition id."""
        return (self.name, self.topic_id.int)


def local_changes(delta: MetadataDelta, broker_id: int) -> LocalChanges:
    """What `broker_id` must do for the records replayed into `delta` (cost: the changes)."""
    return run_to_end(local_changes_in_steps(delta, broker_id))


def local_changes_in_steps(delta: MetadataDelta, broker_id: int) -> Steps[LocalChanges]:
    """`local_changes` in steps (module docstring)."""
    changes: list[_TopicChange] = []
    for topic_id in delta.deleted_topic_ids:
        gone = delta.base.topics.by_id[topic_id]
        changes.append(_TopicChange(gone.name, topic_id, gone.partitions, {}, gone.partitions))
    for count, topic in enumerate(delta.topic_deltas.values(), start=1):
        if count % LIST_STEP_TOPICS == 0:
            yield
        before = topic.base.partitions if topic.base is not None else {}
        changed = topic.partition_changes
        changes.append(_TopicChange(topic.name, topic.topic_id, before, changed, changed))
    return (yield from _classify(changes, broker_id))


def local_changes_between(
    previous: MetadataImage, current: MetadataImage, broker_id: int
) -> LocalChanges:
    """What `broker_id` must do to go from `previous` to `current`, however many deltas apart.

    Topics shared by both images (the same object) are skipped, so consecutive images cost
    what changed plus one pass over the topic index.
    """
    return run_to_end(local_changes_between_in_steps(previous, current, broker_id))


def local_changes_between_in_steps(
    previous: MetadataImage, current: MetadataImage, broker_id: int
) -> Steps[LocalChanges]:
    """`local_changes_between` in steps (module docstring)."""
    before, after = previous.topics.by_id, current.topics.by_id
    changes: list[_TopicChange] = []
    for topic_id, gone in before.items():
        if topic_id not in after:
            changes.append(_TopicChange(gone.name, topic_id, gone.partitions, {}, gone.partitions))
    for count, (topic_id, topic) in enumerate(after.items(), start=1):
        if count % LIST_STEP_TOPICS == 0:
            yield
        old = before.get(topic_id)
        if old is topic:
            continue
        old_partitions = old.partitions if old is not None else {}
        ids = set(topic.partitions) | set(old_partitions)
        changes.append(_TopicChange(topic.name, topic_id, old_partitions, topic.partitions, ids))
    return (yield from _classify(changes, broker_id))


def _classify(changes: Iterable[_TopicChange], broker_id: int) -> Steps[LocalChanges]:
    found: dict[str, list[LocalPartition]] = {DELETE: [], LEADER: [], FOLLOWER: []}
    # Topics in the lists' order and each topic's partitions by id, so that the lists come out
    # sorted (module docstring) without sorting every partition in the last step: 10,000 of
    # them at a restart held the loop 2-7 ms of CPU, 73 ms with the collection it set off on a
    # loaded machine (docs/benchmarks.md, "The stalls: waits for a core"). The same topic twice
    # (not made by the callers here) would interleave its partitions: then the lists are sorted
    # whole.
    topics = sorted(changes, key=_TopicChange.sort_key)
    whole = len({topic.sort_key() for topic in topics}) < len(topics)
    looked_at = 0
    for change in topics:
        if looked_at >= CLASSIFY_STEP_PARTITIONS:
            looked_at = 0
            yield
        for partition_id in sorted(change.partition_ids):
            looked_at += 1
            old = change.before.get(partition_id)
            new = change.after.get(partition_id)
            kind = _kind(old, new, broker_id)
            if kind is not None:
                # A removed topic's partitions report their last state.
                registration = new if new is not None else old
                assert registration is not None
                found[kind].append(
                    LocalPartition(change.name, change.topic_id, partition_id, registration, old)
                )
    if whole:
        return LocalChanges(
            *(
                tuple(sorted(found[kind], key=LocalPartition._sort_key))
                for kind in (DELETE, LEADER, FOLLOWER)
            )
        )
    return LocalChanges(*(tuple(found[kind]) for kind in (DELETE, LEADER, FOLLOWER)))


DELETE, LEADER, FOLLOWER = "delete", "leader", "follower"


def _kind(
    old: PartitionRegistration | None, new: PartitionRegistration | None, broker_id: int
) -> str | None:
    """Which list one partition belongs to for `broker_id`, or None."""
    if new is None or broker_id not in new.replicas:
        was_replica = old is not None and broker_id in old.replicas
        return DELETE if was_replica else None
    if old is not None and old.partition_epoch == new.partition_epoch:
        return None  # nothing this broker acts on changed
    return LEADER if new.leader == broker_id else FOLLOWER
