"""local_changes: which partitions one broker must delete, lead or follow after a delta
(docs/design/kraft.md#brokers-react-to-metadata), scenario by scenario. Every scenario also checks
that diffing the two images (`local_changes_between`) gives the same answer as the delta."""

from __future__ import annotations

import random
from uuid import UUID

import pytest
from metadata_helpers import bootstrapped, create_topic, delta_of, register, replayed, topic_id

from replog.quorum.metadata import local_changes as local_changes_module
from replog.quorum.metadata.image import MetadataImage, MetadataProvenance
from replog.quorum.metadata.local_changes import (
    CLASSIFY_STEP_PARTITIONS,
    LocalChanges,
    LocalPartition,
    _classify,
    _TopicChange,
    local_changes,
    local_changes_between,
    local_changes_between_in_steps,
    local_changes_in_steps,
)
from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.quorum.metadata.records import (
    BrokerRegistrationChangeRecord,
    FenceChange,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    RemoveTopicRecord,
)
from replog.quorum.metadata.steps import run_to_end

ME = 1
ORDERS = topic_id(1)
PAYMENTS = topic_id(2)


def changes(base: MetadataImage, *records: MetadataRecord) -> LocalChanges:
    delta = delta_of(base, *records)
    found = local_changes(delta, ME)
    new = delta.apply(MetadataProvenance(base.provenance.last_offset + len(records), 1))
    assert local_changes_between(base, new, ME) == found
    return found


def ids(partitions: tuple[LocalPartition, ...]) -> list[tuple[str, int]]:
    return [(p.topic_name, p.partition_id) for p in partitions]


def with_orders() -> MetadataImage:
    """orders-0 led by me, orders-1 followed by me, orders-2 not mine."""
    return replayed(bootstrapped(), *create_topic("orders", ORDERS, (1, 2), (2, 1), (2, 3)))


def test_a_new_topic_makes_me_leader_and_follower_of_my_partitions() -> None:
    found = changes(bootstrapped(), *create_topic("orders", ORDERS, (1, 2), (2, 1), (2, 3)))
    assert ids(found.leaders) == [("orders", 0)]
    assert ids(found.followers) == [("orders", 1)]
    assert found.deletes == ()
    (leader,) = found.leaders
    assert (leader.topic_id, leader.previous, leader.registration.leader_epoch) == (ORDERS, None, 0)
    assert found.elected_leaders == found.leaders  # a new partition's first leader is elected
    assert found.followers[0].registration.leader == 2  # whom to fetch from
    assert found.followers[0].leader_epoch_changed


def test_an_isr_change_on_my_partition_reaches_me_without_an_election() -> None:
    found = changes(with_orders(), PartitionChangeRecord(ORDERS, 0, isr=(1,)))
    assert ids(found.leaders) == [("orders", 0)]
    assert found.elected_leaders == ()
    (leader,) = found.leaders
    assert leader.previous is not None
    assert (leader.previous.partition_epoch, leader.registration.partition_epoch) == (0, 1)
    assert leader.registration.isr == (1,)


def test_losing_leadership_makes_me_a_follower_of_the_new_leader() -> None:
    found = changes(with_orders(), PartitionChangeRecord(ORDERS, 0, leader=2))
    assert found.leaders == ()
    (follower,) = found.followers
    assert (follower.partition_id, follower.registration.leader) == (0, 2)
    assert follower.leader_epoch_changed


def test_gaining_leadership_is_an_election() -> None:
    found = changes(with_orders(), PartitionChangeRecord(ORDERS, 1, leader=1))
    assert ids(found.elected_leaders) == [("orders", 1)]
    assert found.followers == ()


def test_a_follower_sees_a_change_of_isr_as_a_change_without_a_new_leader() -> None:
    found = changes(with_orders(), PartitionChangeRecord(ORDERS, 1, isr=(2,)))
    (follower,) = found.followers
    assert not follower.leader_epoch_changed


def test_changes_to_partitions_i_do_not_host_need_nothing() -> None:
    assert changes(with_orders(), PartitionChangeRecord(ORDERS, 2, leader=3)).is_empty()


def test_records_that_touch_no_partition_need_nothing() -> None:
    base = replayed(with_orders(), register(1, 5))
    assert changes(
        base, NoOpRecord(), BrokerRegistrationChangeRecord(1, 5, FenceChange.UNFENCE)
    ).is_empty()


def test_being_reassigned_away_deletes_the_partition() -> None:
    found = changes(with_orders(), PartitionChangeRecord(ORDERS, 1, replicas=(2, 3), isr=(2, 3)))
    (deleted,) = found.deletes
    assert deleted.partition_id == 1
    assert deleted.previous is not None and ME in deleted.previous.replicas
    assert ME not in deleted.registration.replicas
    assert found.leaders == found.followers == ()


