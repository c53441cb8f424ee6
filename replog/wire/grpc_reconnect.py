"""How replog's gRPC channels between nodes (and the admin client's) dial a peer again: Kafka's
client settings, in gRPC's channel options (`RECONNECT_OPTIONS`).

Rules:
- After a failed connection the next attempt comes `reconnect.backoff.ms` (50; gRPC floors it
  at 100) later, growing to `reconnect.backoff.max.ms` (1000): gRPC's own default (1 s growing
  to 120 s) would hide a restarted peer for minutes.
- A connection attempt (TCP connect and the server's HTTP/2 SETTINGS frame) gets
  `socket.connection.setup.timeout.ms` (10 s). gRPC's name for it misleads:
  `grpc.min_reconnect_backoff_ms` is no backoff but the least time an attempt gets. Set to the
  backoff, it gave each attempt 100 ms, and a live peer that did not run for a tenth of a
  second (a loaded machine) failed the call UNAVAILABLE ("connection attempt timed out before
  receiving SETTINGS frame"), which the Raft core takes for an unreachable peer. A peer that is
  down refuses at once whatever this is; a call's own timeout bounds its wait for the dial.
- These backoffs pace gRPC's reconnection in the background, which fails every call at once
  until it succeeds, and whose outcome someone must read: under gRPC's polling engine
  (`grpc_engine`) a thread polling for a call does, grpc.aio's poller thread does for asyncio
  channels, and for a blocking channel no call waits on nothing does but gRPC's backup poller,
  every 5 s (5-10 s of refusals after the peer listens). The blocking admin client therefore
  drops a channel after UNAVAILABLE and dials afresh (`replog.admin.controller_client`), as the
  nodes' own clients do (`redialing_channel`).
"""

from __future__ import annotations

RECONNECT_BACKOFF_MS = 50  # Kafka's reconnect.backoff.ms
RECONNECT_BACKOFF_MAX_MS = 1000  # Kafka's reconnect.backoff.max.ms
CONNECTION_SETUP_TIMEOUT_MS = 10_000  # Kafka's socket.connection.setup.timeout.ms

RECONNECT_OPTIONS: list[tuple[str, int]] = [
    ("grpc.initial_reconnect_backoff_ms", RECONNECT_BACKOFF_MS),
    ("grpc.min_reconnect_backoff_ms", CONNECTION_SETUP_TIMEOUT_MS),
    ("grpc.max_reconnect_backoff_ms", RECONNECT_BACKOFF_MAX_MS),
]
