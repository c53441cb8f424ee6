"""`replog.sim.sweep_progress`: seeds whose controllers move partitions in steps of 2 reach a
committed state naming fenced brokers, and a controller that never sweeps them is caught."""

from __future__ import annotations

import uuid

import pytest
from planted_bug_seeds import caught_within

from replog.quorum.controller.controller import QuorumController
from replog.quorum.metadata.broker_registration import BrokerRegistration
from replog.quorum.metadata.image import (
    ClusterImage,
    MetadataImage,
    MetadataProvenance,
    TopicImage,
    TopicsImage,
    frozen_mapping,
)
from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.sim.invariants import InvariantViolation
from replog.sim.sweep_progress import STALL_BATCHES, SweepProgress, named_fenced


def test_a_controller_that_never_sweeps_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # A session-expiry fencing's moves after its first step stay undone: no sweep on ticks or
    # on activation, and none is ever due (the controller does not wake for one).
    monkeypatch.setattr(QuorumController, "_move_off_fenced", lambda self, now_ms: None)
    monkeypatch.setattr(QuorumController, "_move_off_fenced_due", lambda self: False)
    # First caught at seed 6 (at `d0e5ddda`): the scan starts there (planted_bug_seeds).
    caught_within(range(6, 46), "does not sweep them")


# --- the rule on images made by hand ------------------------------------------------------------

TOPIC = uuid.UUID(int=7)


def _image(fenced: set[int], isrs: list[tuple[int, ...]], epoch: int, offset: int) -> MetadataImage:
    """Brokers 1-3 (`fenced` among them) and one topic whose partition i has ISR `isrs[i]`,
    led by its first member, after a batch of quorum epoch `epoch` ending at `offset`."""
    brokers = {b: BrokerRegistration(b, uuid.UUID(int=b), 1, fenced=b in fenced) for b in (1, 2, 3)}
    partitions = {i: PartitionRegistration((1, 2, 3), isr, isr[0]) for i, isr in enumerate(isrs)}
    topic = TopicImage("t", TOPIC, frozen_mapping(partitions))
    return MetadataImage(
        provenance=MetadataProvenance(offset, epoch),
        cluster=ClusterImage(frozen_mapping(brokers)),
        topics=TopicsImage(frozen_mapping({TOPIC: topic}), frozen_mapping({"t": topic})),
    )


def test_fenced_brokers_named_for_too_many_batches_of_one_epoch_are_a_stall() -> None:
    sweep = SweepProgress()
    named = [(3, 1), (3, 2)]  # broker 3 fenced, in both ISRs beside broker 1 or 2
    for offset in range(STALL_BATCHES + 1):
        sweep.after_batch(_image({3}, named, epoch=4, offset=offset))
    with pytest.raises(InvariantViolation, match="does not sweep them"):
        sweep.after_batch(_image({3}, named, epoch=4, offset=STALL_BATCHES + 1))


def test_a_pair_leaving_or_a_new_epoch_starts_the_count_again() -> None:
    sweep = SweepProgress()
    for offset in range(STALL_BATCHES):
        sweep.after_batch(_image({3}, [(3, 1), (3, 2)], epoch=4, offset=offset))
    # One pair leaves: the broker leaves partition 0's ISR.
    for offset in range(STALL_BATCHES, 2 * STALL_BATCHES):
        sweep.after_batch(_image({3}, [(1,), (3, 2)], epoch=4, offset=offset))
    # A new active controller: its own batches count from zero.
    for offset in range(2 * STALL_BATCHES, 3 * STALL_BATCHES):
        sweep.after_batch(_image({3}, [(1,), (3, 2)], epoch=5, offset=offset))
    assert sweep.batches_naming == 3 * STALL_BATCHES


def test_the_last_isr_member_of_a_leaderless_partition_is_not_named() -> None:
    leaderless = PartitionRegistration((1, 2, 3), (3,), -1)
    topic = TopicImage("t", TOPIC, frozen_mapping({0: leaderless}))
    image = MetadataImage(
        cluster=ClusterImage(
            frozen_mapping({3: BrokerRegistration(3, uuid.UUID(int=3), 1, fenced=True)})
        ),
        topics=TopicsImage(frozen_mapping({TOPIC: topic}), frozen_mapping({"t": topic})),
    )
    assert named_fenced(image) == frozenset()
    # Beside broker 1 in partition 0's ISR; alone but leading partition 1.
    named = named_fenced(_image({3}, [(1, 3), (3,)], epoch=1, offset=0))
    assert named == {(TOPIC, 0, 3), (TOPIC, 1, 3)}
