"""The Kafka listener's API handlers: each request translated into what the broker already
knows, its answer into Kafka's response (docs/kafka-protocol.md, "Listener").

Rules:
- The handler table is `SERVED` plus the tables of the handler modules passed in as
  `extensions` (`kafka_admin_apis`), and the only source of the ApiVersions answer: an API is
  advertised exactly when it has a handler, at exactly the versions handled. Two handlers of
  one API key are a programming error, refused when the handlers are built.
- ApiVersions v3+ with a client software name or version that is not
  `[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?` is INVALID_REQUEST with no APIs (Kafka's check;
  librdkafka then retries v0). Supported and finalized features are left empty.
- Metadata is the broker's view of its image (`broker_metadata.metadata_view_from_image`, the
  view the controller's Metadata read gives): unfenced brokers only, a partition without a
  leader LEADER_NOT_AVAILABLE, a topic asked for and absent UNKNOWN_TOPIC_OR_PARTITION (topics
  are never created automatically), one asked for by an unknown id UNKNOWN_TOPIC_ID. A topic
  with a non-zero id is asked for by that id, whatever its name ("" from Kafka's Java client).
- Brokers are advertised with their endpoint of the listener name the client connected through
  (Kafka's rule); a broker that registered no such endpoint is left out, and a partition whose
  leader is such a broker has leader -1 and LISTENER_NOT_FOUND (v6+) or LEADER_NOT_AVAILABLE.
- `controller_id` is a live broker, not the active controller (`controller_for_clients`: this
  broker when listed, else a random listed one, -1 with none), as a KRaft broker answers:
  clients send their controller-bound requests there and it forwards them to the active
  controller, elected or not yet. On a node that is also a controller, v9+ answers carry
  replog's tagged field saying how current the metadata is (`replog.kafka.staleness_tag`):
  whether the quorum is lost, since when, and which brokers the node has not heard from.
- Metadata v0: an empty topic list means every topic; v1+: null means every topic, empty none.
- DescribeTopicPartitions (KIP-966's, with the eligible leader replicas) is the broker's image
  in pages (`describe_topic_partitions`).
- A Produce with a transactional id first passes the leader's transaction verification
  (`produce_verifier`, KIP-890: a batch that begins its producer's transaction on a partition
  waits for the coordinator to verify the partition, or with v12 to add it); a refused
  partition is answered with the refusal and not appended.
- Produce (v3-12, topics by name) goes through the broker's Produce core
  (`BrokerCores.produce`) with no protobuf in between:
  the records are the request's bytes as they arrived (never decoded here; the core checks
  the batch framing, the log the rest), the core's refusals (illegal topic names, negative
  partitions, bytes that are not whole v2 batches, acks), its ReplicaManager call and
  purgatory (acks=all waits at most the request's timeout), its storage-error handling;
  Kafka's answer is built from the core's results. What the core refuses as a whole (acks=0
  with a failed partition, a partition named twice, a broker not serving data) is a
  `RequestRefusedError`: the listener closes the connection, as Kafka's broker does for a
  failed acks=0 produce. acks=0 gets no response. Null records are empty records.
  `current_leader` is filled when the replica manager names one; `record_errors` when records
  were refused one by one (a record without a key on a compacted topic: INVALID_RECORD, as
  Kafka's LogValidator answers; v8+ carry them and the error message, older versions the code
  alone); `node_endpoints` is left empty.
- Fetch (v4-18, consumers only) goes through the broker's Fetch core
  (`BrokerCores.fetch`, which the followers' ReplicaFetch stream also calls: its refusals,
  its `ReplicaManager.fetch_or_wait` call and purgatory) with no protobuf in between, inside the
  broker's fetch session cache (`fetch_session_cache`, KIP-227): a session's whole partition
  list is read, the answer keeps what the session rules keep. A fetch the replica manager
  answers at once is answered at once here too; one that waits gives an awaitable. Topics are
  named by id from v13 (an unknown id is UNKNOWN_TOPIC_ID, answered at once), and the answer
  groups consecutive partitions of one topic, as Kafka's does. A fetch from a replica
  (replica id >= 0) is refused. Records are the bytes the log read, never decoded, put into
  the answer as they are; on a connection that sends files (a plain TCP listener's), a
  partition's records of `REGION_MIN_BYTES` or more are left in the segment file and sent from
  there (`sendfile`, Kafka's `FileRecords.transferTo`); aborted transactions are null for
  READ_UNCOMMITTED, and for
  READ_COMMITTED those the replica manager found for the records read (none: empty).
- OffsetForLeaderEpoch (v2-4, consumers only) goes through the broker's core
  (`BrokerCores.offsets_for_leader_epoch`) the same way, answered at once.
- ListOffsets (v1-11: earliest, latest, by timestamp, max timestamp; from v8 earliest local,
  from v9 latest tiered, from v11 earliest pending upload, answered as with no tiered storage;
  v10's timeout matters only to a remote lookup, never made here) goes through the broker's
  ListOffsets core (`BrokerCores.list_offsets`): its refusals and answers, with no protobuf
  in between, and answered at once.
- `handle` gives the answer itself for the requests answered at once (ApiVersions, Metadata,
  ListOffsets, an idempotent InitProducerId, OffsetForLeaderEpoch, a Fetch that need not wait)
  and an
  awaitable of it for the others: the listener answers the first kind with no task (a
  consumer asks offsets after every poll and waits; one catching up waits for each fetch).
- InitProducerId (v0-5) without a transactional id is `broker_cores.init_producer_id`: a new id
  with epoch 0, answered at once. With one it goes to the broker's transaction coordinator
  (`TransactionCoordinator.init_producer_id`; COORDINATOR_NOT_AVAILABLE until it runs), its
  producer id and epoch given when both are set (KIP-360), INVALID_REQUEST when only one is.
- With an authorizer (`authorizer.class.name`, `broker_authorizer`), every request passes the
  per-API rules of `replog.kafka.api_authorization` first, on behalf of its connection's
  principal: refused entries are answered there with Kafka's errors, the handler sees the
  rest. Fetch asks in its handler, over the fetch session's whole partition list.
- The admin APIs and the transaction APIs' refusals are `kafka_admin_apis.KafkaAdminApis`'s,
  passed in as an extension by the broker runtime; so are the consumer group APIs,
  `kafka_group_apis.KafkaGroupApis`'s.
"""

