"""The byte format of a Raft Fetch connection: a greeting, then length-prefixed frames.

Why not gRPC for Fetch: every Raft commit waits on two Fetch hops (the leader answers a parked
Fetch; the follower's next Fetch carries its new log end offset). Through Python gRPC a hop
costs 0.5-1 ms of scheduling across grpc's poller thread and the event loop; a plain asyncio
socket hands the bytes to a callback on the loop directly. Kafka's controllers also speak a
framed binary protocol over one TCP connection per peer. Every other Raft RPC stays on gRPC.

Format (all integers big-endian):
- The greeting, sent once by the connecting node: the magic `RLRF`, a version byte (1), and
  the caller's node id (int32).
- Then frames in both directions: length (uint32, of what follows), a request sequence number
  (uint32, chosen by the caller; the answer echoes it), and a protobuf `FetchRequest` (caller
  to callee) or `FetchResponse` (back).

Rules: bytes that do not follow the format raise `InvalidRequestError` naming what was wrong;
a frame longer than `MAX_FRAME_BYTES` is refused before it is buffered. Both ends turn on TCP
keepalive and a TCP user timeout (`keep_alive`): a peer whose machine died or whose link was
cut sends no FIN, and the listener would otherwise hold its connection and parked fetch
forever (the caller's own requests have deadlines; the listener's side has none). Keepalive
probes only an idle connection; the user timeout ends one whose sent bytes go unacknowledged
(an answer written to the dead peer), which TCP would otherwise retransmit for ~15 minutes.
Both give up after the same ~25 s, as gRPC pairs its keepalive with TCP_USER_TIMEOUT.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct

from replog.errors import InvalidRequestError

MAGIC = b"RLRF"
VERSION = 1
MAX_FRAME_BYTES = 64 * 1024 * 1024  # the same limit as the quorum's gRPC messages
_GREETING = struct.Struct(">4sBi")
_HEADER = struct.Struct(">II")  # length of the rest, sequence number
GREETING_BYTES = _GREETING.size
# Probe an idle connection after 10 s (the gRPC channels' keepalive_time_ms), every 5 s, and
# give up after 3 unanswered probes: a dead peer's connection ends within about 25 s.
KEEPALIVE_IDLE_S = 10
KEEPALIVE_INTERVAL_S = 5
KEEPALIVE_PROBES = 3
# Unacknowledged bytes end the connection after as long as the probes would take. (Linux also
# counts it for keepalive: once set, the probes give up when it has passed, not after a count.)
USER_TIMEOUT_MS = (KEEPALIVE_IDLE_S + KEEPALIVE_INTERVAL_S * KEEPALIVE_PROBES) * 1000


def keep_alive(transport: asyncio.BaseTransport) -> None:
    """Turn on TCP keepalive and the user timeout for a Fetch connection's socket (module
    rules). Never raises: a socket that refuses an option (a kernel or sandbox without it)
    still carries Fetch, only a dead peer is noticed later; raising here, in
    `connection_made`, would leave a connection half set up (no greeting sent, or not
    tracked by its listener)."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return
    options = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]
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


def greeting(node_id: int) -> bytes:
    return _GREETING.pack(MAGIC, VERSION, node_id)


def parse_greeting(data: bytes) -> int:
    """The caller's node id from a greeting of `GREETING_BYTES` bytes."""
    magic, version, node_id = _GREETING.unpack(data)
    if magic != MAGIC:
        raise InvalidRequestError(
            f"not a Raft Fetch connection: it began with {magic!r}, expected {MAGIC!r}"
        )
    if version != VERSION:
        raise InvalidRequestError(
            f"Raft Fetch connection version {version} is not supported (this node speaks {VERSION})"
        )
    return int(node_id)


def frame(sequence: int, payload: bytes) -> bytes:
    return _HEADER.pack(len(payload) + 4, sequence) + payload


class FrameReader:
    """Cuts a byte stream into (sequence, payload) frames as the bytes arrive."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        """Add `data`; return every frame now complete, in order."""
        buffer = self._buffer
        buffer += data
        frames = []
        start = 0
        while len(buffer) - start >= _HEADER.size:
            length, sequence = _HEADER.unpack_from(buffer, start)
            if length < 4 or length > MAX_FRAME_BYTES + 4:
                raise InvalidRequestError(
                    f"Raft Fetch frame of {length} bytes: must be 4 to "
                    f"{MAX_FRAME_BYTES + 4} bytes (sequence number and message)"
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
