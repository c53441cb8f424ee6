"""A client of one broker's Kafka listener for replog's clients' data path, in
`replication.messages` types: Produce (pipelined), Fetch (KIP-227 sessions), ListOffsets,
OffsetForLeaderEpoch, DeleteRecords, Metadata, InitProducerId and topic configs
(DescribeConfigs), over the client's `KafkaConnections`.

Rules:
- Lanes (connections to the one broker, `KafkaConnections`): produce requests go on the
  "produce" lane, pipelined in the order `produce` is called (the broker appends them in that
  order); a fetcher's fetches on "fetch", so a long poll never delays anything else; every
  other call on the default lane. A producer thus has one produce connection per broker.
- Record bytes are never parsed here: a produce request's records are the accumulator's batch
  bytes as they are; a fetch answer's records are views of the response's buffer.
- Topics are named, never given by id: Produce up to v12, Fetch up to v12 (Kafka 4.x serves
  both; topic ids are KIP-516's later versions).
- Failures raise `replog.errors`: NetworkError (refused, unreachable, lost: retriable, a
  produce's outcome unknown), RequestTimedOutError (no answer within `request_timeout_ms`
  plus the request's own wait: a fetch's `max_wait_ms`, an acks=all produce's or a
  DeleteRecords' `timeout_ms`; the connection closes), NotAKafkaListenerError (the address is
  something else), UnsupportedVersionError, MalformedResponseError (bytes that do not decode,
  or an answer that does not answer the request: a partition not asked for, one named twice
  or, outside a fetch session and acks=0, left out; an offset below -1 beside no error; a
  negative producer id or epoch beside no error). A malformed answer closes its connection.
  Per-partition errors are `KafkaError` instances in the results, as Kafka's client keeps
  them; `init_producer_id` raises its answer's error.
- A fetch session (`fetch_stream(sessions=True)`) follows KIP-227: the first request is a
  full one (session id 0, epoch 0); the broker's session id is used from then on with the
  epochs `FetcherSession` counts; an answer without a session id, a session error
  (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH) or any failure starts afresh with
  a full request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterable, Sequence
from dataclasses import replace
from itertools import groupby
from typing import Any, Protocol, TypeVar

from replog.errors import (
    ClientClosedError,
    InvalidRecordError,
    KafkaError,
    MalformedResponseError,
    RecordsRejectedError,
    RequestTimedOutError,
    answer_error,
    error_for_code,
)
from replog.kafka.messages.delete_records_request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from replog.kafka.messages.delete_records_response import DeleteRecordsResponse
from replog.kafka.messages.describe_configs_request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from replog.kafka.messages.describe_configs_response import DescribeConfigsResponse
from replog.kafka.messages.fetch_request import (
    FetchPartition,
    FetchRequest,
    FetchTopic,
    ForgottenTopic,
)
from replog.kafka.messages.fetch_response import FetchResponse
from replog.kafka.messages.init_producer_id_request import InitProducerIdRequest
from replog.kafka.messages.init_producer_id_response import InitProducerIdResponse
from replog.kafka.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from replog.kafka.messages.list_offsets_response import ListOffsetsResponse
from replog.kafka.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from replog.kafka.messages.metadata_response import MetadataResponse
from replog.kafka.messages.offset_for_leader_epoch_request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from replog.kafka.messages.offset_for_leader_epoch_response import OffsetForLeaderEpochResponse
from replog.kafka.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from replog.kafka.messages.produce_response import PartitionProduceResponse, ProduceResponse
from replog.kafka.protocol.codec import Message
from replog.replication import messages as m
from replog.replication.fetch_session import FetchChanges, FetcherSession
from replog.wire.kafka_connection import KafkaConnection, KafkaConnections

REQUEST_TIMEOUT_MS_DEFAULT = 30_000
PRODUCE_MAX_VERSION = 12  # v13 names topics by id
# v12 tells a broker with transaction version 2 that the producer adds partitions by producing
# (KIP-890): a version 1 transactional producer stays below it, as Kafka's does.
TRANSACTION_V1_PRODUCE_MAX_VERSION = 11
FETCH_MAX_VERSION = 12  # likewise
INIT_PRODUCER_ID_MAX_VERSION = 5  # v6 is two-phase commit
TOPIC_RESOURCE = 2  # Kafka's ConfigResource.Type TOPIC
# Kafka's producer asks an idempotent (not transactional) producer id with this timeout.
NO_TRANSACTION_TIMEOUT_MS = 2**31 - 1
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
DEFAULT_LANE = ""
PRODUCE_LANE = "produce"
FETCH_LANE = "fetch"

T = TypeVar("T")


class _Result(Protocol):
    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def error(self) -> Any: ...


def _error(code: int, message: str | None = None) -> KafkaError | None:
    """The error an answer's code stands for (`answer_error`)."""
    return answer_error(code, message)


