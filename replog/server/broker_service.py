"""The `Broker` gRPC servicer: the data plane's requests to the replica manager.

Thin: each method decodes its request (`broker_codec`; Produce's is decoded, and every
request's size checked, by the deserializer `add_broker_service` registers), answers what is
malformed per partition, hands the rest to the `ReplicaManager`, and encodes the answer (a
fetch's by its serializer); the replica manager (and the cores under it) decide everything
else.

Rules:
- Bytes that are not a protobuf message of the method's request type fail with
  INVALID_ARGUMENT, answered by the service and not by gRPC's own deserializer (which would
  answer INTERNAL and log a traceback): register the service with `add_broker_service`.
- A request larger than `request_bytes_max` (Kafka's `socket.request.max.bytes`) fails with
  gRPC RESOURCE_EXHAUSTED naming its size and the limit. One the codec cannot decode (a topic
  id that is not 16 bytes, an unknown isolation level) or that names a partition twice fails
  with INVALID_ARGUMENT naming the field, the value or the partition.
- A malformed partition entry gets its own Kafka error and the others go on: an illegal topic
  name is INVALID_TOPIC_EXCEPTION, a negative partition UNKNOWN_TOPIC_OR_PARTITION, produce
  bytes that are not whole v2 batches CORRUPT_MESSAGE (framing only: the records are never
  decoded here; CRCs and the rest are the log's), acks other than 0, 1, -1
  INVALID_REQUIRED_ACKS for every partition. A fetch with such an entry is answered at once
  (Kafka answers a fetch with any partition error without waiting).
- acks=0 answers an empty response; if any partition failed, the call is aborted (ABORTED,
  naming the partition and its error): the gRPC analogue of Kafka closing the connection, so
  the producer notices and refreshes its metadata.
- `ProduceStream` serves Produce requests pipelined on one call: each is appended as it
  arrives, in the order sent, without waiting for the answers before it (its task reaches the
  append before any later request's starts: tasks start in the order created, and nothing
  waits before the append), and answered in that order, each exactly as `Produce` would; at
  most `PRODUCE_STREAM_DEPTH` are served at once. A request `Produce` would fail as a whole
  ends the call with that status after the answers to the requests before it; the requests
  after it are not appended. Kafka's broker also reads one connection's requests in order;
  a producer keeps one such call per broker (half the CPU of a unary call per request, see
  `FetchStream`).
- `FetchStream` answers Fetch requests sent one after another on one call, in order, each
  exactly as `Fetch` would; a request `Fetch` would fail as a whole ends the stream with that
  status. A consumer keeps one per leader: a stream message costs this process about half of
  what a unary call does (measured: 170-200 against 400-430 us of CPU for a 256 KiB answer).
  Followers fetch over the ReplicaFetch service (`replica_fetch_service`), served by
  `replica_fetch` with the same rules.
- Waiting requests (acks=all produce, fetch long polls, DeleteRecords) wait at most their own
  timeout and end a little before the caller's gRPC deadline, so the caller gets Kafka's
  answer rather than DEADLINE_EXCEEDED.
- Until the broker has recovered its logs and created its replica manager (`attach`), data
  requests fail with UNAVAILABLE. Metadata is answered from the image once the broker caught
  up with the metadata log (`metadata_ready`: a heartbeat answer said so and its first image is
  published), UNAVAILABLE before, as Kafka's broker serves nothing before it caught up: a
  partial image would call existing topics unknown.
- InitProducerId (Kafka's rules for a producer without a transactional id): a transactional
  id is UNSUPPORTED_VERSION (transactions are not supported); exactly one of producer id and
  epoch -1 is INVALID_REQUEST; otherwise a new id from the producer-id manager with epoch 0
  (an idempotent producer's old id and epoch are not checked, as in Kafka), or
  COORDINATOR_LOAD_IN_PROGRESS while the manager has none (or the broker has no manager yet).
- Clients may not produce to internal topics (`__consumer_offsets`): the replica manager's
  `produce` refuses them (INVALID_TOPIC_EXCEPTION naming the topic); only the broker's own
  group coordinator appends there, through
  `ReplicaManager.produce(request, internal_topics_allowed=True)`.
- The replica manager answers errors per partition; a KAFKA_STORAGE_ERROR among them also
  goes to `on_storage_error` (the node stops: a disk it cannot trust). If it raises anyway: a
  `KafkaStorageError` goes to `on_storage_error` and the call fails with UNAVAILABLE; another
  `KafkaError` becomes every partition's error; any other exception is logged and the call
  fails with INTERNAL. Never a crashed process.
- Produce, Fetch, ListOffsets and OffsetsForLeaderEpoch are answered by cores that take
  decoded requests (`produce`, `fetch`, `list_offsets`, `offsets_for_leader_epoch`): the gRPC
  methods decode and call them, and the Kafka listener calls them directly, so both shells get
  the same refusals and answers with no protobuf between the Kafka listener and the replica
  manager (a Kafka Produce's records are the request's bytes, never decoded). `fetch` gives a
  fetch answered at once (records there, an error, no wait asked) in the step that read it,
  and an awaitable for one that waits in the replica manager's purgatory.
- DescribeLogDirs answers from the replica manager's log manager (`log_dirs.describe_log_dirs`:
  every log dir and the replicas in it, filtered by topic); like the other data requests it is
  UNAVAILABLE until the logs are recovered, and UNIMPLEMENTED for a replica manager without a
  log manager (a test double).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import replace
from functools import lru_cache, partial
from typing import Any, NoReturn, Protocol, TypeVar, runtime_checkable

import grpc

from quorum.metadata.image import MetadataImage
from replog.errors import (
    CoordinatorLoadInProgressError,
    CorruptRecordError,
    IllegalStateError,
    InvalidFetchSessionEpochError,
    InvalidRequestError,
    InvalidRequiredAcksError,
    InvalidTopicError,
    KafkaError,
    KafkaStorageError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from replog.pb import broker_pb2 as pb
from replog.pb import broker_pb2_grpc
from replog.pb import controller_pb2 as controller_pb
from replog.record.header import LOG_OVERHEAD, validate_batch
from replog.replication import messages as m
from replog.replication.fetch_session import FULL_FETCH_EPOCH, LeaderFetchSession
from replog.server.broker_metadata import metadata_response_from_image
from replog.server.log_dirs import LogView, describe_log_dirs
from replog.server.loop_turns import yield_turn
from replog.server.repeat_reads import RepeatReads
from replog.server.stream_requests import STOPPING, StreamRequests
from replog.server.tolerant_service import (
    Context,
    Refused,
    RequestLimit,
    abort_for,
    add_tolerant_service,
    refuse_undecodable,
    remaining_ms,
    serve_guarded,
)
from replog.topic_names import topic_name_problem
from replog.wire import broker_codec as codec

log = logging.getLogger("replog.server.broker")

SERVICE_NAME = "replog.pb.broker.Broker"
# Kafka's socket.request.max.bytes.
REQUEST_BYTES_MAX_DEFAULT = 104_857_600
_VALID_ACKS = (m.ACKS_NONE, m.ACKS_LEADER, m.ACKS_ALL)
# Requests of one ProduceStream call being served at once (appended, their answers not yet
# sent); the call's later requests wait in gRPC's flow control. Kafka's producer keeps at most
# 5 in flight per connection (max.in.flight.requests.per.connection); an open-loop sender may
# have more after a stall, and serving them at once costs nothing a unary Produce would not.
PRODUCE_STREAM_DEPTH = 32
# How many FetchStream requests are read ahead of the one being answered: a follower or a
# consumer sends its next fetch after the answer, so one is the norm; beyond the bound, gRPC's
# flow control holds a client that sends without waiting, as it did before the queue.
FETCH_STREAM_DEPTH = 8
# Fetch entries decoded between two turns of the loop's other tasks (`_decode_fetch`): a few
# milliseconds.
FETCH_DECODE_STEP_PARTITIONS = 500


class _NotServed(Exception):
    """A ProduceStream request not served because one sent before it failed the call."""


class BrokerRequests(Protocol):
    """What the service needs of the replica manager (`replica_manager.ReplicaManager`).

    `produce` must append every batch before its first await (it may await afterwards, for
    acks=all): ProduceStream relies on it to append one call's requests in the order sent."""

    async def produce(self, request: m.ProduceRequest) -> m.ProduceResponse: ...
    def fetch_or_wait(
        self,
        request: m.FetchRequest,
        repeats: RepeatReads | None = None,
        session: LeaderFetchSession | None = None,
    ) -> m.FetchResponse | Awaitable[m.FetchResponse]: ...
    def list_offsets(self, request: m.ListOffsetsRequest) -> m.ListOffsetsResponse: ...
    def offsets_for_leader_epoch(
        self, request: m.OffsetsForLeaderEpochRequest
    ) -> m.OffsetsForLeaderEpochResponse: ...
    async def delete_records(self, request: m.DeleteRecordsRequest) -> m.DeleteRecordsResponse: ...


