"""PartitionChangeBuilder: one table row per rule of docs/design/kraft.md#partition-change-builder,
plus properties.

Each scenario states the partition, the targets, which brokers are acceptable leaders and the
election type, and the exact record expected (or None).
"""

from __future__ import annotations

from uuid import UUID

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.quorum.controller.partition_change_builder import Election, PartitionChangeBuilder
from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.quorum.metadata.records import (
    LEADER_UNCHANGED,
    NO_LEADER,
    RECOVERY_STATE_UNCHANGED,
    LeaderRecoveryState,
    PartitionChangeRecord,
)

TOPIC = UUID(int=7, version=4)
RECOVERED = LeaderRecoveryState.RECOVERED
RECOVERING = LeaderRecoveryState.RECOVERING


def part(
    replicas: tuple[int, ...],
    isr: tuple[int, ...],
    leader: int,
    *,
    adding: tuple[int, ...] = (),
    removing: tuple[int, ...] = (),
    state: LeaderRecoveryState = RECOVERED,
) -> PartitionRegistration:
    return PartitionRegistration(
        replicas=replicas,
        isr=isr,
        leader=leader,
        leader_epoch=5,
        partition_epoch=9,
        adding_replicas=adding,
        removing_replicas=removing,
        leader_recovery_state=state,
    )


def build(
    partition: PartitionRegistration,
    *,
    acceptable: set[int],
    election: Election = Election.ONLINE,
    isr: tuple[int, ...] | None = None,
    replicas: tuple[int, ...] | None = None,
    adding: tuple[int, ...] | None = None,
    removing: tuple[int, ...] | None = None,
    state: LeaderRecoveryState | None = None,
) -> PartitionChangeRecord | None:
    return PartitionChangeBuilder(
        partition,
        TOPIC,
        0,
        acceptable.__contains__,
        election=election,
        target_isr=isr,
        target_replicas=replicas,
        target_adding_replicas=adding,
        target_removing_replicas=removing,
        target_leader_recovery_state=state,
    ).build()


def change(**fields: object) -> PartitionChangeRecord:
    return PartitionChangeRecord(topic_id=TOPIC, partition_id=0, **fields)  # type: ignore[arg-type]


ALL = {1, 2, 3, 4, 5, 6}


# -- rule 7: nothing changes, nothing is written --------------------------------------------------


def test_no_targets_and_a_valid_leader_write_nothing() -> None:
    assert build(part((1, 2, 3), (1, 2, 3), 1), acceptable=ALL) is None


def test_targets_equal_to_the_current_state_write_nothing() -> None:
    partition = part((1, 2, 3), (1, 2), 1)
    assert (
        build(
            partition,
            acceptable=ALL,
            isr=(1, 2),
            replicas=(1, 2, 3),
            adding=(),
            removing=(),
            state=RECOVERED,
        )
        is None
    )


# -- rule 4: the ISR field -------------------------------------------------------------------------


def test_an_isr_shrink_writes_only_the_isr() -> None:
    record = build(part((1, 2, 3), (1, 2, 3), 1), acceptable=ALL, isr=(1, 2))
    assert record == change(isr=(1, 2))
    assert record.leader == LEADER_UNCHANGED
    assert record.leader_recovery_state == RECOVERY_STATE_UNCHANGED


def test_an_isr_expand_writes_only_the_isr() -> None:
    assert build(part((1, 2, 3), (1,), 1), acceptable=ALL, isr=(1, 3)) == change(isr=(1, 3))


def test_an_empty_target_isr_is_not_written_and_the_leader_goes() -> None:
    # The last member (1) is fenced: it stays in the ISR so it can come back as a clean leader.
    record = build(part((1, 2, 3), (1,), 1), acceptable={2, 3}, isr=())
    assert record == change(leader=NO_LEADER)
    assert part((1, 2, 3), (1,), 1).merge(record).isr == (1,)


# -- rule 2: ONLINE election ---------------------------------------------------------------------


def test_a_valid_current_leader_stays_even_if_not_first_in_replicas() -> None:
    assert build(part((1, 2, 3), (1, 2, 3), 3), acceptable=ALL) is None


