"""One quorum node's Fetch connection to one peer (the leader it follows or observes).

Theory of operation: the transport opens a connection the first time the core fetches from a
peer, asking the peer's gRPC service where it listens for Fetch (`FetchEndpoint`, once per
connection), then greets it (`raft_fetch_wire`) and writes each Fetch as a frame. Requests are
written at once, in the core's order; queued while the connection opens. Answers are handed to
the core from the socket's callback on the event loop: no task switch on the commit path.

Rules:
- Each request keeps its own deadline: the request timeout plus its max wait, as a unary call
  had. When one passes, or the connection fails, closes or carries bytes that break the format,
  every outstanding request is reported failed and the connection is finished: an answer
  arriving later could no longer be trusted. The transport opens a new one for the next request.
- A refused or lost connection, and a peer that closes it (shutting down), is reported as
  unreachable; a deadline, a malformed answer or any other failure to open as a plain failure
  (as gRPC's UNAVAILABLE and other codes were).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import cast

from replog.errors import InvalidRequestError
from replog.pb import raft_pb2 as pb
from replog.quorum.raft.messages import FetchRequest, RaftResponse
from replog.server.raft import raft_fetch_wire as wire
from replog.server.raft.raft_codec import request_to_proto, response_from_proto
from replog.server.runtime.node_tasks import Spawner
from replog.wire.framed_wire import connect as framed_connect

log = logging.getLogger("replog.server.raft")

# Where the peer listens for Fetch connections: (host, port); raises EndpointUnknown.
EndpointLookup = Callable[[], Awaitable[tuple[str, int]]]


class EndpointUnknown(Exception):
    """The peer could not say where it listens for Fetch connections."""

    def __init__(self, message: str, *, unreachable: bool) -> None:
        super().__init__(message)
        self.unreachable = unreachable


class FetchConnection(asyncio.Protocol):
    """A Fetch connection to one peer; see the module rules."""

    def __init__(
        self,
        destination_id: int,
        caller_id: int,
        lookup: EndpointLookup,
        request_timeout_ms: int,
        deliver: Callable[[FetchRequest, RaftResponse], None],
        report_failure: Callable[[FetchRequest, bool], None],
        on_finished: Callable[[FetchConnection, bool], None],
        *,
        tasks: Spawner,
    ) -> None:
        self.destination_id = destination_id
        self._caller_id = caller_id
        self._request_timeout_ms = request_timeout_ms
        self._deliver = deliver
        self._report_failure = report_failure
        self._on_finished = on_finished
        self._sequence = itertools.count(1)
        self._outstanding: dict[int, tuple[FetchRequest, asyncio.TimerHandle]] = {}
        self._queued: list[bytes] = []  # frames written before the connection opened
        self._socket: asyncio.Transport | None = None
        self._reader = wire.FORMAT.reader()
        self.finished = False
        self._opening = tasks.spawn(self._open(lookup), name="a Raft Fetch connection")

    # --- outbound -----------------------------------------------------------------------------

    def send(self, request: FetchRequest) -> None:
        """Write `request`; its answer or failure reaches the callbacks given at creation."""
        assert not self.finished
        sequence = next(self._sequence) & 0xFFFFFFFF
        expiry = asyncio.get_running_loop().call_later(
            (self._request_timeout_ms + request.max_wait_ms) / 1000, self._expire, sequence
        )
        self._outstanding[sequence] = (request, expiry)
        proto = cast(pb.FetchRequest, request_to_proto(request))
        data = wire.frame(sequence, proto.SerializeToString())
        if self._socket is None:
            self._queued.append(data)
        else:
            self._socket.write(data)

    async def _open(self, lookup: EndpointLookup) -> None:
        try:
            host, port = await lookup()
            await framed_connect(lambda: self, host, port)
        except EndpointUnknown as exc:
            self._finish(exc.unreachable, exc)
        except OSError as exc:
            self._finish(True, exc)
        except Exception as exc:
            # Unforeseen (a lookup's own bug): fail the requests now rather than at their
            # deadline, and keep the task's exception from going unretrieved.
            log.warning("Fetch connection to node %d could not open: %r", self.destination_id, exc)
            self._finish(False, exc)

    # --- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        if self.finished:
            transport.close()
            return
        self._socket = transport
        wire.keep_alive(transport)
        transport.write(wire.greeting(self._caller_id) + b"".join(self._queued))
        self._queued.clear()

    def data_received(self, data: bytes) -> None:
        try:
            frames = self._reader.feed(data)
            for sequence, payload in frames:
                entry = self._outstanding.pop(sequence, None)
                if entry is None:
                    raise InvalidRequestError(f"an answer to request {sequence}, never sent")
                request, expiry = entry
                expiry.cancel()
                answer = pb.FetchResponse.FromString(payload)
                self._deliver(request, response_from_proto(request, answer))
        except Exception as exc:  # a malformed answer: nothing more on this connection counts
            log.warning("Fetch connection to node %d: %s", self.destination_id, exc)
            self._finish(False, exc)

    def connection_lost(self, exc: Exception | None) -> None:
        self._finish(True, exc or "closed by the peer")

    # --- ending -------------------------------------------------------------------------------

    def _expire(self, sequence: int) -> None:
        if sequence in self._outstanding:
            self._finish(False, "deadline exceeded")

    def _finish(self, unreachable: bool, why: object) -> None:
        """End the connection and report every outstanding request failed (once)."""
        if self.finished:
            return
        log.debug("Fetch connection to node %d ended: %s", self.destination_id, why)
        outstanding = self._close()
        self._on_finished(self, unreachable)
        for request, _ in outstanding:
            self._report_failure(request, unreachable)

    def close(self) -> None:
        """End without reporting anything (the owner is shutting down)."""
        self._close()

    def _close(self) -> list[tuple[FetchRequest, asyncio.TimerHandle]]:
        self.finished = True
        if self._socket is not None:
            self._socket.close()
        if self._opening is not asyncio.current_task():
            self._opening.cancel()
        outstanding = list(self._outstanding.values())
        self._outstanding.clear()
        for _, expiry in outstanding:
            expiry.cancel()
        return outstanding