class LogDirectories(Protocol):
    """What DescribeLogDirs reads of a log manager (`replog.storage.LogManager`)."""

    @property
    def log_dirs(self) -> list[str]: ...
    def all_logs(self) -> Mapping[tuple[str, int], LogView]: ...


@runtime_checkable
class HostsLogs(Protocol):
    """A replica manager that exposes its log manager (`replica_manager.ReplicaManager`)."""

    @property
    def log_manager(self) -> LogDirectories: ...


class ProducerIds(Protocol):
    """What the service needs of the producer-id manager (`producer_id_manager`)."""

    def generate_producer_id(self) -> int: ...


class _Entry(Protocol):
    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...


E = TypeVar("E", bound=_Entry)
R = TypeVar("R")
S = TypeVar("S")


def records_problem(records: bytes | memoryview) -> str | None:
    """Why `records` are not whole v2 batches (framing and magic only), None if they are."""
    position = 0
    while position < len(records):
        try:
            header = validate_batch(records, position, where=f"byte {position}", defer_crc=True)
        except KafkaError as error:
            return str(error)
        position += header.batch_length + LOG_OVERHEAD
    return None


class BrokerService(broker_pb2_grpc.BrokerServicer):
    def __init__(
        self,
        broker_id: int,
        *,
        cluster_id: str,
        image: Callable[[], MetadataImage],
        controller_id: Callable[[], int] = lambda: -1,
        replica_manager: BrokerRequests | None = None,
        request_bytes_max: int = REQUEST_BYTES_MAX_DEFAULT,
        on_storage_error: Callable[[KafkaStorageError], None] | None = None,
        producer_ids: ProducerIds | None = None,
        metadata_ready: Callable[[], bool] = lambda: True,
    ) -> None:
        self.broker_id = broker_id
        self._metadata_ready = metadata_ready
        self._cluster_id = cluster_id
        self._image = image
        self._controller_id = controller_id
        self._replica_manager = replica_manager
        self.request_bytes_max = request_bytes_max
        self._on_storage_error = on_storage_error
        self._producer_ids = producer_ids
        # The open ProduceStream and FetchStream calls, told to end when the broker stops
        # serving (`attach(None)`).
        self._open_streams: set[StreamRequests] = set()
        self._stopped_serving = False  # attach(None) was called: a new stream ends at once

    def attach(self, replica_manager: BrokerRequests | None) -> None:
        """The logs are recovered: serve data requests from now on (None: stop serving them,
        before the replica manager and the logs shut down).

        Stopping also ends every open ProduceStream and FetchStream with UNAVAILABLE once the
        answers queued before it went out: clients keep their streams open, and the server's
        stop would cancel them after the grace period, which gRPC logs as an unhandled
        CancelledError traceback (on graceful stops and on storage-error stops alike)."""
        self._replica_manager = replica_manager
        self._stopped_serving = replica_manager is None
        if replica_manager is None:
            for stream in self._open_streams:
                stream.stop()

    # --- the calls -----------------------------------------------------------------------------

    async def Produce(self, request: m.ProduceRequest, context: Context) -> pb.ProduceResponse:
        return await self._serve(request, context, partial(self._produce, request, context))

    async def ProduceStream(
        self, requests: AsyncIterator[Any], context: Context
    ) -> AsyncIterator[pb.ProduceResponse]:
        """Each request appended as it arrives and answered in the order sent (module
        docstring); at most `PRODUCE_STREAM_DEPTH` of them are being served at once."""
        refused = False  # a request failed: the later ones are not appended

        async def served(request: Any) -> pb.ProduceResponse:
            nonlocal refused
            if refused:
                raise _NotServed()
            try:
                refuse_undecodable(request)
                return await self._produce(request, context)
            except BaseException:
                refused = True
                raise

        # Each request is served by a task as soon as it is read. The task runs to its append
        # before any later one starts (tasks start in the order created, and nothing in
        # `served` waits before the append), so the log holds the requests in the order sent.
        stream = await self._open_stream(
            requests,
            context,
            "ProduceRequest",
            PRODUCE_STREAM_DEPTH,
            lambda request: asyncio.ensure_future(served(request)),
        )
        started = stream.queue
        try:
            while (answer := await started.get()) is not None:
                if answer is STOPPING:
                    await self._abort_stopping(context, "ProduceRequest")
                try:
                    response = await answer
                except Exception as exc:
                    await abort_for(
                        exc, context, "ProduceRequest", who=f"broker {self.broker_id}", log=log
                    )
                stream.release()
                yield response
            await stream.ended()
        finally:
            self._close_stream(stream)
            while not started.empty():
                pending = started.get_nowait()
                if pending is None or pending is STOPPING:
                    continue
                if pending.done():
                    # Retrieved, so asyncio does not log it as never retrieved: the call's
                    # status already says what ended it.
                    if not pending.cancelled():
                        pending.exception()
                else:
                    pending.cancel()

    async def _produce(self, decoded: m.ProduceRequest, context: Context) -> pb.ProduceResponse:
        answer = await self.produce(decoded, _deadline_bound(context))
        return pb.ProduceResponse() if answer is None else codec.produce_response_to_proto(answer)

    async def produce(
        self, decoded: m.ProduceRequest, bound_ms: Callable[[int], int] | None = None
    ) -> m.ProduceResponse | None:
        """Produce: what `Produce` and `ProduceStream` answer, and what the Kafka listener
        answers, called directly (no protobuf in between: the records are the bytes as they
        arrived, only their batch headers checked). None for acks=0 (no answer); raises
        `Refused`. `bound_ms(timeout_ms)`: how long an acks=all request may wait in the
        purgatory (cut before a gRPC caller's deadline; None: its own timeout)."""
        rm = self._ready()
        if decoded.acks not in _VALID_ACKS:
            refused: dict[int, KafkaError] = {
                i: InvalidRequiredAcksError(
                    f"{p.topic}-{p.partition}: acks={decoded.acks}: must be 0, 1 or -1 (all)"
                )
                for i, p in enumerate(decoded.partitions)
            }
        else:
            refused = _refusals(decoded.partitions, "Produce", _produce_problem)
        timeout_ms = decoded.timeout_ms if bound_ms is None else bound_ms(decoded.timeout_ms)

        def failed(p: m.ProducePartition, error: KafkaError) -> m.ProducePartitionResult:
            return m.ProducePartitionResult(p.topic, p.partition, error)

        answered = await _resolved(
            self._ask_manager(
                decoded.partitions,
                refused,
                lambda valid: rm.produce(replace(decoded, partitions=valid, timeout_ms=timeout_ms)),
                failed,
            )
        )
        if decoded.acks == m.ACKS_NONE:
            # The manager answers acks=0 with the failed partitions only.
            failures = [
                (p.topic, p.partition, error)
                for i, p in enumerate(decoded.partitions)
                if (error := refused.get(i)) is not None
            ] + [(r.topic, r.partition, r.error) for r in answered if r.error is not None]
            if failures:
                topic, partition, error = failures[0]
                more = f" (and {len(failures) - 1} more partitions)" if len(failures) > 1 else ""
                raise Refused(
                    grpc.StatusCode.ABORTED,
                    f"acks=0 produce to {topic}-{partition} failed with "
                    f"{error.error_name}: {error}{more}",
                )
            return None
        return m.ProduceResponse(tuple(_merged(decoded.partitions, refused, answered, failed)))

    async def Fetch(self, request: pb.FetchRequest, context: Context) -> m.FetchResponse:
        return await self._serve(
            request, context, lambda: self._fetch(request, _deadline_bound(context), None)
        )

    async def FetchStream(
        self, requests: AsyncIterator[Any], context: Context
    ) -> AsyncIterator[m.FetchResponse]:
        """Each request answered in turn as `Fetch` answers it; one that `Fetch` would fail
        ends the stream with that status (`serve_guarded` aborts the call). The call holds
        one fetch session for the requests that use one (`fetch_session`)."""
        session = LeaderFetchSession()
        # The session's reads that found nothing, which its unchanged entries reuse.
        repeats = RepeatReads()
        stream = await self._open_stream(
            requests, context, "FetchRequest", FETCH_STREAM_DEPTH, lambda request: request
        )
        try:
            while (request := await stream.queue.get()) is not None:
                if request is STOPPING:
                    await self._abort_stopping(context, "FetchRequest")
                stream.release()
                yield await self._serve(
                    request,
                    context,
                    partial(self._fetch, request, _deadline_bound(context), session, repeats),
                )
            await stream.ended()
        finally:
            self._close_stream(stream)

    async def _open_stream(
        self,
        requests: AsyncIterator[Any],
        context: Context,
        what: str,
        depth: int,
        admit: Callable[[Any], Any],
    ) -> StreamRequests:
        """A stream call's requests (`StreamRequests`), registered to be told when the broker
        stops serving; a call opened after that ends at once."""
        if self._stopped_serving:
            await self._abort_stopping(context, what)
        stream = StreamRequests(requests, depth, admit)
        self._open_streams.add(stream)
        return stream

    def _close_stream(self, stream: StreamRequests) -> None:
        self._open_streams.discard(stream)
        stream.close()

    async def _abort_stopping(self, context: Context, what: str) -> NoReturn:
        """End a stream call because the broker stopped serving (`attach(None)`)."""
        await abort_for(
            Refused(grpc.StatusCode.UNAVAILABLE, "the broker is stopping"),
            context,
            what,
            who=f"broker {self.broker_id}",
            log=log,
        )

    async def replica_fetch(
        self, request: pb.FetchRequest, session: LeaderFetchSession, repeats: RepeatReads | None
    ) -> m.FetchResponse:
        """A follower's fetch from its ReplicaFetch stream (`replica_fetch_service`), in the
        stream's `session`, answered exactly as a `FetchStream` request; a request
        `FetchStream` would fail as a whole raises `Refused`. Its max wait is its own: the
        follower waits for it plus its request timeout."""
        return await self._fetch(request, _no_bound, session, repeats)

    async def _fetch(
        self,
        request: pb.FetchRequest,
        bound_ms: Callable[[int], int],
        session: LeaderFetchSession | None,
        repeats: RepeatReads | None = None,
    ) -> m.FetchResponse:
        """`request` decoded, then answered by `fetch`."""
        decoded = await self._decode_fetch(request)
        answer = self.fetch(decoded, bound_ms, session, repeats)
        return answer if isinstance(answer, m.FetchResponse) else await answer

    def fetch(
        self,
        sent: m.FetchRequest,
        bound_ms: Callable[[int], int] | None = None,
        session: LeaderFetchSession | None = None,
        repeats: RepeatReads | None = None,
    ) -> m.FetchResponse | Awaitable[m.FetchResponse]:
        """What a decoded Fetch is answered: the answer itself when it is given at once, else
        an awaitable of it (the fetch waits in the replica manager's purgatory; await it at
        once). The gRPC methods answer with it, and so does the Kafka listener, called directly
        (no protobuf in between: a consumer catching up waits for each answer). Raises
        `Refused` (so may the awaitable). `bound_ms(max_wait_ms)`: how long the request may
        wait (cut before a gRPC caller's deadline; None: its own max wait). `session`: the
        FetchStream call's session (`fetch_session`), which a request with a `session_epoch`
        needs."""
        rm = self._ready()
        decoded = sent
        if sent.session_epoch == m.NO_SESSION:
            repeats = None  # a sessionless request is read in full
        else:
            if session is None:
                raise Refused(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    "Fetch: fetch sessions live on a FetchStream call; leave session_epoch "
                    "out of a unary Fetch",
                )
            try:
                # Only the session's partitions with news (`fetch_session` Rules).
                decoded = session.round_request(sent)
            except InvalidFetchSessionEpochError as error:
                raise Refused(
                    grpc.StatusCode.FAILED_PRECONDITION, f"{error.error_name}: {error}"
                ) from None
            if repeats is not None:
                if sent.session_epoch == FULL_FETCH_EPOCH:
                    repeats.clear()
                repeats.forget(sent.forgotten)
        refused = _refusals(decoded.partitions, "Fetch", _entry_problem)
        rounds = None if sent.session_epoch == m.NO_SESSION else session
        # Kafka answers at once when any partition has an error
        # (docs/design/replication.md#answer-now-or-wait); a bounded round that left news
        # unread answers at once too (`fetch_session` Rules), so the next round reads it.
        now = refused or (rounds is not None and rounds.deferred)
        if now:
            max_wait_ms = 0
        else:
            max_wait_ms = decoded.max_wait_ms if bound_ms is None else bound_ms(decoded.max_wait_ms)
        if rounds is not None and not decoded.partitions:
            # No news: the round waits for some (or its max wait) on the session's partitions.
            idle = rm.fetch_or_wait(replace(decoded, max_wait_ms=max_wait_ms), repeats, rounds)
            return _then(idle, partial(rounds.answer, sent))

        def failed(p: m.FetchPartition, error: KafkaError) -> m.FetchPartitionResult:
            return m.FetchPartitionResult(p.topic, p.partition, error, topic_id=p.topic_id)

        def answered(results: Sequence[m.FetchPartitionResult]) -> m.FetchResponse:
            response = m.FetchResponse(tuple(_merged(decoded.partitions, refused, results, failed)))
            if rounds is None:
                return response
            return rounds.answer(sent, response)

        return _then(
            self._ask_manager(
                decoded.partitions,
                refused,
                lambda valid: rm.fetch_or_wait(
                    _narrowed(decoded, valid, max_wait_ms), repeats, rounds
                ),
                failed,
            ),
            answered,
        )

    async def ListOffsets(
        self, request: pb.ListOffsetsRequest, context: Context
    ) -> pb.ListOffsetsResponse:
        async def serve() -> pb.ListOffsetsResponse:
            decoded = self._decode(request, codec.list_offsets_request_from_proto)
            return codec.list_offsets_response_to_proto(self.list_offsets(decoded))

        return await self._serve(request, context, serve)

    def list_offsets(self, request: m.ListOffsetsRequest) -> m.ListOffsetsResponse:
        """ListOffsets, answered at once (the replica manager's `list_offsets` never waits):
        what `ListOffsets` answers, and what the Kafka listener answers, called directly (no
        protobuf in between: a Kafka consumer asks offsets after every poll). Raises
        `Refused`."""
        results = self._answered_at_once(
            request,
            "ListOffsets",
            self._ready().list_offsets,
            lambda p, error: m.ListOffsetsPartitionResult(p.topic, p.partition, error),
        )
        return m.ListOffsetsResponse(tuple(results))

    async def OffsetsForLeaderEpoch(
        self, request: pb.OffsetsForLeaderEpochRequest, context: Context
    ) -> pb.OffsetsForLeaderEpochResponse:
        async def serve() -> pb.OffsetsForLeaderEpochResponse:
            decoded = self._decode(request, codec.offsets_for_leader_epoch_request_from_proto)
            return codec.offsets_for_leader_epoch_response_to_proto(
                self.offsets_for_leader_epoch(decoded)
            )

        return await self._serve(request, context, serve)

    def offsets_for_leader_epoch(
        self, request: m.OffsetsForLeaderEpochRequest
    ) -> m.OffsetsForLeaderEpochResponse:
        """OffsetsForLeaderEpoch, answered at once (the replica manager's never waits): what
        `OffsetsForLeaderEpoch` answers, and what the Kafka listener answers, called directly.
        Raises `Refused`."""
        results = self._answered_at_once(
            request,
            "OffsetsForLeaderEpoch",
            self._ready().offsets_for_leader_epoch,
            lambda p, error: m.OffsetForLeaderPartitionResult(p.topic, p.partition, error),
        )
        return m.OffsetsForLeaderEpochResponse(tuple(results))

    async def DeleteRecords(
        self, request: pb.DeleteRecordsRequest, context: Context
    ) -> pb.DeleteRecordsResponse:
        async def serve() -> pb.DeleteRecordsResponse:
            decoded = self._decode(request, codec.delete_records_request_from_proto)
            answer = await self.delete_records(decoded, _deadline_bound(context))
            return codec.delete_records_response_to_proto(answer)

        return await self._serve(request, context, serve)

    async def delete_records(
        self, request: m.DeleteRecordsRequest, bound_ms: Callable[[int], int] | None = None
    ) -> m.DeleteRecordsResponse:
        """DeleteRecords: what `DeleteRecords` answers, and what the Kafka listener answers,
        called directly. Raises `Refused`. `bound_ms(timeout_ms)`: how long it may wait for
        the followers (cut before a gRPC caller's deadline; None: its own timeout)."""
        rm = self._ready()
        timeout_ms = request.timeout_ms if bound_ms is None else bound_ms(request.timeout_ms)
        results = await self._answer(
            request.partitions,
            _refusals(request.partitions, "DeleteRecords", _entry_problem),
            lambda valid: rm.delete_records(
                replace(request, partitions=valid, timeout_ms=timeout_ms)
            ),
            lambda p, error: m.DeleteRecordsPartitionResult(p.topic, p.partition, error),
        )
        return m.DeleteRecordsResponse(tuple(results))

    async def Metadata(
        self, request: controller_pb.MetadataRequest, context: Context
    ) -> controller_pb.MetadataResponse:
        async def serve() -> controller_pb.MetadataResponse:
            if not self._metadata_ready():
                # Kafka's broker serves no request before its metadata caught up. Answering
                # from a partial image would call existing topics unknown to clients (after a
                # whole-cluster restart, sends would fail by the thousand).
                raise Refused(
                    grpc.StatusCode.UNAVAILABLE,
                    "not caught up with the metadata log yet (starting); ask another broker or "
                    "try again shortly",
                )
            return metadata_response_from_image(
                self._image(),
                request,
                cluster_id=self._cluster_id,
                controller_id=self._controller_id(),
            )

        return await self._serve(request, context, serve)

    async def InitProducerId(
        self, request: pb.InitProducerIdRequest, context: Context
    ) -> pb.InitProducerIdResponse:
        async def serve() -> pb.InitProducerIdResponse:
            decoded = codec.init_producer_id_request_from_proto(request)
            answer = init_producer_id(self.broker_id, decoded, self._producer_ids)
            return codec.init_producer_id_response_to_proto(answer)

        return await self._serve(request, context, serve)

    async def DescribeLogDirs(
        self, request: pb.DescribeLogDirsRequest, context: Context
    ) -> pb.DescribeLogDirsResponse:
        async def serve() -> pb.DescribeLogDirsResponse:
            decoded = codec.describe_log_dirs_request_from_proto(request)
            return codec.describe_log_dirs_response_to_proto(self.describe_log_dirs(decoded))

        return await self._serve(request, context, serve)

    def describe_log_dirs(self, request: m.DescribeLogDirsRequest) -> m.DescribeLogDirsResponse:
        """DescribeLogDirs: what `DescribeLogDirs` answers, and what the Kafka listener answers,
        called directly. Raises `Refused`."""
        rm = self._ready()
        if not isinstance(rm, HostsLogs):
            raise Refused(
                grpc.StatusCode.UNIMPLEMENTED,
                f"broker {self.broker_id} cannot describe its log dirs: no log manager",
            )
        manager = rm.log_manager
        return describe_log_dirs(manager.log_dirs, manager.all_logs(), request.topics)

    # --- helpers -------------------------------------------------------------------------------

    async def _serve(self, request: Any, context: Context, serve: Callable[[], Awaitable[R]]) -> R:
        """Run `serve` (garbage and oversize requests were refused by the deserializer); a
        `Refused` or an unexpected error aborts."""
        return await serve_guarded(request, context, serve, who=f"broker {self.broker_id}", log=log)

    def _decode(self, request: Any, decode: Callable[[Any], R]) -> R:
        try:
            return decode(request)
        except InvalidRequestError as error:
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, str(error)) from None

    async def _decode_fetch(self, request: pb.FetchRequest) -> m.FetchRequest:
        """`request` decoded, letting the loop's other tasks run between slices of
        `FETCH_DECODE_STEP_PARTITIONS` entries: a full fetch (a follower's session opening
        at a restart) holds thousands. Nothing is read or changed before it is whole."""
        partitions: list[m.FetchPartition] = []
        try:
            for entry in codec.fetch_partitions_from_proto(request):
                partitions.append(entry)
                if len(partitions) % FETCH_DECODE_STEP_PARTITIONS == 0:
                    await yield_turn()
            return codec.fetch_request_from_proto(request, partitions)
        except InvalidRequestError as error:
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, str(error)) from None

    def _ready(self) -> BrokerRequests:
        rm = self._replica_manager
        if rm is None:
            raise Refused(
                grpc.StatusCode.UNAVAILABLE,
                "not serving data requests: its logs are not recovered yet or it is shutting "
                "down; try again shortly",
            )
        return rm

    def _answered_at_once(
        self,
        request: Any,
        where: str,
        ask: Callable[[Any], Any],
        failed: Callable[[Any, KafkaError], R],
    ) -> list[R]:
        """One result per partition of `request` (a request whose `partitions` the manager
        answers at once: `ask(request with its valid partitions)` gives the response)."""
        return _at_once(
            self._answer(
                request.partitions,
                _refusals(request.partitions, where, _entry_problem),
                lambda valid: ask(replace(request, partitions=valid)),
                failed,
            )
        )

    async def _answer(
        self,
        entries: Sequence[E],
        refused: dict[int, KafkaError],
        ask: Callable[[tuple[E, ...]], Any],
        failed: Callable[[E, KafkaError], R],
    ) -> list[R]:
        """One result per entry in request order: its refusal, or the manager's answer."""
        answered = await _resolved(self._ask_manager(entries, refused, ask, failed))
        return _merged(entries, refused, answered, failed)

    def _ask_manager(
        self,
        entries: Sequence[E],
        refused: dict[int, KafkaError],
        ask: Callable[[tuple[E, ...]], Any],
        failed: Callable[[E, KafkaError], R],
    ) -> Sequence[R] | Awaitable[Sequence[R]]:
        """The manager's per-partition answers to the entries not refused (none if all were),
        or an awaitable of them when the manager's answer is one.

        `ask` gets those entries and returns the manager's response, or an awaitable of it.
        """
        valid = tuple(p for i, p in enumerate(entries) if i not in refused)
        if not valid:
            return ()
        try:
            response = ask(valid)
        except KafkaError as error:
            return self._manager_failed(valid, error, failed)
        if inspect.isawaitable(response):
            return self._manager_answers_later(valid, response, failed)
        return self._manager_answered(response)

    async def _manager_answers_later(
        self,
        valid: tuple[E, ...],
        response: Awaitable[Any],
        failed: Callable[[E, KafkaError], R],
    ) -> Sequence[R]:
        try:
            answer = await response
        except KafkaError as error:
            return self._manager_failed(valid, error, failed)
        return self._manager_answered(answer)

    def _manager_failed(
        self, valid: tuple[E, ...], error: KafkaError, failed: Callable[[E, KafkaError], R]
    ) -> list[R]:
        """The manager raised `error`: a storage error stops the broker (`on_storage_error`)
        and refuses the request; another is every entry's."""
        if isinstance(error, KafkaStorageError):
            if self._on_storage_error is not None:
                self._on_storage_error(error)
            raise Refused(grpc.StatusCode.UNAVAILABLE, f"storage error: {error}") from None
        return [failed(p, error) for p in valid]

    def _manager_answered(self, response: Any) -> Sequence[Any]:
        answered: Sequence[Any] = response.partitions
        # The manager answers a failed disk per partition (KAFKA_STORAGE_ERROR); the broker
        # must still stop, as Kafka takes a failed log dir offline.
        if self._on_storage_error is not None:
            for result in answered:
                result_error = getattr(result, "error", None)
                if isinstance(result_error, KafkaStorageError):
                    self._on_storage_error(result_error)
                    break
        return answered


