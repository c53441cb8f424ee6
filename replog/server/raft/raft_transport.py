"""Carries Raft messages between quorum nodes: over gRPC, and Fetch over a framed TCP connection.

Theory of operation: the core addresses every message by node id. A request the core sends
becomes one gRPC call to that node, except Fetch, which goes on this node's Fetch connection to
that peer (`raft_fetch_client`; on every commit's path, and a plain socket costs a fraction of a
Python gRPC call); its answer is turned back into a response message carrying the core's own
correlation id and handed to the core. A request arriving over gRPC or a peer's Fetch
connection (`raft_fetch_server`) is given a local correlation id and handed to the core; the
core's response with that id completes the waiting gRPC call, or is written straight back on
the connection (a parked Fetch waits up to its max wait).

Rules:
- The network may lose, delay or duplicate anything; the core tolerates that. A failed or
  timed-out call is never retried here: it is reported to the core (`RequestFailed`), whose
  rules decide when to retry and what a refused connection means. UNAVAILABLE (connection
  refused or reset, or the peer shutting down) is reported as unreachable; anything else
  (deadline exceeded, ...) as a plain failure. A peer failing for seconds is said once at
  WARNING, and its return at INFO (`peer_failures`).
- Calls fail fast while a channel reconnects (no wait-for-ready): waiting would hide a dead
  peer from the core for a whole request timeout.
- The caller's node id travels in the `replog-node-id` metadata key (on a Fetch connection, in
  its greeting). Callers without one (the CLI's DescribeQuorum) get a synthetic id above every
  node id.
- A peer's Fetch listener is found through its gRPC `FetchEndpoint`, asked once per connection:
  the port may be chosen at start (`controller.quorum.fetch.port` 0), and the host is the one
  this node reaches the peer's gRPC listener at.
- Closing closes the Fetch listener and its connections too: peers learn at once that this node
  is going away, as a parked gRPC call's UNAVAILABLE told them. Requests the core sends after
  that are dropped: a channel or Fetch connection opened for them would never be closed.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

import grpc

from replog.clock import monotonic_s
from replog.net_address import format_host_port
from replog.pb import raft_pb2 as pb
from replog.pb import raft_pb2_grpc
from replog.quorum.raft.config import RaftConfig
from replog.quorum.raft.messages import (
    BeginQuorumEpochRequest,
    DescribeQuorumRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
    Message,
    RaftRequest,
    RaftResponse,
    VoteRequest,
)
from replog.server.raft.peer_failures import PeerFailures
from replog.server.raft.raft_codec import (
    fetch_request_from_proto,
    request_to_proto,
    response_from_proto,
    response_to_proto,
)
from replog.server.raft.raft_fetch_client import EndpointUnknown, FetchConnection
from replog.server.raft.raft_fetch_server import FetchListener, Reply
from replog.server.runtime.node_tasks import Spawner
from replog.wire.grpc_reconnect import RECONNECT_OPTIONS
from replog.wire.link_security import grpc_channel

log = logging.getLogger("replog.server.raft")

NODE_ID_METADATA_KEY = "replog-node-id"
_SYNTHETIC_ID_BASE = 1 << 30  # ids for callers that are not quorum nodes
_CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.keepalive_time_ms", 10_000),
    # After a peer was down, gRPC's default reconnect backoff (1 s growing to 120 s) keeps the
    # channel failing fast long after the peer is back, so Fetches to a new leader would fail
    # for seconds and the follower would hit its fetch timeout and start a needless election
    # (5-8 s failovers). Kafka's client settings instead (replog/wire/grpc_reconnect.py).
    *RECONNECT_OPTIONS,
]

_METHOD_BY_TYPE: dict[type, str] = {
    VoteRequest: "Vote",
    BeginQuorumEpochRequest: "BeginQuorumEpoch",
    EndQuorumEpochRequest: "EndQuorumEpoch",
    FetchSnapshotRequest: "FetchSnapshot",
    DescribeQuorumRequest: "DescribeQuorum",
}


def is_quorum_node_id(node_id: int) -> bool:
    """Whether `node_id` may be a quorum node's, not one given to a caller without one."""
    return node_id < _SYNTHETIC_ID_BASE


