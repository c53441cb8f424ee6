"""The metadata append connection's format: `framed_wire` with its own magic, carrying
`MetadataLog.Append` requests and answers, many at once on one connection.

Why not gRPC: a process that writes the metadata log (a tool, a benchmark's proposers, an
application beside the cluster) pays Python gRPC's per-call cost on every append, and a Python
gRPC server serves about 2,000 unary calls a second on this project's machine whatever the
quorum could commit (docs/benchmarks.md, "Metadata quorum commit", the grpc-noop row). Here a
connection carries any number of appends at once, each answered when it is committed.

Format: `framed_wire`'s greeting with the magic `RLMA`, version 1 and the caller's id
(`NOT_A_NODE`: a client, not a node), then frames:
- caller to node: a protobuf `AppendRequest` (raft.proto), with a sequence number the caller
  chooses (the request's correlation id, 1 or more);
- node to caller, with the request's sequence number: the `AppendResponse` the gRPC
  `MetadataLog.Append` answers with (error code and message, leader id, quorum epoch, offsets).
  Answers are written as appends commit, not in the order sent;
- node to caller, with sequence number `CONNECTION_REFUSAL` (0): an `AppendResponse` refusing
  the connection as a whole (bytes that break the framing), after which the node closes it.

Rules: an append too large for a frame raises `MessageSizeTooLargeError` before it is sent
(`request_frame`); a frame whose message is not an `AppendRequest` raises
`MalformedRequestError` naming the request and what was wrong (the node answers it so; the
frames after it are intact); bytes that break the framing raise `InvalidRequestError`
(`framed_wire`), and so does a request numbered 0 on the node; an answer that is not an
`AppendResponse` raises `MalformedResponseError`. `result_of` turns an answer's error code
back into the `replog.errors` class the node raised.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from google.protobuf.message import DecodeError

from replog.errors import (
    KafkaError,
    MalformedRequestError,
    MalformedResponseError,
    MessageSizeTooLargeError,
    error_for_code,
)
from replog.pb import raft_pb2 as pb
from replog.wire.framed_wire import FrameFormat, frame

# The same limit as the quorum's gRPC messages.
FORMAT = FrameFormat(
    name="metadata append", magic=b"RLMA", version=1, max_frame_bytes=64 * 1024 * 1024
)
CONNECTION_REFUSAL = 0
NOT_A_NODE = -1
NONE = -1  # "unknown" on the wire (leader id)


@dataclass(frozen=True, slots=True)
class AppendResult:
    """Where a committed append's values are in the metadata log."""

    quorum_epoch: int
    base_offset: int
    last_offset: int


def request_frame(sequence: int, values: Sequence[bytes]) -> bytes:
    """The frame of request `sequence` (MessageSizeTooLargeError: longer than a frame may be,
    which the node would answer by refusing the whole connection)."""
    payload = pb.AppendRequest(values=values).SerializeToString()
    if len(payload) > FORMAT.max_frame_bytes:
        raise MessageSizeTooLargeError(
            f"an append of {len(values)} values is a {FORMAT.name} frame of {len(payload)} "
            f"bytes, over its limit of {FORMAT.max_frame_bytes}"
        )
    return frame(sequence, payload)


def parse_request(sequence: int, payload: bytes) -> list[bytes]:
    """The values of request `sequence` (MalformedRequestError naming what was wrong)."""
    try:
        request = pb.AppendRequest.FromString(payload)
    except DecodeError as exc:
        raise MalformedRequestError(
            f"{FORMAT.name} request {sequence}: {len(payload)} bytes that are not an "
            f"AppendRequest ({exc})"
        ) from None
    return list(request.values)


def answer_frame(sequence: int, answer: pb.AppendResponse) -> bytes:
    return frame(sequence, answer.SerializeToString())


def refusal(error: KafkaError, leader_id: int = NONE, quorum_epoch: int = 0) -> pb.AppendResponse:
    """The answer carrying `error` (its code and message)."""
    return pb.AppendResponse(
        error_code=error.code,
        error_message=str(error),
        leader_id=leader_id,
        quorum_epoch=quorum_epoch,
    )


def parse_answer(payload: bytes, where: str) -> pb.AppendResponse:
    """An answer's message; `where` ("node 2 at host:port") names the sender in errors."""
    try:
        answer: pb.AppendResponse = pb.AppendResponse.FromString(payload)
    except DecodeError as exc:
        raise MalformedResponseError(
            f"{where} sent {len(payload)} bytes that are not an AppendResponse ({exc})"
        ) from None
    return answer


def result_of(answer: pb.AppendResponse) -> AppendResult:
    """The committed append, or the error the node answered with, raised as its class."""
    if answer.error_code:
        raise error_for_code(answer.error_code, answer.error_message)
    return AppendResult(answer.quorum_epoch, answer.base_offset, answer.last_offset)
