"""The Kafka listener's admin handlers: each request translated into the call replog's own
admin tools make, its answer into Kafka's response (docs/kafka-protocol.md, "Listener").

Rules:
- Controller requests (CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs,
  IncrementalAlterConfigs, DescribeConfigs of another broker's resource, ElectLeaders,
  AlterPartitionReassignments, ListPartitionReassignments, UnregisterBroker) are forwarded to
  the active controller's gRPC `Controller` service through the broker's `ControllerCalls`
  (redirects followed, as Kafka's brokers forward admin requests, KIP-590): the controller
  validates and decides exactly as for `replog topics`, `replog configs` and the other admin
  commands. Here only the encoding changes. A forwarded request is sent again through a
  controller election for as long as the client's request allows (its `timeout_ms`, else 30 s:
  `controller_retry`), as Kafka's forwarding manager does; no controller answering by then is
  REQUEST_TIMED_OUT for every entry. An error of the whole request (a policy violation, a
  duplicate resource) is every entry's error.
- DescribeConfigs is forwarded too while this broker knows a quorum leader, so that a change
  forwarded a moment ago shows. With no leader known, or no controller answering within
  `DESCRIBE_FORWARD_TIMEOUT_MS`, a topic's, a group's, the cluster default's and this broker's
  own configs are answered from this broker's metadata image over its static configs
  (`describe_image_configs`), as a Kafka broker answers them always: served while the quorum
  has lost its majority, as last committed.
- BROKER_LOGGER (8) resources are this node's own loggers, described and altered here
  (`runtime_loggers`), never forwarded: Kafka's brokers answer them locally too. The legacy
  AlterConfigs refuses them with INVALID_REQUEST, as Kafka does.
- What the controller's protocol cannot say is refused here, per entry, without forwarding:
  a config resource type other than TOPIC (2), BROKER (4), GROUP (32) or BROKER_LOGGER (8) is
  INVALID_REQUEST, alone or next to served ones; a topic config with a null value in
  CreateTopics is INVALID_CONFIG (Kafka's rule).
- AlterConfigs (the legacy, whole-resource form) replaces the resource's dynamic configs: it
  becomes an IncrementalAlterConfigs that sets every key given (a null value deletes it),
  marked `replace` so that the controller deletes every other key set on the resource in its
  own state (this broker's metadata image may not hold a change the controller committed).
- UnregisterBroker removes the broker's registration whatever its state, as Kafka's controller
  does (an unknown id is BROKER_ID_NOT_REGISTERED): meant for a broker that is shut down; a
  running one registers again at its next heartbeat.
- DescribeCluster is answered from this broker's metadata image as Metadata is (brokers at
  their endpoint of the listener the client came through; fenced ones only when asked, v2;
  `controller_id` a live broker, `broker_metadata.controller_for_clients`).
  Controller endpoints (endpoint type 2) are UNSUPPORTED_ENDPOINT_TYPE, as a Kafka broker
  answers: clients ask controllers directly for those.
- DeleteRecords goes through the gRPC Broker service's DeleteRecords (its refusals, the same
  `ReplicaManager.delete_records` call); DescribeLogDirs through its DescribeLogDirs (this
  broker's dirs), each dir's total and usable bytes read from its file system, each replica
  with replog's tag of its log start, log end and high watermark, and one of a compacted log's
  dirty ratio (`replica_offsets_tag`, v2+);
  DescribeProducers asks the replica manager for the producers of partitions this broker
  hosts a replica of, leader or follower, as Kafka answers (`ReplicaManager.describe_producers`),
  with each one's open transaction's first offset and last marker's coordinator epoch.
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol, TypeVar
from uuid import UUID

from replog.errors import (
    InvalidConfigError,
    InvalidRequestError,
    KafkaError,
    RequestRefusedError,
    RequestTimedOutError,
    UnknownServerError,
)
from replog.kafka import replica_offsets_tag
from replog.kafka.connection import KafkaRequest, Served
from replog.kafka.messages import alter_configs_response as acr
from replog.kafka.messages import alter_partition_reassignments_response as aprr
from replog.kafka.messages import create_partitions_response as cpr
from replog.kafka.messages import create_topics_response as ctr
from replog.kafka.messages import delete_records_response as drr
from replog.kafka.messages import delete_topics_response as dtr
from replog.kafka.messages import describe_cluster_response as dcr
from replog.kafka.messages import describe_configs_response as dcfr
from replog.kafka.messages import describe_log_dirs_response as dldr
from replog.kafka.messages import describe_producers_response as dpr
from replog.kafka.messages import elect_leaders_response as elr
from replog.kafka.messages import incremental_alter_configs_response as iacr
from replog.kafka.messages import list_partition_reassignments_response as lprr
from replog.kafka.messages import unregister_broker_response as ubr
from replog.kafka.messages.alter_configs_request import AlterConfigsRequest
from replog.kafka.messages.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
)
from replog.kafka.messages.create_partitions_request import CreatePartitionsRequest
from replog.kafka.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from replog.kafka.messages.delete_records_request import DeleteRecordsRequest
from replog.kafka.messages.delete_topics_request import DeleteTopicsRequest
from replog.kafka.messages.describe_cluster_request import DescribeClusterRequest
from replog.kafka.messages.describe_configs_request import DescribeConfigsRequest
from replog.kafka.messages.describe_log_dirs_request import DescribeLogDirsRequest
from replog.kafka.messages.describe_producers_request import DescribeProducersRequest
from replog.kafka.messages.elect_leaders_request import ElectLeadersRequest
from replog.kafka.messages.incremental_alter_configs_request import (
    IncrementalAlterConfigsRequest,
)
from replog.kafka.messages.list_partition_reassignments_request import (
    ListPartitionReassignmentsRequest,
)
from replog.kafka.messages.unregister_broker_request import UnregisterBrokerRequest
from replog.kafka.protocol.codec import ZERO_UUID, Message
from replog.kafka.replica_offsets_tag import ReplicaOffsets
from replog.pb import common_pb2
from replog.pb import controller_pb2 as cpb
from replog.quorum.controller.config_control import CLUSTER_DEFAULT
from replog.quorum.controller.config_definitions import (
    BROKER_CONFIGS,
    GROUP_CONFIGS,
    TOPIC_CONFIGS,
    ConfigType,
)
from replog.quorum.controller.reads import describe_image_configs
from replog.quorum.metadata.image import ConfigResource, MetadataImage
from replog.quorum.metadata.records import ConfigResourceType
from replog.replication import messages as m
from replog.replication.producer_state import ProducerEntry
from replog.server.controller.controller_calls import Stub
from replog.server.controller.controller_retry import forward_timeout_ms
from replog.server.data_plane.broker_cores import BrokerCores
from replog.server.kafka.broker_metadata import controller_for_clients, listener_endpoint
from replog.server.kafka.kafka_apis import error_code, per_topic
from replog.server.kafka.runtime_loggers import BROKER_LOGGER, RuntimeLoggers
from replog.server.runtime.tolerant_service import Refused
from replog.wire.broker_codec import error_from_proto
from replog.wire.controller_codec import describe_configs_to_proto

# How long a DescribeConfigs waits for the controller before this broker's image answers: well
# inside a client's request timeout (the CLI's 10 s, Kafka's admin 30 s).
DESCRIBE_FORWARD_TIMEOUT_MS = 5_000

CREATE_TOPICS = 19
DELETE_TOPICS = 20
DELETE_RECORDS = 21
DESCRIBE_CONFIGS = 32
ALTER_CONFIGS = 33
DESCRIBE_LOG_DIRS = 35
CREATE_PARTITIONS = 37
ELECT_LEADERS = 43
INCREMENTAL_ALTER_CONFIGS = 44
ALTER_PARTITION_REASSIGNMENTS = 45
LIST_PARTITION_REASSIGNMENTS = 46
DESCRIBE_CLUSTER = 60
DESCRIBE_PRODUCERS = 61
UNREGISTER_BROKER = 64
# This module's handler table: API key -> (min, max) version handled.
ADMIN_SERVED: Mapping[int, tuple[int, int]] = {
    CREATE_TOPICS: (2, 7),
    DELETE_TOPICS: (1, 6),
    DELETE_RECORDS: (0, 2),
    DESCRIBE_CONFIGS: (1, 4),
    ALTER_CONFIGS: (0, 2),
    DESCRIBE_LOG_DIRS: (1, 5),
    CREATE_PARTITIONS: (0, 3),
    ELECT_LEADERS: (0, 2),
    INCREMENTAL_ALTER_CONFIGS: (0, 1),
    # v1 adds allow_replication_factor_change=false, which the controller cannot check.
    ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    LIST_PARTITION_REASSIGNMENTS: (0, 0),
    DESCRIBE_CLUSTER: (0, 2),
    DESCRIBE_PRODUCERS: (0, 0),
    UNREGISTER_BROKER: (0, 0),
}
# DescribeCluster's endpoint types (KIP-919).
ENDPOINT_TYPE_BROKERS = 1
ENDPOINT_TYPE_CONTROLLERS = 2
UNSUPPORTED_ENDPOINT_TYPE = 115
# DescribeConfigs' ConfigSource and ConfigType codes, as on Kafka's wire.
CONFIG_SOURCES = {
    "TOPIC_CONFIG": 1,
    "DYNAMIC_BROKER_CONFIG": 2,
    "DYNAMIC_DEFAULT_BROKER_CONFIG": 3,
    "STATIC_BROKER_CONFIG": 4,
    "DEFAULT_CONFIG": 5,
    "DYNAMIC_BROKER_LOGGER_CONFIG": 6,
    "GROUP_CONFIG": 8,
}
CONFIG_TYPES = {
    ConfigType.BOOLEAN: 1,
    ConfigType.STRING: 2,
    ConfigType.INT: 3,
    ConfigType.LONG: 5,
    ConfigType.DOUBLE: 6,
    ConfigType.LIST: 7,
}
INCREMENTAL_SET = 0
PREFERRED_ELECTION = 0
T = TypeVar("T")


class ForwardToController(Protocol):
    """Sends one request to the active controller: `ControllerCalls.call`."""

    def __call__(
        self, what: str, send: Callable[[Stub, float], Awaitable[Any]], *, timeout_ms: int
    ) -> Awaitable[Any]: ...


class KafkaAdminApis:
    """The admin handlers of one broker's Kafka listeners."""

    def __init__(
        self,
        broker_id: int,
        *,
        cluster_id: str,
        image: Callable[[], MetadataImage],
        forward: ForwardToController | None = None,
        broker_service: BrokerCores | None = None,
        describe_producers: Callable[[str, int], Sequence[ProducerEntry]] | None = None,
        loggers: RuntimeLoggers | None = None,
        static_configs: Mapping[str, str] | None = None,
        quorum_leader: Callable[[], int | None] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        """`rng`: the random choice of the controller named to clients (None: a fresh
        source; a simulation passes its seeded one)."""
        self.broker_id = broker_id
        # The node's static broker configs (server.properties), below every dynamic value in
        # the configs it describes.
        self._static_configs: Mapping[str, str] = dict(static_configs or {})
        # The metadata quorum's leader this broker knows of (answering None: none, its image
        # is as last committed); not given: taken to be known.
        self._quorum_leader = quorum_leader
        self._choose = (rng or random.Random()).choice
        self._loggers = loggers if loggers is not None else RuntimeLoggers(broker_id)
        self._cluster_id = cluster_id
        self._image = image
        self._forward_call = forward
        self._broker_service = broker_service
        self._describe_producers = describe_producers

    @property
    def served(self) -> Served:
        return ADMIN_SERVED

    async def handle(self, request: KafkaRequest, listener_name: str) -> Message | None:
        body, version = request.body, request.api_version
        if isinstance(body, CreateTopicsRequest):
            return await self.create_topics(body, version)
        if isinstance(body, DeleteTopicsRequest):
            return await self.delete_topics(body, version)
        if isinstance(body, CreatePartitionsRequest):
            return await self.create_partitions(body)
        if isinstance(body, DescribeConfigsRequest):
            return await self.describe_configs(body)
        if isinstance(body, AlterConfigsRequest):
            return await self.alter_configs(body)
        if isinstance(body, IncrementalAlterConfigsRequest):
            return await self.incremental_alter_configs(body)
        if isinstance(body, DescribeClusterRequest):
            return self.describe_cluster(body, listener_name)
        if isinstance(body, DeleteRecordsRequest):
            return await self.delete_records(body)
        if isinstance(body, DescribeLogDirsRequest):
            return await self.describe_log_dirs(body)
        if isinstance(body, ElectLeadersRequest):
            return await self.elect_leaders(body, version)
        if isinstance(body, AlterPartitionReassignmentsRequest):
            return await self.alter_partition_reassignments(body)
        if isinstance(body, ListPartitionReassignmentsRequest):
            return await self.list_partition_reassignments(body)
        if isinstance(body, DescribeProducersRequest):
            return self.describe_producers(body)
        if isinstance(body, UnregisterBrokerRequest):
            return await self.unregister_broker(body)
        raise InvalidRequestError(f"no admin handler for {type(body).__name__}")

    # --- forwarding to the controller ----------------------------------------------------------

    async def _forward(
        self,
        method: str,
        request: Any,
        client_timeout_ms: int | None = None,
        *,
        timeout_ms: int | None = None,
    ) -> tuple[Any, KafkaError | None]:
        """`request` to the active controller's `method`: its answer and the error of the
        whole request (the answer's, or why no controller answered; then no answer).

        It is sent again through an election for as long as the client's request allows
        (`forward_timeout_ms`), or for `timeout_ms` where given; a request whose controller call
        has a `timeout_ms` gives the controller what is left of it at each attempt."""
        if self._forward_call is None:
            raise RequestRefusedError(f"broker {self.broker_id} forwards no {method}")

        gives_timeout = "timeout_ms" in request.DESCRIPTOR.fields_by_name

        def send(stub: Stub, timeout_s: float) -> Awaitable[Any]:
            if gives_timeout and client_timeout_ms is not None and client_timeout_ms > 0:
                request.timeout_ms = min(client_timeout_ms, max(1, int(timeout_s * 1000)))
            answer: Awaitable[Any] = getattr(stub, method)(request, timeout=timeout_s)
            return answer

        try:
            answer = await self._forward_call(
                f"{method} from a Kafka client of broker {self.broker_id}",
                send,
                timeout_ms=(
                    forward_timeout_ms(client_timeout_ms) if timeout_ms is None else timeout_ms
                ),
            )
        except KafkaError as error:
            return None, error
        return answer, error_from_proto(answer)

    async def forward_request(
        self, method: str, request: Any, client_timeout_ms: int | None = None
    ) -> tuple[Any, KafkaError | None]:
        """`_forward`, for the other handler modules that share this broker's forwarding (the
        ACL APIs, `kafka_sasl_apis`, `kafka_feature_apis`)."""
        return await self._forward(method, request, client_timeout_ms)

    # --- topics --------------------------------------------------------------------------------

    async def create_topics(
        self, request: CreateTopicsRequest, version: int
    ) -> ctr.CreateTopicsResponse:
        refused = {i: e for i, t in enumerate(request.topics) if (e := _null_config(t)) is not None}
        forwarded = [t for i, t in enumerate(request.topics) if i not in refused]
        answer, failure = None, None
        if forwarded:
            answer, failure = await self._forward(
                "CreateTopics",
                cpb.CreateTopicsRequest(
                    topics=[
                        cpb.CreatableTopic(
                            name=t.name,
                            num_partitions=t.num_partitions,
                            replication_factor=t.replication_factor,
                            assignments=[
                                cpb.ReplicaAssignment(
                                    partition_index=a.partition_index, broker_ids=a.broker_ids
                                )
                                for a in t.assignments
                            ],
                            configs={c.name: c.value for c in t.configs if c.value is not None},
                        )
                        for t in forwarded
                    ],
                    validate_only=request.validate_only,
                    timeout_ms=request.timeout_ms,
                ),
                request.timeout_ms,
            )
        answered = iter(_results(answer, "topics", len(forwarded), failure))
        results = []
        for index, topic in enumerate(request.topics):
            result: Any = refused[index] if index in refused else next(answered)
            error = _error_of(result)
            created = error is None
            results.append(
                ctr.CreatableTopicResult(
                    name=topic.name,
                    topic_id=_uuid(result.topic_id) if created else ZERO_UUID,
                    error_code=error_code(error),
                    error_message=_message(error),
                    num_partitions=result.num_partitions if created else -1,
                    replication_factor=result.replication_factor if created else -1,
                    configs=[] if version >= 5 and created else None,
                )
            )
        return ctr.CreateTopicsResponse(topics=results)

    async def delete_topics(
        self, request: DeleteTopicsRequest, version: int
    ) -> dtr.DeleteTopicsResponse:
        # v6 names each topic by name or by id; before, by name only. The controller answers
        # one result per name, then one per id, in request order.
        wanted: list[tuple[str | None, UUID]] = (
            [(t.name, t.topic_id) for t in request.topics]
            if version >= 6
            else [(name, ZERO_UUID) for name in request.topic_names]
        )
        by_name = [name for name, _ in wanted if name is not None]
        by_id = [topic_id for name, topic_id in wanted if name is None]
        answer, failure = await self._forward(
            "DeleteTopics",
            cpb.DeleteTopicsRequest(
                topic_names=by_name,
                topic_ids=[topic_id.bytes for topic_id in by_id],
                timeout_ms=request.timeout_ms,
            ),
            request.timeout_ms,
        )
        answered = _results(answer, "topics", len(wanted), failure)
        named = iter(answered[: len(by_name)])
        identified = iter(answered[len(by_name) :])
        responses = []
        for name, topic_id in wanted:
            result = next(named) if name is not None else next(identified)
            error = _error_of(result)
            if not isinstance(result, KafkaError):
                name = name if name is not None else (result.name or None)
                topic_id = _uuid(result.topic_id) if result.topic_id else topic_id
            responses.append(
                dtr.DeletableTopicResult(
                    name=name,
                    topic_id=topic_id,
                    error_code=error_code(error),
                    error_message=_message(error),
                )
            )
        return dtr.DeleteTopicsResponse(responses=responses)

    async def create_partitions(
        self, request: CreatePartitionsRequest
    ) -> cpr.CreatePartitionsResponse:
        answer, failure = await self._forward(
            "CreatePartitions",
            cpb.CreatePartitionsRequest(
                topics=[
                    cpb.CreatePartitionsTopic(
                        name=t.name,
                        count=t.count,
                        assignments=[
                            cpb.ReplicaAssignment(partition_index=index, broker_ids=a.broker_ids)
                            for index, a in enumerate(t.assignments or ())
                        ],
                    )
                    for t in request.topics
                ],
                validate_only=request.validate_only,
                timeout_ms=request.timeout_ms,
            ),
            request.timeout_ms,
        )
        answered = _results(answer, "results", len(request.topics), failure)
        return cpr.CreatePartitionsResponse(
            results=[
                cpr.CreatePartitionsTopicResult(
                    name=topic.name, error_code=error_code(error), error_message=_message(error)
                )
                for topic, result in zip(request.topics, answered, strict=True)
                for error in (_error_of(result),)
            ]
        )

    # --- configs -------------------------------------------------------------------------------

    async def describe_configs(
        self, request: DescribeConfigsRequest
    ) -> dcfr.DescribeConfigsResponse:
        resources = [(r.resource_type, r.resource_name) for r in request.resources]
        local = {
            i: self._describe_loggers(r.resource_name, r.configuration_keys)
            for i, r in enumerate(request.resources)
            if r.resource_type == BROKER_LOGGER
        }
        known = {i: c for i, r in enumerate(resources) if (c := _config_resource(*r)) is not None}
        here = [i for i, resource in known.items() if self._describes_here(resource)]
        # With a quorum leader known, the controller's committed state answers (a change
        # forwarded a moment ago shows); without one, or when no controller answers in time,
        # this broker's image does, as a Kafka broker's always does (module docstring).
        leader_known = self._quorum_leader is None or self._quorum_leader() is not None
        forwarded = [i for i in known if leader_known or i not in here]
        answer, failure = None, None
        if forwarded:
            answer, failure = await self._forward(
                "DescribeConfigs",
                cpb.DescribeConfigsRequest(
                    resources=[
                        cpb.ConfigResourceKeys(
                            resource_type=request.resources[i].resource_type,
                            resource_name=request.resources[i].resource_name,
                            configuration_keys=request.resources[i].configuration_keys or (),
                        )
                        for i in forwarded
                    ]
                ),
                timeout_ms=DESCRIBE_FORWARD_TIMEOUT_MS,
            )
        answered: dict[int, Any] = dict(
            zip(forwarded, _results(answer, "results", len(forwarded), failure), strict=True)
        )
        if not leader_known or isinstance(failure, RequestTimedOutError):
            image = self._image()
            for i in here:
                keys = request.resources[i].configuration_keys or None
                described = describe_image_configs(image, self._static_configs, known[i], keys)
                answered[i] = describe_configs_to_proto([described]).results[0]
        results = []
        for index, (resource_type, resource_name) in enumerate(resources):
            result = answered.get(index, _unknown_resource_type(resource_type))
            error = _error_of(result)
            configs = (
                [_described(resource_type, c, request.include_synonyms) for c in result.configs]
                if error is None
                else []
            )
            if index in local:
                error, configs = local[index]
            results.append(
                dcfr.DescribeConfigsResult(
                    error_code=error_code(error),
                    error_message=_message(error),
                    resource_type=resource_type,
                    resource_name=resource_name,
                    configs=configs,
                )
            )
        return dcfr.DescribeConfigsResponse(results=results)

    def _describes_here(self, resource: ConfigResource) -> bool:
        """Whether this broker answers a config resource from its own image and static configs
        (module docstring): all but another broker's."""
        return resource.resource_type is not ConfigResourceType.BROKER or (
            resource.resource_name in (CLUSTER_DEFAULT, str(self.broker_id))
        )

    def _describe_loggers(
        self, resource_name: str, keys: Sequence[str] | None
    ) -> tuple[KafkaError | None, list[dcfr.DescribeConfigsResourceResult]]:
        """This node's loggers as Kafka describes a BROKER_LOGGER resource (source
        DYNAMIC_BROKER_LOGGER_CONFIG, no synonyms), or the error."""
        try:
            loggers = self._loggers.describe(resource_name, keys)
        except KafkaError as error:
            return error, []
        return None, [
            dcfr.DescribeConfigsResourceResult(
                name=name,
                value=level,
                read_only=False,
                config_source=CONFIG_SOURCES["DYNAMIC_BROKER_LOGGER_CONFIG"],
                is_sensitive=False,
                synonyms=[],
            )
            for name, level in loggers
        ]

    async def alter_configs(self, request: AlterConfigsRequest) -> acr.AlterConfigsResponse:
        """The whole-resource form (module docstring): every key given is set (a null value
        deletes it), every other key set on the resource is deleted by the controller."""
        changes = [
            (
                r.resource_type,
                r.resource_name,
                [(c.name, INCREMENTAL_SET, c.value) for c in r.configs],
            )
            for r in request.resources
        ]
        outcome = await self._alter(changes, request.validate_only, replace=True)
        return acr.AlterConfigsResponse(
            responses=_per_resource(acr.AlterConfigsResourceResponse, changes, outcome)
        )

    async def incremental_alter_configs(
        self, request: IncrementalAlterConfigsRequest
    ) -> iacr.IncrementalAlterConfigsResponse:
        changes = [
            (
                r.resource_type,
                r.resource_name,
                [(c.name, c.config_operation, c.value) for c in r.configs],
            )
            for r in request.resources
        ]
        local = [i for i, (kind, _, _) in enumerate(changes) if kind == BROKER_LOGGER]
        outcome = await self._alter(
            [c for i, c in enumerate(changes) if i not in local], request.validate_only
        )
        for i in local:
            _, name, operations = changes[i]
            outcome.insert(i, self._alter_loggers(name, operations, request.validate_only))
        return iacr.IncrementalAlterConfigsResponse(
            responses=_per_resource(iacr.AlterConfigsResourceResponse, changes, outcome)
        )

    def _alter_loggers(
        self,
        resource_name: str,
        operations: Sequence[tuple[str, int, str | None]],
        validate_only: bool,
    ) -> KafkaError | None:
        try:
            self._loggers.alter(resource_name, operations, validate_only)
        except KafkaError as error:
            return error
        return None

    async def _alter(
        self,
        changes: Sequence[tuple[int, str, Sequence[tuple[str, int, str | None]]]],
        validate_only: bool,
        *,
        replace: bool = False,
    ) -> list[KafkaError | None]:
        """IncrementalAlterConfigs of `changes` (type, name, [(key, operation, value)]) at
        the controller, each resource's other keys deleted with `replace`: each resource's
        error, in order."""
        known = [i for i, (kind, name, _) in enumerate(changes) if _config_resource(kind, name)]
        answer, failure = None, None
        if known:
            resources = []
            for i in known:
                kind, name, ops = changes[i]
                resource = cpb.AlterConfigsResource(
                    resource_type=kind, resource_name=name, replace=replace
                )
                for key, operation, value in ops:
                    config = resource.configs.add(name=key, operation=operation)
                    if value is not None:
                        config.value = value
                resources.append(resource)
            answer, failure = await self._forward(
                "IncrementalAlterConfigs",
                cpb.IncrementalAlterConfigsRequest(
                    resources=resources, validate_only=validate_only
                ),
            )
        answered = dict(zip(known, _results(answer, "results", len(known), failure), strict=True))
        return [
            _error_of(answered.get(i, _unknown_resource_type(kind)))
            for i, (kind, _, _) in enumerate(changes)
        ]

    # --- cluster -------------------------------------------------------------------------------

    def describe_cluster(
        self, request: DescribeClusterRequest, listener_name: str
    ) -> dcr.DescribeClusterResponse:
        if request.endpoint_type != ENDPOINT_TYPE_BROKERS:
            return other_endpoint_type(request, self._cluster_id, "broker", "controller")
        image = self._image()
        brokers = []
        for broker_id in sorted(image.cluster.brokers):
            registration = image.cluster.brokers[broker_id]
            endpoint = listener_endpoint(image, broker_id, listener_name)
            if endpoint is None or (registration.fenced and not request.include_fenced_brokers):
                continue
            brokers.append(
                dcr.DescribeClusterBroker(
                    broker_id=broker_id,
                    host=endpoint.host,
                    port=endpoint.port,
                    rack=registration.rack,
                    is_fenced=registration.fenced,
                )
            )
        listed = [b.broker_id for b in brokers if not b.is_fenced]
        return dcr.DescribeClusterResponse(
            endpoint_type=request.endpoint_type,
            cluster_id=self._cluster_id,
            controller_id=controller_for_clients(self.broker_id, listed, self._choose),
            brokers=brokers,
        )

    async def unregister_broker(
        self, request: UnregisterBrokerRequest
    ) -> ubr.UnregisterBrokerResponse:
        _, failure = await self._forward(
            "UnregisterBroker", cpb.UnregisterBrokerRequest(broker_id=request.broker_id)
        )
        return ubr.UnregisterBrokerResponse(
            error_code=error_code(failure), error_message=_message(failure)
        )

    async def elect_leaders(
        self, request: ElectLeadersRequest, version: int
    ) -> elr.ElectLeadersResponse:
        wanted = (
            None
            if request.topic_partitions is None
            else [(t.topic, p) for t in request.topic_partitions for p in t.partitions]
        )
        if wanted == []:
            return elr.ElectLeadersResponse()
        answer, failure = await self._forward(
            "ElectLeaders",
            cpb.ElectLeadersRequest(
                election_type=request.election_type if version >= 1 else PREFERRED_ELECTION,
                partitions=[
                    common_pb2.TopicPartition(topic=t, partition=p) for t, p in wanted or ()
                ],
                timeout_ms=request.timeout_ms,
            ),
            request.timeout_ms,
        )
        results: list[tuple[str, tuple[int, KafkaError | None]]]
        if failure is not None:
            results = [(t, (p, failure)) for t, p in wanted or ()]
        else:
            results = [(r.topic, (r.partition_index, error_from_proto(r))) for r in answer.results]
        return elr.ElectLeadersResponse(
            error_code=error_code(failure) if version >= 1 else 0,
            replica_election_results=[
                elr.ReplicaElectionResult(
                    topic=topic,
                    partition_result=[
                        elr.PartitionResult(
                            partition_id=partition,
                            error_code=error_code(error),
                            error_message=_message(error),
                        )
                        for partition, error in entries
                    ],
                )
                for topic, entries in _by_topic(results)
            ],
        )

    async def alter_partition_reassignments(
        self, request: AlterPartitionReassignmentsRequest
    ) -> aprr.AlterPartitionReassignmentsResponse:
        pb_request = cpb.AlterPartitionReassignmentsRequest(timeout_ms=request.timeout_ms)
        for topic in request.topics:
            pb_topic = pb_request.topics.add(name=topic.name)
            for p in topic.partitions:
                pb_partition = pb_topic.partitions.add(partition_index=p.partition_index)
                if p.replicas is not None:  # absent: cancel the reassignment
                    pb_partition.replicas.broker_ids.extend(p.replicas)
        answer, failure = await self._forward(
            "AlterPartitionReassignments", pb_request, request.timeout_ms
        )
        count = sum(len(t.partitions) for t in request.topics)
        answered = _results(answer, "results", count, failure)
        return aprr.AlterPartitionReassignmentsResponse(
            error_code=error_code(failure),
            error_message=_message(failure),
            responses=[
                aprr.ReassignableTopicResponse(
                    name=topic.name,
                    partitions=[
                        aprr.ReassignablePartitionResponse(
                            partition_index=p.partition_index,
                            error_code=error_code(error),
                            error_message=_message(error),
                        )
                        for p, result in zip(topic.partitions, results, strict=True)
                        for error in (_error_of(result),)
                    ],
                )
                for topic, results in per_topic(request.topics, lambda t: t.partitions, answered)
            ],
        )

    async def list_partition_reassignments(
        self, request: ListPartitionReassignmentsRequest
    ) -> lprr.ListPartitionReassignmentsResponse:
        wanted = [
            common_pb2.TopicPartition(topic=t.name, partition=p)
            for t in request.topics or ()
            for p in t.partition_indexes
        ]
        if request.topics is not None and not wanted:
            return lprr.ListPartitionReassignmentsResponse()
        answer, failure = await self._forward(
            "ListPartitionReassignments",
            cpb.ListPartitionReassignmentsRequest(partitions=wanted),
            request.timeout_ms,
        )
        if failure is not None:
            return lprr.ListPartitionReassignmentsResponse(
                error_code=failure.code, error_message=str(failure)
            )
        return lprr.ListPartitionReassignmentsResponse(
            topics=[
                lprr.OngoingTopicReassignment(
                    name=topic,
                    partitions=[
                        lprr.OngoingPartitionReassignment(
                            partition_index=r.partition_index,
                            replicas=list(r.replicas),
                            adding_replicas=list(r.adding_replicas),
                            removing_replicas=list(r.removing_replicas),
                        )
                        for r in entries
                    ],
                )
                for topic, entries in _by_topic((r.topic, r) for r in answer.reassignments)
            ]
        )

    # --- this broker's data --------------------------------------------------------------------

    async def delete_records(self, request: DeleteRecordsRequest) -> drr.DeleteRecordsResponse:
        """Through the broker's DeleteRecords core (its refusals, the same
        `ReplicaManager.delete_records` call)."""
        service = self._service("DeleteRecords")
        decoded = m.DeleteRecordsRequest(
            tuple(
                m.DeleteRecordsPartition(t.name, p.partition_index, p.offset)
                for t in request.topics
                for p in t.partitions
            ),
            request.timeout_ms,
        )
        with self._refusals():
            answer = await service.delete_records(decoded)
        return drr.DeleteRecordsResponse(
            topics=[
                drr.DeleteRecordsTopicResult(
                    name=topic.name,
                    partitions=[
                        drr.DeleteRecordsPartitionResult(
                            partition_index=r.partition,
                            low_watermark=r.low_watermark if r.error is None else -1,
                            error_code=error_code(r.error),
                        )
                        for r in answered
                    ],
                )
                for topic, answered in per_topic(
                    request.topics, lambda t: t.partitions, answer.partitions
                )
            ]
        )

    async def describe_log_dirs(
        self, request: DescribeLogDirsRequest
    ) -> dldr.DescribeLogDirsResponse:
        """Through the broker's DescribeLogDirs core; a topic asked for with a list of
        partitions is answered for those partitions only (Kafka's filter)."""
        service = self._service("DescribeLogDirs")
        wanted = (
            None if request.topics is None else {t.topic: set(t.partitions) for t in request.topics}
        )
        if wanted == {}:
            return dldr.DescribeLogDirsResponse()
        with self._refusals():
            answer = service.describe_log_dirs(
                m.DescribeLogDirsRequest(tuple(sorted(wanted or ())))
            )
        results = []
        for described in answer.log_dirs:
            error = described.error
            total, usable = _disk_usage(described.log_dir) if error is None else (-1, -1)
            results.append(
                dldr.DescribeLogDirsResult(
                    error_code=error_code(error),
                    log_dir=described.log_dir,
                    topics=[
                        dldr.DescribeLogDirsTopic(
                            name=topic,
                            partitions=[
                                _log_dir_partition(r)
                                for r in replicas
                                if wanted is None or r.partition in wanted[topic]
                            ],
                        )
                        for topic, replicas in _by_topic((r.topic, r) for r in described.replicas)
                    ],
                    total_bytes=total,
                    usable_bytes=usable,
                )
            )
        return dldr.DescribeLogDirsResponse(results=results)

    def describe_producers(
        self, request: DescribeProducersRequest
    ) -> dpr.DescribeProducersResponse:
        describe = self._describe_producers
        if describe is None:
            raise RequestRefusedError(f"broker {self.broker_id} serves no DescribeProducers")
        topics = []
        for topic in request.topics:
            partitions = []
            for partition in topic.partition_indexes:
                try:
                    producers = describe(topic.name, partition)
                except KafkaError as error:
                    partitions.append(
                        dpr.PartitionResponse(
                            partition_index=partition,
                            error_code=error.code,
                            error_message=str(error),
                        )
                    )
                    continue
                partitions.append(
                    dpr.PartitionResponse(
                        partition_index=partition,
                        active_producers=[
                            dpr.ProducerState(
                                producer_id=p.producer_id,
                                producer_epoch=p.producer_epoch,
                                last_sequence=p.last_sequence,
                                last_timestamp=p.last_timestamp_ms,
                                coordinator_epoch=p.coordinator_epoch,
                                current_txn_start_offset=p.current_txn_first_offset,
                            )
                            for p in producers
                        ],
                    )
                )
            topics.append(dpr.TopicResponse(name=topic.name, partitions=partitions))
        return dpr.DescribeProducersResponse(topics=topics)

    def _service(self, api: str) -> BrokerCores:
        if self._broker_service is None:
            raise RequestRefusedError(f"broker {self.broker_id} serves no {api} (no data plane)")
        return self._broker_service

    @contextlib.contextmanager
    def _refusals(self) -> Iterator[None]:
        """The broker's refusals of a whole request (`Refused`) as the listener's: the
        connection closes, the details logged."""
        try:
            yield
        except Refused as refused:
            raise RequestRefusedError(f"broker {self.broker_id}: {refused.details}") from None


def other_endpoint_type(
    request: DescribeClusterRequest, cluster_id: str, served: str, other: str
) -> dcr.DescribeClusterResponse:
    """UNSUPPORTED_ENDPOINT_TYPE: a `served` ("broker") describes its own kind only."""
    served_type = ENDPOINT_TYPE_BROKERS if served == "broker" else ENDPOINT_TYPE_CONTROLLERS
    return dcr.DescribeClusterResponse(
        error_code=UNSUPPORTED_ENDPOINT_TYPE,
        error_message=(
            f"endpoint type {request.endpoint_type}: a {served} describes its {served}s "
            f"(type {served_type}) only; ask a {other} for {other}s"
        ),
        endpoint_type=request.endpoint_type,
        cluster_id=cluster_id,
    )


def _results(answer: Any, field: str, count: int, failure: KafkaError | None) -> list[Any]:
    """The controller's `count` per-entry results (request order), or `failure` for each; a
    controller that answered another number of entries is UNKNOWN_SERVER_ERROR for each. No
    entries when none were forwarded (then there is no answer)."""
    if count == 0:
        return []
    if failure is not None:
        return [failure] * count
    results = list(getattr(answer, field))
    if len(results) != count:
        error = UnknownServerError(
            f"the controller answered {len(results)} entries to a request of {count}"
        )
        return [error] * count
    return results


def _per_resource(
    make: Callable[..., T],
    changes: Sequence[tuple[int, str, object]],
    outcome: Sequence[KafkaError | None],
) -> list[T]:
    """One answer per resource altered (AlterConfigs and IncrementalAlterConfigs answer
    alike, in classes of their own)."""
    return [
        make(
            error_code=error_code(error),
            error_message=_message(error),
            resource_type=resource_type,
            resource_name=resource_name,
        )
        for (resource_type, resource_name, _), error in zip(changes, outcome, strict=True)
    ]


def _error_of(result: Any) -> KafkaError | None:
    """The error of one result: a refusal or failure made here, or the controller's."""
    return result if isinstance(result, KafkaError) else error_from_proto(result)


def _message(error: KafkaError | None) -> str | None:
    return None if error is None else str(error)


def _uuid(value: bytes) -> UUID:
    return UUID(bytes=value) if len(value) == 16 else ZERO_UUID


def _null_config(topic: CreatableTopic) -> KafkaError | None:
    nulls = sorted(c.name for c in topic.configs if c.value is None)
    if not nulls:
        return None
    return InvalidConfigError(
        f"topic {topic.name!r}: null value not supported for topic configs: {', '.join(nulls)}"
    )


def _config_resource(resource_type: int, resource_name: str) -> ConfigResource | None:
    """The controller's resource, None for a type it has no configs of."""
    try:
        return ConfigResource(ConfigResourceType(resource_type), resource_name)
    except ValueError:
        return None


def _unknown_resource_type(resource_type: int) -> KafkaError:
    if resource_type == BROKER_LOGGER:
        return InvalidRequestError(
            f"config resource type BROKER_LOGGER ({BROKER_LOGGER}) is altered by "
            "IncrementalAlterConfigs only, as Kafka's brokers refuse it in AlterConfigs"
        )
    served = [f"{t.name} ({int(t)})" for t in ConfigResourceType]
    return InvalidRequestError(
        f"config resource type {resource_type} is not supported: only "
        + ", ".join([*served, f"BROKER_LOGGER ({BROKER_LOGGER})"])
    )


def _described(
    resource_type: int, entry: cpb.ConfigEntry, include_synonyms: bool
) -> dcfr.DescribeConfigsResourceResult:
    definitions = (
        TOPIC_CONFIGS
        if resource_type == int(ConfigResourceType.TOPIC)
        else GROUP_CONFIGS
        if resource_type == int(ConfigResourceType.GROUP)
        else BROKER_CONFIGS
    )
    definition = definitions.get(entry.name)
    source = CONFIG_SOURCES.get(entry.source, 0)
    value = entry.value if entry.HasField("value") else None
    synonyms = []
    if include_synonyms:
        # The value's own level only: a topic or group value taken from a broker key is
        # named by it.
        broker_level = resource_type in (
            int(ConfigResourceType.TOPIC),
            int(ConfigResourceType.GROUP),
        ) and entry.source not in ("TOPIC_CONFIG", "GROUP_CONFIG", "DEFAULT_CONFIG")
        name = definition.broker_name if broker_level and definition else None
        synonyms.append(
            dcfr.DescribeConfigsSynonym(name=name or entry.name, value=value, source=source)
        )
    return dcfr.DescribeConfigsResourceResult(
        name=entry.name,
        value=value,
        read_only=entry.read_only,
        config_source=source,
        is_sensitive=entry.is_sensitive,
        synonyms=synonyms,
        config_type=0 if definition is None else CONFIG_TYPES.get(definition.config_type, 0),
    )


def _by_topic(entries: Iterable[tuple[str, T]]) -> list[tuple[str, list[T]]]:
    """(topic, item) pairs regrouped by topic, topics in first-seen order."""
    grouped: dict[str, list[T]] = {}
    for topic, item in entries:
        grouped.setdefault(topic, []).append(item)
    return list(grouped.items())


def _disk_usage(path: str) -> tuple[int, int]:
    """Total and usable bytes of the file system holding `path` (-1, -1 when unknown)."""
    try:
        stats = os.statvfs(path)
    except OSError:
        return -1, -1
    return stats.f_blocks * stats.f_frsize, stats.f_bavail * stats.f_frsize


def _log_dir_partition(r: m.ReplicaLogInfo) -> dldr.DescribeLogDirsPartition:
    """A replica of the broker's log dirs in Kafka's form, with replog's offsets tag."""
    partition = dldr.DescribeLogDirsPartition(
        partition_index=r.partition,
        partition_size=r.size,
        offset_lag=r.offset_lag,
        is_future_key=r.is_future,
    )
    offsets = ReplicaOffsets(r.log_start_offset, r.log_end_offset, r.high_watermark)
    tagged = [replica_offsets_tag.encode(offsets)]
    if r.dirty_ratio is not None:
        tagged.append(replica_offsets_tag.encode_dirty_ratio(r.dirty_ratio))
    partition.unknown_tagged_fields = tuple(tagged)
    return partition