def test_an_unacceptable_leader_is_replaced_by_the_first_valid_replica_in_replica_order() -> None:
    # ISR order says 3 first, but elections follow the replica (preference) order.
    record = build(part((1, 2, 3), (3, 2, 1), 1), acceptable={2, 3}, isr=(3, 2))
    assert record == change(isr=(3, 2), leader=2)


def test_a_leader_dropped_from_the_target_isr_is_replaced() -> None:
    record = build(part((1, 2, 3), (1, 2, 3), 1), acceptable=ALL, isr=(2, 3))
    assert record == change(isr=(2, 3), leader=2)


def test_online_never_elects_outside_the_isr() -> None:
    # 3 is acceptable but not in sync; 2 is in sync but not acceptable.
    record = build(part((1, 2, 3), (1, 2), 1), acceptable={3}, isr=(2,))
    assert record == change(isr=(2,), leader=NO_LEADER)


def test_a_leaderless_partition_elects_a_returning_isr_member() -> None:
    record = build(part((1, 2, 3), (2,), NO_LEADER), acceptable={2, 3})
    assert record == change(leader=2)


def test_a_leaderless_partition_with_no_valid_member_writes_nothing() -> None:
    assert build(part((1, 2, 3), (2,), NO_LEADER), acceptable={1, 3}) is None


# -- rule 2: UNCLEAN election --------------------------------------------------------------------


def test_unclean_prefers_a_clean_leader_when_one_exists() -> None:
    record = build(
        part((1, 2, 3), (1, 2), 1), acceptable={2, 3}, isr=(2,), election=Election.UNCLEAN
    )
    assert record == change(isr=(2,), leader=2)


def test_unclean_elects_the_first_acceptable_replica_with_isr_of_one_and_recovering() -> None:
    record = build(part((1, 2, 3), (1,), NO_LEADER), acceptable={3, 2}, election=Election.UNCLEAN)
    assert record == change(isr=(2,), leader=2, leader_recovery_state=int(RECOVERING))


def test_unclean_on_an_already_recovering_partition_does_not_rewrite_the_state() -> None:
    partition = part((1, 2, 3), (1,), NO_LEADER, state=RECOVERING)
    record = build(partition, acceptable={3}, election=Election.UNCLEAN)
    assert record == change(isr=(3,), leader=3)


def test_unclean_keeping_the_leader_the_target_isr_left_out_keeps_it_in_the_isr() -> None:
    # The leader stays, so it must stay in sync with itself (the property below needs it).
    partition = part((1, 3, 2), (2, 1), 2)
    record = build(partition, acceptable={2}, isr=(1,), election=Election.UNCLEAN)
    assert record == change(isr=(2,))
    # Already the ISR: nothing to write.
    partition = part((1, 3, 2), (2,), 2)
    assert build(partition, acceptable={2}, isr=(1,), election=Election.UNCLEAN) is None


def test_unclean_with_nobody_acceptable_elects_nobody() -> None:
    partition = part((1, 2, 3), (1,), 1)
    record = build(partition, acceptable=set(), isr=(), election=Election.UNCLEAN)
    assert record == change(leader=NO_LEADER)


# -- rule 2: PREFERRED election ------------------------------------------------------------------


def test_preferred_moves_leadership_to_a_valid_first_replica() -> None:
    record = build(part((1, 2, 3), (1, 2, 3), 2), acceptable=ALL, election=Election.PREFERRED)
    assert record == change(leader=1)


def test_preferred_keeps_a_valid_leader_when_the_first_replica_is_not_in_sync() -> None:
    record = build(part((1, 2, 3), (2, 3), 2), acceptable=ALL, election=Election.PREFERRED)
    assert record is None


def test_preferred_falls_back_to_the_next_valid_replica() -> None:
    partition = part((1, 2, 3), (2, 3), NO_LEADER)
    record = build(partition, acceptable={3}, election=Election.PREFERRED)
    assert record == change(leader=3)