def test_being_reassigned_in_makes_me_a_follower() -> None:
    found = changes(
        with_orders(), PartitionChangeRecord(ORDERS, 2, replicas=(2, 3, 1), adding_replicas=(1,))
    )
    (follower,) = found.followers
    assert (follower.partition_id, follower.registration.leader) == (2, 2)
    assert not follower.leader_epoch_changed  # the leader stays: keep fetching from it


def test_removing_a_topic_deletes_the_partitions_i_hosted() -> None:
    found = changes(with_orders(), RemoveTopicRecord(ORDERS))
    assert ids(found.deletes) == [("orders", 0), ("orders", 1)]
    assert all(d.registration == d.previous for d in found.deletes)
    assert found.leaders == found.followers == ()


def test_a_name_removed_and_created_again_in_one_delta_deletes_old_and_starts_new() -> None:
    found = changes(
        with_orders(),
        RemoveTopicRecord(ORDERS),
        *create_topic("orders", PAYMENTS, (3, 1), (1,)),
    )
    assert [(d.topic_id, d.partition_id) for d in found.deletes] == [(ORDERS, 0), (ORDERS, 1)]
    assert [(p.topic_id, p.partition_id) for p in found.followers] == [(PAYMENTS, 0)]
    assert [(p.topic_id, p.partition_id) for p in found.leaders] == [(PAYMENTS, 1)]


def test_a_topic_created_and_removed_in_one_delta_needs_nothing() -> None:
    base = bootstrapped()
    assert changes(
        base, *create_topic("orders", ORDERS, (1,)), RemoveTopicRecord(ORDERS)
    ).is_empty()


def test_results_are_sorted_by_topic_name_then_partition() -> None:
    found = changes(
        bootstrapped(),
        *create_topic("payments", PAYMENTS, (1,), (1,)),
        *create_topic("orders", ORDERS, (1,), (1,)),
    )
    assert ids(found.leaders) == [("orders", 0), ("orders", 1), ("payments", 0), ("payments", 1)]


def test_between_images_skips_topics_shared_by_both() -> None:
    base = with_orders()
    new = replayed(base, *create_topic("payments", PAYMENTS, (1,)))
    assert new.topics.by_id[ORDERS] is base.topics.by_id[ORDERS]
    assert ids(local_changes_between(base, new, ME).leaders) == [("payments", 0)]


def test_between_images_many_deltas_apart_compares_epochs_only() -> None:
    # A broker that missed the intermediate images (a snapshot load) sees only the net effect:
    # led, lost, led again is one election; a change made and undone still moved the epoch.
    base = with_orders()
    new = replayed(
        base,
        PartitionChangeRecord(ORDERS, 0, leader=2),
        PartitionChangeRecord(ORDERS, 0, leader=1),
        PartitionChangeRecord(ORDERS, 1, isr=(2,)),
        PartitionChangeRecord(ORDERS, 1, isr=(2, 1)),
    )
    found = local_changes_between(base, new, ME)
    assert ids(found.elected_leaders) == [("orders", 0)]
    assert found.elected_leaders[0].registration.leader_epoch == 2
    assert ids(found.followers) == [("orders", 1)]


def test_topic_ids_sort_as_their_canonical_text() -> None:
    """Two topics of one name (removed and created again) order by id as their text would."""
    rng = random.Random(7)
    uuids = [UUID(int=rng.getrandbits(128)) for _ in range(2_000)]
    uuids += [UUID(int=n) for n in (0, 1, 15, 16, 2**64, 2**127)]
    assert sorted(uuids, key=lambda u: u.int) == sorted(uuids, key=str)


def test_a_large_first_image_is_classified_in_bounded_steps_with_the_whole_answer() -> None:
    """A restart's first image changes every partition a broker holds: the changes are found
    a slice of about CLASSIFY_STEP_PARTITIONS partitions at a time, and the answer is the
    whole computation's, the same from the delta and from the two images."""
    rng = random.Random(3)
    records: list[MetadataRecord] = []
    partitions = 0
    for n in range(300):
        count = rng.randint(1, 40)
        partitions += count
        assignments = [tuple(rng.sample((1, 2, 3, 4), 3)) for _ in range(count)]
        records += create_topic(
            f"t{rng.randint(0, 10**6)}-{n}", UUID(int=rng.getrandbits(128)), *assignments
        )
    base = bootstrapped()
    delta = delta_of(base, *records)
    new = delta.apply(MetadataProvenance(base.provenance.last_offset + len(records), 1))
    whole = local_changes(delta, ME)
    assert len(whole.leaders) + len(whole.followers) > 2 * CLASSIFY_STEP_PARTITIONS
    for steps in (
        local_changes_in_steps(delta, ME),
        local_changes_between_in_steps(base, new, ME),
    ):
        slices = 0
        while True:
            try:
                next(steps)
                slices += 1
            except StopIteration as done:
                assert done.value == whole
                break
        # Each slice ends at the first topic boundary past the bound (40 partitions at most).
        assert slices >= partitions // (CLASSIFY_STEP_PARTITIONS + 40)
        assert slices <= partitions // CLASSIFY_STEP_PARTITIONS
    keys = [(p.topic_name, str(p.topic_id), p.partition_id) for p in whole.leaders]
    assert keys == sorted(keys)