# Produce requests and fetch answers go through `broker_codec`'s wire forms (record bytes kept
# out of protobuf); the servicer gets `m.ProduceRequest` and answers `m.FetchResponse`.
_METHODS: dict[str, tuple[Any, Any]] = {
    "Produce": (codec.ProduceRequestWire, pb.ProduceResponse),
    "Fetch": (pb.FetchRequest, codec.FetchResponseWire),
    "ListOffsets": (pb.ListOffsetsRequest, pb.ListOffsetsResponse),
    "OffsetsForLeaderEpoch": (pb.OffsetsForLeaderEpochRequest, pb.OffsetsForLeaderEpochResponse),
    "DeleteRecords": (pb.DeleteRecordsRequest, pb.DeleteRecordsResponse),
    "Metadata": (controller_pb.MetadataRequest, controller_pb.MetadataResponse),
    "InitProducerId": (pb.InitProducerIdRequest, pb.InitProducerIdResponse),
    "DescribeLogDirs": (pb.DescribeLogDirsRequest, pb.DescribeLogDirsResponse),
}


_STREAMS: dict[str, tuple[Any, Any]] = {
    "ProduceStream": (codec.ProduceRequestWire, pb.ProduceResponse),
    "FetchStream": (pb.FetchRequest, codec.FetchResponseWire),
}