def test_preferred_with_no_valid_replica_elects_nobody() -> None:
    partition = part((1, 2, 3), (2, 3), 2)
    assert build(partition, acceptable={1}, election=Election.PREFERRED) == change(leader=-1)


# -- rule 1: reassignment completion -------------------------------------------------------------


REASSIGNING = part((4, 5, 6, 1, 2, 3), (1, 2, 3), 1, adding=(4, 5, 6), removing=(1, 2, 3))


def test_a_reassignment_completes_once_the_isr_covers_the_target() -> None:
    record = build(REASSIGNING, acceptable=ALL, isr=(1, 2, 3, 4, 5, 6))
    # The old leader is being removed: the first target replica in sync takes over.
    assert record == change(
        isr=(4, 5, 6), leader=4, replicas=(4, 5, 6), removing_replicas=(), adding_replicas=()
    )


def test_a_reassignment_does_not_complete_while_a_target_replica_is_missing() -> None:
    record = build(REASSIGNING, acceptable=ALL, isr=(1, 2, 3, 4, 5))
    assert record == change(isr=(1, 2, 3, 4, 5))


def test_a_completed_reassignment_that_keeps_the_leader_still_bumps_its_epoch() -> None:
    partition = part((1, 4, 2, 3), (1, 2, 3), 1, adding=(4,), removing=(2, 3))
    record = build(partition, acceptable=ALL, isr=(1, 2, 3, 4))
    assert record == change(
        isr=(1, 4), leader=1, replicas=(1, 4), removing_replicas=(), adding_replicas=()
    )
    merged = partition.merge(record)
    assert (merged.leader, merged.leader_epoch, merged.partition_epoch) == (1, 6, 10)


def test_a_reassignment_that_only_adds_completes_without_an_epoch_bump() -> None:
    partition = part((1, 2, 3), (1, 2), 1, adding=(3,))
    record = build(partition, acceptable=ALL, isr=(1, 2, 3))
    assert record == change(isr=(1, 2, 3), adding_replicas=())


def test_completion_needs_a_non_empty_isr_after_removal() -> None:
    partition = part((3, 1), (1,), 1, adding=(3,), removing=(1,))
    assert build(partition, acceptable=ALL, isr=(1,)) is None


# -- rule 3: forced leader epoch bump ------------------------------------------------------------


def test_dropping_replicas_without_a_leader_change_bumps_the_leader_epoch() -> None:
    partition = part((1, 2, 3), (1, 2), 1)
    record = build(partition, acceptable=ALL, replicas=(1, 2))
    assert record == change(leader=1, replicas=(1, 2))
    assert partition.merge(record).leader_epoch == 6


def test_reordering_replicas_does_not_bump_the_leader_epoch() -> None:
    record = build(part((1, 2, 3), (1, 2, 3), 1), acceptable=ALL, replicas=(3, 2, 1))
    assert record == change(replicas=(3, 2, 1))


def test_a_leaderless_partition_losing_replicas_writes_no_leader_again() -> None:
    partition = part((1, 2, 3), (1,), NO_LEADER)
    record = build(partition, acceptable=set(), replicas=(1, 2))
    assert record == change(leader=NO_LEADER, replicas=(1, 2))


# -- rules 5 and 6: assignment fields and recovery state -----------------------------------------


def test_adding_and_removing_are_written_only_when_they_change() -> None:
    partition = part((1, 2, 3), (1, 2, 3), 1)
    record = build(partition, acceptable=ALL, replicas=(4, 1, 2, 3), adding=(4,), removing=())
    assert record == change(replicas=(4, 1, 2, 3), adding_replicas=(4,))


def test_the_recovery_state_is_written_when_the_target_differs() -> None:
    partition = part((1, 2, 3), (1,), 1, state=RECOVERING)
    record = build(partition, acceptable=ALL, isr=(1,), state=RECOVERED)
    assert record == change(leader_recovery_state=int(RECOVERED))


