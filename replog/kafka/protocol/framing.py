"""Kafka frames and headers: size prefix, request header v0/v1/v2, response header v0/v1, and
the generated message classes by (API key, version).

Rules (Kafka's, docs/kafka-protocol.md):
- A frame is an int32 size (not counting itself), then a header, then the body.
- A request at a flexible version has header v2 (v1 + tagged fields; the client id keeps its
  int16 length), otherwise v1; ControlledShutdown v0 alone used v0 (no client id).
- A response at a flexible version has header v1 (tagged fields), otherwise v0, except
  ApiVersions, whose response header is always v0 so that any client can read the answer to a
  version it guessed too high.
- An unknown API key is an `InvalidRequestError`, a version outside the spec's range an
  `UnsupportedVersionError`, bad bytes a `ProtocolDecodeError`; nothing else escapes.
"""

from __future__ import annotations

import struct

from replog.errors import InvalidRequestError, ProtocolDecodeError
from replog.kafka.messages import REQUESTS, RESPONSES
from replog.kafka.messages.request_header import RequestHeader
from replog.kafka.messages.response_header import ResponseHeader
from replog.kafka.protocol.codec import Buffer, FileRecords, HeldRecords, Message

API_VERSIONS_KEY = 18
CONTROLLED_SHUTDOWN_KEY = 7
_SIZE = struct.Struct(">i")
_KEY_VERSION_CORRELATION = struct.Struct(">hhi")


def request_class(api_key: int) -> type[Message]:
    try:
        return REQUESTS[api_key]
    except KeyError:
        raise InvalidRequestError(f"unknown API key {api_key}") from None


def response_class(api_key: int) -> type[Message]:
    try:
        return RESPONSES[api_key]
    except KeyError:
        raise InvalidRequestError(f"unknown API key {api_key}") from None


def request_type(api_key: int, version: int) -> type[Message]:
    """The request class of `api_key`, checked to define `version`."""
    cls = request_class(api_key)
    cls.check_version(version)
    return cls


def response_type(api_key: int, version: int) -> type[Message]:
    cls = response_class(api_key)
    cls.check_version(version)
    return cls


def request_header_version(api_key: int, api_version: int) -> int:
    """Header version of a request; also for versions above the spec's (flexible stays)."""
    if api_key == CONTROLLED_SHUTDOWN_KEY and api_version == 0:
        return 0
    return 2 if request_class(api_key).is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if response_class(api_key).is_flexible(api_version) else 0


def frame_size(prefix: Buffer) -> int:
    """The body size a 4-byte frame prefix announces (negative sizes are the caller's error)."""
    if len(prefix) != 4:
        raise ProtocolDecodeError(
            "frame", 0, "size", f"a size prefix has 4 bytes, not {len(prefix)}"
        )
    size: int = _SIZE.unpack(prefix)[0]
    return size


def peek_request(frame: Buffer) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a request frame (without its size prefix),
    readable before knowing whether the key and version are supported."""
    if len(frame) < 8:
        raise ProtocolDecodeError(
            "RequestHeader", 1, "request_api_key", f"truncated ({len(frame)} bytes, 8 needed)"
        )
    key: int
    version: int
    correlation_id: int
    key, version, correlation_id = _KEY_VERSION_CORRELATION.unpack_from(frame, 0)
    return key, version, correlation_id


def decode_request_header(frame: Buffer) -> tuple[RequestHeader, int]:
    """The request header and the body's offset in `frame` (no size prefix)."""
    view = memoryview(frame).cast("B")
    key, version, _ = peek_request(view)
    return RequestHeader.read(view, 0, request_header_version(key, version))


def decode_request(frame: Buffer) -> tuple[RequestHeader, Message]:
    """Header and body of a request frame (no size prefix); the body must fill the frame."""
    view = memoryview(frame).cast("B")
    header, pos = decode_request_header(view)
    cls = request_type(header.request_api_key, header.request_api_version)
    return header, cls.decode(view[pos:], header.request_api_version)


def encode_request(header: RequestHeader, body: Message, *, framed: bool = True) -> bytes:
    """A request frame: size prefix (unless `framed` is false), header, body."""
    version = header.request_api_version
    cls = request_type(header.request_api_key, version)
    if not isinstance(body, cls):
        raise InvalidRequestError(
            f"API key {header.request_api_key} takes {cls.NAME}, not {body.NAME}"
        )
    out = bytearray(b"\0\0\0\0" if framed else b"")
    header.write(out, request_header_version(header.request_api_key, version))
    body.write(out, version)
    if framed:
        _SIZE.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def encode_response(
    api_key: int, api_version: int, correlation_id: int, body: Message, *, framed: bool = True
) -> bytes:
    """A response frame: size prefix (unless `framed` is false), header, body."""
    out = _encode_response_into(bytearray(), api_key, api_version, correlation_id, body, framed)
    return bytes(out)


def encode_response_pieces(
    api_key: int, api_version: int, correlation_id: int, body: Message, *, framed: bool = True
) -> list[Buffer | FileRecords]:
    """`encode_response`'s bytes in pieces that joined are them: records of `HOLD_MIN_BYTES`
    or more are pieces of their own, not copied, and records left in their file
    (`FileRecords`, which `encode_response` refuses) are too (`HeldRecords`), for a writer that
    sends them one after the other."""
    out = HeldRecords()
    _encode_response_into(out, api_key, api_version, correlation_id, body, framed)
    return out.pieces()


def _encode_response_into(
    out: bytearray,
    api_key: int,
    api_version: int,
    correlation_id: int,
    body: Message,
    framed: bool,
) -> bytearray:
    cls = response_type(api_key, api_version)
    if not isinstance(body, cls):
        raise InvalidRequestError(f"API key {api_key} answers {cls.NAME}, not {body.NAME}")
    if framed:
        out += b"\0\0\0\0"
    ResponseHeader(correlation_id=correlation_id).write(
        out, response_header_version(api_key, api_version)
    )
    body.write(out, api_version)
    if framed:
        held = out.held_bytes if isinstance(out, HeldRecords) else 0
        _SIZE.pack_into(out, 0, len(out) + held - 4)
    return out


def decode_response(
    frame: Buffer, api_key: int, api_version: int
) -> tuple[ResponseHeader, Message]:
    """Header and body of a response frame (no size prefix) to a request of that key/version."""
    view = memoryview(frame).cast("B")
    cls = response_type(api_key, api_version)
    header, pos = ResponseHeader.read(view, 0, response_header_version(api_key, api_version))
    return header, cls.decode(view[pos:], api_version)