def add_broker_service(service: BrokerService, server: Any) -> None:
    """Register `service` on a grpc.aio server, as `broker_pb2_grpc.add_BrokerServicer_to_server`
    does, but with deserializers that hand garbage and requests over its `request_bytes_max`
    to the service instead of failing."""
    limit = RequestLimit(service.request_bytes_max, "socket.request.max.bytes")
    add_tolerant_service(server, SERVICE_NAME, service, _METHODS, _STREAMS, limit)


def init_producer_id(
    broker_id: int, request: m.InitProducerIdRequest, producer_ids: ProducerIds | None
) -> m.InitProducerIdResponse:
    """The answer to InitProducerId (module docstring)."""
    if request.transactional_id is not None:
        return m.InitProducerIdResponse(
            UnsupportedVersionError(
                f"broker {broker_id}: InitProducerId with transactional_id "
                f"{request.transactional_id!r}: transactions are not supported (only idempotent "
                "producers, without a transactional id)"
            )
        )
    if (request.producer_id == m.NO_PRODUCER_ID) != (request.producer_epoch == m.NO_PRODUCER_EPOCH):
        return m.InitProducerIdResponse(
            InvalidRequestError(
                f"broker {broker_id}: InitProducerId with producer_id {request.producer_id} and "
                f"producer_epoch {request.producer_epoch}: both must be -1 (a new id) or both set"
            )
        )
    if producer_ids is None:
        return m.InitProducerIdResponse(
            CoordinatorLoadInProgressError(
                f"broker {broker_id} does not hand out producer ids yet (it is starting)"
            )
        )
    try:
        producer_id = producer_ids.generate_producer_id()
    except KafkaError as error:
        return m.InitProducerIdResponse(error)
    return m.InitProducerIdResponse(producer_id=producer_id, producer_epoch=0)


