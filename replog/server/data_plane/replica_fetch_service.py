"""The `ReplicaFetch` gRPC servicer: a partition leader's side of its followers' fetch streams
(`replica_fetch.proto`), internal to the cluster.

Theory of operation: a follower keeps one `Fetch` call per leader broker and sends its fetches
on it one after another. The call holds one KIP-227 incremental fetch session
(`fetch_session.LeaderFetchSession`, with its kept empty reads, `repeat_reads`), and each
request is served in turn by `serve` (`BrokerCores.replica_fetch`: the rules of every
follower fetch, the fetch purgatory's long poll included: `max_wait_ms`, `min_bytes`). The
answer is written as serialized bytes (`broker_codec.FetchResponseWire`:
the protobuf bytes with the record bytes joined in, never decoded or copied into a message).

Rules:
- Followers only: a request with `replica_id` < 0 (a consumer) fails the call with
  INVALID_ARGUMENT, and so does one naming another replica than the call's first request did
  (it would move that broker's progress and place in the ISR on this call's word).
- A request `serve` refuses as a whole ends the call with its status (`Refused`: a malformed
  field, INVALID_ARGUMENT; a session epoch out of turn, FAILED_PRECONDITION; the broker not
  serving data requests, UNAVAILABLE), as do bytes that are no `FetchRequest`
  (INVALID_ARGUMENT) and a request over `socket.request.max.bytes` (RESOURCE_EXHAUSTED),
  through `tolerant_service`. The session ends with the call; the follower's next call opens a
  new one with a full fetch.
- Requests are read at most `DEPTH` ahead of the one being answered (a follower sends its next
  fetch after the answer); gRPC's flow control holds a peer that sends more.
- `stop` (the broker stops serving data requests) ends every open call with UNAVAILABLE once
  its current answer is out and the follower's next request is in, and any later call once its
  first request is in (ended sooner, a follower's write racing the end makes gRPC's core report
  INTERNAL instead), so followers learn at once and fetch from the leaders the controller
  names next. A follower writes its next fetch as soon as an answer is in, so the wait is
  short; one that never writes holds its call until it goes away or the server stops, as any
  open call does.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NoReturn

import grpc

from replog.pb import broker_pb2 as pb
from replog.pb import replica_fetch_pb2
from replog.replication import messages as m
from replog.replication.fetch_session import LeaderFetchSession
from replog.server.data_plane.repeat_reads import RepeatReads
from replog.server.data_plane.stream_requests import STOPPING, StreamRequests
from replog.server.runtime.tolerant_service import (
    Context,
    Refused,
    RequestLimit,
    abort_for,
    add_tolerant_service,
    serve_guarded,
)
from replog.wire import broker_codec as codec

log = logging.getLogger("replog.server.fetcher")

SERVICE_NAME = replica_fetch_pb2.DESCRIPTOR.services_by_name["ReplicaFetch"].full_name
# Requests read ahead of the one being answered (module rules).
DEPTH = 8

Serve = Callable[[pb.FetchRequest, LeaderFetchSession, RepeatReads], Awaitable[m.FetchResponse]]


class ReplicaFetchService:
    """Serves `ReplicaFetch.Fetch` calls (module rules)."""

    def __init__(self, broker_id: int, serve: Serve, request_bytes_max: int) -> None:
        self.broker_id = broker_id
        self.request_bytes_max = request_bytes_max
        self._serve = serve
        self._open: set[StreamRequests] = set()
        self._stopped = False

    def stop(self) -> None:
        """The broker stops serving data requests: end every open call (module rules)."""
        self._stopped = True
        for stream in self._open:
            stream.stop()

    async def Fetch(
        self, requests: AsyncIterator[Any], context: Context
    ) -> AsyncIterator[m.FetchResponse]:
        stream = StreamRequests(requests, DEPTH, lambda request: request)
        self._open.add(stream)
        if self._stopped:
            stream.stop()  # ended as an open call is, once its first request is in
        session = LeaderFetchSession()
        repeats = RepeatReads()  # the session's reads that found nothing, reused
        follower: list[int] = []  # the replica the call's first request named
        try:
            while (request := await stream.queue.get()) is not None:
                if request is STOPPING:
                    # The follower writes its next fetch once its answer is in, its first as the
                    # call opens (module rules): that request, or the end of its requests.
                    await stream.queue.get()
                    await self._abort_stopping(context)
                stream.release()
                yield await serve_guarded(
                    request,
                    context,
                    lambda: self._fetch(request, follower, session, repeats),
                    who=f"broker {self.broker_id}",
                    log=log,
                )
            await stream.ended()
        finally:
            self._open.discard(stream)
            stream.close()

    async def _fetch(
        self,
        request: pb.FetchRequest,
        follower: list[int],
        session: LeaderFetchSession,
        repeats: RepeatReads,
    ) -> m.FetchResponse:
        replica = request.replica_id
        if replica < 0:
            raise Refused(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"ReplicaFetch serves follower replicas only, and the fetch names replica "
                f"{replica}; consumers fetch through a Kafka listener",
            )
        if not follower:
            follower.append(replica)
        elif replica != follower[0]:
            raise Refused(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"the fetch names replica {replica}, the stream's first request broker "
                f"{follower[0]}",
            )
        return await self._serve(request, session, repeats)

    async def _abort_stopping(self, context: Context) -> NoReturn:
        await abort_for(
            Refused(grpc.StatusCode.UNAVAILABLE, "the broker is stopping"),
            context,
            "FetchRequest",
            who=f"broker {self.broker_id}",
            log=log,
        )


def add_replica_fetch_service(service: ReplicaFetchService, server: Any) -> None:
    """Register `service` on a grpc.aio server with `tolerant_service`'s deserializer (garbage
    and requests over `request_bytes_max` go to the service, which refuses them) and the
    fetch answer serializer (`broker_codec.FetchResponseWire`)."""
    limit = RequestLimit(service.request_bytes_max, "socket.request.max.bytes")
    streams = {"Fetch": (pb.FetchRequest, codec.FetchResponseWire)}
    add_tolerant_service(server, SERVICE_NAME, service, {}, streams, limit)
