"""A small asyncio client of one broker's `Broker` service, in `replication.messages` types.

Used by the client library, the replica fetcher, the benchmark and tests. One gRPC channel per
client.

Rules:
- Calls fail fast while the channel is down (no wait-for-ready): a dead broker is an error at
  once (`grpc.aio.AioRpcError` UNAVAILABLE), not a wait of a whole timeout. After UNAVAILABLE
  the channel is replaced, so the next call dials afresh instead of failing fast through
  gRPC's reconnect backoff (as the Raft transport does).
- The deadline of a call is `timeout_ms` (default `request_timeout_ms`); a Fetch's adds its
  `max_wait_ms`, and a Produce's or DeleteRecords' the request's own `timeout_ms`, so a long
  poll or an acks=all wait is not cut short by the transport.
- Per-partition errors come back as `KafkaError` instances in the results; only a failed call
  raises (`grpc.aio.AioRpcError`: INVALID_ARGUMENT, RESOURCE_EXHAUSTED, UNAVAILABLE, ...),
  or an answer that is not one (below).
  `init_producer_id` has no partitions: it raises the answer's `KafkaError` itself.
- An answer that is not one the RPC can have raises `MalformedResponseError` naming the
  address, the RPC and what was wrong, never a bare AttributeError or a result nobody can
  trust: bytes that do not parse as the RPC's message (gRPC's aio stub then hands back None
  and logs the parse error; `RedialingChannel` turns that, or an INTERNAL "Exception
  deserializing response!", into the error), a partition the request did not ask for,
  named twice, or left out (an acks=0 Produce's answer names none: its failure is the call
  ABORTED; a fetch session's answer may leave any out, `FetchStream`), a topic id that is
  not 16 bytes, an offset below -1 ("none") or a negative producer id or epoch beside no
  error. An error code this client does not know stays a
  per-partition `UnknownServerError` naming the code, as in Kafka.
  `metadata` checks only that the answer parsed: its reader judges its contents.
- A stream call (`FetchStream`, `ProduceStream`) the broker ends without an error while
  requests wait for answers raises NetworkError naming the broker and the call: the peer
  closed the stream, a retriable outcome, not a malformed answer.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Callable, Collection, Sequence
from typing import Any, Protocol, TypeVar

import grpc
from google.protobuf.message import DecodeError

from replog.errors import (
    ClientClosedError,
    InvalidRequestError,
    MalformedResponseError,
    NetworkError,
    RequestTimedOutError,
)
from replog.pb import broker_pb2, broker_pb2_grpc
from replog.pb import controller_pb2 as controller_pb
from replog.replication import messages as m
from replog.replication.fetch_session import FetchChanges, FetcherSession
from replog.wire import broker_codec as codec
from replog.wire.redialing_channel import RedialingChannel
from replog.wire.session_answers import checked_session_answer, offset_problem

REQUEST_TIMEOUT_MS_DEFAULT = 30_000
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", 128 * 1024 * 1024),
    ("grpc.max_receive_message_length", 128 * 1024 * 1024),
    ("grpc.keepalive_time_ms", 10_000),
    # Kafka's reconnect.backoff.ms / reconnect.backoff.max.ms (see raft_transport).
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 1000),
]

R = TypeVar("R")


class _Result(Protocol):
    """What every per-partition result has (the checks below need nothing else)."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def error(self) -> Any: ...


class _Answer(Protocol):
    """A per-partition RPC's decoded answer."""

    @property
    def partitions(self) -> Sequence[_Result]: ...


A = TypeVar("A", bound=_Answer)