def _deadline_bound(context: Context) -> Callable[[int], int]:
    """`_bounded_ms` for a gRPC call's requests."""
    return lambda requested_ms: _bounded_ms(requested_ms, context)


def _no_bound(requested_ms: int) -> int:
    return requested_ms


def _bounded_ms(requested_ms: int, context: Context) -> int:
    """`requested_ms`, cut to end a little before the caller's deadline."""
    left_ms = remaining_ms(context)
    if left_ms is None:
        return requested_ms
    return max(0, min(requested_ms, left_ms))


# A fetch session's request names every partition of the session each round, and a broker
# knows few topics: their names are checked once each (bounded, so made-up names cannot grow it).
_topic_problem = lru_cache(maxsize=4096)(topic_name_problem)


def _entry_problem(entry: _Entry) -> KafkaError | None:
    problem = _topic_problem(entry.topic)
    if problem is not None:
        return InvalidTopicError(f"{entry.topic}-{entry.partition}: {problem}")
    if entry.partition < 0:
        return UnknownTopicOrPartitionError(
            f"{entry.topic}-{entry.partition}: a partition number must be >= 0"
        )
    return None


def _produce_problem(entry: m.ProducePartition) -> KafkaError | None:
    error = _entry_problem(entry)
    if error is not None:
        return error
    problem = records_problem(entry.records)
    if problem is not None:
        return CorruptRecordError(
            f"{entry.topic}-{entry.partition}: the records are not whole v2 batches: {problem}"
        )
    return None


