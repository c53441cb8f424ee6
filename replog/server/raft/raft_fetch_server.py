"""A quorum node's listener for peers' Fetch connections (`raft_fetch_wire`).

Theory of operation: each connection's greeting names the fetching node; every frame after it
is one Fetch, handed to `accept` with a `reply` callback that writes the answer as a frame with
the request's sequence number. The core answers a parked Fetch from its own loop, so the answer
leaves from that call, with no task switch.

Rules:
- Bytes that break the format end the connection with a warning naming what was wrong; the
  node and its other connections go on.
- `close` stops listening and closes every connection, so that peers learn at once that this
  node is going away (they see the connection closed: unreachable).
- A connection that closes drops its unanswered requests (`forget`): no answer is written to a
  closed socket, and nothing is kept for it.
- While answers wait in the socket's write buffer (the peer does not read them), no more
  requests are read from it: a peer cannot make this node buffer answers without bound.
- A wildcard host (`0.0.0.0`, `::`, empty) listens on every interface of both families on one
  socket, as the node's gRPC listener does: voters written as `[::1]` reach it too. Where the
  machine has no IPv6 (no dual-stack socket), a wildcard listens on IPv4's, on one socket.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from replog.errors import InvalidRequestError
from replog.net_address import format_peer
from replog.pb import raft_pb2 as pb
from replog.server.raft import raft_fetch_wire as wire
from replog.wire.framed_wire import FramedListener, InboundReader

log = logging.getLogger("replog.server.raft")

Reply = Callable[[bytes], None]
# accept(caller id, request, reply) -> a handle for `forget` when the connection closes first
Accept = Callable[[int, pb.FetchRequest, Reply], int]
Forget = Callable[[int], None]


class FetchListener(FramedListener):
    """Serves Fetch connections on one port; see the module rules."""

    def __init__(self, accept: Accept, forget: Forget) -> None:
        super().__init__()
        self._accept = accept
        self._forget = forget

    def _connection(self) -> asyncio.Protocol:
        return _InboundConnection(self)


class _InboundConnection(asyncio.Protocol):
    def __init__(self, listener: FetchListener) -> None:
        self._listener = listener
        self._socket: asyncio.Transport | None = None
        self._reader = InboundReader(wire.FORMAT)
        self._pending: dict[int, int] = {}  # sequence -> handle: accepted, not yet answered
        self._peer = "?"

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._peer = format_peer(transport.get_extra_info("peername"))
        if self._listener.refuses(transport, self._peer):
            return
        self._socket = transport
        self._listener.connections.add(self)
        wire.keep_alive(transport)

    def data_received(self, data: bytes) -> None:
        try:
            for sequence, payload in self._reader.feed(data):
                request = pb.FetchRequest.FromString(payload)
                caller_id = self._reader.caller_id
                assert caller_id is not None  # frames follow the greeting
                handle = self._listener._accept(caller_id, request, self._replier(sequence))
                self._pending[sequence] = handle
        except Exception as exc:  # malformed bytes: this connection ends, the node goes on
            if not isinstance(exc, InvalidRequestError):
                exc = InvalidRequestError(f"a malformed Fetch request: {exc}")
            log.warning("Fetch connection from %s: %s; closing it", self._peer, exc)
            self.close()

    def _replier(self, sequence: int) -> Reply:
        def reply(answer: bytes) -> None:
            self._pending.pop(sequence, None)
            if self._socket is not None and not self._socket.is_closing():
                self._socket.write(wire.frame(sequence, answer))

        return reply

    def pause_writing(self) -> None:
        assert self._socket is not None
        if not self._socket.is_closing():
            self._socket.pause_reading()

    def resume_writing(self) -> None:
        assert self._socket is not None
        if not self._socket.is_closing():
            self._socket.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self._listener.connections.discard(self)
        for handle in self._pending.values():
            self._listener._forget(handle)
        self._pending.clear()

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