class BrokerClient:
    def __init__(
        self,
        address: str,
        *,
        request_timeout_ms: int = REQUEST_TIMEOUT_MS_DEFAULT,
        metadata: Sequence[tuple[str, str]] = (),
    ) -> None:
        self.address = address
        self.request_timeout_ms = request_timeout_ms
        self._metadata = tuple(metadata)
        self._channel = RedialingChannel(
            address,
            _broker_stub,
            CHANNEL_OPTIONS,
            peer="broker",
            service=broker_pb2.DESCRIPTOR.services_by_name["Broker"],
        )

    def reconnect(self) -> None:
        """Drop the channel: the next call dials again at once."""
        self._channel.reconnect()

    def _malformed(self, rpc: str, what: str) -> MalformedResponseError:
        return MalformedResponseError(f"broker at {self.address} answered {rpc} with {what}")

    def _stream_ended(self, rpc: str, what: str) -> NetworkError:
        """The broker ended a stream call without an error while `what` waited for its answer:
        the peer closed the stream (module Rules). Kafka's word for a connection closed
        before the answer came, retriable: nothing malformed was received."""
        return NetworkError(
            f"broker at {self.address} ended the {rpc} call without an error while {what} "
            "waited for an answer (the peer closed the stream)"
        )

    async def _call(
        self,
        rpc: str,
        message: Any,
        timeout_ms: int | None,
        extra_ms: int = 0,
    ) -> Any:
        """The answer of one call of the `Broker` method `rpc`; an unparseable one raises
        MalformedResponseError (module docstring)."""
        deadline_ms = (self.request_timeout_ms if timeout_ms is None else timeout_ms) + extra_ms
        return await self._channel.call_rpc(rpc, message, deadline_ms / 1000, self._metadata)

    def _decoded(self, rpc: str, decode: Callable[..., R], answer: Any) -> R:
        """`decode(answer)`, with a malformed field (a topic id that is not 16 bytes) raised as
        MalformedResponseError."""
        try:
            return decode(answer, where=f"{rpc} answer of broker at {self.address}")
        except InvalidRequestError as exc:  # the codec's word for a field it cannot hold
            raise self._malformed(rpc, f"a malformed field: {exc}") from None
        except DecodeError:  # a fetch answer, parsed here rather than by gRPC (`_broker_stub`)
            raise self._channel.unparsed(rpc) from None

    def _checked(
        self,
        rpc: str,
        decode: Callable[..., A],
        answer: Any,
        asked: Sequence[Any],
        offsets: tuple[str, ...] = (),
        *,
        all_answered: bool = True,
    ) -> A:
        """The decoded answer of a per-partition RPC, checked against the partitions `asked`
        (`_check_results`)."""
        response = self._decoded(rpc, decode, answer)
        self._check_results(rpc, asked, response.partitions, offsets, all_answered=all_answered)
        return response

    def _check_results(
        self,
        rpc: str,
        asked: Sequence[Any],
        results: Sequence[_Result],
        offsets: tuple[str, ...] = (),
        *,
        all_answered: bool = True,
    ) -> None:
        """Every result answers a partition of `asked` (entries with `topic` and `partition`)
        once; with `all_answered`, every one asked for has its result; and none of the named
        `offsets` of a result without error is below -1 ("none" or "not said" throughout
        `replication.messages`, which readers already take so; beside an error they mean
        nothing). One set, one pass: this runs for every answer, a follower's fetches
        included; telling "not asked for" from "twice" is left to the failure."""
        pending = {(p.topic, p.partition) for p in asked}
        for result in results:
            key = (result.topic, result.partition)
            try:
                pending.remove(key)
            except KeyError:
                if any((p.topic, p.partition) == key for p in asked):
                    raise self._malformed(rpc, f"partition {_tp(key)} twice") from None
                raise self._malformed(rpc, f"a partition it did not ask for: {_tp(key)}") from None
            self._check_offsets(rpc, result, offsets)
        if all_answered and pending:
            missing = sorted(pending)
            names = ", ".join(_tp(key) for key in missing[:5])
            more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            raise self._malformed(rpc, f"no result for {names}{more}")

    def checked_fetch_in(
        self, holds: Callable[[tuple[str, int]], bool], answer: Any, rpc: str
    ) -> m.FetchResponse:
        """An incremental session answer, checked against the session's partitions (`holds`:
        `session_answers.checked_session_answer`)."""
        response = self._decoded(rpc, codec.fetch_response_from_wire, answer)
        return checked_session_answer(response, holds, lambda what: self._malformed(rpc, what))

    def _check_offsets(self, rpc: str, result: _Result, offsets: tuple[str, ...]) -> None:
        """None of the named `offsets` of a result without error is below -1."""
        problem = offset_problem(result, offsets)
        if problem is not None:
            raise self._malformed(rpc, problem)

    async def produce(
        self, request: m.ProduceRequest, *, timeout_ms: int | None = None
    ) -> m.ProduceResponse:
        answer = await self._call(
            "Produce",
            codec.produce_request_to_wire(request),
            timeout_ms,
            max(0, request.timeout_ms),
        )
        return self._checked_produce(request, answer)

    def _checked_produce(
        self, request: m.ProduceRequest, answer: Any, rpc: str = "Produce"
    ) -> m.ProduceResponse:
        acks_none = request.acks == m.ACKS_NONE
        return self._checked(
            rpc,
            codec.produce_response_from_proto,
            answer,
            request.partitions,
            () if acks_none else ("base_offset",),
            all_answered=not acks_none,  # acks=0: no partitions; a failure is ABORTED
        )

    def produce_stream(self) -> ProduceStream:
        """Produce requests pipelined on one `ProduceStream` call (`ProduceStream`)."""
        return ProduceStream(self)

    async def fetch(
        self, request: m.FetchRequest, *, timeout_ms: int | None = None
    ) -> m.FetchResponse:
        answer = await self._call(
            "Fetch",
            codec.fetch_request_to_proto(request),
            timeout_ms,
            max(0, request.max_wait_ms),
        )
        return self.checked_fetch(request, answer)

    def checked_fetch(
        self, request: m.FetchRequest, answer: Any, rpc: str = "Fetch", *, all_answered: bool = True
    ) -> m.FetchResponse:
        return self._checked(
            rpc,
            codec.fetch_response_from_wire,
            answer,
            request.partitions,
            ("high_watermark", "log_start_offset"),
            all_answered=all_answered,
        )

    def fetch_stream(self, *, sessions: bool = False) -> FetchStream:
        """Fetches on one `FetchStream` call (`FetchStream`), what followers' and consumers'
        fetchers use (with `sessions`: incremental fetch sessions, KIP-227)."""
        return FetchStream(self, sessions=sessions)

    async def list_offsets(
        self, request: m.ListOffsetsRequest, *, timeout_ms: int | None = None
    ) -> m.ListOffsetsResponse:
        answer = await self._call(
            "ListOffsets", codec.list_offsets_request_to_proto(request), timeout_ms
        )
        # offset -1: no record at or after the timestamp asked for.
        return self._checked(
            "ListOffsets",
            codec.list_offsets_response_from_proto,
            answer,
            request.partitions,
            ("offset",),
        )

    async def offsets_for_leader_epoch(
        self, request: m.OffsetsForLeaderEpochRequest, *, timeout_ms: int | None = None
    ) -> m.OffsetsForLeaderEpochResponse:
        answer = await self._call(
            "OffsetsForLeaderEpoch",
            codec.offsets_for_leader_epoch_request_to_proto(request),
            timeout_ms,
        )
        # end_offset -1: the epoch asked for is older than the log (UNDEFINED_EPOCH_OFFSET).
        return self._checked(
            "OffsetsForLeaderEpoch",
            codec.offsets_for_leader_epoch_response_from_proto,
            answer,
            request.partitions,
            ("end_offset",),
        )

    async def delete_records(
        self, request: m.DeleteRecordsRequest, *, timeout_ms: int | None = None
    ) -> m.DeleteRecordsResponse:
        answer = await self._call(
            "DeleteRecords",
            codec.delete_records_request_to_proto(request),
            timeout_ms,
            max(0, request.timeout_ms),
        )
        return self._checked(
            "DeleteRecords",
            codec.delete_records_response_from_proto,
            answer,
            request.partitions,
            ("low_watermark",),
        )

    async def metadata(
        self, topics: Sequence[str] | None = None, *, timeout_ms: int | None = None
    ) -> controller_pb.MetadataResponse:
        """The broker's view of the cluster (the message the controller's Metadata answers)."""
        answer: controller_pb.MetadataResponse = await self._call(
            "Metadata",
            controller_pb.MetadataRequest(topics=list(topics or ())),
            timeout_ms,
        )
        return answer

    async def init_producer_id(self, *, timeout_ms: int | None = None) -> tuple[int, int]:
        """A new producer id and its epoch (0) for an idempotent producer.

        Raises the `replog.errors` class of the answer's error (COORDINATOR_LOAD_IN_PROGRESS,
        retriable, while the broker has no ids yet), MalformedResponseError for an answer
        without error and without an id, or `grpc.aio.AioRpcError` for a failed call.
        """
        answer = await self._call(
            "InitProducerId",
            codec.init_producer_id_request_to_proto(m.InitProducerIdRequest()),
            timeout_ms,
        )
        response: m.InitProducerIdResponse = self._decoded(
            "InitProducerId", codec.init_producer_id_response_from_proto, answer
        )
        if response.error is not None:
            raise response.error
        if response.producer_id < 0 or response.producer_epoch < 0:
            raise self._malformed(
                "InitProducerId",
                f"producer id {response.producer_id} epoch {response.producer_epoch} beside "
                "no error (neither is ever negative)",
            )
        return response.producer_id, response.producer_epoch

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> BrokerClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