def _refusals(
    entries: Sequence[E], where: str, problem: Callable[[E], KafkaError | None]
) -> dict[int, KafkaError]:
    """Index -> error of each malformed entry; `Refused` if a partition is named twice."""
    seen: set[tuple[str, int]] = set()
    refused: dict[int, KafkaError] = {}
    for index, entry in enumerate(entries):
        key = (entry.topic, entry.partition)
        if key in seen:
            raise Refused(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"{where} names {entry.topic}-{entry.partition} more than once",
            )
        seen.add(key)
        error = problem(entry)
        if error is not None:
            refused[index] = error
    return refused


def _at_once(call: Coroutine[Any, Any, R]) -> R:
    """The result of `call`, run here to its end: a call whose awaits all answer at once
    (an `_answer` whose manager call returns its response). One that would wait is a
    programming error."""
    try:
        call.send(None)
    except StopIteration as done:
        result: R = done.value
        return result
    call.close()
    raise IllegalStateError("a call answered at once waited")


def _narrowed(
    request: m.FetchRequest, valid: tuple[m.FetchPartition, ...], max_wait_ms: int
) -> m.FetchRequest:
    """`request` with only its `valid` entries (some of its own, in order) and `max_wait_ms`:
    the request itself when that changes nothing (no copy: most fetches)."""
    if len(valid) == len(request.partitions) and max_wait_ms == request.max_wait_ms:
        return request
    return replace(request, partitions=valid, max_wait_ms=max_wait_ms)


