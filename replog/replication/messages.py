"""The broker data plane's requests and answers, as the replica manager sees them.

One frozen dataclass per message of `proto/replog/pb/broker.proto` but Metadata (DescribeLogDirs'
answer is built by `replog/server/data_plane/log_dirs.py`), flattened to one entry per partition
(the wire groups partitions by topic; `replog/wire/broker_codec.py` translates).
Errors are `replog.errors.KafkaError` instances, so each carries Kafka's code and a message
that names the topic-partition and offset it is about; None means success.

Conventions (Kafka's wire defaults): -1 means "none / not known / not checked" for offsets,
leader epochs, broker epochs and replica ids. Record bytes are whole v2 batches, never decoded
here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol
from uuid import UUID

from replog.common.frozen_init import fast_frozen_init
from replog.common.offsets import NO_LEADER_EPOCH as NO_LEADER_EPOCH
from replog.common.offsets import NO_OFFSET as NO_OFFSET
from replog.errors import KafkaError

CONSUMER_REPLICA_ID = -1
NO_SESSION = -1  # FetchRequest.session_epoch of a fetch outside any session

# ListOffsets special timestamps (Kafka's ListOffsetsRequest constants).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4  # KIP-405: the local log's first offset
LATEST_TIERED_TIMESTAMP = -5  # KIP-1005: the last offset in tiered storage
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6  # KIP-1023: the first offset not yet tiered

ACKS_NONE = 0
ACKS_LEADER = 1
ACKS_ALL = -1


class IsolationLevel(IntEnum):
    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1


@dataclass(frozen=True, slots=True)
class LeaderIdAndEpoch:
    leader_id: int  # -1: no leader
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class EpochEndOffsetResult:
    """Where `leader_epoch` ends in a log (exclusive): an OffsetsForLeaderEpoch answer or a
    Fetch's diverging epoch. (-1, -1): the epoch is not known."""

    leader_epoch: int
    end_offset: int


# --- Produce --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProducePartition:
    topic: str
    partition: int
    # Whole v2 batches: `bytes`, or a read-only view of `bytes` (a Kafka Produce request's
    # records as the listener decodes them).
    records: bytes | memoryview


@dataclass(frozen=True, slots=True)
class ProduceRequest:
    acks: int
    timeout_ms: int
    partitions: tuple[ProducePartition, ...]
    transactional_id: str | None = None  # a transactional producer's (Kafka's Produce v3+)


@dataclass(frozen=True, slots=True)
class ProducePartitionResult:
    topic: str
    partition: int
    error: KafkaError | None = None
    base_offset: int = NO_OFFSET
    log_append_time_ms: int = -1
    log_start_offset: int = NO_OFFSET
    current_leader: LeaderIdAndEpoch | None = None


@dataclass(frozen=True, slots=True)
class ProduceResponse:
    partitions: tuple[ProducePartitionResult, ...]


# --- Fetch ----------------------------------------------------------------------------------


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class FetchPartition:
    topic: str
    partition: int
    fetch_offset: int
    partition_max_bytes: int = 1048576
    current_leader_epoch: int = NO_LEADER_EPOCH
    last_fetched_epoch: int = NO_LEADER_EPOCH
    log_start_offset: int = NO_OFFSET
    topic_id: UUID | None = None


@dataclass(frozen=True, slots=True)
class FetchRequest:
    partitions: tuple[FetchPartition, ...]
    replica_id: int = CONSUMER_REPLICA_ID
    replica_epoch: int = -1
    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 52428800
    isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED
    # KIP-227 incremental fetch session on a ReplicaFetch call (`fetch_session`): NO_SESSION,
    # 0 (a full fetch opening the session), or the epoch of an incremental one, which carries
    # only changed partitions and, in `forgotten`, the (topic, partition)s dropped.
    session_epoch: int = NO_SESSION
    forgotten: tuple[tuple[str, int], ...] = ()
    # Not on the wire: a partition's records of this many bytes or more are answered as a
    # `RecordsRegion` (`FetchPartitionResult.region`), for the one writer that sends them
    # from the file (the framed fetch listener); None: always as bytes.
    region_min_bytes: int | None = None

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id >= 0


class RecordsRegion(Protocol):
    """Records a leader left in its segment file, for the writer of its answer to send from
    there (`replog.storage.file_region.Region`: a file's, or a memory file system's): here only
    their size is known."""

    def __len__(self) -> int: ...

    def close(self) -> None: ...


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class FetchPartitionResult:
    topic: str
    partition: int
    error: KafkaError | None = None
    high_watermark: int = NO_OFFSET
    last_stable_offset: int = NO_OFFSET
    log_start_offset: int = NO_OFFSET
    diverging_epoch: EpochEndOffsetResult | None = None
    current_leader: LeaderIdAndEpoch | None = None
    records: bytes = b""
    topic_id: UUID | None = None
    # To followers only, with OffsetOutOfRangeError: the leader's log end offset
    # (docs/design/replication.md#follower-out-of-range).
    log_end_offset: int = NO_OFFSET
    # The records, left in the leader's file (`FetchRequest.region_min_bytes`); `records`
    # is then empty.
    region: RecordsRegion | None = None
    # READ_COMMITTED only: (producer id, first offset) of each aborted transaction the
    # records overlap, for the consumer to skip (None: READ_UNCOMMITTED).
    aborted_transactions: tuple[tuple[int, int], ...] | None = None

    @property
    def records_size(self) -> int:
        """The records' bytes, wherever they are."""
        region = self.region
        return len(self.records) if region is None else len(region)


