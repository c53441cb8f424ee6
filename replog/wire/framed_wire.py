"""The byte format of replog's framed TCP connections: a greeting, then length-prefixed frames.

Nodes speak it where a request is on the commit path and Python gRPC's per-message cost
(0.5-1 ms of scheduling across grpc's poller thread and the event loop per hop) would dominate:
a plain asyncio socket hands the bytes to a callback on the loop directly. Each protocol on it
(`raft_fetch_wire`, `metadata_append_wire`) is a `FrameFormat`: its own
magic, version and limit, so a connection that reaches the wrong listener is refused by name.
`FramedListener` is what their listeners share (listen, hold the connections, close them);
`CoalescedWrites` sends the frames of one event-loop turn in one socket write.

Format (all integers big-endian):
- The greeting, sent once by the connecting node: the format's 4-byte magic, a version byte
  and the caller's node id (int32).
- Then frames in both directions: length (uint32, of what follows), a request sequence number
  (uint32, chosen by the caller; the answer echoes it), and the protocol's message.

Rules: bytes that do not follow the format raise `InvalidRequestError` naming the protocol and
what was wrong; a frame longer than the format's `max_frame_bytes` is refused from its header,
before it is buffered. Both ends turn on TCP keepalive and a TCP user timeout (`keep_alive`):
a peer whose machine died or whose link was cut sends no FIN, and the listener would otherwise
hold its connection and parked request forever (the caller's own requests have deadlines; the
listener's side has none). Keepalive probes only an idle connection; the user timeout ends one
whose sent bytes go unacknowledged (an answer written to the dead peer), which TCP would
otherwise retransmit for ~15 minutes. Both give up after the same ~25 s, as gRPC pairs its
keepalive with TCP_USER_TIMEOUT. `keep_alive` also turns Nagle's algorithm off (TCP_NODELAY), as
gRPC does: asyncio does so only on sockets made with the TCP protocol number, which a wildcard
listener's dual-stack socket (`listen`) is not, and with it on a frame smaller than a segment
waits while the previous one is unacknowledged.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
import socket
import ssl
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from replog.errors import InvalidRequestError
from replog.net_address import is_wildcard
from replog.record.batch import Buffer
from replog.wire.link_peer_check import PeerCheck
from replog.wire.link_security import framed_client_context, framed_server_context
from replog.wire.server_close import close_server
from replog.wire.tls_accept import TlsAccept
from replog.wire.tls_handshake_failure import handshake_failure_cause, is_authentication_failure

log = logging.getLogger("replog.server.tls")
ProtocolT = TypeVar("ProtocolT", bound=asyncio.Protocol)
_GREETING = struct.Struct(">4sBi")
_HEADER = struct.Struct(">II")  # length of the rest, sequence number
GREETING_BYTES = _GREETING.size
HEADER_BYTES = _HEADER.size
# Probe an idle connection after 10 s (the gRPC channels' keepalive_time_ms), every 5 s, and
# give up after 3 unanswered probes: a dead peer's connection ends within about 25 s.
KEEPALIVE_IDLE_S = 10
KEEPALIVE_INTERVAL_S = 5
KEEPALIVE_PROBES = 3
# Unacknowledged bytes end the connection after as long as the probes would take. (Linux also
# counts it for keepalive: once set, the probes give up when it has passed, not after a count.)
USER_TIMEOUT_MS = (KEEPALIVE_IDLE_S + KEEPALIVE_INTERVAL_S * KEEPALIVE_PROBES) * 1000


def keep_alive(transport: asyncio.BaseTransport) -> None:
    """Turn on TCP keepalive and the user timeout, and Nagle's algorithm off, for a framed
    connection's socket (module rules). Never raises: a socket that refuses an option (a
    kernel or sandbox without it) still carries frames, only a dead peer is noticed later;
    raising here, in `connection_made`, would leave a connection half set up (no greeting
    sent, or not tracked by its listener)."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return
    options = [
        (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1),
        (socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),
    ]
    # Linux names; elsewhere the system's defaults (hours) apply.
    for name, value in (
        ("TCP_KEEPIDLE", KEEPALIVE_IDLE_S),
        ("TCP_KEEPINTVL", KEEPALIVE_INTERVAL_S),
        ("TCP_KEEPCNT", KEEPALIVE_PROBES),
        ("TCP_USER_TIMEOUT", USER_TIMEOUT_MS),
    ):
        if hasattr(socket, name):
            options.append((socket.IPPROTO_TCP, getattr(socket, name), value))
    for level, option, value in options:
        with contextlib.suppress(OSError):
            sock.setsockopt(level, option, value)


def frame(sequence: int, payload: bytes) -> bytes:
    return header(sequence, len(payload)) + payload


