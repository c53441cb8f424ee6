"""The Raft Fetch connection's format: `framed_wire` with its own magic, version and limit.

Why not gRPC for Fetch: every Raft commit waits on two Fetch hops (the leader answers a parked
Fetch; the follower's next Fetch carries its new log end offset). Through Python gRPC a hop
costs 0.5-1 ms of scheduling across grpc's poller thread and the event loop; a plain asyncio
socket hands the bytes to a callback on the loop directly. Kafka's controllers also speak a
framed binary protocol over one TCP connection per peer. Every other Raft RPC stays on gRPC.

Format: `framed_wire`'s greeting with the magic `RLRF` and version 1, then frames carrying a
protobuf `FetchRequest` (caller to callee) or `FetchResponse` (back).
"""

from __future__ import annotations

from replog.wire.framed_wire import (
    GREETING_BYTES,
    KEEPALIVE_IDLE_S,
    KEEPALIVE_INTERVAL_S,
    KEEPALIVE_PROBES,
    FrameFormat,
    frame,
    keep_alive,
)

__all__ = [
    "FORMAT",
    "GREETING_BYTES",
    "KEEPALIVE_IDLE_S",
    "KEEPALIVE_INTERVAL_S",
    "KEEPALIVE_PROBES",
    "MAGIC",
    "MAX_FRAME_BYTES",
    "VERSION",
    "frame",
    "greeting",
    "keep_alive",
    "parse_greeting",
]

# The same limit as the quorum's gRPC messages.
FORMAT = FrameFormat(name="Raft Fetch", magic=b"RLRF", version=1, max_frame_bytes=64 * 1024 * 1024)
MAGIC = FORMAT.magic
VERSION = FORMAT.version
MAX_FRAME_BYTES = FORMAT.max_frame_bytes
greeting = FORMAT.greeting
parse_greeting = FORMAT.parse_greeting