def _produce_error(topic: str, answer: PartitionProduceResponse) -> KafkaError | None:
    """A Produce answer's error for one partition; INVALID_RECORD naming the partition, with
    the records refused one by one when the answer lists them (v8+: a record without a key
    on a compacted topic, Kafka's record errors)."""
    error = _error(answer.error_code, answer.error_message)
    if isinstance(error, InvalidRecordError):
        refused = [(e.batch_index, e.batch_index_error_message or "") for e in answer.record_errors]
        error = RecordsRejectedError(f"{topic}-{answer.index}: {error}", refused)
    return error


def _leader(leader_id: int, leader_epoch: int) -> m.LeaderIdAndEpoch | None:
    if leader_id < 0 and leader_epoch < 0:
        return None  # the field's default: not said
    return m.LeaderIdAndEpoch(leader_id, leader_epoch)


def _by_topic(items: Iterable[T], topic: Any) -> list[tuple[str, list[T]]]:
    """`items` in runs of one topic each, in their order."""
    return [(name, list(run)) for name, run in groupby(items, key=topic)]


def _tp(key: tuple[str, int]) -> str:
    return f"{key[0]}-{key[1]}"


class KafkaBrokerClient:
    """The data-path calls to the broker at `address` (module docstring)."""

    def __init__(
        self,
        address: str,
        connections: KafkaConnections,
        *,
        request_timeout_ms: int = REQUEST_TIMEOUT_MS_DEFAULT,
    ) -> None:
        self.address = address
        self.connections = connections
        self.request_timeout_ms = request_timeout_ms

    def reconnect(self) -> None:
        """Close this broker's connections: the next call dials again at once."""
        for lane in (DEFAULT_LANE, PRODUCE_LANE, FETCH_LANE):
            self.connections.drop(self.address, lane)

    def malformed(self, api: str, what: str) -> MalformedResponseError:
        return MalformedResponseError(f"broker at {self.address} answered {api} with {what}")

    async def connection(
        self, lane: str = DEFAULT_LANE, wait_ms: int | None = None
    ) -> KafkaConnection:
        """The open connection on `lane`, dialled if needed. A caller waits for the dial (which
        `socket.connection.setup.timeout.ms` bounds) at most `wait_ms`, as Kafka's client
        bounds the ApiVersions exchange of a new connection by the request's timeout; the dial
        goes on for the next caller."""
        if wait_ms is None:
            return await self.connections.get(self.address, lane)
        try:
            async with asyncio.timeout(wait_ms / 1000):
                return await self.connections.get(self.address, lane)
        except TimeoutError:
            raise RequestTimedOutError(
                f"{self.address} did not finish the connection's setup (connect and "
                f"ApiVersions) within {wait_ms} ms"
            ) from None

    async def _call(
        self,
        request: Message,
        timeout_ms: int | None,
        extra_ms: int = 0,
        *,
        lane: str = DEFAULT_LANE,
        max_version: int | None = None,
        min_version: int = 0,
    ) -> tuple[Any, int]:
        wait_ms = (self.request_timeout_ms if timeout_ms is None else timeout_ms) + extra_ms
        connection = await self.connection(lane, wait_ms)
        return await connection.call(
            request, timeout_ms=wait_ms, min_version=min_version, max_version=max_version
        )

    # --- checks --------------------------------------------------------------------------

    def check_results(
        self,
        api: str,
        asked: Iterable[tuple[str, int]],
        results: Sequence[_Result],
        offsets: tuple[str, ...] = (),
        *,
        all_answered: bool = True,
    ) -> None:
        """Every result answers a partition of `asked` once; with `all_answered` every one
        asked for has its result; none of the named `offsets` of a result without error is
        below -1."""
        pending = set(asked)
        seen: set[tuple[str, int]] = set()
        for result in results:
            key = (result.topic, result.partition)
            if key in seen:
                raise self.malformed(api, f"partition {_tp(key)} twice")
            if key not in pending:
                raise self.malformed(api, f"a partition it did not ask for: {_tp(key)}")
            seen.add(key)
            if result.error is None:
                for name in offsets:
                    value = getattr(result, name)
                    if value < m.NO_OFFSET:
                        raise self.malformed(
                            api, f"{name} {value} for {_tp(key)} beside no error (never below -1)"
                        )
        if all_answered and len(seen) < len(pending):
            missing = sorted(pending - seen)
            names = ", ".join(_tp(key) for key in missing[:5])
            more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            raise self.malformed(api, f"no result for {names}{more}")

    # --- produce -------------------------------------------------------------------------

    def produce_request(self, request: m.ProduceRequest) -> ProduceRequest:
        return ProduceRequest(
            transactional_id=request.transactional_id,
            acks=request.acks,
            timeout_ms=request.timeout_ms,
            topic_data=[
                TopicProduceData(
                    name=topic,
                    partition_data=[
                        PartitionProduceData(index=p.partition, records=p.records) for p in run
                    ],
                )
                for topic, run in _by_topic(request.partitions, _topic_of)
            ],
        )

    def produce_response(
        self, request: m.ProduceRequest, answer: ProduceResponse
    ) -> m.ProduceResponse:
        response = m.ProduceResponse(
            tuple(
                m.ProducePartitionResult(
                    topic.name,
                    p.index,
                    _produce_error(topic.name, p),
                    p.base_offset,
                    p.log_append_time_ms,
                    p.log_start_offset,
                    _leader(p.current_leader.leader_id, p.current_leader.leader_epoch),
                )
                for topic in answer.responses
                for p in topic.partition_responses
            )
        )
        self.check_results(
            "Produce",
            ((p.topic, p.partition) for p in request.partitions),
            response.partitions,
            ("base_offset",),
        )
        return response

    async def produce(
        self, request: m.ProduceRequest, *, timeout_ms: int | None = None
    ) -> m.ProduceResponse:
        """One produce request on the produce lane (`ProduceStream.produce`)."""
        return await self.produce_stream().produce(request, timeout_ms=timeout_ms)

    def produce_stream(self) -> ProduceStream:
        return ProduceStream(self)

    # --- fetch ---------------------------------------------------------------------------

    def fetch_request(self, request: m.FetchRequest, session_id: int = 0) -> FetchRequest:
        return FetchRequest(
            replica_id=-1,
            max_wait_ms=request.max_wait_ms,
            min_bytes=request.min_bytes,
            max_bytes=request.max_bytes,
            isolation_level=int(request.isolation_level),
            session_id=session_id,
            session_epoch=request.session_epoch,
            topics=[
                FetchTopic(
                    topic=topic,
                    partitions=[
                        FetchPartition(
                            partition=p.partition,
                            current_leader_epoch=p.current_leader_epoch,
                            fetch_offset=p.fetch_offset,
                            last_fetched_epoch=p.last_fetched_epoch,
                            log_start_offset=p.log_start_offset,
                            partition_max_bytes=p.partition_max_bytes,
                        )
                        for p in run
                    ],
                )
                for topic, run in _by_topic(request.partitions, _topic_of)
            ],
            forgotten_topics_data=[
                ForgottenTopic(topic=topic, partitions=[p for _, p in run])
                for topic, run in _by_topic(request.forgotten, _first)
            ],
        )

    @staticmethod
    def fetch_response(answer: FetchResponse) -> m.FetchResponse:
        return m.FetchResponse(
            tuple(
                m.FetchPartitionResult(
                    topic.topic,
                    p.partition_index,
                    _error(p.error_code),
                    p.high_watermark,
                    p.last_stable_offset,
                    p.log_start_offset,
                    (
                        None
                        if p.diverging_epoch.epoch < 0
                        else m.EpochEndOffsetResult(
                            p.diverging_epoch.epoch, p.diverging_epoch.end_offset
                        )
                    ),
                    _leader(p.current_leader.leader_id, p.current_leader.leader_epoch),
                    b"" if p.records is None else p.records,  # type: ignore[arg-type]
                    aborted_transactions=(
                        None
                        if p.aborted_transactions is None
                        else tuple((a.producer_id, a.first_offset) for a in p.aborted_transactions)
                    ),
                )
                for topic in answer.responses
                for p in topic.partitions
            )
        )

    async def fetch(
        self, request: m.FetchRequest, *, timeout_ms: int | None = None
    ) -> m.FetchResponse:
        """A sessionless fetch on the fetch lane."""
        sent = request if request.session_epoch == m.NO_SESSION else _sessionless(request)
        answer, _ = await self._call(
            self.fetch_request(sent),
            timeout_ms,
            max(0, request.max_wait_ms),
            lane=FETCH_LANE,
            max_version=FETCH_MAX_VERSION,
        )
        assert isinstance(answer, FetchResponse)
        if answer.error_code != 0:
            raise error_for_code(answer.error_code, f"broker at {self.address}: Fetch refused")
        response = self.fetch_response(answer)
        self.check_results(
            "Fetch",
            ((p.topic, p.partition) for p in request.partitions),
            response.partitions,
            ("high_watermark", "log_start_offset"),
        )
        return response

    def fetch_stream(self, *, sessions: bool = False) -> FetchStream:
        return FetchStream(self, sessions=sessions)

    # --- offsets -------------------------------------------------------------------------

    async def list_offsets(
        self, request: m.ListOffsetsRequest, *, timeout_ms: int | None = None
    ) -> m.ListOffsetsResponse:
        wire = ListOffsetsRequest(
            replica_id=request.replica_id,
            isolation_level=int(request.isolation_level),
            topics=[
                ListOffsetsTopic(
                    name=topic,
                    partitions=[
                        ListOffsetsPartition(
                            partition_index=p.partition,
                            current_leader_epoch=p.current_leader_epoch,
                            timestamp=p.timestamp,
                        )
                        for p in run
                    ],
                )
                for topic, run in _by_topic(request.partitions, _topic_of)
            ],
        )
        answer, _ = await self._call(wire, timeout_ms, min_version=1)
        assert isinstance(answer, ListOffsetsResponse)
        response = m.ListOffsetsResponse(
            tuple(
                m.ListOffsetsPartitionResult(
                    topic.name,
                    p.partition_index,
                    _error(p.error_code),
                    p.timestamp,
                    p.offset,
                    p.leader_epoch,
                )
                for topic in answer.topics
                for p in topic.partitions
            )
        )
        self.check_results(
            "ListOffsets",
            ((p.topic, p.partition) for p in request.partitions),
            response.partitions,
            ("offset",),
        )
        return response

    async def offsets_for_leader_epoch(
        self, request: m.OffsetsForLeaderEpochRequest, *, timeout_ms: int | None = None
    ) -> m.OffsetsForLeaderEpochResponse:
        wire = OffsetForLeaderEpochRequest(
            replica_id=request.replica_id,
            topics=[
                OffsetForLeaderTopic(
                    topic=topic,
                    partitions=[
                        OffsetForLeaderPartition(
                            partition=p.partition,
                            current_leader_epoch=p.current_leader_epoch,
                            leader_epoch=p.leader_epoch,
                        )
                        for p in run
                    ],
                )
                for topic, run in _by_topic(request.partitions, _topic_of)
            ],
        )
        answer, _ = await self._call(wire, timeout_ms)
        assert isinstance(answer, OffsetForLeaderEpochResponse)
        response = m.OffsetsForLeaderEpochResponse(
            tuple(
                m.OffsetForLeaderPartitionResult(
                    topic.topic, p.partition, _error(p.error_code), p.leader_epoch, p.end_offset
                )
                for topic in answer.topics
                for p in topic.partitions
            )
        )
        self.check_results(
            "OffsetForLeaderEpoch",
            ((p.topic, p.partition) for p in request.partitions),
            response.partitions,
            ("end_offset",),
        )
        return response

    async def delete_records(
        self, request: m.DeleteRecordsRequest, *, timeout_ms: int | None = None
    ) -> m.DeleteRecordsResponse:
        wire = DeleteRecordsRequest(
            timeout_ms=request.timeout_ms,
            topics=[
                DeleteRecordsTopic(
                    name=topic,
                    partitions=[
                        DeleteRecordsPartition(partition_index=p.partition, offset=p.offset)
                        for p in run
                    ],
                )
                for topic, run in _by_topic(request.partitions, _topic_of)
            ],
        )
        answer, _ = await self._call(wire, timeout_ms, max(0, request.timeout_ms))
        assert isinstance(answer, DeleteRecordsResponse)
        response = m.DeleteRecordsResponse(
            tuple(
                m.DeleteRecordsPartitionResult(
                    topic.name, p.partition_index, _error(p.error_code), p.low_watermark
                )
                for topic in answer.topics
                for p in topic.partitions
            )
        )
        self.check_results(
            "DeleteRecords",
            ((p.topic, p.partition) for p in request.partitions),
            response.partitions,
            ("low_watermark",),
        )
        return response

    # --- cluster -------------------------------------------------------------------------

    async def metadata(
        self, topics: Sequence[str] | None = None, *, timeout_ms: int | None = None
    ) -> MetadataResponse:
        """The broker's view of the cluster: every topic for `topics` None (or empty), else
        those. Its reader judges its contents."""
        wire = MetadataRequest(
            topics=[MetadataRequestTopic(name=t) for t in topics] if topics else None,
            allow_auto_topic_creation=False,
        )
        answer, _ = await self._call(wire, timeout_ms, min_version=1)
        assert isinstance(answer, MetadataResponse)
        return answer

    async def init_producer_id(self, *, timeout_ms: int | None = None) -> tuple[int, int]:
        """A new producer id and its epoch for an idempotent producer; raises the answer's
        error (COORDINATOR_LOAD_IN_PROGRESS, retriable, while the broker has no ids yet)."""
        wire = InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=NO_TRANSACTION_TIMEOUT_MS
        )
        answer, _ = await self._call(wire, timeout_ms, max_version=INIT_PRODUCER_ID_MAX_VERSION)
        assert isinstance(answer, InitProducerIdResponse)
        if answer.error_code != 0:
            raise error_for_code(
                answer.error_code, f"broker at {self.address} refused InitProducerId"
            )
        if answer.producer_id < 0 or answer.producer_epoch < 0:
            raise self.malformed(
                "InitProducerId",
                f"producer id {answer.producer_id} epoch {answer.producer_epoch} beside "
                "no error (neither is ever negative)",
            )
        return answer.producer_id, answer.producer_epoch

    async def topic_configs(
        self, topics: Sequence[str], keys: Sequence[str], *, timeout_ms: int | None = None
    ) -> dict[str, dict[str, str | None] | KafkaError]:
        """The configs `keys` of each of `topics`, or the topic's error (DescribeConfigs)."""
        wire = DescribeConfigsRequest(
            resources=[
                DescribeConfigsResource(
                    resource_type=TOPIC_RESOURCE, resource_name=t, configuration_keys=list(keys)
                )
                for t in topics
            ]
        )
        answer, _ = await self._call(wire, timeout_ms)
        assert isinstance(answer, DescribeConfigsResponse)
        configs: dict[str, dict[str, str | None] | KafkaError] = {}
        for result in answer.results:
            error = _error(result.error_code, result.error_message)
            configs[result.resource_name] = (
                error if error is not None else {c.name: c.value for c in result.configs}
            )
        return configs

    async def close(self) -> None:
        """Nothing of its own: the connections belong to the client's `KafkaConnections`."""