class FetchStream:
    """Fetches sent one after another on one `FetchStream` call to the client's broker.

    Rules:
    - The call opens at the first fetch, and again at the first fetch after a failure: any
      failed fetch cancels the call (a broker that failed one answer is not trusted with the
      next), as a failed unary Fetch leaves nothing behind.
    - An answer must come within the request's `max_wait_ms` plus the client's
      `request_timeout_ms` (a unary Fetch's deadline); otherwise RequestTimedOutError naming
      the broker and the wait.
    - Failures are those of `BrokerClient.fetch`: the call's `grpc.aio.AioRpcError` (UNAVAILABLE
      also drops the channel), `MalformedResponseError` for an answer that does not parse or
      does not answer the request. A stream the broker ends without an error before the
      answer (the peer closed it) is NetworkError, retriable, as a connection closed under a
      Kafka request is: nothing malformed came.
    - A call on a channel the client has since dropped (another call saw UNAVAILABLE) is
      cancelled before the next fetch and a new one opened on the current channel: the old
      channel's grace period would cut it off in the middle of some later fetch. UNAVAILABLE
      on such a call does not drop the current channel.
    - Not for concurrent use: one fetch at a time, as a fetcher task does.
    - With `sessions` (followers' and consumers' fetchers), each call holds a KIP-227 fetch
      session (`replication.fetch_session`): `fetch` takes every partition to fetch, sends the
      first request of a call in full and later ones with only what changed, and returns the
      answer as the broker sent it: only the partitions with news, and even the first answer
      may leave partitions out (the leader reads a bounded round of them; the rest come in
      later answers), so a missing partition means "nothing new yet". A new call starts a new
      session.
    """

    RPC = "FetchStream"

    def __init__(self, client: BrokerClient, *, sessions: bool = False) -> None:
        self._client = client
        self._call: Any = None
        self._generation = -1  # the channel generation `_call` was opened at
        self._session = FetcherSession() if sessions else None

    async def fetch(
        self,
        request: m.FetchRequest,
        *,
        resend: Collection[tuple[str, int]] = (),
        changes: FetchChanges | None = None,
    ) -> m.FetchResponse:
        """The answer to `request`; in a session, the partitions in `resend` are sent (and
        so answered in full) even if their entries did not change, and `changes` says what
        changed since the previous request (`FetcherSession.to_send`)."""
        client = self._client
        channel = client._channel
        wait_ms = client.request_timeout_ms + max(0, request.max_wait_ms)
        if self._call is not None and self._generation != channel.generation:
            self.close()
        if self._call is None:
            self._call = channel.open_stream(self.RPC, client._metadata)
            self._generation = channel.generation
        session = self._session
        sent = request if session is None else session.to_send(request, resend, changes)
        try:
            # asyncio.timeout, not wait_for: Python 3.11's wait_for drops a cancellation that
            # arrives as the answer does, and a fetcher told to stop would fetch on.
            async with asyncio.timeout(wait_ms / 1000):
                answer = await self._exchange(self._call, codec.fetch_request_to_proto(sent))
            if session is None:
                return client.checked_fetch(request, answer, self.RPC)
            # A session's answer may leave out any of its partitions, the first one's too: the
            # leader reads at most a bounded round of them (`fetch_session`, bounded rounds). It
            # is checked against the session's partitions, at the cost of what it carries.
            return client.checked_fetch_in(session.holds, answer, self.RPC)
        except TimeoutError:
            self.close()
            raise RequestTimedOutError(
                f"broker at {client.address} sent no {self.RPC} answer within {wait_ms} ms"
            ) from None
        except grpc.aio.AioRpcError as exc:
            current = self._generation == channel.generation
            self.close()
            if exc.code() == grpc.StatusCode.UNAVAILABLE and current:
                client.reconnect()
            raise
        except BaseException:
            self.close()
            raise

    async def _exchange(self, call: Any, message: Any) -> Any:
        # write() on a call that has ended raises InvalidStateError whatever its status; read()
        # then raises the status (AioRpcError: UNAVAILABLE for a broker that went away while
        # the stream was idle) or, for a call the broker ended without an error, returns EOF.
        with contextlib.suppress(asyncio.InvalidStateError):
            await call.write(message)
        answer = await call.read()
        if answer is grpc.aio.EOF:
            raise self._client._stream_ended(self.RPC, "a fetch")
        if answer is None:
            raise self._client._channel.unparsed(self.RPC)
        return answer

    def close(self) -> None:
        """Cancel the call; the next fetch opens a new one (and a new session)."""
        call, self._call = self._call, None
        if call is not None:
            call.cancel()
        if self._session is not None:
            self._session.reset()