def _merged(
    entries: Sequence[E],
    refused: dict[int, KafkaError],
    answered: Sequence[Any],
    failed: Callable[[E, KafkaError], R],
) -> list[R]:
    """One result per request entry, in request order: the refusal or the manager's answer."""
    by_key = {(r.topic, r.partition): r for r in answered}
    results: list[R] = []
    for index, entry in enumerate(entries):
        error = refused.get(index)
        if error is not None:
            results.append(failed(entry, error))
            continue
        result = by_key.get((entry.topic, entry.partition))
        if result is None:
            # The manager must answer every partition; say so rather than drop one silently.
            result = failed(
                entry,
                UnknownServerError(
                    f"{entry.topic}-{entry.partition}: the replica manager gave no answer"
                ),
            )
        results.append(result)
    return results


async def _resolved(value: R | Awaitable[R]) -> R:
    """`value`, awaited if it is an awaitable."""
    if inspect.isawaitable(value):
        return await value
    return value


def _then(value: R | Awaitable[R], then: Callable[[R], S]) -> S | Awaitable[S]:
    """`then(value)`: now when `value` is given, else an awaitable of it (once `value` is)."""
    if inspect.isawaitable(value):
        return _after(value, then)
    return then(value)


async def _after(value: Awaitable[R], then: Callable[[R], S]) -> S:
    return then(await value)
