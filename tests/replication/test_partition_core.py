"""`PartitionCore` cases the scripts (testdata/*.txt) do not show: corruption reported before an
idempotence error, events on a replica that does not lead, events it does not know, and the
follower's answers to a divergence at the leader's log start and to OFFSET_OUT_OF_RANGE."""

from __future__ import annotations

from uuid import UUID

import pytest

from replog.errors import (
    CorruptRecordError,
    NotLeaderOrFollowerError,
    OutOfOrderSequenceNumberError,
)
from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.record import build_batch, read_header
from replog.replication.leader_state import PartitionReplicationConfig, ReplicaEligibility
from replog.replication.messages import ACKS_LEADER
from replog.replication.partition_core import PartitionCore
from replog.replication.partition_effects import BackOff, Refuse, RestartLogAt, TruncateTo
from replog.replication.partition_events import (
    DivergingEpochAnswered,
    FollowerFetchArrived,
    LeadershipChanged,
    OffsetOutOfRangeAnswered,
    ProduceArrived,
    TimerFired,
)
from replog.replication.producer_state import ProducerStateTable

NOW_MS = 1_000_000


def core() -> PartitionCore:
    return PartitionCore(
        topic="t",
        topic_id=UUID(int=7),
        partition=0,
        local_broker_id=1,
        producers=ProducerStateTable("t-0"),
        alter_partition_retry_ms=1000,
    )


def leading_with_a_producer() -> PartitionCore:
    """A single-replica leader whose producer 9 wrote sequence 0 at offset 0."""
    partition = core()
    partition.step(
        LeadershipChanged(
            PartitionRegistration(replicas=(1,), isr=(1,), leader=1, leader_epoch=1),
            0,
            0,
            PartitionReplicationConfig(),
            ReplicaEligibility.everyone((1,)),
        ),
        NOW_MS,
    )
    partition.producers.update(read_header(idempotent_batch(0)))
    return partition


def idempotent_batch(sequence: int) -> bytearray:
    return bytearray(
        build_batch([(0, None, b"v", ())], producer_id=9, producer_epoch=0, base_sequence=sequence)
    )


def test_an_out_of_order_batch_is_refused_as_such() -> None:
    partition = leading_with_a_producer()
    (refused,) = partition.step(ProduceArrived(ACKS_LEADER, bytes(idempotent_batch(5))), NOW_MS)
    assert isinstance(refused, Refuse)
    assert isinstance(refused.error, OutOfOrderSequenceNumberError)


def test_a_corrupt_batch_is_refused_as_corrupt_not_as_a_sequence_error() -> None:
    partition = leading_with_a_producer()
    corrupt = idempotent_batch(5)
    corrupt[-1] ^= 0xFF  # a record byte: the CRC no longer matches
    (refused,) = partition.step(ProduceArrived(ACKS_LEADER, bytes(corrupt)), NOW_MS)
    assert isinstance(refused, Refuse)
    assert isinstance(refused.error, CorruptRecordError)


def test_a_replica_that_does_not_lead_refuses_produces_and_fetches() -> None:
    partition = core()
    for event in (
        ProduceArrived(ACKS_LEADER, build_batch([(0, None, b"v", ())])),
        FollowerFetchArrived(2, -1, 0, 0, 0),
    ):
        (refused,) = partition.step(event, NOW_MS)
        assert isinstance(refused, Refuse)
        assert isinstance(refused.error, NotLeaderOrFollowerError)


def test_a_timer_for_a_replica_that_does_not_lead_does_nothing() -> None:
    assert core().step(TimerFired(0, check_isr=True), NOW_MS) == ()


def test_an_unknown_event_is_a_type_error_naming_the_partition() -> None:
    with pytest.raises(TypeError, match="t-0: not a partition event"):
        core().step(object(), NOW_MS)  # type: ignore[arg-type]


def test_a_divergence_at_or_below_the_leaders_log_start_restarts_the_log_there() -> None:
    def follower_end_offset_for(epoch: int) -> tuple[int, int]:
        return (epoch, 8)

    answered = DivergingEpochAnswered(3, 5, 6, 10, 4, follower_end_offset_for)
    assert core().step(answered, NOW_MS) == (RestartLogAt(6),)
    below_the_log_start = DivergingEpochAnswered(3, 5, 2, 10, 4, follower_end_offset_for)
    assert core().step(below_the_log_start, NOW_MS) == (TruncateTo(5),)


def test_offset_out_of_range_truncates_restarts_or_backs_off() -> None:
    partition = core()
    assert partition.step(OffsetOutOfRangeAnswered(7, 0, 9), NOW_MS) == (TruncateTo(7),)
    assert partition.step(OffsetOutOfRangeAnswered(20, 12, 9), NOW_MS) == (RestartLogAt(12),)
    assert partition.step(OffsetOutOfRangeAnswered(20, 3, 9), NOW_MS) == (BackOff(),)
    assert partition.step(OffsetOutOfRangeAnswered(-1, 3, 9), NOW_MS) == (BackOff(),)
