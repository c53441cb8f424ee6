"""PartitionChangeBuilder with eligible leader replicas (KIP-966): one scenario per rule of
the builder's docstring that ELR adds, each with the exact record expected, plus a property
over random changes.

Replicas are (1, 2, 3) and min.insync.replicas 2 unless a scenario says otherwise.
"""

from __future__ import annotations

from typing import Any
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

TOPIC = UUID(int=11, version=4)
REPLICAS = (1, 2, 3)
RECOVERING = LeaderRecoveryState.RECOVERING


def part(
    isr: tuple[int, ...],
    leader: int,
    *,
    elr: tuple[int, ...] = (),
    last_known: tuple[int, ...] = (),
) -> PartitionRegistration:
    return PartitionRegistration(REPLICAS, isr, leader, 4, 8, elr=elr, last_known_elr=last_known)


def build(
    partition: PartitionRegistration,
    *,
    acceptable: set[int],
    isr: tuple[int, ...] | None = None,
    **settings: Any,
) -> PartitionChangeRecord | None:
    """The builder's record, with ELR on and min ISR 2 unless `settings` say otherwise."""
    settings = {"elr_enabled": True, "min_isr": 2, **settings}
    builder = PartitionChangeBuilder(
        partition, TOPIC, 0, acceptable.__contains__, target_isr=isr, **settings
    )
    return builder.build()


def change(
    *,
    isr: tuple[int, ...] | None = None,
    leader: int = LEADER_UNCHANGED,
    elr: tuple[int, ...] | None = None,
    last_known: tuple[int, ...] | None = None,
    recovery: int = RECOVERY_STATE_UNCHANGED,
) -> PartitionChangeRecord:
    return PartitionChangeRecord(
        TOPIC,
        0,
        isr=isr,
        leader=leader,
        leader_recovery_state=recovery,
        elr=elr,
        last_known_elr=last_known,
    )


def test_a_shrink_below_min_isr_moves_the_replica_that_left_into_the_elr() -> None:
    record = build(part((1, 2), 1), acceptable={1, 2, 3}, isr=(1,))
    assert record == change(isr=(1,), elr=(2,))


def test_a_shrink_that_keeps_min_isr_keeps_no_elr() -> None:
    record = build(part((1, 2, 3), 1), acceptable={1, 2, 3}, isr=(1, 2))
    assert record == change(isr=(1, 2))


def test_the_last_member_leaving_empties_the_isr_into_the_elr() -> None:
    # Broker 1, the leader and last ISR member, is fenced.
    record = build(part((1,), 1, elr=(2,)), acceptable={3}, isr=())
    assert record == change(isr=(), leader=NO_LEADER, elr=(1, 2))


def test_without_elr_the_last_member_stays_in_the_isr() -> None:
    record = build(part((1,), 1), acceptable={3}, isr=(), elr_enabled=False)
    assert record == change(leader=NO_LEADER)


def test_an_elr_member_is_elected_cleanly_when_the_isr_is_empty() -> None:
    partition = part((), NO_LEADER, elr=(1, 2), last_known=(1,))
    record = build(partition, acceptable={2})
    assert record == change(isr=(2,), leader=2, elr=(1,), last_known=())


def test_an_elr_member_is_not_elected_while_the_isr_has_members() -> None:
    # 3 is in the ISR but fenced; 2 may only lead from the ELR once the ISR is empty.
    partition = part((3,), NO_LEADER, elr=(2,))
    assert build(partition, acceptable={2}) is None


def test_an_unclean_shutdown_moves_the_replica_from_the_elr_to_the_last_known_elr() -> None:
    # Broker 2 registers again without a clean-shutdown marker: it may have lost its tail.
    partition = part((), NO_LEADER, elr=(1, 2))
    record = build(partition, acceptable={3}, isr=(), unclean_shutdown_replicas=(2,))
    assert record == change(elr=(1,), last_known=(2,))
    # With 1 active, 1 leads at once, cleanly: it held every commit.
    record = build(partition, acceptable={1, 3}, isr=(), unclean_shutdown_replicas=(2,))
    assert record == change(isr=(1,), leader=1, elr=(), last_known=(2,))


