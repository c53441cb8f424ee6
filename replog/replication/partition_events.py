"""What can happen to one partition replica: the inputs of `PartitionCore.step`.

Rules:
- An event is plain data the shell observed: a request's metadata (never a decoded record:
  a produce carries its batch headers only), an offset the log reported after an I/O the
  core asked for, a metadata change, a controller's answer, or a timer.
- Offsets are the ones the shell captured when the event happened (the leader's log end
  offset before a follower's read, after an append); time arrives beside the event, as
  `step`'s `now_ms`, never inside it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from replog.common.frozen_init import fast_frozen_init
from replog.errors import KafkaError
from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.replication.leader_state import (
    IsrChange,
    PartitionReplicationConfig,
    ReplicaEligibility,
)
from replog.replication.producer_state import AppendOrigin


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class ProduceArrived:
    """One partition's entry of a Produce, before anything is appended."""

    acks: int  # 0, 1 or -1 (the request's acks, already known to be one of them)
    # The entry's batches as they arrived: the core reads their headers (and checks their
    # CRCs when the idempotence check refuses them), never their records.
    records: bytes | memoryview
    # acks=-1 produces waiting in the broker's produce purgatory, and its bound.
    waiting_produces: int = 0
    waiting_produces_max: int = 1
    origin: AppendOrigin = AppendOrigin.CLIENT  # a coordinator's batches skip sequence checks


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class LogAppended:
    """The log appended what `ProduceArrived` asked for (`AppendToLog`)."""

    acks: int
    last_offset: int  # of the last appended batch
    leader_log_end_offset: int  # after the append


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class ParkedProduceWoken:
    """A produce parked on this partition (`ParkProduce`) is re-checked."""

    required_offset: int


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class ParkedProduceExpired:
    """A parked produce's request timed out before this partition was done."""

    required_offset: int


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class DeleteRecordsArrived:
    """One partition's entry of a DeleteRecords, before the log start moves."""

    offset: int  # the entry's offset; -1: the HW
    cleanup_policy: str  # the log's cleanup.policy
    leader_log_start_offset: int
    # The request may wait (a timeout, a broker not stopping); DeleteRecords requests waiting in
    # the broker's purgatory, and its bound.
    may_wait: bool = True
    waiting: int = 0
    waiting_max: int = 1


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class LogStartMoved:
    """The log start moved to `offset` as `MoveLogStart` asked (`moved`: it was lower)."""

    offset: int
    moved: bool
    leader_log_start_offset: int


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class ParkedDeleteRecordsWoken:
    """A DeleteRecords parked on this partition (`ParkDeleteRecords`) is re-checked."""

    offset: int
    leader_log_start_offset: int  # -1 when this replica no longer leads


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class ParkedDeleteRecordsExpired:
    """A parked DeleteRecords' request timed out before the low watermark reached `offset`."""

    offset: int
    leader_log_start_offset: int  # -1 when this replica no longer leads


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class FollowerFetchArrived:
    """A follower's Fetch of this partition, recorded once per request (its initial read)."""

    replica_id: int
    broker_epoch: int
    fetch_offset: int
    log_start_offset: int
    leader_log_end_offset: int  # captured before the read


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class DivergingEpochAnswered:
    """The leader answered this follower's fetch with a DivergingEpoch (or an
    OffsetsForLeaderEpoch answer): its (epoch, end offset) for the follower's last epoch."""

    leader_epoch: int
    leader_end_offset: int
    leader_log_start_offset: int  # -1: not in the answer
    follower_log_end_offset: int
    follower_high_watermark: int
    # The follower's own (epoch, end offset) for an epoch (its leader-epoch cache against its
    # LEO), or None when its log tracks no epochs; read only while the event is stepped.
    follower_end_offset_for: Callable[[int], tuple[int, int] | None]


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class OffsetOutOfRangeAnswered:
    """The leader answered this follower's fetch with OFFSET_OUT_OF_RANGE."""

    leader_log_end_offset: int  # -1: not in the answer
    leader_log_start_offset: int
    follower_log_end_offset: int


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class LeadershipChanged:
    """A metadata image names this broker the leader, with `registration`. `config` and
    `eligibility` are read by a replica that starts leading; a leader already takes newer
    ones from `ImageRefreshed`."""

    registration: PartitionRegistration
    leader_log_end_offset: int
    log_high_watermark: int  # the log's (checkpointed) HW, for a replica that starts leading
    config: PartitionReplicationConfig
    eligibility: ReplicaEligibility


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class LeadershipLost:
    """A metadata image names another leader (or none), or the replica stops."""


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class ImageRefreshed:
    """A metadata image's broker registrations (who may join an ISR, whose broker epoch
    fences) and replication config (min.insync.replicas, replica.lag.time.max.ms) reach a
    leader."""

    eligibility: ReplicaEligibility
    config: PartitionReplicationConfig
    leader_log_end_offset: int


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class AlterPartitionAnswered:
    """The controller's answer to `change` (or the sender's error for it)."""

    change: IsrChange
    error: KafkaError | None
    isr: tuple[int, ...]
    leader_epoch: int
    partition_epoch: int
    leader_log_end_offset: int


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class AlterPartitionCollected:
    """The AlterPartition sender collects what to send for this partition (after a
    `SendAlterPartition` named it)."""


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class TimerFired:
    """A wake-up the core asked for (`ScheduleWakeup`) or the periodic ISR check
    (`check_isr`: every replica.lag.time.max.ms / 2)."""

    leader_log_end_offset: int
    check_isr: bool = False


PartitionEvent = (
    ProduceArrived
    | LogAppended
    | ParkedProduceWoken
    | ParkedProduceExpired
    | DeleteRecordsArrived
    | LogStartMoved
    | ParkedDeleteRecordsWoken
    | ParkedDeleteRecordsExpired
    | FollowerFetchArrived
    | DivergingEpochAnswered
    | OffsetOutOfRangeAnswered
    | LeadershipChanged
    | LeadershipLost
    | ImageRefreshed
    | AlterPartitionAnswered
    | AlterPartitionCollected
    | TimerFired
)
