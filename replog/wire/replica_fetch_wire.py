"""The framed fetch connection's format: `framed_wire` with its own magic, and refusals.

Used by the Spark source's framed fetches (`spark.framed_fetch`), which read over gRPC where a
broker names no framed fetch listener; replog's brokers name none (their followers fetch over
the `ReplicaFetch` gRPC service, docs/replication.md).

Format: `framed_wire`'s greeting with the magic `RLRP`, version 1 and the follower's broker id,
then frames:
- follower to leader: a protobuf `FetchRequest` (`broker.proto`), the sequence number below
  `REFUSAL_BIT`;
- leader to follower, with the request's sequence number: the protobuf `FetchResponse`, as the
  `Broker` service writes it (`broker_codec.fetch_response_to_wire`: record bytes are joined
  in, never decoded); or, with `REFUSAL_BIT` set in the sequence number, a refusal of the
  whole request: a Kafka error code (int16) and a UTF-8 message naming what was wrong. The
  leader closes the connection after a refusal, as a refused gRPC stream ended.

Rules: bytes that break the format raise `InvalidRequestError` naming what was wrong
(`framed_wire`); a refusal decodes to the `replog.errors` class of its code.
"""

from __future__ import annotations

import struct

from replog.errors import InvalidRequestError, KafkaError, error_for_code
from replog.wire.framed_wire import FrameFormat, header

# Answers may be as large as the Broker service's gRPC messages (its channels' limit).
FORMAT = FrameFormat(
    name="replica fetch", magic=b"RLRP", version=1, max_frame_bytes=128 * 1024 * 1024
)
REFUSAL_BIT = 0x8000_0000
SEQUENCE_MASK = REFUSAL_BIT - 1
_CODE = struct.Struct(">h")


def refusal(sequence: int, error: KafkaError) -> bytes:
    """The frame refusing request `sequence` with `error` (its code and message)."""
    body = _CODE.pack(error.code) + str(error).encode("utf-8", "replace")
    return header(sequence | REFUSAL_BIT, len(body)) + body


def parse_refusal(payload: bytes, where: str) -> KafkaError:
    """The error a refusal frame carries; `where` ("broker 2 at host:port") prefixes it."""
    if len(payload) < _CODE.size:
        raise InvalidRequestError(
            f"{FORMAT.name} refusal of {len(payload)} bytes: too short for its error code"
        )
    (code,) = _CODE.unpack_from(payload)
    message = payload[_CODE.size :].decode("utf-8", "replace")
    return error_for_code(code, f"{where} refused the fetch: {message}")