def header(sequence: int, payload_bytes: int) -> bytes:
    """A frame's header alone."""
    return _HEADER.pack(payload_bytes + 4, sequence)


# From this size on a payload is written after its header rather than copied behind it: two
# sends cost less than copying it (Python 3.11's writelines joins its buffers, a copy too).
WRITE_APART_BYTES = 64 * 1024


def write_frame(transport: asyncio.WriteTransport, sequence: int, payload: bytes) -> None:
    """Write one frame to `transport`, copying a large payload no more than the socket must."""
    write_frame_pieces(transport, sequence, (payload,))


def write_frame_pieces(
    transport: asyncio.WriteTransport, sequence: int, pieces: Sequence[Buffer]
) -> None:
    """Write one frame whose payload is `pieces` joined, without joining them: each piece of
    WRITE_APART_BYTES or more is written as it is (copied only if the socket leaves part of it
    unsent), the header and the smaller pieces between them joined into one write each."""
    size = sum(len(piece) for piece in pieces)
    write_pieces(transport, [header(sequence, size), *pieces])


def write_pieces(transport: asyncio.WriteTransport, pieces: Sequence[Buffer]) -> None:
    """Write `pieces` in order, each of WRITE_APART_BYTES or more as it is, the smaller ones
    between them joined into one write each."""
    small: list[Buffer] = []
    for piece in pieces:
        if len(piece) < WRITE_APART_BYTES:
            small.append(piece)
            continue
        if small:
            transport.write(b"".join(small))
            small = []
        transport.write(piece)
    if small:
        transport.write(b"".join(small))


class CoalescedWrites:
    """Frames written to one socket in one turn of the event loop, sent with one write after
    it: where many requests are answered (or sent) at once, as when one commit completes a
    batch of appends, they cost one system call rather than one each. Dropped once the
    socket is closing."""

    def __init__(self, transport: asyncio.WriteTransport) -> None:
        self._transport = transport
        self._frames: list[bytes] = []

    def write(self, data: bytes) -> None:
        if not self._frames:
            asyncio.get_running_loop().call_soon(self._flush)
        self._frames.append(data)

    def _flush(self) -> None:
        frames, self._frames = self._frames, []
        if not self._transport.is_closing():
            self._transport.write(frames[0] if len(frames) == 1 else b"".join(frames))


@dataclass(frozen=True, slots=True)
class FrameFormat:
    """One protocol on framed connections: what its greeting says and how large a frame may be."""

    name: str  # "Raft Fetch": in every error about its bytes
    magic: bytes  # 4 bytes
    version: int
    max_frame_bytes: int  # of the message, sequence number excluded

    def greeting(self, node_id: int) -> bytes:
        return _GREETING.pack(self.magic, self.version, node_id)

    def parse_greeting(self, data: bytes) -> int:
        """The caller's node id from a greeting of `GREETING_BYTES` bytes."""
        magic, version, node_id = _GREETING.unpack(data)
        if magic != self.magic:
            raise InvalidRequestError(
                f"not a {self.name} connection: it began with {magic!r}, expected {self.magic!r}"
            )
        if version != self.version:
            raise InvalidRequestError(
                f"{self.name} connection version {version} is not supported (this node "
                f"speaks {self.version})"
            )
        return int(node_id)

    def reader(self) -> FrameReader:
        return FrameReader(self.name, self.max_frame_bytes)


class FrameReader:
    """Cuts a byte stream into (sequence, payload) frames as the bytes arrive."""

    def __init__(self, name: str, max_frame_bytes: int) -> None:
        self._name = name
        self._max_length = max_frame_bytes + 4
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        """Add `data`; return every frame now complete, in order."""
        buffer = self._buffer
        buffer += data
        frames = []
        start = 0
        while len(buffer) - start >= _HEADER.size:
            length, sequence = _HEADER.unpack_from(buffer, start)
            if length < 4 or length > self._max_length:
                raise InvalidRequestError(
                    f"{self._name} frame of {length} bytes: must be 4 to "
                    f"{self._max_length} bytes (sequence number and message)"
                )
            end = start + 4 + length
            if len(buffer) < end:
                break
            frames.append((sequence, bytes(buffer[start + _HEADER.size : end])))
            start = end
        if start:
            del buffer[:start]
        return frames

    @property
    def buffered(self) -> int:
        """Bytes held of a frame not yet complete."""
        return len(self._buffer)