def test_merging_the_record_applies_kafkas_epoch_rules() -> None:
    partition = part((1, 2, 3), (1, 2, 3), 1)
    record = build(partition, acceptable={2, 3}, isr=(2, 3))
    assert record is not None
    merged = partition.merge(record)
    assert (merged.leader, merged.isr, merged.leader_epoch, merged.partition_epoch) == (
        2,
        (2, 3),
        6,
        10,
    )


# -- properties ----------------------------------------------------------------------------------

BROKERS = list(range(1, 7))


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[PartitionRegistration, dict[str, object]]:
    replicas = tuple(draw(st.permutations(BROKERS))[: draw(st.integers(1, 5))])
    isr = tuple(r for r in replicas if draw(st.booleans()))
    leader = draw(st.sampled_from(isr)) if isr and draw(st.booleans()) else NO_LEADER
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
    if len(replicas) > 1 and draw(st.booleans()):
        split = draw(st.integers(1, len(replicas) - 1))
        adding = tuple(r for r in replicas[:split] if draw(st.booleans()))
        removing = tuple(r for r in replicas[split:] if draw(st.booleans()))
    recovering = len(isr) == 1 and leader != NO_LEADER and draw(st.booleans())
    partition = PartitionRegistration(
        replicas=replicas,
        isr=isr,
        leader=leader,
        leader_epoch=draw(st.integers(0, 3)),
        partition_epoch=draw(st.integers(0, 3)),
        adding_replicas=adding,
        removing_replicas=removing,
        leader_recovery_state=RECOVERING if recovering else RECOVERED,
    )
    target_isr = tuple(r for r in replicas if draw(st.booleans())) if draw(st.booleans()) else None
    acceptable = set(draw(st.lists(st.sampled_from([*BROKERS, 7]), unique=True)))
    election = draw(st.sampled_from(list(Election)))
    return partition, {"isr": target_isr, "acceptable": acceptable, "election": election}


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_the_leader_is_always_acceptable_and_in_sync_or_absent(
    scenario: tuple[PartitionRegistration, dict[str, object]],
) -> None:
    partition, targets = scenario
    acceptable = targets["acceptable"]
    assert isinstance(acceptable, set)
    record = build(partition, **targets)  # type: ignore[arg-type]
    after = partition if record is None else partition.merge(record)
    if record is not None:
        assert record.leader == LEADER_UNCHANGED or record.leader in (NO_LEADER, *after.replicas)
    if after.leader != NO_LEADER:
        assert after.leader in acceptable
        assert after.leader in after.isr
        if targets["election"] is not Election.UNCLEAN:
            # ONLINE and PREFERRED only ever pick from the target ISR.
            target_isr = targets["isr"] if targets["isr"] is not None else partition.isr
            assert isinstance(target_isr, tuple)
            assert after.leader in target_isr
    if record is not None and record.leader_recovery_state == RECOVERING:
        assert after.isr == (after.leader,)  # only an unclean election sets RECOVERING here
    assert set(after.isr) <= set(after.replicas)
    assert set(after.adding_replicas) <= set(after.replicas)
    assert set(after.removing_replicas) <= set(after.replicas)
    assert not set(after.adding_replicas) & set(after.removing_replicas)


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_a_record_always_changes_something_and_building_again_converges(
    scenario: tuple[PartitionRegistration, dict[str, object]],
) -> None:
    partition, targets = scenario
    if targets["election"] is Election.UNCLEAN:
        targets["election"] = Election.ONLINE  # unclean rewrites the ISR away from the target
    record = build(partition, **targets)  # type: ignore[arg-type]
    if record is None:
        return
    assert record != change()
    after = partition.merge(record)
    assert after.partition_epoch == partition.partition_epoch + 1
    if record.replicas is None:
        # Unless a reassignment completed (the target ISR then named replicas now gone), the
        # partition has reached its targets: the same request again changes nothing.
        assert build(after, **targets) is None  # type: ignore[arg-type]


@pytest.mark.parametrize("election", list(Election))
def test_every_election_keeps_a_record_free_of_noise(election: Election) -> None:
    # A no-op election on a healthy partition writes nothing whatever the election type.
    assert build(part((1, 2, 3), (1, 2, 3), 1), acceptable=ALL, election=election) is None
