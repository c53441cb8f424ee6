"""`SweepProgress`: the active controller moves fenced brokers out of ISRs and leaderships
within a bounded number of its own committed batches, checked on the committed metadata log.

A session-expiry fencing writes its fencing record with its first step of moves (at most
`max_partition_changes_per_step` partition changes, docs/controller.md "Stepped writes"); the
active controller's sweep of fenced brokers makes the rest, a step per tick, and a controller
activated by a failover finds the moves half made and sweeps at once. Rule, after every
committed data batch (`MetadataChecker` replays them): while the committed state names a
fenced or unregistered broker in an ISR beside other members or as leader (a (partition,
broker) pair; KIP-841 keeps a leaderless partition's last ISR member, which is not named), at
least one named pair leaves within every `STALL_BATCHES` committed data batches of one quorum
epoch (the batches of one active controller); a batch of a new epoch starts the count again.
Whether the controller never sweeps, sweeps only on activation or waits for an unrelated
deadline, its other writes (no-ops every 500 ms, creations, heartbeats) commit while the
pairs stay named.

The runs reach that state only when a fencing has more moves than one step makes: the run's
`max_partition_changes_per_step` is drawn per seed (`STEP_CHOICES`), 2 in some seeds.
"""

from __future__ import annotations

from uuid import UUID

from replog.quorum.metadata.image import MetadataImage
from replog.sim.invariants import InvariantViolation

__all__ = ["STALL_BATCHES", "STEP_CHOICES", "SweepProgress"]

# Between two steps of the sweep the active controller commits at most a step of each other
# chain in its queue and the direct writes that arrived meanwhile: in the seeds that reach
# the state, at most 2 batches went by without a pair leaving (`longest_stall`, 100 seeds).
STALL_BATCHES = 6
# The controller's default (250 changes a step: every run's fencing in one step) and 2.
STEP_CHOICES = (250, 250, 2)

Named = tuple[UUID, int, int]  # (topic id, partition, broker)


def named_fenced(image: MetadataImage) -> frozenset[Named]:
    """The pairs the module docstring calls named, in `image`."""
    brokers = image.cluster.brokers
    gone = {broker_id for broker_id, b in brokers.items() if b.fenced}
    pairs: list[Named] = []
    for topic in image.topics.by_id.values():
        for index, partition in topic.partitions.items():
            isr = partition.isr
            for broker_id in isr:
                if (broker_id in gone or broker_id not in brokers) and (
                    len(isr) > 1 or partition.leader == broker_id
                ):
                    pairs.append((topic.topic_id, index, broker_id))
    return frozenset(pairs)


class SweepProgress:
    """See module docstring; `after_batch` is `MetadataChecker`'s hook."""

    def __init__(self) -> None:
        self._named: frozenset[Named] = frozenset()
        self._epoch = -1
        self._stalled = 0
        self.batches_naming = 0  # committed data batches after which some pair was named
        self.longest_stall = 0  # the most batches of one epoch that moved no named pair out

    def after_batch(self, image: MetadataImage) -> None:
        brokers = image.cluster.brokers
        if not any(b.fenced for b in brokers.values()) and not self._named:
            return  # the common case: nobody fenced, nothing named before
        named = named_fenced(image)
        epoch = image.provenance.last_quorum_epoch
        if not named:
            self._named, self._stalled = named, 0
            return
        self.batches_naming += 1
        if epoch != self._epoch or self._named - named:
            self._stalled = 0
        else:
            self._stalled += 1
            self.longest_stall = max(self.longest_stall, self._stalled)
            if self._stalled > STALL_BATCHES:
                sample = sorted(named)[:3]
                raise InvariantViolation(
                    f"the committed metadata names fenced brokers in ISRs or as leaders "
                    f"({len(named)} pairs (topic id, partition, broker), e.g. {sample}) for "
                    f"{self._stalled} batches of quorum epoch {epoch} up to offset "
                    f"{image.provenance.last_offset} without moving any out: the active "
                    "controller does not sweep them"
                )
        self._named, self._epoch = named, epoch
