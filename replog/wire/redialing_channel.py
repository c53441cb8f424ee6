"""One address's gRPC channel and stub, dialled on first use and replaced after UNAVAILABLE.

Every outbound gRPC client of a node (a follower's `ReplicaFetchStream`, `PeerChannels`) talks
to an address through one of these.

Rules:
- Calls fail fast while the peer is down (no wait-for-ready): a dead peer is an error at once
  (`grpc.aio.AioRpcError` UNAVAILABLE), not a wait of a whole deadline.
- After UNAVAILABLE the channel is replaced (`reconnect`): gRPC's reconnect backoff would
  otherwise keep failing calls fast for up to a second after the peer is back, so "refused"
  would not mean what it says.
- The replaced channel closes in the background with a grace period: calls still in flight on
  it finish or end at their own deadlines. Closing it at once would cancel those calls, and
  callers nobody cancelled would see `asyncio.CancelledError` and take it for their own
  shutdown.
- `close()` closes the current channel and every replaced one still closing, at once (their
  calls in flight are cancelled). A replaced channel left open would be closed by the
  garbage collector after the client's event loop has closed; gRPC then hands the
  completions of its cancelled calls to that closed loop through whichever other loop of
  the process it wakes, which fails there ("RuntimeError: Event loop is closed", a
  traceback in `replog demo`'s output) and leaves that loop's own completions waiting.
- An answer that does not parse as the method's message is `MalformedResponseError` naming
  the peer's address and the RPC (gRPC's aio stubs hand back None for it; its blocking stubs
  fail the call INTERNAL "Exception deserializing response!", taken the same way): the peer
  is not a replog node, or an incompatible one. Never a bare None for the caller to trip on.
  The stub is built on a channel whose response deserializers answer None for a protobuf
  `DecodeError` themselves: gRPC would otherwise log an ERROR with a traceback ("Exception
  deserializing message!") for every such answer, beside the typed error that says it all.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar, cast

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import DecodeError

from replog.errors import MalformedResponseError
from replog.wire.link_security import grpc_channel

StubT = TypeVar("StubT")

# How long a replaced channel waits for its calls in flight: longer than any deadline the
# clients use (a Fetch's long poll or an acks=all Produce adds its own wait to the request
# timeout), so they end on their own.
REPLACED_CHANNEL_GRACE_S = 300.0

# How gRPC words a response it could not parse when it fails the call for it (grpcio 1.85's
# blocking `_channel.py` does; its aio calls hand back None instead).
DESERIALIZE_FAILURE = "Exception deserializing response"
# The details of the INTERNAL status gRPC's asyncio layer sets itself when an operation on a
# call fails in its core: e.g. a stream's write racing the end of the call, or the connection
# cut under it. No replog server sends these words (its INTERNAL names the failure).
GRPC_CORE_INTERNAL = "Internal error from Core"


class RedialingChannel(Generic[StubT]):
    def __init__(
        self,
        address: str,
        make_stub: Callable[[grpc.aio.Channel], StubT],
        options: Sequence[tuple[str, Any]],
        *,
        peer: str = "peer",
        service: ServiceDescriptor | None = None,
    ) -> None:
        """`peer` and `service` only word a malformed answer's error ("broker at ...
        answered Fetch with bytes that do not parse as a replog.pb.FetchResponse message")."""
        self.address = address
        self._peer = peer
        self._service = service
        self._make_stub = make_stub
        self._options = list(options)
        self._channel: grpc.aio.Channel | None = None
        self._stub: StubT | None = None
        self._closing: dict[asyncio.Task[None], grpc.aio.Channel] = {}  # replaced, closing
        # Counts channels dropped: a stream call opened at another generation lives on a
        # channel that is closing (`open_stream`).
        self.generation = 0

    def stub(self) -> StubT:
        if self._stub is None:
            self._channel = grpc_channel(self.address, self._options)
            self._stub = self._make_stub(cast(grpc.aio.Channel, _QuietDecoding(self._channel)))
        return self._stub

    async def call(
        self,
        method: Callable[[StubT], Callable[..., Awaitable[Any]]],
        message: Any,
        timeout_s: float,
        metadata: Sequence[tuple[str, str]] = (),
        *,
        rpc: str = "a call",
    ) -> Any:
        """One unary call (`rpc` names it in errors); UNAVAILABLE replaces the channel and
        propagates; an unparseable answer raises MalformedResponseError (module docstring)."""
        try:
            answer = await method(self.stub())(message, timeout=timeout_s, metadata=tuple(metadata))
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.UNAVAILABLE:
                self.reconnect()
            elif exc.code() == grpc.StatusCode.INTERNAL and DESERIALIZE_FAILURE in (
                exc.details() or ""
            ):
                raise self.unparsed(rpc) from None
            raise
        if answer is None:
            raise self.unparsed(rpc)
        return answer

    async def call_rpc(
        self,
        rpc: str,
        message: Any,
        timeout_s: float,
        metadata: Sequence[tuple[str, str]] = (),
    ) -> Any:
        """`call` of the stub's method named `rpc` (which also names it in errors)."""
        return await self.call(
            lambda stub: getattr(stub, rpc), message, timeout_s, metadata, rpc=rpc
        )

    def open_stream(self, rpc: str, metadata: Sequence[tuple[str, str]] = ()) -> Any:
        """A new call of the stub's bidirectional-stream method `rpc`, with no deadline: its
        user bounds each answer itself. A message that does not parse is read as None
        (`unparsed` makes the typed error of it). A call outlives a `reconnect` on the old
        channel, which its grace period then cuts off: a user that keeps one open compares
        `generation` before each use and opens a new one once it moved."""
        return getattr(self.stub(), rpc)(metadata=tuple(metadata))

    def unparsed(self, rpc: str) -> MalformedResponseError:
        """The error for an answer of `rpc` that does not parse (module docstring)."""
        method = None if self._service is None else self._service.methods_by_name.get(rpc)
        expected = "its answer" if method is None else f"a {method.output_type.full_name}"
        return MalformedResponseError(
            f"{self._peer} at {self.address} answered {rpc} with bytes that do not parse as "
            f"{expected} message (not a replog {self._peer}, or an incompatible version)"
        )

    def reconnect(self) -> None:
        """Drop the channel: the next call dials again at once."""
        channel, self._channel, self._stub = self._channel, None, None
        self.generation += 1
        if channel is not None:
            task = asyncio.get_running_loop().create_task(channel.close(REPLACED_CHANNEL_GRACE_S))
            self._closing[task] = channel
            task.add_done_callback(self._forget_closing)

    def _forget_closing(self, task: asyncio.Task[None]) -> None:
        self._closing.pop(task, None)

    async def close(self) -> None:
        """Close the channel and the replaced ones still closing, at once (module docstring)."""
        channel, self._channel, self._stub = self._channel, None, None
        self.generation += 1
        closing, self._closing = self._closing, {}
        for task in closing:
            task.cancel()  # its grace period ends: the channel closes below
        for replaced in [*closing.values(), *([channel] if channel is not None else [])]:
            await replaced.close()