from __future__ import annotations

import contextlib
import random
import re
from collections.abc import (
    Awaitable,
    Callable,
    Collection,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
    Sized,
)
from dataclasses import replace
from functools import partial
from typing import Protocol, TypeVar, cast
from uuid import UUID

from replog.clock import Clock, monotonic_ms
from replog.errors import (
    CoordinatorNotAvailableError,
    InvalidRequestError,
    KafkaError,
    LeaderNotAvailableError,
    RecordsRejectedError,
    RequestRefusedError,
    TopicAuthorizationFailedError,
    UnknownTopicIdError,
)
from replog.kafka import staleness_tag
from replog.kafka.api_authorization import Caller, describable, fetch_refused
from replog.kafka.connection import Answer, KafkaRequest, Served
from replog.kafka.messages import fetch_response as kf
from replog.kafka.messages.api_versions_request import ApiVersionsRequest
from replog.kafka.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from replog.kafka.messages.describe_topic_partitions_request import DescribeTopicPartitionsRequest
from replog.kafka.messages.fetch_request import FetchRequest
from replog.kafka.messages.init_producer_id_request import InitProducerIdRequest
from replog.kafka.messages.init_producer_id_response import InitProducerIdResponse
from replog.kafka.messages.list_offsets_request import ListOffsetsRequest
from replog.kafka.messages.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from replog.kafka.messages.metadata_request import MetadataRequest
from replog.kafka.messages.metadata_response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from replog.kafka.messages.offset_for_leader_epoch_request import OffsetForLeaderEpochRequest
from replog.kafka.messages.offset_for_leader_epoch_response import (
    EpochEndOffset,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)