def test_an_unclean_shutdown_of_the_last_isr_member_elects_nobody() -> None:
    # Seed 6's shape: 2 led alone (ISR below min ISR, 1 in the ELR but cut off), lost power,
    # and registers again: it leaves the ISR, is not in the ELR, and nobody active may lead.
    partition = part((2,), NO_LEADER, elr=(1,))
    record = build(partition, acceptable={3}, isr=(), unclean_shutdown_replicas=(2,))
    assert record == change(isr=(), last_known=(2,))


def test_with_isr_and_elr_empty_only_an_unclean_election_leads() -> None:
    # Every replica known to hold the commits shut down uncleanly: 3, the last leader, too.
    partition = part((), NO_LEADER, last_known=(3,))
    assert build(partition, acceptable={1, 3}) is None
    record = build(partition, acceptable={1, 3}, election=Election.UNCLEAN)
    assert record == change(isr=(1,), leader=1, last_known=(), recovery=RECOVERING)


def test_an_isr_back_at_min_isr_clears_the_elr() -> None:
    partition = part((2,), 2, elr=(1,))
    record = build(partition, acceptable={1, 2, 3}, isr=(2, 3))
    assert record == change(isr=(2, 3), elr=())


def test_an_unclean_election_clears_the_elr() -> None:
    partition = part((), NO_LEADER, elr=(1,), last_known=(2,))
    record = build(partition, acceptable={3}, election=Election.UNCLEAN)
    assert record == change(isr=(3,), leader=3, elr=(), last_known=(), recovery=RECOVERING)


def test_turning_elr_off_clears_both_fields() -> None:
    partition = part((1,), 1, elr=(2,), last_known=(3,))
    record = build(partition, acceptable={1, 2, 3}, elr_enabled=False)
    assert record == change(elr=(), last_known=())


@pytest.mark.parametrize("min_isr", [3, 5])
def test_the_effective_min_isr_is_at_most_the_replicas(min_isr: int) -> None:
    record = build(part((1, 2, 3), 1), acceptable={1, 2, 3}, isr=(1, 2), min_isr=min_isr)
    assert record == change(isr=(1, 2), elr=(3,))


_IDS = st.lists(st.sampled_from(REPLICAS), unique=True, max_size=3).map(tuple)


@settings(max_examples=300, deadline=None)
@given(
    isr=_IDS,
    elr=_IDS,
    target=_IDS,
    acceptable=st.sets(st.sampled_from(REPLICAS)),
    unclean=_IDS,
    min_isr=st.integers(1, 3),
    election=st.sampled_from(Election),
)
def test_elr_rules_hold_for_any_change(
    isr: tuple[int, ...],
    elr: tuple[int, ...],
    target: tuple[int, ...],
    acceptable: set[int],
    unclean: tuple[int, ...],
    min_isr: int,
    election: Election,
) -> None:
    elr = tuple(r for r in elr if r not in isr)
    leader = isr[0] if isr else NO_LEADER
    partition = part(isr, leader, elr=elr)
    record = build(
        partition,
        acceptable=acceptable,
        isr=target,
        election=election,
        unclean_shutdown_replicas=unclean,
        min_isr=min_isr,
    )
    after = partition if record is None else partition.merge(record)
    # The ELR never overlaps the ISR, never holds a replica that shut down uncleanly, and
    # exists only while the target ISR is below min ISR.
    assert not set(after.elr) & set(after.isr)
    assert not set(after.elr) & set(unclean)
    if len(target) >= min_isr:
        assert after.elr == ()
    # A leader is an ISR member; a clean one held every commit (ISR or ELR before).
    if after.leader != NO_LEADER:
        assert after.leader in after.isr
        unclean_election = record is not None and record.leader_recovery_state == RECOVERING
        if not unclean_election and after.leader != partition.leader:
            assert after.leader in set(target) | (set(isr) | set(elr)) - set(unclean)