class InboundReader:
    """A listener's side of one connection: the caller's greeting, then its frames. `caller_id`
    is None until the whole greeting has arrived."""

    def __init__(self, frame_format: FrameFormat, max_frame_bytes: int | None = None) -> None:
        self._format = frame_format
        self._greeting = b""
        self._frames = FrameReader(
            frame_format.name,
            frame_format.max_frame_bytes if max_frame_bytes is None else max_frame_bytes,
        )
        self.caller_id: int | None = None

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        """Add `data`; return every frame now complete, in order (InvalidRequestError: bytes
        that break the format)."""
        if self.caller_id is None:
            self._greeting += data
            if len(self._greeting) < GREETING_BYTES:
                return []
            self.caller_id = self._format.parse_greeting(self._greeting[:GREETING_BYTES])
            data = self._greeting[GREETING_BYTES:]
            self._greeting = b""
        return self._frames.feed(data)


class Connection(Protocol):
    """What a listener holds of each of its connections."""

    def close(self) -> None: ...


class FramedListener(abc.ABC):
    """A server of framed connections on one port, and the connections it holds: `start`
    listens (`listen`), `close` stops listening and ends every connection. A subclass makes
    each connection's protocol (`_connection`), which adds itself to `connections` once made
    and discards itself once lost."""

    def __init__(self) -> None:
        self._server: asyncio.Server | None = None
        self.connections: set[Connection] = set()
        self.port: int | None = None  # once listening
        # Who is let in when the process's internal links are TLS (`link_security`); the
        # node sets it with the TLS it installs.
        self.peer_check: PeerCheck | None = None

    async def start(self, host: str, port: int) -> int:
        """Listen on `host:port` (0: any free port); return the port. TLS when the process's
        internal links are (`link_security.framed_server_context`)."""
        tls = framed_server_context()
        if tls is None:
            self._server = await listen(host, port, self._connection)
        else:
            self._server = await listen(host, port, lambda: self._tls_connection(tls))
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    def refuses(self, transport: asyncio.BaseTransport, peer: str) -> bool:
        """Whether a new connection's peer is no node (`link_peer_check`): it is then closed,
        its refusal logged."""
        if self.peer_check is None or self.peer_check.framed_refusal(transport, peer) is None:
            return False
        if isinstance(transport, asyncio.Transport):
            transport.abort()
        else:
            transport.close()
        return True

    def _tls_connection(self, tls: ssl.SSLContext) -> asyncio.Protocol:
        """A new connection whose handshake is seen (`tls_accept`): a failed one is refused
        by the peer check (logged, counted), or logged when there is none."""
        return TlsAccept(tls, self._connection(), self._handshake_failed, self.connections)

    def _handshake_failed(self, peer: str, error: BaseException) -> None:
        if self.peer_check is not None:
            self.peer_check.handshake_failed(peer, error)
        elif is_authentication_failure(error):
            cause = handshake_failure_cause(error)
            log.warning("internal link from %s: TLS handshake failed: %s", peer, cause)

    @abc.abstractmethod
    def _connection(self) -> asyncio.Protocol:
        """A new connection's protocol."""

    async def close(self) -> None:
        if self._server is not None:
            await close_server(self._server)
        for connection in list(self.connections):
            connection.close()


async def listen(
    host: str,
    port: int,
    protocol: Callable[[], asyncio.Protocol],
    tls: ssl.SSLContext | None = None,
) -> asyncio.Server:
    """A server on `host:port` (0: any free port) for framed connections, TLS with `tls`. A
    wildcard host (`0.0.0.0`, `::`, empty) listens on every interface of both families on one
    socket, as the node's gRPC listener does; where the machine has no dual-stack socket, on
    IPv4's."""
    loop = asyncio.get_running_loop()
    wildcard = is_wildcard(host)
    if wildcard and socket.has_dualstack_ipv6():
        # Every interface, both families, on one socket: asyncio would bind "::" IPv6 only,
        # and "" as two sockets (two different ports when the port is 0).
        sock = socket.create_server(("::", port), family=socket.AF_INET6, dualstack_ipv6=True)
        return await loop.create_server(protocol, sock=sock, ssl=tls)
    # A machine without IPv6 has only IPv4's interfaces to offer a wildcard (gRPC binds "[::]"
    # there the same way); "::" would not bind, "" would bind twice.
    bind_host = "0.0.0.0" if wildcard else host
    return await loop.create_server(protocol, bind_host, port, reuse_address=True, ssl=tls)


async def connect(
    protocol: Callable[[], ProtocolT], host: str, port: int
) -> tuple[asyncio.BaseTransport, ProtocolT]:
    """A framed connection to `host:port`: TLS when the process's internal links are
    (`link_security.framed_client_context`), the certificate checked for `host`."""
    tls = framed_client_context()
    return await asyncio.get_running_loop().create_connection(
        protocol, host, port, ssl=tls, server_hostname=host if tls is not None else None
    )