from replog.kafka.messages.produce_request import ProduceRequest
from replog.kafka.messages.produce_response import (
    BatchIndexAndErrorMessage,
    LeaderIdAndEpoch,
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from replog.kafka.protocol.codec import ZERO_UUID, Buffer
from replog.quorum.controller.reads import PartitionView, TopicView
from replog.quorum.metadata.image import MetadataImage
from replog.quorum.metadata.records import Endpoint
from replog.replication import messages as m
from replog.replication.fetch_session_cache import (
    CACHE_SLOTS_DEFAULT,
    EVICTION_MS_DEFAULT,
    SESSION_ID_MAX,
    FetchContext,
    FetchSessionCache,
    SessionRefusal,
    new_context,
)
from replog.server.data_plane.broker_cores import BrokerCores, ProducerIds, init_producer_id
from replog.server.kafka.broker_authorizer import BrokerAuthorizer, authorized
from replog.server.kafka.broker_metadata import (
    controller_for_clients,
    listener_endpoint,
    metadata_view_from_image,
)
from replog.server.kafka.describe_topic_partitions import (
    DESCRIBE_TOPIC_PARTITIONS,
    describe_topic_partitions,
)
from replog.server.kafka.kafka_features import FEATURES_VERSION, with_features
from replog.server.raft.metadata_staleness import Staleness
from replog.server.runtime.tolerant_service import Refused
from replog.server.transactions.produce_verifier import ProduceVerifier
from replog.server.transactions.transaction_coordinator import TransactionCoordinator
from replog.topic_names import is_internal_topic
from replog.wire import broker_codec

PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
OFFSET_FOR_LEADER_EPOCH = 23
API_VERSIONS = 18
INIT_PRODUCER_ID = 22
# The handler table: API key -> (min, max) version handled.
SERVED: Mapping[int, tuple[int, int]] = {
    PRODUCE: (3, 12),
    FETCH: (4, 18),
    LIST_OFFSETS: (1, 11),
    METADATA: (0, 13),
    API_VERSIONS: (0, 4),
    INIT_PRODUCER_ID: (0, 5),
    OFFSET_FOR_LEADER_EPOCH: (2, 4),
    DESCRIBE_TOPIC_PARTITIONS: (0, 0),
}
LISTENER_NOT_FOUND = 72
FLEXIBLE_METADATA = 9  # Metadata's first version with tagged fields
# A controller's view of how stale its metadata is, given the brokers of the answer, with the
# wall-clock time of its last contact with the quorum's leader (-1: none) (ControllerDriver).
MetadataStalenessOf = Callable[[Iterable[int]], tuple[Staleness, int]]
T = TypeVar("T")
R = TypeVar("R")
# Fetch names topics by id from this version on (KIP-516).
FETCH_TOPIC_ID_VERSION = 13
# What an unknown topic id is called inside a fetch session: no topic name has a '<'.
_UNKNOWN_ID_PREFIX = "<unknown topic id> "
# A partition's records of this many bytes or more are sent from the segment file to a
# connection that sends files, never read into the broker's memory (a Spark task's 8 MiB
# answers, a consumer catching up). Below it `pread` and `send` cost less than the region's
# descriptor and the sendfile's turns of the event loop.
REGION_MIN_BYTES = 256 * 1024
# The first versions whose answers carry the leader (and for Fetch the diverging epoch).
PRODUCE_CURRENT_LEADER_VERSION = 10
FETCH_TAGGED_LEADER_VERSION = 12
LIST_OFFSETS_LEADER_EPOCH_VERSION = 4
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


class ApiHandlers(Protocol):
    """A module of handlers for more APIs (`kafka_admin_apis.KafkaAdminApis`)."""

    @property
    def served(self) -> Served: ...

    def handle(self, request: KafkaRequest, listener_name: str) -> Answer: ...


class KafkaApis:
    """The handlers of one broker's Kafka listeners (every listener shares them)."""

    def __init__(
        self,
        broker_id: int,
        *,
        cluster_id: str,
        image: Callable[[], MetadataImage],
        controller_id: Callable[[], int] = lambda: -1,
        metadata_staleness: MetadataStalenessOf | None = None,
        broker_service: BrokerCores | None = None,
        producer_ids: ProducerIds | None = None,
        fetch_sessions: FetchSessionCache | None = None,
        clock: Clock = monotonic_ms,
        extensions: Sequence[ApiHandlers] = (),
        transactions: Callable[[], TransactionCoordinator | None] | None = None,
        produce_verifier: Callable[[], ProduceVerifier | None] = lambda: None,
        rng: random.Random | None = None,
        authorizer: BrokerAuthorizer | None = None,
    ) -> None:
        """`transactions`: the broker's transaction coordinator (None while it has none);
        not given, a transactional InitProducerId is refused (`broker_cores`).
        `produce_verifier`: the transaction verification of a transactional Produce (None
        while the data plane is not running: nothing is appended then). `rng`: the
        random choice of the controller named to clients (None: a fresh source; a simulation
        passes its seeded one)."""
        self.broker_id = broker_id
        self._authorizer = authorizer  # None: authorization off (`authorizer.class.name`)
        self._transactions = transactions
        self._produce_verifier = produce_verifier
        self._choose = (rng or random.Random()).choice
        self._served = dict(SERVED)
        self._extensions: dict[int, ApiHandlers] = {}
        for extension in extensions:
            for key, versions in extension.served.items():
                if key in self._served:
                    raise ValueError(f"two handlers of Kafka API key {key}")
                self._served[key] = versions
                self._extensions[key] = extension
        # Every client asks on every connection; the table is fixed from here on (the answer
        # is only read: encoded per request).
        self._api_versions = ApiVersionsResponse(
            api_keys=[
                ApiVersion(api_key=key, min_version=low, max_version=high)
                for key, (low, high) in sorted(self._served.items())
            ]
        )
        self._with_features: tuple[MetadataImage, ApiVersionsResponse] | None = None
        self._cluster_id = cluster_id
        self._image = image
        self._controller_id = controller_id
        self._metadata_staleness = metadata_staleness
        self._broker_service = broker_service
        self._producer_ids = producer_ids
        self._clock = clock
        # `is None`, not `or`: an empty cache is falsy.
        self._fetch_sessions = fetch_session_cache() if fetch_sessions is None else fetch_sessions

    @property
    def served(self) -> Served:
        return self._served

    def handle(self, request: KafkaRequest, listener_name: str) -> Answer:
        """`_handle` under the broker's authorizer, when it has one: the request's entries the
        principal may not touch are answered with Kafka's errors, the rest handled
        (`api_authorization`)."""
        return authorized(
            self._authorizer,
            request,
            lambda asked, caller: self._handle(asked, listener_name, caller),
        )

    def _handle(self, request: KafkaRequest, listener_name: str, caller: Caller | None) -> Answer:
        """The response to `request` (its key and version are in `SERVED`: the connection core
        refuses the others), None when the request gets none; an awaitable of it for the
        requests that wait (produce, a fetch in the purgatory, the extensions'), the response
        itself for the ones answered at once (ApiVersions, Metadata, DescribeTopicPartitions,
        ListOffsets, InitProducerId, OffsetForLeaderEpoch, a fetch answered at once), which the
        listener then answers with no task."""
        extension = self._extensions.get(request.api_key)
        if extension is not None:
            return extension.handle(request, listener_name)
        body = request.body
        if isinstance(body, ListOffsetsRequest):
            return self.list_offsets(body, request.api_version)
        if isinstance(body, FetchRequest):
            return self.fetch(body, request.api_version, caller, sends_files=request.sends_files)
        if isinstance(body, MetadataRequest):
            return self.metadata(body, request.api_version, listener_name)
        if isinstance(body, DescribeTopicPartitionsRequest):
            visible = None if caller is None else describable(caller, log=bool(body.topics))
            return describe_topic_partitions(self._image(), body, listener_name, visible)
        if isinstance(body, ProduceRequest):
            return self.produce(body, request.api_version)
        if isinstance(body, ApiVersionsRequest):
            return self.api_versions(body, request.api_version)
        if isinstance(body, InitProducerIdRequest):
            if body.transactional_id is not None and self._transactions is not None:
                return self.init_transactional_producer_id(body, self._transactions())
            return self.init_producer_id(body)
        if isinstance(body, OffsetForLeaderEpochRequest):
            return self.offset_for_leader_epoch(body)
        raise InvalidRequestError(f"no handler for {type(body).__name__}")

    # --- ApiVersions ---------------------------------------------------------------------------

    def api_versions(self, request: ApiVersionsRequest, version: int) -> ApiVersionsResponse:
        if bad_client_software(request, version):
            return ApiVersionsResponse(error_code=InvalidRequestError.code)
        if version < FEATURES_VERSION:
            return self._api_versions
        image = self._image()
        cached = self._with_features
        if cached is None or cached[0] is not image:
            # One answer per image: every client asks on every connection.
            answer = with_features(
                self._api_versions, image.features.levels, image.provenance.last_offset
            )
            self._with_features = cached = (image, answer)
        return cached[1]

    # --- Metadata ------------------------------------------------------------------------------

    def metadata(
        self, request: MetadataRequest, version: int, listener_name: str
    ) -> MetadataResponse:
        image = self._image()
        names: list[str] | None
        unknown_ids: list[UUID] = []
        if request.topics is None or (version == 0 and not request.topics):
            names = None
        else:
            names = []
            for wanted in request.topics:
                # A topic id names the topic whatever the name next to it (Kafka's Java admin
                # client sends "" with an id), as Kafka reads the request.
                if wanted.topic_id == ZERO_UUID and wanted.name is not None:
                    names.append(wanted.name)
                    continue
                topic = image.topics.by_id.get(wanted.topic_id)
                if topic is None:
                    unknown_ids.append(wanted.topic_id)
                else:
                    names.append(topic.name)
        view = metadata_view_from_image(image, names, self._cluster_id)
        endpoints = {
            broker.broker_id: endpoint
            for broker in view.brokers
            if (endpoint := listener_endpoint(image, broker.broker_id, listener_name)) is not None
        }
        brokers = [
            MetadataResponseBroker(
                node_id=broker.broker_id,
                host=endpoints[broker.broker_id].host,
                port=endpoints[broker.broker_id].port,
                rack=broker.rack,
            )
            for broker in view.brokers
            if broker.broker_id in endpoints
        ]
        missing_listener = LISTENER_NOT_FOUND if version >= 6 else LeaderNotAvailableError.code
        topics = [_topic(topic, endpoints, missing_listener) for topic in view.topics]
        topics += [
            MetadataResponseTopic(error_code=UnknownTopicIdError.code, name=None, topic_id=topic_id)
            for topic_id in unknown_ids
        ]
        leader = self._controller_id()
        response = MetadataResponse(
            brokers=brokers,
            cluster_id=self._cluster_id,
            controller_id=controller_for_clients(self.broker_id, sorted(endpoints), self._choose),
            topics=topics,
        )
        if self._metadata_staleness is not None and version >= FLEXIBLE_METADATA:
            staleness, contact_ms = self._metadata_staleness(endpoints)
            response.unknown_tagged_fields = (
                staleness_tag.encode(
                    staleness_tag.MetadataStaleness(
                        staleness.stale,
                        leader >= 0,
                        staleness.age_ms,
                        None if contact_ms < 0 else contact_ms,
                        self.broker_id,
                        staleness.unreachable,
                    )
                ),
            )
        return response

    # --- Produce -------------------------------------------------------------------------------

    async def produce(self, request: ProduceRequest, version: int) -> ProduceResponse | None:
        """Through the broker's Produce core (`BrokerCores.produce`: its refusals and
        answer, the `ReplicaManager.produce` call and purgatory), the records the request's
        bytes as they arrived. None for
        acks=0, which gets no response."""
        service = self._service("Produce")
        partitions = tuple(
            m.ProducePartition(topic.name, data.index, _records(data.records))
            for topic in request.topic_data
            for data in topic.partition_data
        )
        verifier = self._produce_verifier() if request.transactional_id else None
        refused = (
            {}
            if verifier is None
            else await verifier.verify(request.transactional_id, partitions, version)
        )
        # No await between the verification and the appends (`produce_verifier`).
        with self._refusals():
            answer = await service.produce(
                m.ProduceRequest(
                    request.acks,
                    request.timeout_ms,
                    tuple(p for i, p in enumerate(partitions) if i not in refused)
                    if refused
                    else partitions,
                )
            )
        if answer is None:
            return None
        if refused:
            answer = m.ProduceResponse(_with_refusals(partitions, refused, answer.partitions))
        return ProduceResponse(
            responses=[
                TopicProduceResponse(
                    name=topic.name,
                    partition_responses=[_produce_partition(r, version) for r in answered],
                )
                for topic, answered in _per_topic(
                    request.topic_data, lambda t: t.partition_data, answer.partitions
                )
            ]
        )

    # --- Fetch ---------------------------------------------------------------------------------

    def fetch(
        self,
        request: FetchRequest,
        version: int,
        caller: Caller | None = None,
        *,
        sends_files: bool = False,
    ) -> kf.FetchResponse | Awaitable[kf.FetchResponse]:
        """Through the broker's Fetch core (`BrokerCores.fetch`: its refusals and
        answer, the `ReplicaManager.fetch_or_wait` call, the records as the
        log read them), inside the broker's fetch session cache (`fetch_session_cache`:
        KIP-227 session ids and epochs). The answer itself when the fetch is answered at once,
        else an awaitable of it (the fetch waits in the purgatory). For a connection that
        `sends_files`, a partition's records of `REGION_MIN_BYTES` or more are left in their
        segment file, for it to send from there."""
        service = self._service("Fetch")
        replica_id = request.replica_state.replica_id if version >= 15 else request.replica_id
        _refuse_replica("Fetch", replica_id)
        isolation = broker_codec.isolation_level_from_proto(request.isolation_level, "Fetch")
        uses_ids = version >= FETCH_TOPIC_ID_VERSION
        topic_name = self._topic_names(uses_ids)
        sent = m.FetchRequest(
            partitions=tuple(
                m.FetchPartition(
                    topic_name(topic.topic, topic.topic_id),
                    p.partition,
                    p.fetch_offset,
                    partition_max_bytes=p.partition_max_bytes,
                    current_leader_epoch=p.current_leader_epoch,
                    last_fetched_epoch=p.last_fetched_epoch,
                    log_start_offset=p.log_start_offset,
                    topic_id=topic.topic_id if uses_ids else None,
                )
                for topic in request.topics
                for p in topic.partitions
            ),
            max_wait_ms=request.max_wait_ms,
            min_bytes=request.min_bytes,
            max_bytes=request.max_bytes,
            isolation_level=isolation,
            session_epoch=request.session_epoch,
            region_min_bytes=REGION_MIN_BYTES if sends_files else None,
            forgotten=tuple(
                (topic_name(topic.topic, topic.topic_id), p)
                for topic in request.forgotten_topics_data
                for p in topic.partitions
            ),
        )
        context = new_context(
            self._fetch_sessions, request.session_id, sent, self._clock(), uses_topic_ids=uses_ids
        )
        if isinstance(context, SessionRefusal):
            return kf.FetchResponse(error_code=context.error.code)
        read = context.request
        known = tuple(p for p in read.partitions if not _unknown_id(p.topic))
        # The session's whole partition list is asked about, on every fetch: a READ revoked
        # since the last one refuses its topic now (Kafka's rule).
        refused: Collection[str] = (
            () if caller is None else fetch_refused((p.topic for p in known), caller)
        )
        if refused:
            known = tuple(p for p in known if p.topic not in refused)
        if not known:  # (with none, the Broker service too answers at once, reading nothing)
            return _fetch_response(context, (), version, self._clock(), refused)
        if len(known) < len(read.partitions):
            # Kafka answers at once when a partition has an error: an unknown topic id is one.
            read = replace(read, partitions=known, max_wait_ms=0)
        with self._refusals():
            fetched = service.fetch(read)
        if isinstance(fetched, m.FetchResponse):
            return _fetch_response(context, fetched.partitions, version, self._clock(), refused)
        return self._fetched_later(context, fetched, version, refused)

    async def _fetched_later(
        self,
        context: FetchContext,
        fetched: Awaitable[m.FetchResponse],
        version: int,
        refused: Collection[str],
    ) -> kf.FetchResponse:
        """The answer of a fetch that waited in the purgatory."""
        with self._refusals():
            response = await fetched
        return _fetch_response(context, response.partitions, version, self._clock(), refused)

    def _topic_names(self, uses_ids: bool) -> Callable[[str, UUID], str]:
        """How a Fetch names a topic: its name up to v12, its id from v13 (looked up in the
        image; an unknown id gets a name no topic can have, answered UNKNOWN_TOPIC_ID)."""
        if not uses_ids:
            return lambda name, _: name
        by_id = self._image().topics.by_id

        def name(_: str, topic_id: UUID) -> str:
            topic = by_id.get(topic_id)
            return _UNKNOWN_ID_PREFIX + str(topic_id) if topic is None else topic.name

        return name

    # --- OffsetForLeaderEpoch ------------------------------------------------------------------

    def offset_for_leader_epoch(
        self, request: OffsetForLeaderEpochRequest
    ) -> OffsetForLeaderEpochResponse:
        """Through the broker's OffsetsForLeaderEpoch core
        (`BrokerCores.offsets_for_leader_epoch`: its refusals and answer),
        answered at once (consumers only)."""
        service = self._service("OffsetForLeaderEpoch")
        _refuse_replica("OffsetForLeaderEpoch", request.replica_id)
        decoded = m.OffsetsForLeaderEpochRequest(
            tuple(
                m.OffsetForLeaderPartition(
                    topic.topic, p.partition, p.leader_epoch, p.current_leader_epoch
                )
                for topic in request.topics
                for p in topic.partitions
            )
        )
        with self._refusals():
            results = service.offsets_for_leader_epoch(decoded).partitions
        return OffsetForLeaderEpochResponse(
            topics=[
                OffsetForLeaderTopicResult(
                    topic=topic.topic, partitions=[_epoch_end_offset(r) for r in answered]
                )
                for topic, answered in _per_topic(request.topics, lambda t: t.partitions, results)
            ]
        )

    # --- ListOffsets ---------------------------------------------------------------------------

    def list_offsets(self, request: ListOffsetsRequest, version: int) -> ListOffsetsResponse:
        """Through the broker's ListOffsets (`BrokerCores.list_offsets`: its refusals
        and answer, the `ReplicaManager.list_offsets` call), answered at once."""
        service = self._service("ListOffsets")
        decoded = m.ListOffsetsRequest(
            partitions=tuple(
                m.ListOffsetsPartition(
                    topic.name, p.partition_index, p.timestamp, p.current_leader_epoch
                )
                for topic in request.topics
                for p in topic.partitions
            ),
            replica_id=request.replica_id,
            isolation_level=broker_codec.isolation_level_from_proto(
                request.isolation_level, "ListOffsets"
            ),
        )
        with self._refusals():
            results = service.list_offsets(decoded).partitions
        return ListOffsetsResponse(
            topics=[
                ListOffsetsTopicResponse(
                    name=topic.name,
                    partitions=[_list_offsets_partition(r, version) for r in answered],
                )
                for topic, answered in _per_topic(request.topics, lambda t: t.partitions, results)
            ]
        )

    def _service(self, api: str) -> BrokerCores:
        if self._broker_service is None:
            raise RequestRefusedError(f"broker {self.broker_id} serves no {api} (no data plane)")
        return self._broker_service

    @contextlib.contextmanager
    def _refusals(self) -> Iterator[None]:
        """The broker's refusals of a whole request (`Refused`, a gRPC status for the
        ReplicaFetch stream) as the listener's: the connection closes, the details logged."""
        try:
            yield
        except Refused as refused:
            raise RequestRefusedError(f"broker {self.broker_id}: {refused.details}") from None

    # --- InitProducerId ------------------------------------------------------------------------

    async def init_transactional_producer_id(
        self, request: InitProducerIdRequest, coordinator: TransactionCoordinator | None
    ) -> InitProducerIdResponse:
        """InitProducerId with a transactional id: the transaction coordinator's (module
        Rules)."""
        assert request.transactional_id is not None
        given = (request.producer_id, request.producer_epoch)
        if (given[0] == m.NO_PRODUCER_ID) != (given[1] == m.NO_PRODUCER_EPOCH):
            return InitProducerIdResponse(error_code=InvalidRequestError.code)
        if coordinator is None:
            return InitProducerIdResponse(error_code=CoordinatorNotAvailableError.code)
        answer = await coordinator.init_producer_id(
            request.transactional_id,
            request.transaction_timeout_ms,
            None if given[0] == m.NO_PRODUCER_ID else given,
        )
        return InitProducerIdResponse(
            error_code=_code(answer.error),
            producer_id=answer.producer_id,
            producer_epoch=answer.producer_epoch,
        )

    def init_producer_id(self, request: InitProducerIdRequest) -> InitProducerIdResponse:
        """The broker's rule for an idempotent producer (`broker_cores.init_producer_id`): a
        new producer id with epoch 0."""
        answer = init_producer_id(
            self.broker_id,
            m.InitProducerIdRequest(
                transactional_id=request.transactional_id,
                transaction_timeout_ms=request.transaction_timeout_ms,
                producer_id=request.producer_id,
                producer_epoch=request.producer_epoch,
            ),
            self._producer_ids,
        )
        return InitProducerIdResponse(
            error_code=_code(answer.error),
            producer_id=answer.producer_id,
            producer_epoch=answer.producer_epoch,
        )


def bad_client_software(request: ApiVersionsRequest, version: int) -> bool:
    """Whether an ApiVersions request v3+ names its client software in a form Kafka refuses."""
    return version >= 3 and not (
        _SOFTWARE.fullmatch(request.client_software_name)
        and _SOFTWARE.fullmatch(request.client_software_version)
    )


def fetch_session_cache(
    max_slots: int = CACHE_SLOTS_DEFAULT,
    eviction_ms: int = EVICTION_MS_DEFAULT,
    rng: random.Random | None = None,
) -> FetchSessionCache:
    """A broker's fetch session cache, its session ids drawn at random (Kafka's) from `rng`
    (a simulation's seeded one) or a fresh source."""
    return FetchSessionCache(
        partial((rng or random.Random()).randint, 1, SESSION_ID_MAX),
        max_slots=max_slots,
        eviction_ms=eviction_ms,
    )


def _records(records: bytes | bytearray | memoryview | None) -> bytes | memoryview:
    """A request's records as the replica manager takes them (a view of the frame's bytes)."""
    if records is None:
        return b""
    return records if isinstance(records, bytes | memoryview) else bytes(records)


def _code(error: KafkaError | None) -> int:
    return 0 if error is None else error.code


def _produce_partition(result: m.ProducePartitionResult, version: int) -> PartitionProduceResponse:
    leader = result.current_leader if version >= PRODUCE_CURRENT_LEADER_VERSION else None
    error = result.error
    return PartitionProduceResponse(
        index=result.partition,
        error_code=_code(error),
        error_message=None if error is None else str(error),
        record_errors=(
            [
                BatchIndexAndErrorMessage(batch_index=index, batch_index_error_message=text)
                for index, text in error.record_errors
            ]
            if isinstance(error, RecordsRejectedError)
            else []
        ),
        base_offset=result.base_offset,
        log_append_time_ms=result.log_append_time_ms,
        log_start_offset=result.log_start_offset,
        current_leader=(
            LeaderIdAndEpoch()
            if leader is None
            else LeaderIdAndEpoch(leader_id=leader.leader_id, leader_epoch=leader.leader_epoch)
        ),
    )


def _fetched(
    result: m.FetchPartitionResult, aborted: list[kf.AbortedTransaction] | None, version: int
) -> kf.PartitionData:
    diverging, leader = result.diverging_epoch, result.current_leader
    if version < FETCH_TAGGED_LEADER_VERSION:  # the versions without these fields
        diverging = leader = None
    return kf.PartitionData(
        partition_index=result.partition,
        error_code=_code(result.error),
        high_watermark=result.high_watermark,
        last_stable_offset=result.last_stable_offset,
        log_start_offset=result.log_start_offset,
        diverging_epoch=(
            kf.EpochEndOffset()
            if diverging is None
            else kf.EpochEndOffset(epoch=diverging.leader_epoch, end_offset=diverging.end_offset)
        ),
        current_leader=(
            kf.LeaderIdAndEpoch()
            if leader is None
            else kf.LeaderIdAndEpoch(leader_id=leader.leader_id, leader_epoch=leader.leader_epoch)
        ),
        aborted_transactions=(
            None
            if aborted is None
            else [
                kf.AbortedTransaction(producer_id=producer_id, first_offset=first_offset)
                for producer_id, first_offset in result.aborted_transactions or ()
            ]
        ),
        # Records left in their file are written only by a connection that sends files
        # (`FileRecords`, which the codec holds apart in the frame's pieces).
        records=result.records if result.region is None else cast(Buffer, result.region),
    )


def _fetch_response(
    context: FetchContext,
    fetched: Sequence[m.FetchPartitionResult],
    version: int,
    now_ms: int,
    refused: Collection[str] = (),
) -> kf.FetchResponse:
    """The Kafka answer to the read of `context.request` whose known partitions' results are
    `fetched` (each partition with an unknown topic id is UNKNOWN_TOPIC_ID, each of a topic in
    `refused` TOPIC_AUTHORIZATION_FAILED): what the session keeps of it, grouped by topic, each
    partition's records the bytes the log read."""
    read = context.request
    results = {(r.topic, r.partition): r for r in fetched}
    session_id, answered = context.answer(
        m.FetchResponse(
            tuple(
                results.get((p.topic, p.partition))
                or m.FetchPartitionResult(
                    p.topic,
                    p.partition,
                    TopicAuthorizationFailedError(f"Fetch: may not READ topic {p.topic}")
                    if p.topic in refused
                    else UnknownTopicIdError(f"Fetch: no topic has id {p.topic_id}"),
                )
                for p in read.partitions
            )
        ),
        now_ms,
    )
    aborted: list[kf.AbortedTransaction] | None = (
        None if read.isolation_level is m.IsolationLevel.READ_UNCOMMITTED else []
    )
    uses_ids = version >= FETCH_TOPIC_ID_VERSION
    ids = {p.topic: p.topic_id for p in read.partitions}
    return kf.FetchResponse(
        session_id=session_id,
        responses=[
            kf.FetchableTopicResponse(
                topic="" if uses_ids else topic,
                topic_id=(ids.get(topic) or ZERO_UUID) if uses_ids else ZERO_UUID,
                partitions=[_fetched(r, aborted, version) for r in run],
            )
            for topic, run in _runs_by_topic(answered.partitions)
        ],
    )


def _unknown_id(topic: str) -> bool:
    return topic.startswith(_UNKNOWN_ID_PREFIX)


def _runs_by_topic(
    results: Sequence[m.FetchPartitionResult],
) -> list[tuple[str, list[m.FetchPartitionResult]]]:
    """Consecutive results of one topic as one topic entry, as Kafka builds a Fetch answer (a
    session's order need not keep a topic's partitions together)."""
    runs: list[tuple[str, list[m.FetchPartitionResult]]] = []
    for result in results:
        if runs and runs[-1][0] == result.topic:
            runs[-1][1].append(result)
        else:
            runs.append((result.topic, [result]))
    return runs


def _with_refusals(
    partitions: Sequence[m.ProducePartition],
    refused: Mapping[int, KafkaError],
    answered: Sequence[m.ProducePartitionResult],
) -> tuple[m.ProducePartitionResult, ...]:
    """One result per partition in request order: the refusals where given, else the
    answers of the partitions produced, in their order."""
    rest = iter(answered)
    return tuple(
        m.ProducePartitionResult(p.topic, p.partition, refused[i]) if i in refused else next(rest)
        for i, p in enumerate(partitions)
    )


def _per_topic(
    topics: Sequence[T], partitions: Callable[[T], Sized], results: Sequence[R]
) -> list[tuple[T, Sequence[R]]]:
    """Each topic of a request with its partitions' results: `results` holds one per
    partition, in request order (the broker's cores merge their answers so)."""
    grouped: list[tuple[T, Sequence[R]]] = []
    position = 0
    for topic in topics:
        count = len(partitions(topic))
        grouped.append((topic, results[position : position + count]))
        position += count
    return grouped


def _refuse_replica(api: str, replica_id: int) -> None:
    """Followers replicate over replog's gRPC listener; a Kafka client is a consumer (-1, or
    -2 for Kafka's debugging consumers)."""
    if replica_id >= 0:
        raise RequestRefusedError(
            f"{api} from replica {replica_id}: followers fetch over replog's gRPC listener"
        )


def _epoch_end_offset(result: m.OffsetForLeaderPartitionResult) -> EpochEndOffset:
    return EpochEndOffset(
        error_code=_code(result.error),
        partition=result.partition,
        leader_epoch=result.leader_epoch,
        end_offset=result.end_offset,
    )


def _list_offsets_partition(
    result: m.ListOffsetsPartitionResult, version: int
) -> ListOffsetsPartitionResponse:
    return ListOffsetsPartitionResponse(
        partition_index=result.partition,
        error_code=_code(result.error),
        timestamp=result.timestamp,
        offset=result.offset,
        # The epoch only where the version has the field (v4+, KIP-320).
        leader_epoch=result.leader_epoch if version >= LIST_OFFSETS_LEADER_EPOCH_VERSION else -1,
    )


def _topic(
    topic: TopicView, endpoints: Mapping[int, Endpoint], missing_listener: int
) -> MetadataResponseTopic:
    if topic.error is not None:
        return MetadataResponseTopic(error_code=topic.error.code, name=topic.name)
    return MetadataResponseTopic(
        name=topic.name,
        topic_id=topic.topic_id or ZERO_UUID,
        is_internal=is_internal_topic(topic.name),
        partitions=[_partition(p, endpoints, missing_listener) for p in topic.partitions],
    )


def _partition(
    partition: PartitionView, endpoints: Mapping[int, Endpoint], missing_listener: int
) -> MetadataResponsePartition:
    registration = partition.registration
    error = 0 if partition.error is None else partition.error.code
    leader = registration.leader
    if error == 0 and leader not in endpoints:
        # Alive (it has a leader) but unreachable through this listener, or not live at all.
        error = missing_listener if leader in _live(partition) else LeaderNotAvailableError.code
        leader = -1
    return MetadataResponsePartition(
        error_code=error,
        partition_index=partition.partition_id,
        leader_id=leader,
        leader_epoch=registration.leader_epoch,
        replica_nodes=list(registration.replicas),
        isr_nodes=list(registration.isr),
        offline_replicas=list(partition.offline_replicas),
    )


def _live(partition: PartitionView) -> set[int]:
    offline = set(partition.offline_replicas)
    return {r for r in partition.registration.replicas if r not in offline}


# Shared with the other handler modules (`kafka_admin_apis`).
error_code = _code
per_topic = _per_topic
