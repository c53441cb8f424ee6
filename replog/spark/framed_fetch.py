"""A Spark task's Fetch over the leader's framed fetch connection, not gRPC: the serialized
FetchResponse read off the socket straight into one buffer.

Why: every broker listens on `replica.fetch.port` for framed fetch connections
(`replica_fetch_wire`; its followers fetch there), and answers a frame with the
serialized `FetchResponse` exactly as its gRPC `Fetch` does, served by the same code
(`BrokerService.replica_fetch`). Through grpcio a task's 8 MiB answer is copied four times
in the worker (the socket into grpc's slices, each slice into a bytes, those into a growing
bytearray, that into the bytes handed over) and once more on the broker (the serialized
answer into a slice); here the socket's bytes land once, in a buffer allocated for the
answer, and the broker writes its answer after the frame's header. The fetches of 2M
records of 100 B (batch walk and CRC included, no decoding): 0.10-0.12 us of worker CPU per
row through gRPC, about 0.06 through this, and 0.02-0.04 us less on the brokers
(docs/benchmarks.md, "Where a row's CPU goes").

Rules:
- The connection greets the leader as a consumer (broker id -1, `CONSUMER_REPLICA_ID`) and
  every request is a consumer's (replica id -1, no fetch session): the leader serves it as it
  serves a consumer's gRPC Fetch, committed records only (below its high watermark), and
  refuses a request naming another replica than the greeting's.
- One fetch at a time per connection (the range reader's next fetch starts after the answer
  before), one connection per leader address, opened at its first fetch: the port comes from
  the leader's gRPC service (`ReplicaFetchEndpoint`), the host is the one its gRPC address
  names.
- Only a leader whose framed path is truly not there raises `FramedFetchUnavailable`, and
  the caller fetches from it over gRPC instead: its gRPC service answers the endpoint query
  UNIMPLEMENTED (an older broker), its answer names no port, or the port refuses the
  connection (not reachable from the executors).
- Any other failure closes the connection and raises a typed error naming the leader's
  address, for the caller to retry as any failed fetch: the endpoint query's
  `grpc.aio.AioRpcError` or typed error (a leader not available, restarting, or not
  listening yet), `NetworkError` for a connection that could not be made or was lost,
  `MalformedResponseError` for bytes that break the format or answer another request,
  `RequestTimedOutError` when no answer came within the request's max wait plus `timeout_ms`
  (connecting included), the Kafka error of a refusal frame. The next fetch connects
  afresh.
- A connection outlives a task when its worker keeps the task's session (`fetch_sessions`):
  it is used again only if it has not failed (a leader that closed it while idle failed it)
  and no partition it fetched has a new leader epoch since; else the next fetch asks the
  port again and connects afresh (the leader at that address may have restarted, its port
  with it).
- The buffer an answer is read into is its own (never reused): the answer handed over is a
  view of it that the decoded columns may outlive.
- While an answer's payload comes in, the socket's receive low-water mark (`SO_RCVLOWAT`,
  Linux only) is what is left of it, at most `RECEIVE_LOW_WATER`, and 1 between answers: the
  loop wakes to read about once per MiB instead of for every few hundred KiB the kernel has,
  and never waits for bytes the answer does not have. The kernel caps the mark by the
  receive buffer (growing it to hold the mark) and wakes a reader whose buffer is full, a
  connection closed or failed, whatever the mark. A failed `setsockopt` turns it off for
  the connection (reads go on at the default mark).
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import struct
import sys

import grpc
import numpy as np

from replog.client.connections import Connections
from replog.errors import (
    MalformedResponseError,
    NetworkError,
    ReplogError,
    RequestTimedOutError,
)
from replog.net_address import format_host_port, parse_host_port
from replog.replication import messages as m
from replog.wire import broker_codec as codec
from replog.wire import replica_fetch_wire as wire
from replog.wire.replica_fetch_caller import ReplicaFetchCaller

_HEADER = struct.Struct(">II")  # framed_wire's: length of the rest, sequence number
# The most an answer's read waits for before the loop wakes (module rules). Measured on 8 MiB
# answers (bench/spark_fetch_path.py): the fetch's loop thread 0.034-0.036 us of CPU per row
# with 1 MiB, 0.038-0.043 with 512 KiB, 2 or 4 MiB, 0.043-0.051 without (docs/benchmarks.md,
# "Where a row's CPU goes").
RECEIVE_LOW_WATER = 1 << 20
_LOW_WATER_OPTION = getattr(socket, "SO_RCVLOWAT", None) if sys.platform == "linux" else None


class FramedFetchUnavailable(Exception):
    """The leader's framed fetch connection cannot be opened: fetch over gRPC instead."""


