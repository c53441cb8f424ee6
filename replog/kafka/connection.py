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
- Bytes are framed where they were fed: a frame that lies within one chunk is decoded in place
  (its records are a view of that chunk's bytes, never copied); one spread over chunks is
  joined once. The broker decodes no records either, so a produce request's records reach
  the log with no copy made here beyond the socket read. Going out, a response keeps records
  of `HOLD_MIN_BYTES` or more apart (`encode_response_pieces`): `take_output` gives the
  frames in pieces, a Fetch answer's records as the log read them, never copied here.
  `sends_files` is set by a shell that sends records left in their files (`FileRecords`) from
  there (`sendfile`: a plain TCP connection, not TLS); every request read carries it, for a
  Fetch handler to answer with such records only then.
- `in_flight` counts the requests read whose responses were not taken yet; the shell reads no
  more while it is at its bound (`queued.max.requests`), so a client that sends and never reads
  holds a bounded amount of memory. `requests_read` and `requests_released` say where a
  connection that is to close stands: it closes once every request before the one that closes
  it is released (`unanswered` names those still waiting).
- `principal` is who the connection authenticated as (`User:ANONYMOUS` until the shell sets
  it: a TLS client certificate's subject, or a SASL login once its exchange completes,
  `sasl_authenticator`, which wins over the certificate's as in Kafka) and `client_host` the
  client's IP address: the one place a connection's identity is kept. Every request read
  carries both as of the moment it was read (`KafkaRequest.principal`), for the authorizer.
- After a SaslHandshake v0 (`raw_sasl_tokens` set by the shell) each frame is a bare SASL
  token, not a request: it is read as a SaslAuthenticate v0 request and its answer is written
  as a bare size-prefixed token, until the shell clears the flag.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Awaitable, Mapping
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
from replog.kafka.messages.sasl_authenticate_request import SaslAuthenticateRequest
from replog.kafka.messages.sasl_authenticate_response import SaslAuthenticateResponse
from replog.kafka.protocol.codec import Buffer, FileRecords, Message
from replog.kafka.protocol.framing import (
    API_VERSIONS_KEY,
    decode_request_header,
    encode_response,
    encode_response_pieces,
    peek_request,
)
from replog.security.principal import ANONYMOUS, KafkaPrincipal

SIZE_PREFIX_BYTES = 4
REQUEST_BYTES_MAX_DEFAULT = 104_857_600  # socket.request.max.bytes
_SIZE = struct.Struct(">i")
# The version a bare SASL token (after a SaslHandshake v0) is read and answered at.
RAW_TOKEN_VERSION = -1

# Served versions by API key: (min, max).
Served = Mapping[int, tuple[int, int]]
# What a handler gives for a request: its response (None: no response, as for Produce with
# acks=0) when it answers at once, else an awaitable of it.
Answer = Message | None | Awaitable[Message | None]


@dataclass(frozen=True, slots=True)
class KafkaRequest:
    """One decoded request and its place on the connection."""

    sequence: int  # 0, 1, 2, ... in arrival order on this connection
    header: RequestHeader
    body: Message
    size: int  # frame bytes, without the size prefix
    peer: str = ""  # the client's host:port, as the connection names it ("": not known)
    # Who the connection had authenticated as when the request was read.
    principal: KafkaPrincipal = ANONYMOUS
    client_host: str = ""  # the client's IP address, as ACL hosts name it ("": not known)
    # Its connection sends records left in their files from there (`KafkaConnection.sends_files`).
    sends_files: bool = False

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


def request_label(api_key: int, api_version: int, correlation_id: int) -> str:
    """`Metadata v12 (correlation id 7)`: a request as errors and log lines name it."""
    return f"{api_name(api_key)} v{api_version} (correlation id {correlation_id})"


class KafkaConnection:
    """One connection's framing and response order; the shell feeds bytes and writes output."""

    def __init__(
        self, peer: str, served: Served, *, request_bytes_max: int = REQUEST_BYTES_MAX_DEFAULT
    ) -> None:
        if API_VERSIONS_KEY not in served:
            raise ValueError("a Kafka listener serves ApiVersions")
        self.peer = peer
        # The connection's identity (module Rules); the shell sets both once known.
        self.principal = ANONYMOUS
        self.client_host = ""
        self.sends_files = False
        self._served = dict(served)
        self._request_bytes_max = request_bytes_max
        # Bytes fed and not yet framed, in order: whole chunks as the socket gave them (never
        # merged until a frame needs it), the first one read from `_offset` on.
        self._chunks: deque[bytes] = deque()
        self._offset = 0
        self._buffered = 0
        self._next_sequence = 0
        self._head = 0  # the oldest slot not released
        # Slot -> (api key, version, correlation id) of requests not answered yet.
        self._waiting: dict[int, tuple[int, int, int]] = {}
        # Slot -> the encoded response frame in pieces (`encode_response_pieces`; None:
        # answered without a response).
        self._answered: dict[int, list[Buffer | FileRecords] | None] = {}
        self.raw_sasl_tokens = False

    # --- bytes in ------------------------------------------------------------------------------

    def feed(self, data: Buffer) -> None:
        """Bytes read from the socket, in order. `bytes` are kept as they are (a frame within
        one chunk is decoded from it without a copy); other buffers are copied once."""
        if not data:
            return
        chunk = data if isinstance(data, bytes) else bytes(data)
        self._chunks.append(chunk)
        self._buffered += len(chunk)

    @property
    def buffered_bytes(self) -> int:
        return self._buffered

    @property
    def bytes_missing(self) -> int:
        """How many more bytes the next frame needs before it is whole: 0 with none begun or
        one whole (a size prefix over `request_bytes_max` counts as whole: reading it fails)."""
        buffered = self._buffered
        if buffered == 0:
            return 0
        if buffered < SIZE_PREFIX_BYTES:
            return SIZE_PREFIX_BYTES - buffered
        size = self._next_size()
        if size < 0 or size > self._request_bytes_max:
            return 0
        return max(SIZE_PREFIX_BYTES + size - buffered, 0)

    def _next_size(self) -> int:
        """The size prefix of the next frame (at least its 4 bytes are buffered)."""
        first = self._chunks[0]
        if len(first) - self._offset >= SIZE_PREFIX_BYTES:
            (size,) = _SIZE.unpack_from(first, self._offset)
        else:
            (size,) = _SIZE.unpack(self._peek(SIZE_PREFIX_BYTES))
        return int(size)

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

    def _next_frame(self) -> bytes | memoryview | None:
        if self._buffered < SIZE_PREFIX_BYTES:
            return None
        size = self._next_size()
        if size < 0:
            raise InvalidFrameSizeError(self.peer, f"invalid frame size {size} (negative)")
        if size > self._request_bytes_max:
            raise InvalidFrameSizeError(
                self.peer,
                f"frame size {size} is larger than socket.request.max.bytes "
                f"({self._request_bytes_max})",
            )
        if self._buffered < SIZE_PREFIX_BYTES + size:
            return None
        self._take(SIZE_PREFIX_BYTES)
        return self._take(size)

    def _peek(self, count: int) -> bytes:
        """The first `count` buffered bytes, left in place (a size prefix split across chunks)."""
        head = bytearray()
        offset = self._offset
        for chunk in self._chunks:
            head += chunk[offset : offset + count - len(head)]
            offset = 0
            if len(head) >= count:
                break
        return bytes(head)

    def _take(self, count: int) -> bytes | memoryview:
        """The first `count` buffered bytes, consumed: a view of the chunk that holds them
        all (no copy), else one join of the pieces (the only copy a frame costs here)."""
        if not count:
            return b""
        chunks = self._chunks
        first = chunks[0]
        offset = self._offset
        self._buffered -= count
        if len(first) - offset >= count:
            end = offset + count
            if end == len(first):
                chunks.popleft()
                self._offset = 0
            else:
                self._offset = end
            return first if offset == 0 and end == len(first) else memoryview(first)[offset:end]
        parts: list[bytes | memoryview] = []
        while count:
            first = chunks[0]
            available = len(first) - offset
            if available <= count:
                parts.append(memoryview(first)[offset:] if offset else first)
                chunks.popleft()
                count -= available
                offset = 0
            else:
                parts.append(memoryview(first)[offset : offset + count])
                offset += count
                count = 0
        self._offset = offset
        return b"".join(parts)

    def _admit(self, frame: bytes | memoryview) -> KafkaRequest | None:
        if self.raw_sasl_tokens:
            return self._raw_token(frame)
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
                f"{request_label(key, version, correlation_id)} is not served "
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
                f"{request_label(key, version, correlation_id)} does not decode: {error}",
            ) from None
        sequence = self._take_slot(key, version, correlation_id)
        return self._request(sequence, header, body, len(frame))

    def _raw_token(self, frame: bytes | memoryview) -> KafkaRequest:
        """A bare SASL token, read as the SaslAuthenticate v0 request it stands for."""
        key = SaslAuthenticateRequest.API_KEY
        sequence = self._take_slot(key, RAW_TOKEN_VERSION, -1)
        header = RequestHeader(request_api_key=key, request_api_version=0, correlation_id=-1)
        body = SaslAuthenticateRequest(auth_bytes=bytes(frame))
        return self._request(sequence, header, body, len(frame))

    def _request(
        self, sequence: int, header: RequestHeader, body: Message, size: int
    ) -> KafkaRequest:
        """A request read now: the connection's identity as of this moment goes with it."""
        return KafkaRequest(
            sequence,
            header,
            body,
            size,
            self.peer,
            self.principal,
            self.client_host,
            self.sends_files,
        )

    def _answer_unsupported_api_versions(self, correlation_id: int) -> None:
        """Answered at v0 whatever version was asked (KIP-511)."""
        low, high = self._served[API_VERSIONS_KEY]
        sequence = self._take_slot(API_VERSIONS_KEY, 0, correlation_id)
        body = ApiVersionsResponse(
            error_code=UnsupportedVersionError.code,
            api_keys=[ApiVersion(api_key=API_VERSIONS_KEY, min_version=low, max_version=high)],
        )
        self._answered[sequence] = [encode_response(API_VERSIONS_KEY, 0, correlation_id, body)]
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
        frame: list[Buffer | FileRecords] | None
        try:
            if version == RAW_TOKEN_VERSION and body is not None:
                if not isinstance(body, SaslAuthenticateResponse):
                    raise IllegalStateError(f"a bare SASL token answered with {body.NAME}")
                frame = [_SIZE.pack(len(body.auth_bytes)) + body.auth_bytes]
            else:
                frame = (
                    None
                    if body is None
                    else encode_response_pieces(key, version, correlation_id, body)
                )
        except BaseException:
            self._waiting[request.sequence] = waiting
            raise
        self._answered[request.sequence] = frame

    @property
    def output_ready(self) -> bool:
        """The oldest unreleased request is answered: `take_output` has something."""
        return self._head in self._answered

    def take_output(self) -> list[Buffer | FileRecords]:
        """The response frames (size prefix included) now releasable, in request order, each
        in its pieces (`encode_response_pieces`: large records apart, not copied; records left
        in their files, for a connection that `sends_files`)."""
        pieces: list[Buffer | FileRecords] = []
        while self._head in self._answered:
            frame = self._answered.pop(self._head)
            self._head += 1
            if frame is not None:
                pieces += frame
        return pieces

    @property
    def in_flight(self) -> int:
        """Requests read whose responses were not taken yet."""
        return self._next_sequence - self._head

    @property
    def requests_read(self) -> int:
        """Requests read so far: the sequence number the next one gets."""
        return self._next_sequence

    @property
    def requests_released(self) -> int:
        """Requests whose responses were taken (or that had none): every sequence below it."""
        return self._head

    def unanswered(self, before: int) -> list[str]:
        """The requests before sequence `before` not answered yet, oldest first, named as
        `request_label` names them."""
        return [request_label(*self._waiting[s]) for s in sorted(self._waiting) if s < before]
