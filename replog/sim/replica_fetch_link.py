"""`sim_fetch_streams`: followers' ReplicaFetch streams over the simulated network, in place of
gRPC channels (`ReplicaFetchStream`'s channel): the follower's `ReplicaFetchStream` and the
leader's `ReplicaFetchService` (and so `BrokerCores.replica_fetch`) are the real ones.

Rules:
- A call a follower opens is a call of its leader's servicer's `Fetch`, its requests and
  answers crossing as their bytes (serialized on one side, parsed on the other, as on the
  wire). The servicer is the one the leader's node has when the call's first request arrives
  (`services`, kept by the simulation: a node that is down has none, a restarted one its new
  one).
- Each fetch (a request written, its answer read) goes as one `SimNetwork.call` from the
  follower's node to the leader's. A loss fails as a gRPC stream fails: a leader that is down
  is UNAVAILABLE (a refused connection); a request or answer lost is no answer, which the
  stream's own timeout ends (`RequestTimedOutError`); a leader that restarted since the call
  opened ends it with UNAVAILABLE. The follower then opens a new call (`replica_fetch_stream`
  Rules).
- A cancelled call (the follower's `close`) ends at the leader at once, as gRPC's cancellation
  reaches the server: its requests end, an answer being served is cancelled, a servicer
  between two requests is closed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from typing import Any, NoReturn

import grpc

from replog.pb import broker_pb2 as pb
from replog.server.data_plane.replica_fetch_service import ReplicaFetchService
from replog.server.data_plane.replica_fetch_stream import ReplicaFetchStream
from replog.server.data_plane.replica_fetcher import FetchStream, FetchStreams
from replog.sim.network import CallLost, SimNetwork
from replog.sim.rpc_errors import lost_call_error, rpc_error
from replog.wire import broker_codec as codec

__all__ = ["sim_fetch_streams"]

# The network's bound on one fetch: the stream's own timeout (its max wait plus
# replica.socket.timeout.ms) always ends the wait first.
CALL_TIMEOUT_S = 3600.0


class _ServerContext:
    """The little of gRPC's servicer context the ReplicaFetch servicer uses: `abort`."""

    def __init__(self) -> None:
        self.status: tuple[grpc.StatusCode, str] | None = None

    async def abort(self, code: grpc.StatusCode, details: str = "") -> NoReturn:
        self.status = (code, details)
        raise grpc.aio.AbortError()

    def time_remaining(self) -> float | None:
        return None  # a stream call has no deadline


class _LeaderCall:
    """The leader's side of one call: its servicer's `Fetch` over the call's requests."""

    def __init__(self, service: ReplicaFetchService) -> None:
        self.service = service
        self._requests: asyncio.Queue[pb.FetchRequest | None] = asyncio.Queue()
        self._context = _ServerContext()
        answers = service.Fetch(self._read(), self._context)
        assert isinstance(answers, AsyncGenerator)  # an async generator method (cancel)
        self._answers = answers
        self._serving: asyncio.Task[Any] | None = None
        self._ended = False

    async def _read(self) -> AsyncIterator[pb.FetchRequest]:
        while (request := await self._requests.get()) is not None:
            yield request

    async def exchange(self, request: bytes) -> bytes | None:
        """The answer to `request`, serialized; None when the servicer ended the call."""
        if self._ended:
            raise rpc_error(grpc.StatusCode.CANCELLED, "the call was cancelled")
        self._serving = asyncio.current_task()
        self._requests.put_nowait(pb.FetchRequest.FromString(request))
        try:
            answer = await anext(self._answers)
        except StopAsyncIteration:
            return None
        except grpc.aio.AbortError:
            code, details = self._context.status or (grpc.StatusCode.UNKNOWN, "aborted")
            raise rpc_error(code, details) from None
        finally:
            self._serving = None
        return codec.fetch_response_to_wire(answer)

    def cancel(self) -> None:
        """The call ends here at once, as gRPC's cancellation ends a servicer's: an answer
        being served is cancelled; a servicer waiting at its last answer is closed there, its
        cleanup run now (synchronous: `ReplicaFetchService.Fetch` awaits nothing in it)."""
        if self._ended:
            return
        self._ended = True
        self._requests.put_nowait(None)
        if self._serving is not None:
            self._serving.cancel()
            return
        closing = self._answers.aclose()
        try:
            closing.send(None)
        except StopIteration:
            return
        closing.close()
        raise RuntimeError("the ReplicaFetch servicer's cleanup awaited something")


class _FollowerCall:
    """The follower's side of one call: `write` a request, `read` its answer (module Rules)."""

    def __init__(
        self,
        network: SimNetwork,
        source: int,
        destination: int,
        services: Mapping[int, ReplicaFetchService],
    ) -> None:
        self._network = network
        self._source = source
        self._destination = destination
        self._services = services
        self._leader: _LeaderCall | None = None
        self._written: list[bytes] = []
        self._cancelled = False

    async def write(self, request: bytes) -> None:
        if self._cancelled:
            raise asyncio.InvalidStateError("the call was cancelled")
        self._written.append(bytes(request))

    async def read(self) -> Any:
        request = self._written.pop(0)
        destination = self._destination

        async def serve() -> bytes | None:
            service = self._services.get(destination)
            if self._cancelled or service is None:
                raise rpc_error(grpc.StatusCode.UNAVAILABLE, f"broker {destination} is down")
            if self._leader is None:
                self._leader = _LeaderCall(service)
            elif self._leader.service is not service:
                raise rpc_error(
                    grpc.StatusCode.UNAVAILABLE, f"broker {destination} restarted under the call"
                )
            return await self._leader.exchange(request)

        up = self._services.get(destination) is not None
        try:
            answer = await self._network.call(
                self._source, destination, serve if up else None, timeout_s=CALL_TIMEOUT_S
            )
        except CallLost as lost:
            raise lost_call_error(lost) from None
        return grpc.aio.EOF if answer is None else answer

    def cancel(self) -> None:
        self._cancelled = True
        if self._leader is not None:
            self._leader.cancel()


class _SimFetchChannel:
    """A follower's channel to one leader: each call a `_FollowerCall`; nothing to dial."""

    def __init__(self, open_call: Callable[[], _FollowerCall]) -> None:
        self._open_call = open_call

    def open_stream(self, rpc: str) -> _FollowerCall:
        assert rpc == "Fetch", rpc
        return self._open_call()

    def reconnect(self) -> None:
        pass  # nothing to dial: the network is always there

    async def close(self) -> None:
        pass


def sim_fetch_streams(
    network: SimNetwork, node_id: int, services: Mapping[int, ReplicaFetchService]
) -> FetchStreams:
    """The fetch streams of node `node_id`'s followers (module docstring), for its
    `ReplicaFetcherManager`; `services`: each node's ReplicaFetch servicer, None when down."""

    def make(address: str, source_id: int, *, request_timeout_ms: int) -> FetchStream:
        return ReplicaFetchStream(
            address,
            source_id,
            request_timeout_ms=request_timeout_ms,
            channel=_SimFetchChannel(lambda: _FollowerCall(network, node_id, source_id, services)),
        )

    return make