def _topic_of(entry: Any) -> str:
    return str(entry.topic)


def _first(entry: tuple[str, int]) -> str:
    return entry[0]


def _sessionless(request: m.FetchRequest) -> m.FetchRequest:
    return replace(request, session_epoch=m.NO_SESSION, forgotten=())


class FetchStream:
    """Fetches one after another on the broker's fetch lane, in a KIP-227 session with
    `sessions` (module docstring). Not for concurrent use: one fetch at a time, as a fetcher
    task does. `close` ends the session (the next fetch is a full one)."""

    API = "Fetch"

    def __init__(self, client: KafkaBrokerClient, *, sessions: bool = False) -> None:
        self._client = client
        self._session = FetcherSession() if sessions else None
        self._session_id = 0

    async def fetch(
        self,
        request: m.FetchRequest,
        *,
        resend: Collection[tuple[str, int]] = (),
        changes: FetchChanges | None = None,
    ) -> m.FetchResponse:
        """The answer to `request`; in a session, the partitions in `resend` are sent (and so
        answered in full) even if unchanged, `changes` says what changed since the previous
        request (`FetcherSession.to_send`); the answer has only the partitions with news."""
        client = self._client
        session = self._session
        if session is None:
            return await client.fetch(request)
        try:
            connection = await client.connection(FETCH_LANE)
            sent = session.to_send(request, resend, changes)
            session_id = 0 if sent.session_epoch == 0 else self._session_id
            wait_ms = client.request_timeout_ms + max(0, sent.max_wait_ms)
            answer, _ = await connection.call(
                client.fetch_request(sent, session_id),
                timeout_ms=wait_ms,
                max_version=FETCH_MAX_VERSION,
            )
        except BaseException:
            self.close()
            raise
        assert isinstance(answer, FetchResponse)
        if answer.error_code in (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH):
            self.close()  # the broker dropped the session: the next fetch is a full one
            return m.FetchResponse(())
        if answer.error_code != 0:
            self.close()
            raise error_for_code(answer.error_code, f"broker at {client.address} refused Fetch")
        response = client.fetch_response(answer)
        try:
            self._check(response)
        except MalformedResponseError:
            self.close()
            connection.close()
            raise
        if answer.session_id == 0:
            session.reset()  # no session was made (or kept): every fetch is a full one
        self._session_id = answer.session_id
        return response

    def _check(self, response: m.FetchResponse) -> None:
        session = self._session
        assert session is not None
        seen: set[tuple[str, int]] = set()
        client = self._client
        for result in response.partitions:
            key = (result.topic, result.partition)
            if key in seen:
                raise client.malformed(self.API, f"partition {_tp(key)} twice")
            if not session.holds(key):
                raise client.malformed(self.API, f"a partition it did not ask for: {_tp(key)}")
            seen.add(key)
        client.check_results(
            self.API, seen, response.partitions, ("high_watermark", "log_start_offset")
        )

    def close(self) -> None:
        """End the session: the next fetch is a full one."""
        self._session_id = 0
        if self._session is not None:
            self._session.reset()


