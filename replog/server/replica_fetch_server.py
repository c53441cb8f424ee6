"""A partition leader's listener for its followers' replica fetch connections
(`replica_fetch_wire`), which the Spark source's tasks also use as consumers (greeting and
requests with replica id -1, `replog.spark.framed_fetch`): served as a consumer's FetchStream
request is, committed records only.

Theory of operation: each connection's greeting names the follower; every frame after it is
one fetch (a protobuf `FetchRequest`). The connection holds one incremental fetch session
(`fetch_session`), as a `FetchStream` call did, and its requests are served in the order
sent, one at a time, by `serve` (`BrokerService.replica_fetch`: every rule of a `FetchStream`
request holds, purgatory waits included). Each answer is written as soon as it is ready:
its header, then the serialized `FetchResponse` in the codec's parts, never joined
(`frame_parts`): a partition's records of REGION_MIN_BYTES or more are never read into
memory but sent from the segment file (`sendfile`, as Kafka's `FileRecords.transferTo`; the
node passes the threshold to `serve`), smaller ones read and written as they are.

Rules:
- Bytes that break the format (greeting, frame length) end the connection with a warning
  naming what was wrong; the broker and its other connections go on. A frame that is not a
  `FetchRequest`, one naming another replica than the greeting's broker, and a request
  `serve` refuses as a whole (`Refused`: a malformed field, a stale session epoch, a broker
  not serving data requests), are answered with a refusal
  frame carrying the Kafka error that names it, and the connection ends after it (the
  session ends with it, as a refused `FetchStream` call did). Anything else `serve` raises is
  a bug: logged with its traceback, refused as UNKNOWN_SERVER_ERROR.
- A connection that greets as a consumer (a Spark task) gets a send buffer that holds most
  of a large answer (CONSUMER_SEND_BUFFER_BYTES); a follower's keeps the kernel's default
  (its answers pace its replication: not measured with another).
- Backpressure: at most `DEPTH` requests are read ahead of the one being served (give or
  take one socket read), and while answers wait in the socket's write buffer (the follower
  does not read them) no more requests are read or served: a peer cannot make this broker
  buffer requests or answers without bound. A request frame is at most `socket.request.max.bytes`.
- A connection that closes cancels the request being served (a parked fetch stops waiting)
  and drops the rest. An answer that cannot be sent whole (the connection lost mid-answer, a
  segment file cut back under its records) ends the connection with a warning: the caller
  sees a lost connection and fetches again.
- `close` (the broker stops serving data requests) stops listening and ends every
  connection at once, answers not yet read dropped (a follower that stopped reading cannot
  keep one open): followers learn at once, and fetch from the new leaders the controller
  names.
- A wildcard host listens on every interface of both families, as the Raft fetch listener
  does (`framed_wire.listen`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections import deque
from collections.abc import Awaitable, Callable

import grpc
from google.protobuf.message import DecodeError

from replog.errors import (
    BrokerNotAvailableError,
    InvalidFetchSessionEpochError,
    InvalidRequestError,
    KafkaError,
    KafkaStorageError,
    UnknownServerError,
)
from replog.net_address import format_peer
from replog.pb import broker_pb2 as pb
from replog.record.batch import Buffer
from replog.replication import messages as m
from replog.replication.fetch_session import LeaderFetchSession
from replog.server.frame_parts import write_frame_parts
from replog.server.repeat_reads import RepeatReads
from replog.server.tolerant_service import Refused
from replog.storage.file_region import FileRegion
from replog.wire import framed_wire
from replog.wire import replica_fetch_wire as wire
from replog.wire.broker_codec import fetch_response_parts, fetch_response_pieces
from replog.wire.framed_wire import listen

log = logging.getLogger("replog.server.fetcher")

Serve = Callable[[pb.FetchRequest, LeaderFetchSession, RepeatReads], Awaitable[m.FetchResponse]]
# A partition's records of this many bytes or more are sent from the segment file (`sendfile`),
# never read into the broker's memory (`file_region`): a Spark task's 8 MiB answers, a
# follower catching up. Below it `pread` and `send` cost less than the region's descriptor
# and the sendfile's turns of the event loop (at least `SPLIT_MIN_BYTES`: such records are
# parts of their own).
REGION_MIN_BYTES = 256 * 1024
# Requests read ahead of the one being served (the Broker service's FETCH_STREAM_DEPTH): a
# follower sends its next fetch after the answer, so one is the norm.
DEPTH = 8
# A consumer's connection (a Spark task's: answers of up to `max.partition.fetch.bytes`, 8 MiB
# by default) asks for a send buffer this large (Linux doubles it, up to twice
# net.core.wmem_max): the kernel then takes most of an answer in one `send`, where the default
# buffer (grown by the kernel up to 4 MiB) leaves about half of an 8 MiB answer to be copied
# into the transport's buffer and sent from there over several turns of the event loop.
CONSUMER_SEND_BUFFER_BYTES = 4 * 1024 * 1024
# What a refusal's gRPC-style status means in Kafka's words.
_REFUSAL_ERRORS: dict[grpc.StatusCode, type[KafkaError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidRequestError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: InvalidRequestError,
    grpc.StatusCode.FAILED_PRECONDITION: InvalidFetchSessionEpochError,
    grpc.StatusCode.UNAVAILABLE: BrokerNotAvailableError,
}


class ReplicaFetchListener:
    """Serves replica fetch connections on one port; see the module rules."""

    def __init__(self, broker_id: int, serve: Serve, request_bytes_max: int) -> None:
        self.broker_id = broker_id
        self._serve = serve
        self._request_bytes_max = request_bytes_max
        self._server: asyncio.Server | None = None
        self._connections: set[_FollowerConnection] = set()
        self.port: int | None = None  # once listening

    async def start(self, host: str, port: int) -> int:
        """Listen on `host:port` (0: any free port); return the port."""
        self._server = await listen(host, port, lambda: _FollowerConnection(self))
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
        self.port = None
        for connection in list(self._connections):
            connection.abort()


class _FollowerConnection(asyncio.Protocol):
    def __init__(self, listener: ReplicaFetchListener) -> None:
        self._listener = listener
        self._socket: asyncio.Transport | None = None
        self._reader = framed_wire.InboundReader(wire.FORMAT, listener._request_bytes_max)
        self._requests: deque[tuple[int, bytes]] = deque()
        self._arrived = asyncio.Event()
        self._serving: asyncio.Task[None] | None = None
        self._writable = asyncio.Event()  # no answers wait in the write buffer
        self._writable.set()
        self._read_paused = False
        self._peer = "?"

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._socket = transport
        self._listener._connections.add(self)
        framed_wire.keep_alive(transport)
        self._peer = format_peer(transport.get_extra_info("peername"))
        self._serving = asyncio.get_running_loop().create_task(
            self._serve_in_order(), name=f"replica fetches from {self._peer}"
        )

    def data_received(self, data: bytes) -> None:
        greeted = self._reader.caller_id is not None
        try:
            frames = self._reader.feed(data)
        except InvalidRequestError as exc:  # this connection ends, the broker goes on
            log.warning("replica fetch connection from %s: %s; closing it", self._peer, exc)
            self.close()
            return
        if not greeted and self._reader.caller_id == m.CONSUMER_REPLICA_ID:
            self._consumer_send_buffer()
        if frames:
            self._requests.extend(frames)
            self._arrived.set()
            self._pace()

    async def _serve_in_order(self) -> None:
        session = LeaderFetchSession()
        repeats = RepeatReads()  # the session's reads that found nothing, reused
        while True:
            while not self._requests:
                self._arrived.clear()
                await self._arrived.wait()
            # Answers the follower has not read yet: serve (and buffer) no more until it does.
            await self._writable.wait()
            sequence, payload = self._requests.popleft()
            self._pace()
            try:
                request = pb.FetchRequest.FromString(payload)
                if request.replica_id != self._reader.caller_id:
                    # The fetch would move another broker's replica state (its fetch offset,
                    # its place in the ISR) on this connection's word.
                    raise Refused(
                        grpc.StatusCode.INVALID_ARGUMENT,
                        f"the fetch names replica {request.replica_id}, the connection's "
                        f"greeting broker {self._reader.caller_id}",
                    )
                response = await self._listener._serve(request, session, repeats)
            except DecodeError as exc:
                self._refuse(
                    sequence,
                    InvalidRequestError(
                        f"the {len(payload)} request bytes are not a FetchRequest message: {exc}"
                    ),
                )
                return
            except Refused as refused:
                error_type = _REFUSAL_ERRORS.get(refused.code, UnknownServerError)
                self._refuse(sequence, error_type(f"{refused.code.name}: {refused.details}"))
                return
            except Exception as exc:
                log.error(
                    "broker %d: a replica fetch from %s failed unexpectedly",
                    self._listener.broker_id,
                    self._peer,
                    exc_info=exc,
                )
                self._refuse(sequence, UnknownServerError(f"{type(exc).__name__}: {exc}"))
                return
            if any(p.region is not None for p in response.partitions):
                if not await self._send_parts(sequence, fetch_response_parts(response)):
                    return
                continue
            socket = self._socket
            if socket is not None and not socket.is_closing():
                framed_wire.write_frame_pieces(socket, sequence, fetch_response_pieces(response))

    async def _send_parts(self, sequence: int, parts: list[Buffer | m.RecordsRegion]) -> bool:
        """Write an answer with records left in their files (`frame_parts`); False when the
        connection cannot carry another (module rules)."""
        socket = self._socket
        if socket is None or socket.is_closing():
            for part in parts:
                if isinstance(part, FileRegion):
                    part.close()
            return True
        try:
            await write_frame_parts(socket, sequence, parts)
        except (OSError, KafkaStorageError) as exc:
            # Part of the frame may be sent: the connection cannot carry another.
            log.warning("replica fetch connection from %s: %s; closing it", self._peer, exc)
            socket.abort()
            return False
        return True

    def _consumer_send_buffer(self) -> None:
        """A consumer's connection: the larger send buffer (CONSUMER_SEND_BUFFER_BYTES). A
        socket that refuses it still serves, at more CPU per answer."""
        sock = None if self._socket is None else self._socket.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, CONSUMER_SEND_BUFFER_BYTES)

    def _refuse(self, sequence: int, error: KafkaError) -> None:
        """Answer `sequence` with `error` and end the connection (module rules)."""
        who = f"broker {self._listener.broker_id}"
        log.info("%s: refused a replica fetch from %s: %s", who, self._peer, error)
        socket = self._socket
        if socket is not None and not socket.is_closing():
            socket.write(wire.refusal(sequence, error))
            socket.close()  # after the buffered bytes are written

    def _pace(self) -> None:
        """Read while fewer than DEPTH requests wait and the follower reads its answers."""
        socket = self._socket
        if socket is None or socket.is_closing():
            return
        pause = not self._writable.is_set() or len(self._requests) >= DEPTH
        if pause and not self._read_paused:
            socket.pause_reading()
        elif not pause and self._read_paused:
            socket.resume_reading()
        self._read_paused = pause

    def pause_writing(self) -> None:
        self._writable.clear()
        self._pace()

    def resume_writing(self) -> None:
        self._writable.set()
        self._pace()

    def connection_lost(self, exc: Exception | None) -> None:
        self._listener._connections.discard(self)
        self._requests.clear()
        if self._serving is not None:
            self._serving.cancel()

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()

    def abort(self) -> None:
        """End the connection now, dropping answers the follower has not read: `close` would
        wait for it to read them, and a follower that stopped reading would keep the
        connection and its parked fetch alive after the broker stopped serving."""
        if self._socket is not None:
            self._socket.abort()
