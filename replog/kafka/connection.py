"""The sans-I/O core of one Kafka client connection: bytes in, requests out, responses back in
request order (docs/kafka-protocol.md, "Listener").

Rules (Kafka's):
- A frame is an int32 size, then that many bytes. A negative size, or one above
  `request_bytes_max` (`socket.request.max.bytes`), is an `InvalidFrameSizeError` (Kafka's
  InvalidReceiveException) and the connection must close; the frame is never buffered.
- A complete frame's request header is read first. An API key the listener does not serve, a
  version outside its served range, a header or body that does not decode: a
  `KafkaConnectionError` naming the peer and the cause, and the connection closes, as Kafka's
  broker closes it. Bytes after a body that decodes are ignored, as Kafka's parser ignores
  them.
- ApiVersions at a version above the served range is answered, not refused (KIP-511): error
  UNSUPPORTED_VERSION, the served ApiVersions range as the only API, in a v0 body under
  response header v0, so that any client can read it and retry lower.
- Responses leave strictly in request order, whatever order the handlers finish in: each
  request takes a slot in arrival order, `respond` fills it, `take_output` releases the filled
  slots at the head. A request answered with no response (Produce with acks=0) frees its slot
  without bytes.
- `in_flight` counts the requests read whose responses were not taken yet; the shell reads no
  more while it is at its bound (`queued.max.requests`), so a client that sends and never reads
  holds a bounded amount of memory.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass

from replog.errors import (
    IllegalStateError,
    InvalidFrameSizeError,
    KafkaConnectionError,
    KafkaError,
    UnsupportedVersionError,
)
from replog.kafka.messages import REQUESTS
from replog.kafka.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from replog.kafka.messages.request_header import RequestHeader
from replog.kafka.protocol.codec import Buffer, Message
from replog.kafka.protocol.framing import (
    API_VERSIONS_KEY,
    decode_request_header,
    encode_response,
    peek_request,
)

SIZE_PREFIX_BYTES = 4
REQUEST_BYTES_MAX_DEFAULT = 104_857_600  # socket.request.max.bytes
_SIZE = struct.Struct(">i")
_COMPACT_AFTER_BYTES = 64 * 1024

# Served versions by API key: (min, max).
Served = Mapping[int, tuple[int, int]]


@dataclass(frozen=True, slots=True)
class KafkaRequest:
    """One decoded request and its place on the connection."""

    sequence: int  # 0, 1, 2, ... in arrival order on this connection
    header: RequestHeader
    body: Message
    size: int  # frame bytes, without the size prefix
    peer: str = ""  # the client's host:port, as the connection names it ("": not known)

    @property
    def api_key(self) -> int:
        return self.header.request_api_key

    @property
    def api_version(self) -> int:
        return self.header.request_api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id


def api_name(api_key: int) -> str:
    """`Metadata` for 3; `API key 999` for a key no spec defines."""
    cls = REQUESTS.get(api_key)
    return f"API key {api_key}" if cls is None else cls.NAME.removesuffix("Request")


class KafkaConnection:
    """One connection's framing and response order; the shell feeds bytes and writes output."""

    def __init__(
        self, peer: str, served: Served, *, request_bytes_max: int = REQUEST_BYTES_MAX_DEFAULT
    ) -> None:
        if API_VERSIONS_KEY not in served:
            raise ValueError("a Kafka listener serves ApiVersions")
        self.peer = peer
        self._served = dict(served)
        self._request_bytes_max = request_bytes_max
        self._buffer = bytearray()
        self._start = 0  # where the unread bytes of `_buffer` begin
        self._next_sequence = 0
        self._head = 0  # the oldest slot not released
        # Slot -> (api key, version, correlation id) of requests not answered yet.
        self._waiting: dict[int, tuple[int, int, int]] = {}
        # Slot -> the encoded response frame (None: answered without a response).
        self._answered: dict[int, bytes | None] = {}

    # --- bytes in ------------------------------------------------------------------------------

    def feed(self, data: Buffer) -> None:
        """Bytes read from the socket, in order."""
        self._buffer += data

    @property
    def buffered_bytes(self) -> int:
        return len(self._buffer) - self._start

    def next_request(self) -> KafkaRequest | None:
        """The next complete request, None until more bytes arrive. Requests the core answers
        itself (ApiVersions at an unserved version) are not returned: their answers wait in
        order with the others. Raises `KafkaConnectionError`: close the connection."""
        while True:
            frame = self._next_frame()
            if frame is None:
                return None
            request = self._admit(frame)
            if request is not None:
                return request

    def _next_frame(self) -> bytes | None:
        start = self._start
        if len(self._buffer) - start < SIZE_PREFIX_BYTES:
            return None
        (size,) = _SIZE.unpack_from(self._buffer, start)
        if size < 0:
            raise InvalidFrameSizeError(self.peer, f"invalid frame size {size} (negative)")
        if size > self._request_bytes_max:
            raise InvalidFrameSizeError(
                self.peer,
                f"frame size {size} is larger than socket.request.max.bytes "
                f"({self._request_bytes_max})",
            )
        end = start + SIZE_PREFIX_BYTES + size
        if len(self._buffer) < end:
            return None
        frame = bytes(self._buffer[start + SIZE_PREFIX_BYTES : end])
        # Consumed bytes are dropped at once only when nothing follows them, else in one move
        # per chunk's worth: a chunk of many small frames costs no move per frame.
        if end == len(self._buffer):
            self._buffer.clear()
            self._start = 0
        elif end >= _COMPACT_AFTER_BYTES:
            del self._buffer[:end]
            self._start = 0
        else:
            self._start = end
        return frame

    def _admit(self, frame: bytes) -> KafkaRequest | None:
        try:
            key, version, correlation_id = peek_request(frame)
        except KafkaError as error:
            raise KafkaConnectionError(self.peer, f"bad request header: {error}") from None
        served = self._served.get(key)
        if served is None:
            raise KafkaConnectionError(
                self.peer,
                f"{api_name(key)} (correlation id {correlation_id}) is not served by this "
                f"listener (it serves API keys {sorted(self._served)})",
            )
        low, high = served
        if key == API_VERSIONS_KEY and version > high:
            self._answer_unsupported_api_versions(correlation_id)
            return None
        if not low <= version <= high:
            raise KafkaConnectionError(
                self.peer,
                f"{api_name(key)} v{version} (correlation id {correlation_id}) is not served "
                f"(versions {low}-{high})",
            )
        cls = REQUESTS[key]
        try:
            header, position = decode_request_header(frame)
            # Bytes after the body are ignored, as Kafka's parser ignores them: librdkafka
            # 2.16's Metadata v13 for every topic carries three.
            body, _ = cls.read(memoryview(frame), position, version)
        except KafkaError as error:
            raise KafkaConnectionError(
                self.peer,
                f"{api_name(key)} v{version} (correlation id {correlation_id}) does not "
                f"decode: {error}",
            ) from None
        sequence = self._take_slot(key, version, correlation_id)
        return KafkaRequest(sequence, header, body, len(frame), self.peer)

    def _answer_unsupported_api_versions(self, correlation_id: int) -> None:
        """Answered at v0 whatever version was asked (KIP-511)."""
        low, high = self._served[API_VERSIONS_KEY]
        sequence = self._take_slot(API_VERSIONS_KEY, 0, correlation_id)
        body = ApiVersionsResponse(
            error_code=UnsupportedVersionError.code,
            api_keys=[ApiVersion(api_key=API_VERSIONS_KEY, min_version=low, max_version=high)],
        )
        self._answered[sequence] = encode_response(API_VERSIONS_KEY, 0, correlation_id, body)
        del self._waiting[sequence]

    def _take_slot(self, key: int, version: int, correlation_id: int) -> int:
        sequence = self._next_sequence
        self._next_sequence += 1
        self._waiting[sequence] = (key, version, correlation_id)
        return sequence

    # --- responses out -------------------------------------------------------------------------

    def respond(self, request: KafkaRequest, body: Message | None) -> None:
        """Answer `request` (None: no response is sent, as for Produce acks=0). Raises
        `ProtocolEncodeError` if `body` cannot be written at the request's version."""
        waiting = self._waiting.pop(request.sequence, None)
        if waiting is None:
            raise IllegalStateError(
                f"{self.peer}: request {request.sequence} (correlation id "
                f"{request.correlation_id}) is answered twice or was never read"
            )
        key, version, correlation_id = waiting
        try:
            frame = None if body is None else encode_response(key, version, correlation_id, body)
        except BaseException:
            self._waiting[request.sequence] = waiting
            raise
        self._answered[request.sequence] = frame

    @property
    def output_ready(self) -> bool:
        """The oldest unreleased request is answered: `take_output` has something."""
        return self._head in self._answered

    def take_output(self) -> list[bytes]:
        """The response frames (size prefix included) now releasable, in request order."""
        frames: list[bytes] = []
        while self._head in self._answered:
            frame = self._answered.pop(self._head)
            self._head += 1
            if frame is not None:
                frames.append(frame)
        return frames

    @property
    def in_flight(self) -> int:
        """Requests read whose responses were not taken yet."""
        return self._next_sequence - self._head
