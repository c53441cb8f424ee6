"""The broker's request cores (`BrokerCores`): the data plane's requests to the replica manager,
decoded, as the Kafka listener's handlers (`kafka_apis`, `kafka_admin_apis`) and the followers'
ReplicaFetch service (`replica_fetch_service`) hand them over.

Thin: each core answers what is malformed per partition, hands the rest to the
`ReplicaManager`, and gives its answer; the replica manager (and the cores under it) decide
everything else.

Rules:
- A request malformed as a whole raises `Refused` naming what was wrong (the Kafka listener
  closes the connection, as Kafka's broker does; the ReplicaFetch stream ends with its status):
  a partition named twice; a follower's fetch the codec cannot decode (a topic id that is not
  16 bytes, an unknown isolation level); a fetch session epoch out of turn, or one without a
  session.
- A malformed partition entry gets its own Kafka error and the others go on: an illegal topic
  name is INVALID_TOPIC_EXCEPTION, a negative partition UNKNOWN_TOPIC_OR_PARTITION, produce
  bytes that are not whole v2 batches CORRUPT_MESSAGE (framing only: the records are never
  decoded here; CRCs and the rest are the log's), acks other than 0, 1, -1
  INVALID_REQUIRED_ACKS for every partition. A fetch with such an entry is answered at once
  (Kafka answers a fetch with any partition error without waiting).
- acks=0 answers nothing (None); if any partition failed, it raises `Refused` naming the
  partition and its error, so the Kafka listener closes the connection, as Kafka's broker does,
  and the producer notices and refreshes its metadata.
- `replica_manager.produce` appends every batch before its first await, so the requests of
  one connection, handed over in the order read, are appended in that order.
- Until the broker has recovered its logs and created its replica manager (`attach`), and
  once it stops serving them (`attach(None)`), data requests raise `Refused` (UNAVAILABLE).
- InitProducerId (`init_producer_id`, Kafka's rules for a producer without a transactional
  id): a transactional id is UNSUPPORTED_VERSION here (the Kafka listener gives those to the
  transaction coordinator); exactly one
  of producer id and epoch -1 is INVALID_REQUEST; otherwise a new id from the producer-id
  manager with epoch 0 (an idempotent producer's old id and epoch are not checked, as in
  Kafka), or COORDINATOR_LOAD_IN_PROGRESS while the manager has none (or the broker has no
  manager yet).
- Clients may not produce to internal topics (`__consumer_offsets`): the replica manager's
  `produce` refuses them (INVALID_TOPIC_EXCEPTION naming the topic); only the broker's own
  group coordinator appends there, through
  `ReplicaManager.produce(request, internal_topics_allowed=True)`.
- The replica manager answers errors per partition; a KAFKA_STORAGE_ERROR among them also
  goes to `on_storage_error` (the node stops: a disk it cannot trust). If it raises anyway: a
  `KafkaStorageError` goes to `on_storage_error` and the request is refused (UNAVAILABLE);
  another `KafkaError` becomes every partition's error.
- `fetch` gives a fetch answered at once (records there, an error, no wait asked) in the step
  that read it, and an awaitable for one that waits in the replica manager's purgatory.
- WriteTxnMarkers (`write_txn_markers`, one call for the Kafka listener and the Broker
  service) is the replica manager's, per marker and partition; before the answer each marker
  goes to `on_markers_written` with the partitions that took it (the group coordinator applies
  or drops a transaction's offsets at its marker, as Kafka's `onTransactionCompleted`).
- DescribeLogDirs answers from the replica manager's log manager (`log_dirs.describe_log_dirs`:
  every log dir and the replicas in it, filtered by topic, with each compacted log's dirty
  ratio from `replog.storage.cleaner.dirty_ratios`); like the other data requests it is
  refused until the logs are recovered, and refused (UNIMPLEMENTED) for a replica manager
  without a log manager (a test double).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import replace
from functools import lru_cache, partial
from typing import Any, Protocol, TypeVar, runtime_checkable

import grpc

from replog.clock import wall_clock_ms
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
from replog.record.header import LOG_OVERHEAD, validate_batch
from replog.replication import messages as m
from replog.replication.fetch_session import FULL_FETCH_EPOCH, LeaderFetchSession
from replog.server.config.data_plane_config import REQUEST_BYTES_MAX_DEFAULT
from replog.server.data_plane.log_dirs import LogView, describe_log_dirs
from replog.server.data_plane.repeat_reads import RepeatReads
from replog.server.runtime.loop_turns import yield_turn
from replog.server.runtime.tolerant_service import Refused
from replog.storage.cleaner.dirty_ratios import dirty_ratios
from replog.storage.log import Log
from replog.topic_names import topic_name_problem
from replog.wire import broker_codec as codec

log = logging.getLogger("replog.server.broker")

_VALID_ACKS = (m.ACKS_NONE, m.ACKS_LEADER, m.ACKS_ALL)
# Fetch entries decoded between two turns of the loop's other tasks (`_decode_fetch`): a few
# milliseconds.
FETCH_DECODE_STEP_PARTITIONS = 500


class BrokerRequests(Protocol):
    """What the cores need of the replica manager (`replica_manager.ReplicaManager`).

    `produce` must append every batch before its first await (it may await afterwards, for
    acks=all): the Kafka listener relies on it to append one connection's requests in the
    order read."""

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
    async def write_txn_markers(
        self, request: m.WriteTxnMarkersRequest
    ) -> m.WriteTxnMarkersResponse: ...


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


# (producer id, COMMIT, the partitions the marker was written to)
MarkersWritten = Callable[[int, bool, list[tuple[str, int]]], None]


class ProducerIds(Protocol):
    """What InitProducerId needs of the producer-id manager (`producer_id_manager`)."""

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


class BrokerCores:
    """The broker's answers to its data requests (module docstring), called by the Kafka
    listener's handlers and, for followers, by the ReplicaFetch service."""

    def __init__(
        self,
        broker_id: int,
        *,
        replica_manager: BrokerRequests | None = None,
        request_bytes_max: int = REQUEST_BYTES_MAX_DEFAULT,
        on_storage_error: Callable[[KafkaStorageError], None] | None = None,
        wall_clock: Callable[[], int] = wall_clock_ms,
        on_markers_written: MarkersWritten | None = None,
    ) -> None:
        self.broker_id = broker_id
        self._on_markers_written = on_markers_written
        self._wall_clock = wall_clock  # DescribeLogDirs' dirty ratios (compaction lags)
        self._replica_manager = replica_manager
        self.request_bytes_max = request_bytes_max
        self._on_storage_error = on_storage_error

    def attach(self, replica_manager: BrokerRequests | None) -> None:
        """The logs are recovered: serve data requests from now on (None: stop serving them,
        before the replica manager and the logs shut down)."""
        self._replica_manager = replica_manager

    # --- the cores ----------------------------------------------------------------------------

    async def produce(self, decoded: m.ProduceRequest) -> m.ProduceResponse | None:
        """Produce, as the Kafka listener answers it (no protobuf in between: the records are
        the bytes as they arrived, only their batch headers checked). None for acks=0 (no
        answer); raises `Refused`."""
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

        def failed(p: m.ProducePartition, error: KafkaError) -> m.ProducePartitionResult:
            return m.ProducePartitionResult(p.topic, p.partition, error)

        answered = await _resolved(
            self._ask_manager(
                decoded.partitions,
                refused,
                lambda valid: rm.produce(replace(decoded, partitions=valid)),
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

    async def replica_fetch(
        self, request: pb.FetchRequest, session: LeaderFetchSession, repeats: RepeatReads | None
    ) -> m.FetchResponse:
        """A follower's fetch from its ReplicaFetch stream (`replica_fetch_service`), decoded
        and answered by `fetch` in the stream's `session`; a request malformed as a whole
        raises `Refused`. Its max wait is its own: the follower waits for it plus its request
        timeout."""
        decoded = await self._decode_fetch(request)
        answer = self.fetch(decoded, session, repeats)
        return answer if isinstance(answer, m.FetchResponse) else await answer

    def fetch(
        self,
        sent: m.FetchRequest,
        session: LeaderFetchSession | None = None,
        repeats: RepeatReads | None = None,
    ) -> m.FetchResponse | Awaitable[m.FetchResponse]:
        """What a decoded Fetch is answered: the answer itself when it is given at once, else
        an awaitable of it (the fetch waits in the replica manager's purgatory; await it at
        once). The Kafka listener calls it directly (no protobuf in between: a consumer
        catching up waits for each answer). Raises `Refused` (so may the awaitable).
        `session`: a ReplicaFetch stream's session (`fetch_session`), which a request with a
        `session_epoch` needs; `repeats`: that session's reads that found nothing."""
        rm = self._ready()
        decoded = sent
        if sent.session_epoch == m.NO_SESSION:
            repeats = None  # a sessionless request is read in full
        else:
            if session is None:
                raise Refused(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    "Fetch: a session_epoch needs a fetch session (a ReplicaFetch stream's)",
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
        max_wait_ms = 0 if now else decoded.max_wait_ms
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

    def list_offsets(self, request: m.ListOffsetsRequest) -> m.ListOffsetsResponse:
        """ListOffsets, answered at once (the replica manager's `list_offsets` never waits):
        as the Kafka listener answers it, called directly (no
        protobuf in between: a Kafka consumer asks offsets after every poll). Raises
        `Refused`."""
        results = self._answered_at_once(
            request,
            "ListOffsets",
            self._ready().list_offsets,
            lambda p, error: m.ListOffsetsPartitionResult(p.topic, p.partition, error),
        )
        return m.ListOffsetsResponse(tuple(results))

    def offsets_for_leader_epoch(
        self, request: m.OffsetsForLeaderEpochRequest
    ) -> m.OffsetsForLeaderEpochResponse:
        """OffsetsForLeaderEpoch, answered at once (the replica manager's never waits), as the
        Kafka listener answers it, called directly. Raises `Refused`."""
        results = self._answered_at_once(
            request,
            "OffsetsForLeaderEpoch",
            self._ready().offsets_for_leader_epoch,
            lambda p, error: m.OffsetForLeaderPartitionResult(p.topic, p.partition, error),
        )
        return m.OffsetsForLeaderEpochResponse(tuple(results))

    async def delete_records(self, request: m.DeleteRecordsRequest) -> m.DeleteRecordsResponse:
        """DeleteRecords, as the Kafka listener answers it, called directly. Raises
        `Refused`."""
        rm = self._ready()
        results = await self._answer(
            request.partitions,
            _refusals(request.partitions, "DeleteRecords", _entry_problem),
            lambda valid: rm.delete_records(replace(request, partitions=valid)),
            lambda p, error: m.DeleteRecordsPartitionResult(p.topic, p.partition, error),
        )
        return m.DeleteRecordsResponse(tuple(results))

    async def write_txn_markers(
        self, request: m.WriteTxnMarkersRequest
    ) -> m.WriteTxnMarkersResponse:
        """WriteTxnMarkers, as the Kafka listener and the Broker service answer it: the
        replica manager's answer per marker and partition. Raises `Refused`; a storage error
        goes to `on_storage_error` as a produce's does."""
        rm = self._ready()
        try:
            response = await rm.write_txn_markers(request)
        except KafkaStorageError as error:
            if self._on_storage_error is not None:
                self._on_storage_error(error)
            raise Refused(grpc.StatusCode.UNAVAILABLE, f"storage error: {error}") from None
        for marker in response.markers:
            self._manager_answered(marker)
        if self._on_markers_written is not None:
            for asked, result in zip(request.markers, response.markers, strict=False):
                written = [(p.topic, p.partition) for p in result.partitions if p.error is None]
                if written:
                    self._on_markers_written(asked.producer_id, asked.committed, written)
        return response

    def describe_log_dirs(self, request: m.DescribeLogDirsRequest) -> m.DescribeLogDirsResponse:
        """DescribeLogDirs, as the Kafka listener answers it, called directly. Raises
        `Refused`."""
        rm = self._ready()
        if not isinstance(rm, HostsLogs):
            raise Refused(
                grpc.StatusCode.UNIMPLEMENTED,
                f"broker {self.broker_id} cannot describe its log dirs: no log manager",
            )
        manager = rm.log_manager
        logs = manager.all_logs()
        wanted = set(request.topics)
        compacted = {
            key: log
            for key, log in logs.items()
            if isinstance(log, Log) and (not wanted or key[0] in wanted)
        }
        ratios = dirty_ratios(manager.log_dirs, compacted, self._wall_clock())
        return describe_log_dirs(manager.log_dirs, logs, request.topics, ratios)

    # --- helpers -------------------------------------------------------------------------------

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


def init_producer_id(
    broker_id: int, request: m.InitProducerIdRequest, producer_ids: ProducerIds | None
) -> m.InitProducerIdResponse:
    """The answer to InitProducerId (module docstring)."""
    if request.transactional_id is not None:
        return m.InitProducerIdResponse(
            UnsupportedVersionError(
                f"broker {broker_id}: InitProducerId with transactional_id "
                f"{request.transactional_id!r}: transactional producers are served by the "
                "transaction coordinator of the Kafka listener, not here"
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