@dataclass(frozen=True, slots=True)
class FetchResponse:
    partitions: tuple[FetchPartitionResult, ...]


# --- ListOffsets ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ListOffsetsPartition:
    topic: str
    partition: int
    timestamp: int
    current_leader_epoch: int = NO_LEADER_EPOCH


@dataclass(frozen=True, slots=True)
class ListOffsetsRequest:
    partitions: tuple[ListOffsetsPartition, ...]
    replica_id: int = CONSUMER_REPLICA_ID
    isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED


@dataclass(frozen=True, slots=True)
class ListOffsetsPartitionResult:
    topic: str
    partition: int
    error: KafkaError | None = None
    timestamp: int = -1
    offset: int = NO_OFFSET
    leader_epoch: int = NO_LEADER_EPOCH


@dataclass(frozen=True, slots=True)
class ListOffsetsResponse:
    partitions: tuple[ListOffsetsPartitionResult, ...]


# --- OffsetsForLeaderEpoch ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetForLeaderPartition:
    topic: str
    partition: int
    leader_epoch: int
    current_leader_epoch: int = NO_LEADER_EPOCH


@dataclass(frozen=True, slots=True)
class OffsetsForLeaderEpochRequest:
    partitions: tuple[OffsetForLeaderPartition, ...]
    replica_id: int = CONSUMER_REPLICA_ID


@dataclass(frozen=True, slots=True)
class OffsetForLeaderPartitionResult:
    topic: str
    partition: int
    error: KafkaError | None = None
    leader_epoch: int = NO_LEADER_EPOCH
    end_offset: int = NO_OFFSET


@dataclass(frozen=True, slots=True)
class OffsetsForLeaderEpochResponse:
    partitions: tuple[OffsetForLeaderPartitionResult, ...]


# --- DeleteRecords --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeleteRecordsPartition:
    topic: str
    partition: int
    offset: int  # -1: up to the high watermark


@dataclass(frozen=True, slots=True)
class DeleteRecordsRequest:
    partitions: tuple[DeleteRecordsPartition, ...]
    timeout_ms: int = 30000


@dataclass(frozen=True, slots=True)
class DeleteRecordsPartitionResult:
    topic: str
    partition: int
    error: KafkaError | None = None
    low_watermark: int = NO_OFFSET


@dataclass(frozen=True, slots=True)
class DeleteRecordsResponse:
    partitions: tuple[DeleteRecordsPartitionResult, ...]


# --- InitProducerId -----------------------------------------------------------------------------

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


@dataclass(frozen=True, slots=True)
class InitProducerIdRequest:
    """(-1, -1): a new producer id. A transactional id asks for transactions (unsupported)."""

    transactional_id: str | None = None
    transaction_timeout_ms: int = 0
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class InitProducerIdResponse:
    error: KafkaError | None = None
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


# --- WriteTxnMarkers ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """A coordinator's end of one transaction: a COMMIT (`committed`) or ABORT marker to write
    to each of `partitions`, as leader, once replicated to the ISR (Kafka's WritableTxnMarker;
    `transaction_version` 0 or 1 before KIP-890 part 2, 2 after)."""

    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    partitions: tuple[tuple[str, int], ...]
    transaction_version: int = 0


@dataclass(frozen=True, slots=True)
class WriteTxnMarkersRequest:
    markers: tuple[TxnMarker, ...]
    timeout_ms: int = 30000


@dataclass(frozen=True, slots=True)
class TxnMarkerPartitionResult:
    topic: str
    partition: int
    error: KafkaError | None = None


@dataclass(frozen=True, slots=True)
class TxnMarkerResult:
    producer_id: int
    partitions: tuple[TxnMarkerPartitionResult, ...]


@dataclass(frozen=True, slots=True)
class WriteTxnMarkersResponse:
    markers: tuple[TxnMarkerResult, ...]


# --- AddPartitionsToTxn between brokers ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TxnPartitionsRequest:
    """A partition leader's or group coordinator's question to a transaction coordinator
    (KIP-890): add `partitions` to the producer's transaction (transaction version 2), or,
    `verify_only`, say whether they are in it (Kafka's AddPartitionsToTxn v4+ from a broker)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[tuple[str, int], ...]
    verify_only: bool


@dataclass(frozen=True, slots=True)
class TxnPartitionsResponse:
    """One result per partition asked, in the request's order."""

    partitions: tuple[TxnMarkerPartitionResult, ...]


# --- DescribeLogDirs ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ReplicaLogInfo:
    """One replica's log in a log dir."""

    topic: str
    partition: int
    size: int
    offset_lag: int
    is_future: bool
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    dirty_ratio: float | None = None  # a compacted log's (the log cleaner's ratio), else None


@dataclass(frozen=True)
class LogDirDescription:
    log_dir: str
    error: KafkaError | None
    replicas: tuple[ReplicaLogInfo, ...]


@dataclass(frozen=True)
class DescribeLogDirsRequest:
    topics: tuple[str, ...] = ()  # empty: every topic


@dataclass(frozen=True)
class DescribeLogDirsResponse:
    log_dirs: tuple[LogDirDescription, ...]