class ProduceStream:
    """Produce requests pipelined on one `ProduceStream` call to the client's broker.

    Rules:
    - Requests go out in the order `produce` is called, and the broker appends and answers them
      in that order; any number may be in flight (the caller bounds it, as a producer does with
      max.in.flight.requests.per.connection). The broker serves `PRODUCE_STREAM_DEPTH` (32)
      at once; the later ones wait in flow control, their timeouts running, as requests
      queued behind a Kafka broker's muted connection do. A caller that stops waiting
      (cancelled) does not take its request back: it is sent and its answer read and dropped,
      so the answers after it still match their requests.
    - The call opens at the first request, and again at the first after a failure. A failure
      ends the call and fails every request in flight on it, as a Kafka producer's requests in
      flight on a connection fail together when it closes: each may or may not have been
      appended. Failures are those of `BrokerClient.produce`: the call's
      `grpc.aio.AioRpcError` (UNAVAILABLE also drops the channel), `MalformedResponseError` for
      an answer that does not parse or does not answer its request, NetworkError for the end
      of the stream with requests unanswered (the peer closed it); and
      `RequestTimedOutError` when a request has no answer within the `timeout_ms` given to
      `produce` (default the client's `request_timeout_ms`) plus the
      request's own `timeout_ms` (a unary Produce's deadline). When the call ends with a
      status or a malformed answer, only the oldest request in flight (the one it ended on)
      gets that error; the later ones get NetworkError (the broker stops appending after a
      request it refuses as a whole, and NetworkError is retriable with an unknown outcome).
      A call cancelled under the stream (its channel closed) fails them with NetworkError.
    - A call on a channel the client has since dropped (another call saw UNAVAILABLE) is ended
      before the next request, its requests in flight failing with NetworkError, and a new one
      opened on the current channel: requests split over two calls could be appended out of
      order.
    - `close` ends the call; requests still in flight fail with ClientClosedError.
    """

    RPC = "ProduceStream"

    def __init__(self, client: BrokerClient) -> None:
        self._client = client
        self._call: Any = None
        self._generation = -1  # the channel generation `_call` was opened at
        # Requests written or queued on `_call` and not answered yet, oldest first.
        self._in_flight: collections.deque[tuple[m.ProduceRequest, asyncio.Future[Any]]] = (
            collections.deque()
        )
        self._outbox: asyncio.Queue[Any] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    async def produce(
        self, request: m.ProduceRequest, *, timeout_ms: int | None = None
    ) -> m.ProduceResponse:
        """Send `request` and wait for its answer: at most `timeout_ms` (default the client's
        `request_timeout_ms`) plus the request's own `timeout_ms`, as a unary Produce."""
        client = self._client
        channel = client._channel
        if self._call is not None and self._generation != channel.generation:
            self._end(
                NetworkError(
                    f"the channel to broker at {client.address} was replaced (another call "
                    f"found it unavailable) while this {self.RPC} request was in flight"
                )
            )
        if self._call is None:
            self._open()
        message = codec.produce_request_to_wire(request)  # before it counts as in flight
        answered: asyncio.Future[m.ProduceResponse] = asyncio.get_running_loop().create_future()
        self._in_flight.append((request, answered))
        self._outbox.put_nowait(message)
        transport_ms = client.request_timeout_ms if timeout_ms is None else timeout_ms
        wait_ms = transport_ms + max(0, request.timeout_ms)
        try:
            async with asyncio.timeout(wait_ms / 1000):
                return await asyncio.shield(answered)
        except TimeoutError:
            if not answered.done():  # else the answer came as the timeout fired
                self._end(
                    RequestTimedOutError(
                        f"broker at {client.address} sent no {self.RPC} answer within {wait_ms} ms"
                    )
                )
            return answered.result()  # `_end` failed it with that error

    def _open(self) -> None:
        client = self._client
        call = client._channel.open_stream(self.RPC, client._metadata)
        self._call = call
        self._generation = client._channel.generation
        self._outbox = asyncio.Queue()
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._write(call, self._outbox)),
            loop.create_task(self._read(call, self._generation)),
        ]

    async def _write(self, call: Any, outbox: asyncio.Queue[Any]) -> None:
        while True:
            message = await outbox.get()
            try:
                await call.write(message)
            except (asyncio.InvalidStateError, grpc.aio.AioRpcError):
                return  # the call ended: `_read` gets its status and fails what is in flight

    async def _read(self, call: Any, generation: int) -> None:
        client = self._client
        try:
            while True:
                answer = await call.read()
                if answer is grpc.aio.EOF:
                    raise client._stream_ended(self.RPC, f"{len(self._in_flight)} request(s)")
                if answer is None:
                    raise client._channel.unparsed(self.RPC)
                if not self._in_flight:
                    raise client._malformed(self.RPC, "an answer to no request")
                request, answered = self._in_flight[0]
                # Checked before it leaves `_in_flight`: a malformed answer fails it too.
                response = client._checked_produce(request, answer, self.RPC)
                self._in_flight.popleft()
                if not answered.done():
                    answered.set_result(response)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # `_end` stopped this reader
            # The call was cancelled under the stream (its channel closed): fail what is on it.
            self._end(NetworkError(f"the {self.RPC} call to broker at {client.address} ended"))
        except grpc.aio.AioRpcError as exc:
            if (
                exc.code() == grpc.StatusCode.UNAVAILABLE
                and generation == client._channel.generation
            ):
                client.reconnect()
            self._end(exc, behind=self._not_served(exc.code().name))
        except Exception as exc:
            self._end(exc, behind=self._not_served(type(exc).__name__))

    def _not_served(self, why: str) -> NetworkError:
        return NetworkError(
            f"broker at {self._client.address}: {self.RPC} request not answered: the call "
            f"ended ({why}) on an earlier request"
        )

    def _end(self, error: BaseException, *, behind: BaseException | None = None) -> None:
        """End the call and fail every request in flight on it with `error`; with `behind`,
        only the oldest (the one the call failed on) gets `error`, the later ones `behind`: a
        broker that refuses a request as a whole does not append those after it, so they
        fail retriably (NetworkError: outcome unknown) rather than with its refusal."""
        call, self._call = self._call, None
        if call is not None:
            call.cancel()
        current = asyncio.current_task()
        for task in self._tasks:
            if task is not current:
                task.cancel()
        self._tasks = []
        failure = error
        while self._in_flight:
            _, answered = self._in_flight.popleft()
            if not answered.done():
                answered.set_exception(failure)
                # Retrieved here too: a request whose caller stopped waiting has no one to.
                answered.exception()
            failure = behind or error

    def close(self) -> None:
        """End the call; requests in flight fail with ClientClosedError."""
        if self._call is not None or self._in_flight:
            self._end(
                ClientClosedError(
                    f"the {self.RPC} call to broker at {self._client.address} was closed with "
                    f"{len(self._in_flight)} requests in flight"
                )
            )