class _QuietDecoding:
    """The channel as a stub sees it when it builds its methods: each response deserializer
    answers None for bytes that are no message instead of raising (module docstring)."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._channel = channel

    def __getattr__(self, name: str) -> Any:
        factory = getattr(self._channel, name)
        if name not in _METHOD_FACTORIES:  # anything else: the channel's own
            return factory

        def quiet_factory(
            method: str,
            request_serializer: Callable[[Any], bytes] | None = None,
            response_deserializer: Callable[[bytes], Any] | None = None,
            **options: Any,
        ) -> Any:
            return factory(
                method,
                request_serializer=request_serializer,
                response_deserializer=_none_on_decode_error(response_deserializer),
                **options,
            )

        return quiet_factory


# The kinds of method replog's stubs build: unary calls, and ReplicaFetch's two-way stream.
_METHOD_FACTORIES = frozenset({"unary_unary", "stream_stream"})


def _none_on_decode_error(
    deserializer: Callable[[bytes], Any] | None,
) -> Callable[[bytes], Any] | None:
    if deserializer is None:  # raw bytes: nothing to parse
        return None

    def deserialize(raw: bytes) -> Any:
        try:
            return deserializer(raw)
        except DecodeError:  # `RedialingChannel.call` turns the None into the typed error
            return None

    return deserialize
