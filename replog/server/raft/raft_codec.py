"""Translation between the Raft core's message dataclasses and their protobuf form.

Rules: None (no leader, no high watermark, anonymous observer) is -1 on the wire; correlation
ids never cross the wire: each side numbers its own calls, so `from_*` functions take the local
correlation id to stamp on what they build.
"""

from __future__ import annotations

from replog.pb import raft_pb2 as pb
from replog.quorum.raft.log_view import EpochEndOffset
from replog.quorum.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RaftRequest,
    RaftResponse,
    ReplicaDescription,
    VoteRequest,
    VoteResponse,
)
from replog.quorum.raft.snapshot_id import SnapshotId

NONE = -1


def _opt(value: int | None) -> int:
    return NONE if value is None else value


def _none(value: int) -> int | None:
    return None if value == NONE else value


def _error(code: int) -> ErrorCode:
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.INVALID_REQUEST


def snapshot_id_to_proto(snapshot_id: SnapshotId) -> pb.SnapshotId:
    return pb.SnapshotId(end_offset=snapshot_id.end_offset, quorum_epoch=snapshot_id.quorum_epoch)


def snapshot_id_from_proto(message: pb.SnapshotId) -> SnapshotId:
    return SnapshotId(message.end_offset, message.quorum_epoch)


# --- requests ---------------------------------------------------------------------------------


def request_to_proto(body: RaftRequest) -> object:
    """The protobuf message for a request dataclass."""
    if isinstance(body, VoteRequest):
        return pb.VoteRequest(
            quorum_epoch=body.quorum_epoch,
            candidate_id=body.candidate_id,
            last_offset_epoch=body.last_offset_epoch,
            last_offset=body.last_offset,
            pre_vote=body.pre_vote,
        )
    if isinstance(body, BeginQuorumEpochRequest):
        return pb.BeginQuorumEpochRequest(quorum_epoch=body.quorum_epoch, leader_id=body.leader_id)
    if isinstance(body, EndQuorumEpochRequest):
        return pb.EndQuorumEpochRequest(
            quorum_epoch=body.quorum_epoch,
            leader_id=body.leader_id,
            preferred_successors=list(body.preferred_successors),
        )
    if isinstance(body, FetchRequest):
        return pb.FetchRequest(
            replica_id=_opt(body.replica_id),
            quorum_epoch=body.quorum_epoch,
            fetch_offset=body.fetch_offset,
            last_fetched_epoch=body.last_fetched_epoch,
            high_watermark=body.high_watermark,
            max_wait_ms=body.max_wait_ms,
            max_bytes=body.max_bytes,
        )
    if isinstance(body, FetchSnapshotRequest):
        return pb.FetchSnapshotRequest(
            replica_id=_opt(body.replica_id),
            quorum_epoch=body.quorum_epoch,
            snapshot_id=snapshot_id_to_proto(body.snapshot_id),
            position=body.position,
            max_bytes=body.max_bytes,
        )
    if isinstance(body, DescribeQuorumRequest):
        return pb.DescribeQuorumRequest()
    raise TypeError(f"not a Raft request: {body!r}")


def vote_request_from_proto(m: pb.VoteRequest, correlation_id: int) -> VoteRequest:
    return VoteRequest(
        correlation_id,
        m.quorum_epoch,
        m.candidate_id,
        m.last_offset_epoch,
        m.last_offset,
        m.pre_vote,
    )


def begin_quorum_epoch_request_from_proto(
    m: pb.BeginQuorumEpochRequest, correlation_id: int
) -> BeginQuorumEpochRequest:
    return BeginQuorumEpochRequest(correlation_id, m.quorum_epoch, m.leader_id)


def end_quorum_epoch_request_from_proto(
    m: pb.EndQuorumEpochRequest, correlation_id: int
) -> EndQuorumEpochRequest:
    return EndQuorumEpochRequest(
        correlation_id, m.quorum_epoch, m.leader_id, tuple(m.preferred_successors)
    )


def fetch_request_from_proto(m: pb.FetchRequest, correlation_id: int) -> FetchRequest:
    return FetchRequest(
        correlation_id,
        _none(m.replica_id),
        m.quorum_epoch,
        m.fetch_offset,
        m.last_fetched_epoch,
        m.high_watermark,
        m.max_wait_ms,
        m.max_bytes,
    )


def fetch_snapshot_request_from_proto(
    m: pb.FetchSnapshotRequest, correlation_id: int
) -> FetchSnapshotRequest:
    return FetchSnapshotRequest(
        correlation_id,
        _none(m.replica_id),
        m.quorum_epoch,
        snapshot_id_from_proto(m.snapshot_id),
        m.position,
        m.max_bytes,
    )


# --- responses --------------------------------------------------------------------------------