class ProduceStream:
    """Produce requests pipelined on the broker's produce lane, in the order `produce` is
    called: each is written before `produce` first suspends on a connection already open, and
    the broker appends a connection's requests in the order sent. Any number may be in flight
    (the caller bounds it: max.in.flight.requests.per.connection). A connection that fails
    fails every request in flight on it (each may or may not have been appended), as a Kafka
    producer's requests on a closed connection; the next request dials afresh. A caller that
    stops waiting does not take its request back. `close` fails those still in flight with
    ClientClosedError."""

    API = "Produce"

    def __init__(self, client: KafkaBrokerClient) -> None:
        self._client = client
        self._in_flight = 0
        self._closed = False

    @property
    def in_flight(self) -> int:
        return self._in_flight

    async def produce(
        self,
        request: m.ProduceRequest,
        *,
        timeout_ms: int | None = None,
        max_version: int = PRODUCE_MAX_VERSION,
    ) -> m.ProduceResponse:
        """Send `request` and wait for its answer: at most `timeout_ms` (default the client's
        `request_timeout_ms`) plus the request's own `timeout_ms`. A transactional producer
        under transaction version 1 sends at most `TRANSACTION_V1_PRODUCE_MAX_VERSION`."""
        client = self._client
        if self._closed:
            raise ClientClosedError(
                f"the produce connection to broker at {client.address} was closed"
            )
        connection = client.connections.cached(client.address, PRODUCE_LANE)
        if connection is None:
            connection = await client.connection(PRODUCE_LANE)
        wire = client.produce_request(request)
        if request.acks == m.ACKS_NONE:
            connection.send(wire, max_version=max_version)
            return m.ProduceResponse(())
        transport_ms = client.request_timeout_ms if timeout_ms is None else timeout_ms
        self._in_flight += 1
        try:
            answer, _ = await connection.call(
                wire,
                timeout_ms=transport_ms + max(0, request.timeout_ms),
                max_version=max_version,
            )
        finally:
            self._in_flight -= 1
        assert isinstance(answer, ProduceResponse)
        try:
            return client.produce_response(request, answer)
        except MalformedResponseError:
            connection.close()
            raise

    def close(self) -> None:
        """Close the produce connection; requests in flight fail."""
        self._closed = True
        connection = self._client.connections.cached(self._client.address, PRODUCE_LANE)
        if connection is not None:
            connection.close(
                ClientClosedError(
                    f"the produce connection to broker at {self._client.address} was closed "
                    f"with {connection.in_flight} requests in flight"
                )
            )