def _broker_stub(channel: grpc.aio.Channel) -> broker_pb2_grpc.BrokerStub:
    """The generated stub, but with Produce requests and Fetch answers as serialized bytes:
    the client writes and reads those itself (`broker_codec.produce_request_to_wire`,
    `fetch_response_from_wire`), keeping record bytes out of protobuf's copies."""
    stub = broker_pb2_grpc.BrokerStub(channel)  # type: ignore[no-untyped-call]
    prefix = f"/{broker_pb2.DESCRIPTOR.services_by_name['Broker'].full_name}/"
    produce_answer = broker_pb2.ProduceResponse.FromString
    fetch_request = broker_pb2.FetchRequest.SerializeToString
    stub.Produce = channel.unary_unary(
        prefix + "Produce", response_deserializer=produce_answer, _registered_method=True
    )
    stub.ProduceStream = channel.stream_stream(
        prefix + "ProduceStream", response_deserializer=produce_answer, _registered_method=True
    )
    stub.Fetch = channel.unary_unary(
        prefix + "Fetch", request_serializer=fetch_request, _registered_method=True
    )
    stub.FetchStream = channel.stream_stream(
        prefix + "FetchStream", request_serializer=fetch_request, _registered_method=True
    )
    return stub


def _tp(key: tuple[str, int]) -> str:
    return f"{key[0]}-{key[1]}"