def response_to_proto(body: RaftResponse) -> object:
    """The protobuf message for a response dataclass."""
    if isinstance(body, VoteResponse):
        return pb.VoteResponse(
            error_code=body.error,
            quorum_epoch=body.quorum_epoch,
            leader_id=_opt(body.leader_id),
            vote_granted=body.vote_granted,
            pre_vote=body.pre_vote,
        )
    if isinstance(body, BeginQuorumEpochResponse | EndQuorumEpochResponse):
        return pb.QuorumEpochResponse(
            error_code=body.error, quorum_epoch=body.quorum_epoch, leader_id=_opt(body.leader_id)
        )
    if isinstance(body, FetchResponse):
        message = pb.FetchResponse(
            error_code=body.error,
            quorum_epoch=body.quorum_epoch,
            leader_id=_opt(body.leader_id),
            fetch_offset=body.fetch_offset,
            last_fetched_epoch=body.last_fetched_epoch,
            high_watermark=_opt(body.high_watermark),
            log_start_offset=body.log_start_offset,
            records=body.records,
        )
        if body.diverging_epoch is not None:
            message.diverging_epoch.quorum_epoch = body.diverging_epoch.quorum_epoch
            message.diverging_epoch.end_offset = body.diverging_epoch.end_offset
        if body.snapshot_id is not None:
            message.snapshot_id.CopyFrom(snapshot_id_to_proto(body.snapshot_id))
        return message
    if isinstance(body, FetchSnapshotResponse):
        return pb.FetchSnapshotResponse(
            error_code=body.error,
            quorum_epoch=body.quorum_epoch,
            leader_id=_opt(body.leader_id),
            snapshot_id=snapshot_id_to_proto(body.snapshot_id),
            size=body.size,
            position=body.position,
            chunk=body.chunk,
        )
    if isinstance(body, DescribeQuorumResponse):
        return pb.DescribeQuorumResponse(
            error_code=body.error,
            quorum_epoch=body.quorum_epoch,
            leader_id=_opt(body.leader_id),
            high_watermark=_opt(body.high_watermark),
            voters=[_replica_to_proto(r) for r in body.voters],
            observers=[_replica_to_proto(r) for r in body.observers],
        )
    raise TypeError(f"not a Raft response: {body!r}")


def _replica_to_proto(replica: ReplicaDescription) -> pb.ReplicaState:
    return pb.ReplicaState(
        replica_id=replica.replica_id,
        log_end_offset=_opt(replica.log_end_offset),
        last_fetch_ms=_opt(replica.last_fetch_ms),
        last_caught_up_ms=_opt(replica.last_caught_up_ms),
    )


def _replica_from_proto(m: pb.ReplicaState) -> ReplicaDescription:
    return ReplicaDescription(
        m.replica_id, _none(m.log_end_offset), _none(m.last_fetch_ms), _none(m.last_caught_up_ms)
    )


def response_from_proto(request: RaftRequest, m: object) -> RaftResponse:
    """The response dataclass for the protobuf answer `m` to `request` (same correlation id)."""
    cid = request.correlation_id
    if isinstance(request, VoteRequest):
        assert isinstance(m, pb.VoteResponse)
        return VoteResponse(
            cid,
            _error(m.error_code),
            m.quorum_epoch,
            _none(m.leader_id),
            m.vote_granted,
            m.pre_vote,
        )
    if isinstance(request, BeginQuorumEpochRequest):
        assert isinstance(m, pb.QuorumEpochResponse)
        return BeginQuorumEpochResponse(
            cid, _error(m.error_code), m.quorum_epoch, _none(m.leader_id)
        )
    if isinstance(request, EndQuorumEpochRequest):
        assert isinstance(m, pb.QuorumEpochResponse)
        return EndQuorumEpochResponse(cid, _error(m.error_code), m.quorum_epoch, _none(m.leader_id))
    if isinstance(request, FetchRequest):
        assert isinstance(m, pb.FetchResponse)
        return FetchResponse(
            cid,
            _error(m.error_code),
            m.quorum_epoch,
            _none(m.leader_id),
            m.fetch_offset,
            m.last_fetched_epoch,
            high_watermark=_none(m.high_watermark),
            log_start_offset=m.log_start_offset,
            diverging_epoch=(
                EpochEndOffset(m.diverging_epoch.quorum_epoch, m.diverging_epoch.end_offset)
                if m.HasField("diverging_epoch")
                else None
            ),
            snapshot_id=snapshot_id_from_proto(m.snapshot_id)
            if m.HasField("snapshot_id")
            else None,
            records=m.records,
        )
    if isinstance(request, FetchSnapshotRequest):
        assert isinstance(m, pb.FetchSnapshotResponse)
        return FetchSnapshotResponse(
            cid,
            _error(m.error_code),
            m.quorum_epoch,
            _none(m.leader_id),
            snapshot_id_from_proto(m.snapshot_id),
            size=m.size,
            position=m.position,
            chunk=m.chunk,
        )
    if isinstance(request, DescribeQuorumRequest):
        assert isinstance(m, pb.DescribeQuorumResponse)
        return DescribeQuorumResponse(
            cid,
            _error(m.error_code),
            m.quorum_epoch,
            _none(m.leader_id),
            high_watermark=_none(m.high_watermark),
            voters=tuple(_replica_from_proto(r) for r in m.voters),
            observers=tuple(_replica_from_proto(r) for r in m.observers),
        )
    raise TypeError(f"not a Raft request: {request!r}")
