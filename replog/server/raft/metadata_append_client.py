"""Appends to a quorum node's metadata log over its metadata append listener
(`metadata_append_wire`): many appends at once on one connection, without gRPC's per-call
cost.

Theory of operation: `connect(address)` asks the node's gRPC service at `address` where it
listens for metadata appends (`MetadataLog.AppendEndpoint`, on the host `address` names),
connects and greets it. `append(values)` writes a frame with the next sequence number (the
appends of one turn of the event loop leave in one socket write) and waits for the answer
with that number; any number of appends may wait at once, from any task of the
loop, and answers arrive in the order the appends commit.

Rules:
- An answer with an error raises its `replog.errors` class: NOT_LEADER_OR_FOLLOWER (its message
  names the leader if the node knows it), INVALID_REQUEST for a node whose log takes no raw
  values (`metadata.log.raw.append.enable`), an append of no values, or a request the node
  could not parse (its `MalformedRequestError` has no code of its own: the message names it).
- An append too large for one frame (`metadata_append_wire`) raises MessageSizeTooLargeError
  without being sent: the node would refuse the whole connection, failing the others.
- Each append has its own deadline (`timeout_s`): past it, `RequestTimedOutError` naming the
  node. The append may still commit (as after a gRPC deadline); its late answer is dropped.
- A connection that fails fails every waiting append and every later one, with one error:
  `NetworkError` for a connection refused or closed (by the node or `close`), the node's
  refusal of the connection, `MalformedResponseError` for bytes that break the format or an
  answer to an append never sent. Connect again to go on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import grpc

from replog.errors import (
    InvalidRequestError,
    MalformedResponseError,
    NetworkError,
    ReplogError,
    RequestTimedOutError,
    error_for_code,
)
from replog.net_address import format_host_port, parse_host_port
from replog.pb import raft_pb2 as pb
from replog.pb import raft_pb2_grpc
from replog.server.raft import metadata_append_wire as wire
from replog.server.raft.metadata_append_wire import AppendResult
from replog.wire import framed_wire
from replog.wire.link_security import grpc_channel

__all__ = ["AppendResult", "MetadataAppendClient"]

ENDPOINT_TIMEOUT_S = 5.0
APPEND_TIMEOUT_S = 30.0
_LAST_SEQUENCE = 0xFFFF_FFFF


class MetadataAppendClient(asyncio.Protocol):
    """One connection to a node's metadata append listener; see the module rules."""

    def __init__(self, where: str) -> None:
        self.where = where  # "the metadata append listener of 127.0.0.1:19092 at ..."
        self._socket: asyncio.Transport | None = None
        self._reader = wire.FORMAT.reader()
        self._waiting: dict[int, asyncio.Future[pb.AppendResponse]] = {}
        self._next = 1
        self._wrapped = False  # the sequence numbers restarted from 1
        self._failure: ReplogError | None = None

    @classmethod
    async def connect(
        cls, address: str, *, timeout_s: float = ENDPOINT_TIMEOUT_S
    ) -> MetadataAppendClient:
        """A connection to the node whose gRPC listener is at `address` (host:port)."""
        host, _ = parse_host_port(address, "a node address", error=NetworkError)
        async with grpc_channel(address) as channel:
            stub = raft_pb2_grpc.MetadataLogStub(channel)  # type: ignore[no-untyped-call]
            try:
                answer = await stub.AppendEndpoint(pb.AppendEndpointRequest(), timeout=timeout_s)
            except grpc.aio.AioRpcError as exc:
                raise NetworkError(
                    f"{address} did not say where it listens for metadata appends: "
                    f"{exc.code().name}: {exc.details()}"
                ) from None
        return await cls.connect_to(host, answer.port, of=address)

    @classmethod
    async def connect_to(cls, host: str, port: int, *, of: str = "") -> MetadataAppendClient:
        """A connection to the metadata append listener at `host:port` (`of`: the node's
        address, for errors)."""
        where = f"the metadata append listener at {format_host_port(host, port)}"
        if of:
            where = f"{of}'s {where[4:]}"
        try:
            _, connected = await framed_wire.connect(lambda: cls(where), host, port)
        except OSError as exc:
            raise NetworkError(
                f"cannot connect to {where} (controller.quorum.append.port): {exc}"
            ) from None
        return connected

    async def append(
        self, values: Sequence[bytes], *, timeout_s: float = APPEND_TIMEOUT_S
    ) -> AppendResult:
        """Append `values` as one batch; where they are once committed (module rules)."""
        if self._failure is not None:
            raise self._failure
        assert self._socket is not None
        sequence = self._next
        # Before the number is taken: a frame too large fails this append alone.
        request = wire.request_frame(sequence, values)
        if sequence == _LAST_SEQUENCE:
            self._next, self._wrapped = 1, True
        else:
            self._next = sequence + 1
        answer: asyncio.Future[pb.AppendResponse] = asyncio.get_running_loop().create_future()
        self._waiting[sequence] = answer
        self._out.write(request)
        try:
            # asyncio.timeout, not wait_for: no task per append.
            async with asyncio.timeout(timeout_s):
                response = await answer
        except TimeoutError:
            raise RequestTimedOutError(
                f"{self.where} answered no append within {timeout_s:g} s"
            ) from None
        finally:
            self._waiting.pop(sequence, None)
        return wire.result_of(response)

    def close(self) -> None:
        """End the connection: waiting appends fail with NetworkError."""
        self._fail(NetworkError(f"{self.where}: the connection was closed by its client"))

    async def __aenter__(self) -> MetadataAppendClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    # --- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._socket = transport
        self._out = framed_wire.CoalescedWrites(transport)
        framed_wire.keep_alive(transport)
        transport.write(wire.FORMAT.greeting(wire.NOT_A_NODE))

    def data_received(self, data: bytes) -> None:
        try:
            for sequence, payload in self._reader.feed(data):
                answer = wire.parse_answer(payload, self.where)
                if sequence == wire.CONNECTION_REFUSAL:
                    message = f"{self.where} refused the connection: {answer.error_message}"
                    self._fail(error_for_code(answer.error_code, message))
                    return
                waiting = self._waiting.get(sequence)
                if waiting is None:
                    if self._sent(sequence):
                        continue  # its caller gave up (deadline): dropped
                    raise MalformedResponseError(
                        f"{self.where} answered append {sequence}, never sent"
                    )
                if not waiting.done():
                    waiting.set_result(answer)
        except MalformedResponseError as exc:
            self._fail(exc)
        except InvalidRequestError as exc:  # the framing's: the node's bytes are bad
            self._fail(MalformedResponseError(f"{self.where} sent malformed bytes: {exc}"))

    def _sent(self, sequence: int) -> bool:
        """Whether `sequence` went out on this connection (once the numbers wrapped: any)."""
        return 0 < sequence < self._next or self._wrapped

    def connection_lost(self, exc: Exception | None) -> None:
        why = f": {exc}" if exc is not None else ""
        self._fail(NetworkError(f"{self.where} closed the connection{why}"))

    def _fail(self, error: ReplogError) -> None:
        """The connection is over: every waiting append and every later one fail with `error`."""
        if self._failure is None:
            self._failure = error
        for waiting in self._waiting.values():
            if not waiting.done():
                waiting.set_exception(self._failure)
        if self._socket is not None:
            self._socket.close()