class FramedFetchChannels:
    """One fetcher's framed fetch connections, one per leader address (module rules). Lives
    on one event loop, as its connections do."""

    def __init__(self, connections: Connections) -> None:
        self._connections = connections  # the gRPC clients that ask for the port
        self._open: dict[str, _AnswerReader] = {}
        self._sequences = itertools.count(1)

    async def fetch(self, address: str, request: m.FetchRequest, *, timeout_ms: int) -> memoryview:
        """The serialized FetchResponse of the broker at `address` to `request` (a
        consumer's), as a view of the buffer it was read into."""
        wait_ms = timeout_ms + max(0, request.max_wait_ms)
        payload = codec.fetch_request_to_proto(request).SerializeToString()
        sequence = next(self._sequences) & wire.SEQUENCE_MASK
        try:
            async with asyncio.timeout(wait_ms / 1000):
                reader = self._open.get(address)
                if reader is None or reader.failed or reader.leader_changed(request):
                    self._drop(address)
                    reader = self._open[address] = await self._connect(address)
                answer = await reader.exchange(sequence, payload)
                reader.fetched(request)
                return answer
        except TimeoutError:
            self._drop(address)
            raise RequestTimedOutError(
                f"broker at {address} sent no fetch answer on its framed fetch connection "
                f"within {wait_ms} ms"
            ) from None
        except BaseException:
            self._drop(address)
            raise

    async def _connect(self, address: str) -> _AnswerReader:
        host, _ = parse_host_port(address, "a broker address", error=NetworkError)
        try:
            port = await self._connections.broker(address).named_replica_fetch_port()
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.UNIMPLEMENTED:
                raise  # the leader is there but cannot answer now: the caller retries
            raise FramedFetchUnavailable(
                f"broker at {address} has no framed fetch port to name (ReplicaFetchEndpoint "
                f"is {exc.code().name}: an older broker)"
            ) from exc
        if port is None:
            raise FramedFetchUnavailable(
                f"broker at {address} named no framed fetch port (replica.fetch.port)"
            )
        where = f"the framed fetch listener at {format_host_port(host, port)} (broker {address})"
        loop = asyncio.get_running_loop()
        try:
            _, reader = await loop.create_connection(lambda: _AnswerReader(where), host, port)
        except ConnectionRefusedError as exc:  # not reachable from here (module rules)
            raise FramedFetchUnavailable(f"cannot connect to {where}: {exc}") from exc
        except OSError as exc:
            raise NetworkError(f"cannot connect to {where}: {exc}") from None
        return reader

    def _drop(self, address: str) -> None:
        reader = self._open.pop(address, None)
        if reader is not None:
            reader.close()

    def close(self) -> None:
        for address in list(self._open):
            self._drop(address)


class _AnswerReader(ReplicaFetchCaller[memoryview], asyncio.BufferedProtocol):
    """One framed fetch connection, greeting as a consumer: a request written, its answer's
    frame read into a buffer of its own (asyncio reads the socket into the buffer
    `get_buffer` hands it)."""

    def __init__(self, where: str) -> None:
        super().__init__(where, m.CONSUMER_REPLICA_ID)
        self._header = bytearray(_HEADER.size)
        self._payload: np.ndarray | None = None  # None: reading a header
        self._got = 0  # bytes of the header or payload read so far
        self._frame = -1  # the sequence number of the frame being read
        # The leader epoch each partition was last fetched at over this connection.
        self._epochs: dict[tuple[str, int], int] = {}
        # The socket whose receive low-water mark follows the answer (None: left alone), and
        # the mark set on it (module rules).
        self._socket_for_mark: socket.socket | None = None
        self._low_water = 1

    def leader_changed(self, request: m.FetchRequest) -> bool:
        """Whether `request` names a leader epoch of a partition other than the one this
        connection last fetched it at: the leader at this address changed since (module
        rules)."""
        epochs = self._epochs
        return any(
            epochs.get((p.topic, p.partition), p.current_leader_epoch) != p.current_leader_epoch
            for p in request.partitions
        )

    def fetched(self, request: m.FetchRequest) -> None:
        for p in request.partitions:
            self._epochs[(p.topic, p.partition)] = p.current_leader_epoch

    def _mark(self, low_water: int) -> None:
        """Set the socket's receive low-water mark (module rules)."""
        sock, option = self._socket_for_mark, _LOW_WATER_OPTION
        if sock is None or option is None or low_water == self._low_water:
            return
        try:
            sock.setsockopt(socket.SOL_SOCKET, option, low_water)
        except OSError:
            self._socket_for_mark = None  # not on this socket: the default mark from now on
            return
        self._low_water = low_water

    # --- asyncio.BufferedProtocol ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        if _LOW_WATER_OPTION is not None:
            self._socket_for_mark = transport.get_extra_info("socket")

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._payload is None:
            return memoryview(self._header)[self._got :]
        return self._payload.data[self._got :]

    def buffer_updated(self, nbytes: int) -> None:
        self._got += nbytes
        try:
            if self._payload is None:
                if self._got == _HEADER.size:
                    self._start_payload()
            else:
                left = len(self._payload) - self._got
                if left == 0:
                    self._mark(1)  # the next header: any byte is worth waking for
                    self._payload_read()
                elif left < self._low_water:
                    self._mark(left)
        except ReplogError as exc:
            self._fail(exc)

    def _start_payload(self) -> None:
        length, sequence = _HEADER.unpack(self._header)
        limit = wire.FORMAT.max_frame_bytes + 4
        if length < 4 or length > limit:
            raise MalformedResponseError(
                f"{self._where} sent a frame of {length} bytes: must be 4 to {limit} bytes"
            )
        self._answer_for(sequence)
        self._frame = sequence
        self._payload = np.empty(length - 4, dtype=np.uint8)  # not zeroed: every byte is read
        self._got = 0
        if length == 4:
            self._payload_read()
        else:
            self._mark(min(length - 4, RECEIVE_LOW_WATER))

    def _payload_read(self) -> None:
        assert self._payload is not None
        payload = self._payload.data
        self._payload, self._got = None, 0
        self._deliver(self._frame, payload)

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost(exc, self._got if self._payload is not None else None)