def test_the_last_step_of_a_large_image_sorts_no_partition(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The lists come out sorted from topics taken in order, each topic's partitions by id:
    fails where the last step sorts every partition found (10,000 at a restart)."""
    rng = random.Random(5)
    records: list[MetadataRecord] = []
    for n in range(200):
        assignments = [tuple(rng.sample((1, 2, 3), 3)) for _ in range(rng.randint(1, 12))]
        name, tid = f"t{rng.randint(0, 99)}-{n}", UUID(int=rng.getrandbits(128))
        records += create_topic(name, tid, *assignments)
    base = bootstrapped()
    delta = delta_of(base, *records)
    new = delta.apply(MetadataProvenance(base.provenance.last_offset + len(records), 1))
    expected = local_changes(delta, ME)
    keyed = [0]
    sort_key = LocalPartition._sort_key

    def counted(self: LocalPartition) -> tuple[str, int, int]:
        keyed[0] += 1
        return sort_key(self)

    monkeypatch.setattr(LocalPartition, "_sort_key", counted)
    for steps in (local_changes_in_steps(delta, ME), local_changes_between_in_steps(base, new, ME)):
        keyed[0] = 0
        assert run_to_end(steps) == expected
        assert keyed[0] == 0
    for found in (expected.leaders, expected.followers):
        keys = [(p.topic_name, str(p.topic_id), p.partition_id) for p in found]
        assert keys == sorted(keys) and len(found) > 0


def test_one_topic_given_twice_still_comes_out_sorted() -> None:
    """Not made by the callers, but the lists' order holds: their partitions interleave."""
    registration = PartitionRegistration((1,), (1,), 1, 0, 0)
    first = _TopicChange("t", ORDERS, {}, {0: registration, 2: registration}, (2, 0))
    second = _TopicChange("t", ORDERS, {}, {1: registration}, (1,))
    other = _TopicChange("a", PAYMENTS, {}, {5: registration}, (5,))
    found = run_to_end(_classify([first, other, second], ME))
    assert ids(found.leaders) == [("a", 5), ("t", 0), ("t", 1), ("t", 2)]


def test_the_topics_are_listed_in_bounded_steps_before_their_partitions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A delta (a controlled shutdown's moves) or an image of 10,000 topics was listed in
    one step, 17-32 ms of CPU: at most `LIST_STEP_TOPICS` topics are listed a step, and the
    answer is the whole computation's."""
    monkeypatch.setattr(local_changes_module, "LIST_STEP_TOPICS", 10, raising=False)
    listed = [0]

    class Counted(_TopicChange):
        __slots__ = ()

        def __new__(cls, *args: object, **kwargs: object) -> Counted:
            listed[0] += 1
            return super().__new__(cls)

    records: list[MetadataRecord] = []
    for n in range(100):
        records += create_topic(f"t{n:03d}", topic_id(100 + n), (1, 2))
    base = bootstrapped()
    image = replayed(base, *records)
    moves = delta_of(
        image, *(PartitionChangeRecord(topic_id(100 + n), 0, leader=2) for n in range(100))
    )
    moved = moves.apply(MetadataProvenance(image.provenance.last_offset + 100, 1))
    expected = [local_changes(moves, ME), local_changes_between(image, moved, ME)]
    monkeypatch.setattr(local_changes_module, "_TopicChange", Counted)
    for steps, answer in zip(
        (local_changes_in_steps(moves, ME), local_changes_between_in_steps(image, moved, ME)),
        expected,
        strict=True,
    ):
        per_step: list[int] = []
        while True:
            listed[0] = 0
            try:
                next(steps)
            except StopIteration as done:
                assert done.value == answer and len(answer.followers) == 100
                per_step.append(listed[0])
                break
            per_step.append(listed[0])
        assert sum(per_step) == 100 and max(per_step) <= 10, per_step
