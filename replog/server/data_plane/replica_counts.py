"""The summary's replica counts (`node_state`'s Rules), kept up to date as the replicas change.

A scrape of `replog_partitions`, `replog_leader_partitions` and the under-replicated, under
and at min ISR gauges reads `LiveReplicaCounts.counts`: a few integers, whatever the number of
replicas (a walk over 33,000 replicas cost ~9 ms of CPU a scrape, in the endpoint's thread,
holding the GIL the event loop waits for).

Rules:
- The replica manager reports every change of what the counts read, on the event loop: the
  number of replicas (`set_partitions`), and a led partition's figures (`led_figures`:
  replication factor less the replicas being added, committed ISR size, effective min ISR)
  whenever its role, replica set, adding replicas, committed ISR or min.insync.replicas may
  have changed (`set_figures`; None: not led, or gone). These change only with metadata and
  AlterPartition answers: produce, fetch and replication pay nothing.
- A report takes the partition's previous contribution out and puts the new one in; the
  counts are then published as one tuple, swapped in one assignment, so a scrape on another
  thread reads a consistent set without a lock.
- `ReplicaCounts.of`/`tally` count from scratch: node_state's walk (`_count_replicas`), kept
  as the oracle the tests check these counts against.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from replog.common.topic_partition import TopicPartitionKey

if TYPE_CHECKING:
    from replog.server.data_plane.partition import Partition

# A led partition's (replication factor as Kafka counts it, committed ISR size, effective
# min ISR).
LedFigures = tuple[int, int, int]


class _CountedReplica(Protocol):
    @property
    def is_leader(self) -> bool: ...
    @property
    def replica_count(self) -> int: ...
    @property
    def isr_size(self) -> int: ...
    @property
    def min_isr(self) -> int: ...


@dataclass(frozen=True, slots=True)
class ReplicaCounts:
    """What the summary families count over the replicas (node_state's Rules)."""

    partitions: int = 0
    leaders: int = 0
    under_replicated: int = 0
    under_min_isr: int = 0
    at_min_isr: int = 0

    @classmethod
    def of(cls, replicas: Iterable[_CountedReplica]) -> ReplicaCounts:
        replicas = tuple(replicas)
        return cls.tally(
            len(replicas),
            ((r.replica_count, r.isr_size, r.min_isr) for r in replicas if r.is_leader),
        )

    @classmethod
    def tally(cls, partitions: int, led: Iterable[LedFigures]) -> ReplicaCounts:
        """The counts of `partitions` replicas, given each led one's figures."""
        leaders = under_replicated = under_min_isr = at_min_isr = 0
        for replica_count, isr_size, min_isr in led:
            leaders += 1
            if isr_size < replica_count:
                under_replicated += 1
            if isr_size < min_isr:
                under_min_isr += 1
            elif isr_size == min_isr:
                at_min_isr += 1
        return cls(partitions, leaders, under_replicated, under_min_isr, at_min_isr)


def led_figures(partition: Partition) -> LedFigures | None:
    """A replica's figures if this broker leads it (None otherwise)."""
    leader_state = partition.leader_state
    if leader_state is None:
        return None
    registration = partition.registration
    # The replication factor as Kafka counts it: replicas a reassignment is still adding do
    # not count (they are not expected in the ISR yet).
    adding = len(registration.adding_replicas) if registration is not None else 0
    return (
        len(leader_state.replicas) - adding,
        len(leader_state.isr),
        leader_state.effective_min_isr,
    )


class LiveReplicaCounts:
    """The counts of one broker's replicas, as the replica manager reports them (Rules)."""

    def __init__(self) -> None:
        self._led: dict[TopicPartitionKey, LedFigures] = {}
        self._partitions = 0
        self._under_replicated = 0
        self._under_min_isr = 0
        self._at_min_isr = 0
        # (partitions, leaders, under-replicated, under min ISR, at min ISR): one object, so
        # that another thread reads all five as of the same change.
        self._published: tuple[int, int, int, int, int] = (0, 0, 0, 0, 0)

    @property
    def counts(self) -> ReplicaCounts:
        """The counts as of the last report (any thread)."""
        return ReplicaCounts(*self._published)

    def set_partitions(self, partitions: int) -> None:
        """The broker now hosts `partitions` replicas."""
        if partitions != self._partitions:
            self._partitions = partitions
            self._publish()

    def set_figures(self, key: TopicPartitionKey, figures: LedFigures | None) -> None:
        """Replica `key`'s figures now (`led_figures`; None: not led by this broker, or gone)."""
        led = self._led
        previous = led.get(key)
        if previous == figures:
            return
        if previous is not None:
            self._add(previous, -1)
        if figures is None:
            del led[key]
        else:
            led[key] = figures
            self._add(figures, 1)
        self._publish()

    def _add(self, figures: LedFigures, sign: int) -> None:
        replica_count, isr_size, min_isr = figures
        if isr_size < replica_count:
            self._under_replicated += sign
        if isr_size < min_isr:
            self._under_min_isr += sign
        elif isr_size == min_isr:
            self._at_min_isr += sign

    def _publish(self) -> None:
        self._published = (
            self._partitions,
            len(self._led),
            self._under_replicated,
            self._under_min_isr,
            self._at_min_isr,
        )
