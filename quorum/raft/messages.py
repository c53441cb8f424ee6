"""The Raft RPCs between quorum nodes, as frozen dataclasses (requests, responses, envelope).

Every RPC of KIP-595/KIP-630/KIP-996 that the static-quorum core needs: Vote (with the pre-vote
flag), BeginQuorumEpoch, EndQuorumEpoch, Fetch, FetchSnapshot and DescribeQuorum. The shell
carries Fetch on a framed TCP connection (`replog/server/raft/raft_fetch_wire.py`) and the others on
the gRPC `RaftQuorum` service; a request and its response share `correlation_id`, which the
shell uses to route a response back to the call that waits for it.

Rules:
- "No leader" and "no epoch" are None in Python; the wire format maps them to -1.
- A response always carries the responder's current `quorum_epoch` and the leader it knows, even
  with an error, so that the receiver can catch up (Kafka's common response handling).
- `error` is an `ErrorCode`, whose values are Kafka's wire codes (`replog.errors` has the
  matching exception classes).
- Records and snapshot chunks are raw bytes: whole RecordBatch v2 batches for Fetch, an
  arbitrary slice of the snapshot file for FetchSnapshot.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from replog.quorum.raft.log_view import EpochEndOffset
from replog.quorum.raft.snapshot_id import SnapshotId


class ErrorCode(IntEnum):
    """Kafka's wire error codes used by the Raft RPCs."""

    NONE = 0
    NOT_LEADER_OR_FOLLOWER = 6
    INVALID_REQUEST = 42
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99


# --- Vote -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VoteRequest:
    """A candidate's (or, with `pre_vote`, a prospective's) request for a vote.

    `quorum_epoch` is the candidate's bumped epoch, or the prospective's current epoch for a
    pre-vote. `last_offset_epoch`/`last_offset` are its last epoch and log end offset.
    """

    correlation_id: int
    quorum_epoch: int
    candidate_id: int
    last_offset_epoch: int
    last_offset: int
    pre_vote: bool


@dataclass(frozen=True, slots=True)
class VoteResponse:
    correlation_id: int
    error: ErrorCode
    quorum_epoch: int
    leader_id: int | None
    vote_granted: bool
    pre_vote: bool


# --- BeginQuorumEpoch / EndQuorumEpoch --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    """A new leader announcing itself to a voter that may not be fetching from it yet."""

    correlation_id: int
    quorum_epoch: int
    leader_id: int


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    correlation_id: int
    error: ErrorCode
    quorum_epoch: int
    leader_id: int | None


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    """A resigning leader; `preferred_successors` by descending fetch offset."""

    correlation_id: int
    quorum_epoch: int
    leader_id: int
    preferred_successors: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    correlation_id: int
    error: ErrorCode
    quorum_epoch: int
    leader_id: int | None


# --- Fetch -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """A follower or observer pulling from its log end offset.

    `fetch_offset` is the fetcher's log end offset; for a voter it is also a promise that every
    offset below it is flushed. `last_fetched_epoch` is the epoch of the fetcher's last batch
    (0 for an empty log). `high_watermark` is the one the fetcher knows: when the leader knows
    a higher one it answers after at most `high_watermark_linger_ms` (5 ms), instead of
    parking the request for the full wait. `replica_id` is None for an anonymous observer.
    """

    correlation_id: int
    replica_id: int | None
    quorum_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    high_watermark: int
    max_wait_ms: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class FetchResponse:
    """The leader's answer. At most one of `diverging_epoch`, `snapshot_id`, `records` is set.

    `fetch_offset`/`last_fetched_epoch` echo the request so that a late or duplicated response
    can be recognised as answering a log position the fetcher no longer has.
    `high_watermark` is None while the leader has not committed an entry of its own epoch.
    """

    correlation_id: int
    error: ErrorCode
    quorum_epoch: int
    leader_id: int | None
    fetch_offset: int
    last_fetched_epoch: int
    high_watermark: int | None = None
    log_start_offset: int = 0
    diverging_epoch: EpochEndOffset | None = None
    snapshot_id: SnapshotId | None = None
    records: bytes = b""


# --- FetchSnapshot ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    """A follower downloading `snapshot_id` from byte `position`."""

    correlation_id: int
    replica_id: int | None
    quorum_epoch: int
    snapshot_id: SnapshotId
    position: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    """One chunk of a snapshot: bytes [position, position + len(chunk)) of `size`."""

    correlation_id: int
    error: ErrorCode
    quorum_epoch: int
    leader_id: int | None
    snapshot_id: SnapshotId
    size: int = 0
    position: int = 0
    chunk: bytes = b""


# --- DescribeQuorum --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DescribeQuorumRequest:
    correlation_id: int


@dataclass(frozen=True, slots=True)
class ReplicaDescription:
    """What the leader knows about one replica; None when it never fetched in this epoch."""

    replica_id: int
    log_end_offset: int | None
    last_fetch_ms: int | None
    last_caught_up_ms: int | None


@dataclass(frozen=True, slots=True)
class DescribeQuorumResponse:
    correlation_id: int
    error: ErrorCode
    quorum_epoch: int
    leader_id: int | None
    high_watermark: int | None = None
    voters: tuple[ReplicaDescription, ...] = ()
    observers: tuple[ReplicaDescription, ...] = ()


# --- Envelope --------------------------------------------------------------------------------

RaftRequest = (
    VoteRequest
    | BeginQuorumEpochRequest
    | EndQuorumEpochRequest
    | FetchRequest
    | FetchSnapshotRequest
    | DescribeQuorumRequest
)
RaftResponse = (
    VoteResponse
    | BeginQuorumEpochResponse
    | EndQuorumEpochResponse
    | FetchResponse
    | FetchSnapshotResponse
    | DescribeQuorumResponse
)
RaftBody = RaftRequest | RaftResponse

REQUEST_TYPES = (
    VoteRequest,
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
    DescribeQuorumRequest,
)


@dataclass(frozen=True, slots=True)
class Message:
    """One RPC request or response from `source_id` to `destination_id`.

    Clients that are not quorum nodes (DescribeQuorum from a CLI) use any id the shell picks;
    the response goes back to that id.
    """

    source_id: int
    destination_id: int
    body: RaftBody

    @property
    def is_request(self) -> bool:
        return isinstance(self.body, REQUEST_TYPES)