class RaftTransport:
    """Sends the core's messages and receives other nodes' requests for it."""

    def __init__(
        self,
        node_id: int,
        config: RaftConfig,
        deliver: Callable[[Message], None],
        report_failure: Callable[[RequestFailed], None],
        *,
        tasks: Spawner,
    ) -> None:
        self.node_id = node_id
        self._spawner = tasks
        self._config = config
        self._deliver = deliver
        self._report_failure = report_failure
        self._hosts = {v.node_id: v.host for v in config.voters}
        self._addresses = {v.node_id: format_host_port(v.host, v.port) for v in config.voters}
        self._channels: dict[int, grpc.aio.Channel] = {}
        self._stubs: dict[int, raft_pb2_grpc.RaftQuorumStub] = {}
        self._waiting: dict[int, asyncio.Future[RaftResponse]] = {}  # gRPC calls
        self._answering: dict[int, Reply] = {}  # Fetches on peers' connections
        self._correlation_ids = itertools.count(1)
        self._synthetic_ids = itertools.count(_SYNTHETIC_ID_BASE)
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing: set[asyncio.Task[None]] = set()
        self._metadata = ((NODE_ID_METADATA_KEY, str(node_id)),)
        self._fetch_connections: dict[int, FetchConnection] = {}  # outbound, by peer
        self.fetch_listener = FetchListener(self._accept_fetch, self._forget_fetch)
        self._closed = False
        self._peer_failures = PeerFailures(node_id)

    # --- outbound -----------------------------------------------------------------------------

    def send(self, message: Message) -> None:
        """Send one message from the core: a request as a call, a response to its waiting call."""
        if self._closed and message.is_request:
            return  # see the module rules
        if isinstance(message.body, FetchRequest):
            self._send_fetch(message.destination_id, message.body)
            return
        if message.is_request:
            task = self._spawner.spawn(self._call(message), name="a Raft call")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return
        reply = self._answering.pop(message.body.correlation_id, None)
        if reply is not None:
            answer = cast(pb.FetchResponse, response_to_proto(message.body))  # type: ignore[arg-type]
            reply(answer.SerializeToString())
            return
        waiting = self._waiting.pop(message.body.correlation_id, None)
        if waiting is not None and not waiting.done():
            waiting.set_result(message.body)  # type: ignore[arg-type]

    async def _call(self, message: Message) -> None:
        request = message.body
        assert not isinstance(request, tuple)
        method = _METHOD_BY_TYPE[type(request)]
        stub = self._stub(message.destination_id)
        if stub is None:
            return
        try:
            answer = await getattr(stub, method)(
                request_to_proto(request),  # type: ignore[arg-type]
                timeout=self._config.request_timeout_ms / 1000,
                metadata=self._metadata,
            )
        except grpc.aio.AioRpcError as exc:
            log.debug("%s to node %d failed: %s", method, message.destination_id, exc.code())
            self._peer_failed(
                message.destination_id, f"{method}: {exc.code().name}: {exc.details()}"
            )
            if exc.code() == grpc.StatusCode.UNAVAILABLE:
                self._reconnect(message.destination_id)
            self._report_failure(
                RequestFailed(
                    message.destination_id,
                    request.correlation_id,
                    unreachable=exc.code() == grpc.StatusCode.UNAVAILABLE,
                )
            )
            return
        response = response_from_proto(request, answer)  # type: ignore[arg-type]
        self._peer_answered(message.destination_id)
        self._deliver(Message(message.destination_id, self.node_id, response))

    def _peer_failed(self, peer_id: int, error: str) -> None:
        said = self._peer_failures.failed(peer_id, error, monotonic_s())
        if said is not None:
            log.warning("%s", said)

    def _peer_answered(self, peer_id: int) -> None:
        if peer_id not in self._peer_failures:  # every Raft answer passes here: no clock read
            return
        said = self._peer_failures.answered(peer_id, monotonic_s())
        if said is not None:
            log.info("%s", said)

    def _fetch_answered(self, destination_id: int, response: RaftResponse) -> None:
        self._peer_answered(destination_id)
        self._deliver(Message(destination_id, self.node_id, response))

    def _fetch_failed(self, destination_id: int, request: FetchRequest, unreachable: bool) -> None:
        self._peer_failed(
            destination_id, "Fetch: " + ("unreachable" if unreachable else "no answer in time")
        )
        self._report_failure(RequestFailed(destination_id, request.correlation_id, unreachable))

    def _send_fetch(self, destination_id: int, request: FetchRequest) -> None:
        connection = self._fetch_connections.get(destination_id)
        if connection is None:
            if destination_id not in self._addresses:
                log.warning("no address for node %d", destination_id)
                return
            connection = FetchConnection(
                destination_id,
                self.node_id,
                lambda: self._fetch_endpoint(destination_id),
                self._config.request_timeout_ms,
                lambda request, response: self._fetch_answered(destination_id, response),
                lambda request, unreachable: self._fetch_failed(
                    destination_id, request, unreachable
                ),
                self._fetch_connection_finished,
                tasks=self._spawner,
            )
            self._fetch_connections[destination_id] = connection
        connection.send(request)

    async def _fetch_endpoint(self, node_id: int) -> tuple[str, int]:
        """Ask `node_id` where it listens for Fetch connections."""
        stub = self._stub(node_id)
        assert stub is not None  # only asked for nodes with an address
        try:
            answer = await stub.FetchEndpoint(
                pb.FetchEndpointRequest(),
                timeout=self._config.request_timeout_ms / 1000,
                metadata=self._metadata,
            )
        except grpc.aio.AioRpcError as exc:
            raise EndpointUnknown(
                f"node {node_id} did not say where it listens for Fetch: {exc.code()}",
                unreachable=exc.code() == grpc.StatusCode.UNAVAILABLE,
            ) from exc
        return self._hosts[node_id], answer.port

    def _fetch_connection_finished(self, connection: FetchConnection, unreachable: bool) -> None:
        if self._fetch_connections.get(connection.destination_id) is connection:
            del self._fetch_connections[connection.destination_id]
        if unreachable and not self._closed:
            self._reconnect(connection.destination_id)

    def _stub(self, node_id: int) -> raft_pb2_grpc.RaftQuorumStub | None:
        stub = self._stubs.get(node_id)
        if stub is None:
            address = self._addresses.get(node_id)
            if address is None:
                log.warning("no address for node %d", node_id)
                return None
            channel = grpc_channel(address, _CHANNEL_OPTIONS)
            self._channels[node_id] = channel
            stub = self._stubs[node_id] = raft_pb2_grpc.RaftQuorumStub(channel)  # type: ignore[no-untyped-call]
        return stub

    def _reconnect(self, node_id: int) -> None:
        """Replace the channel to `node_id` so that the next call connects at once.

        A channel whose peer was down keeps failing calls fast for its reconnect backoff (up
        to 1 s) after the peer is back, so a follower of a restarted-then-elected node would
        take the live leader for unreachable. A fresh channel
        makes every retry a real connection attempt, so "refused" means what it says.
        """
        self._stubs.pop(node_id, None)
        channel = self._channels.pop(node_id, None)
        if channel is not None:
            # Calls still in flight on it finish or time out; nothing new uses it.
            grace = self._config.request_timeout_ms / 1000
            task = self._spawner.spawn(channel.close(grace), name="closing a Raft channel")
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    # --- inbound ------------------------------------------------------------------------------

    def caller_id(self, context: Any) -> int:
        for key, value in context.invocation_metadata() or ():
            if key == NODE_ID_METADATA_KEY:
                return int(value)
        return next(self._synthetic_ids)

    async def handle(
        self,
        context: Any,
        build: Callable[[int], RaftRequest],
    ) -> object:
        """Give a request built with a fresh correlation id to the core; await its response."""
        correlation_id = next(self._correlation_ids)
        request = build(correlation_id)
        future: asyncio.Future[RaftResponse] = asyncio.get_running_loop().create_future()
        self._waiting[correlation_id] = future
        self._deliver(Message(self.caller_id(context), self.node_id, request))
        try:
            # asyncio.timeout, not wait_for: the handler resumes straight from the core's
            # answer, not through wait_for's inner future (one loop iteration less per request,
            # on the commit path of every Fetch).
            async with asyncio.timeout(self._config.request_timeout_ms / 1000):
                response = await future
        except TimeoutError:
            self._waiting.pop(correlation_id, None)
            await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "the quorum node did not answer")
            raise
        except _Closed:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "the quorum node is shutting down")
            raise
        return response_to_proto(response)

    def _accept_fetch(self, caller_id: int, request: pb.FetchRequest, reply: Reply) -> int:
        """Hand a Fetch from a peer's connection to the core; `reply` takes its answer."""
        correlation_id = next(self._correlation_ids)
        self._answering[correlation_id] = reply
        self._deliver(
            Message(caller_id, self.node_id, fetch_request_from_proto(request, correlation_id))
        )
        return correlation_id

    def _forget_fetch(self, correlation_id: int) -> None:
        self._answering.pop(correlation_id, None)

    async def close(self) -> None:
        self._closed = True
        await self.fetch_listener.close()
        for connection in list(self._fetch_connections.values()):
            connection.close()
        self._fetch_connections.clear()
        self._answering.clear()
        for task in list(self._tasks):
            task.cancel()
        for channel in self._channels.values():
            await channel.close()
        for closing in list(self._closing):
            closing.cancel()
        # Failed, not cancelled: cancelling these futures would cancel the handlers of parked
        # Fetches, which gRPC logs as an unhandled CancelledError traceback on every graceful
        # shutdown; failing them lets each call end with UNAVAILABLE instead.
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(_Closed())
        self._waiting.clear()


@dataclass(frozen=True, slots=True)
class RequestFailed:
    """A request of the core got no answer; see the module rules."""

    destination_id: int
    correlation_id: int
    unreachable: bool


class _Closed(Exception):
    """The transport closed while a request waited for the core's answer."""


Handler = Callable[..., Awaitable[object]]
