"""The Kafka listener's admin handlers (`kafka_admin_apis`), against a recording controller and
broker service:

- each controller request becomes the Controller service's request with the same content, and
  each answer Kafka's response, entry by entry in request order; an unreachable controller is
  every entry's error, and so is an error of the whole request;
- what the controller cannot express is refused per entry without forwarding (a config resource
  type replog does not serve, alone or next to served ones; a null topic config in
  CreateTopics);
- BROKER_LOGGER resources are this node's loggers, described and altered here with Kafka's
  errors, never forwarded; the legacy AlterConfigs refuses them;
- AlterConfigs replaces a resource's configs: the keys set in the image and not given are
  deleted;
- DescribeCluster lists brokers at the listener the client came through, fenced ones only when
  asked; DeleteRecords and DescribeLogDirs go through the Broker service (each replica with
  replog's offsets tag); DescribeProducers
  answers the replica manager's producers or its error;
- the transaction APIs answer UNSUPPORTED_VERSION for every entry;
- ApiVersions advertises the core table and this module's, and every response built here
  encodes at every version served.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, cast

import pytest

from replog.errors import (
    BrokerIdNotRegisteredError,
    InvalidConfigError,
    NotLeaderOrFollowerError,
    PolicyViolationError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)
from replog.kafka import replica_offsets_tag
from replog.kafka.connection import KafkaRequest
from replog.kafka.messages import alter_configs_request as ac
from replog.kafka.messages import alter_partition_reassignments_request as apr
from replog.kafka.messages import create_partitions_request as cp
from replog.kafka.messages import create_topics_request as ct
from replog.kafka.messages import delete_records_request as dr
from replog.kafka.messages import delete_topics_request as dt
from replog.kafka.messages import describe_cluster_request as dc
from replog.kafka.messages import describe_configs_request as dcf
from replog.kafka.messages import describe_log_dirs_request as dld
from replog.kafka.messages import describe_producers_request as dp
from replog.kafka.messages import elect_leaders_request as el
from replog.kafka.messages import incremental_alter_configs_request as iac
from replog.kafka.messages import list_partition_reassignments_request as lpr
from replog.kafka.messages.api_versions_request import ApiVersionsRequest
from replog.kafka.messages.request_header import RequestHeader
from replog.kafka.messages.unregister_broker_request import UnregisterBrokerRequest
from replog.kafka.protocol.codec import ZERO_UUID, Message
from replog.pb import common_pb2
from replog.pb import controller_pb2 as cpb
from replog.quorum.metadata.image import MetadataImage
from replog.quorum.metadata.records import (
    ConfigRecord,
    ConfigResourceType,
    Endpoint,
    RegisterBrokerRecord,
)
from replog.replication import messages as m
from replog.replication.producer_state import BatchMetadata, ProducerEntry
from replog.server.data_plane.broker_cores import BrokerCores
from replog.server.kafka.kafka_admin_apis import (
    ADMIN_SERVED,
    DESCRIBE_FORWARD_TIMEOUT_MS,
    KafkaAdminApis,
)
from replog.server.kafka.kafka_apis import SERVED, KafkaApis
from replog.server.kafka.runtime_loggers import RuntimeLoggers
from replog.wire.controller_codec import error_status
from tests.metadata.metadata_helpers import bootstrapped, create_topic, replayed, topic_id

UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
INVALID_CONFIG = 40
UNKNOWN_TOPIC_OR_PARTITION = 3
REQUEST_TIMED_OUT = 7


class Controller:
    """Records what is forwarded and answers it: `answers[method]` is the response, or an
    error to raise (no controller answered)."""

    def __init__(self, **answers: Any) -> None:
        self.answers = answers
        self.sent: list[tuple[str, Any]] = []
        self.timeouts: list[int] = []  # each forwarded request's time for the controller to answer

    async def call(
        self, what: str, send: Callable[[Any, float], Awaitable[Any]], *, timeout_ms: int
    ) -> Any:
        controller = self
        self.timeouts.append(timeout_ms)

        class Stub:
            def __getattr__(self, method: str) -> Callable[..., Awaitable[Any]]:
                async def answer(request: Any, timeout: float) -> Any:
                    controller.sent.append((method, request))
                    found = controller.answers[method]
                    if isinstance(found, Exception):
                        raise found
                    return found

                return answer

        return await send(Stub(), 5.0)


def image() -> MetadataImage:
    def broker(broker_id: int, fenced: bool = False, kafka: bool = True) -> RegisterBrokerRecord:
        endpoints = [Endpoint("CONTROLLER", f"b{broker_id}", 19090 + broker_id)]
        if kafka:
            endpoints.append(Endpoint("PLAINTEXT", f"b{broker_id}", 9090 + broker_id))
        return RegisterBrokerRecord(
            broker_id, uuid.UUID(int=broker_id), 10, endpoints=tuple(endpoints), fenced=fenced
        )

    return replayed(
        bootstrapped(),
        broker(1),
        broker(2),
        broker(3, kafka=False),
        broker(4, fenced=True),
        *create_topic("orders", topic_id(1), (1, 2)),
        ConfigRecord(ConfigResourceType.TOPIC, "orders", "retention.ms", "1000"),
        ConfigRecord(ConfigResourceType.TOPIC, "orders", "cleanup.policy", "compact"),
    )


def admin(controller: Controller | None = None, **kwargs: Any) -> KafkaAdminApis:
    current = image()
    return KafkaAdminApis(
        2,
        cluster_id="c1",
        image=lambda: current,
        forward=(controller or Controller()).call,
        **kwargs,
    )


def request(body: Message, version: int) -> KafkaRequest:
    header = RequestHeader(
        request_api_key=body.API_KEY, request_api_version=version, correlation_id=7
    )
    return KafkaRequest(0, header, body, 0)


async def answer(apis: KafkaAdminApis, body: Message, version: int) -> Any:
    """The handler's response, checked to encode at the version asked."""
    response = await apis.handle(request(body, version), "PLAINTEXT")
    assert response is not None
    response.encode(version)
    return response


def failed(error: Exception) -> common_pb2.ErrorStatus:
    status = error_status(cast(Any, error))
    assert status is not None
    return status


# --- topics -----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_create_topics_forwards_each_topic_and_answers_in_request_order() -> None:
    created = cpb.CreatableTopicResult(
        name="a", topic_id=topic_id(9).bytes, num_partitions=3, replication_factor=2
    )
    refused = cpb.CreatableTopicResult(name="b", error=failed(PolicyViolationError("no b")))
    controller = Controller(
        CreateTopics=cpb.CreateTopicsResponse(topics=[created, refused], controller_id=1)
    )
    body = ct.CreateTopicsRequest(
        topics=[
            ct.CreatableTopic(
                name="a",
                num_partitions=-1,
                replication_factor=-1,
                configs=[ct.CreatableTopicConfig(name="retention.ms", value="5")],
                assignments=[ct.CreatableReplicaAssignment(partition_index=0, broker_ids=[1, 2])],
            ),
            ct.CreatableTopic(name="null", configs=[ct.CreatableTopicConfig(name="x", value=None)]),
            ct.CreatableTopic(name="b", num_partitions=1, replication_factor=1),
        ],
        timeout_ms=1234,
        validate_only=True,
    )
    response = await answer(admin(controller), body, 7)
    ((method, sent),) = controller.sent
    assert method == "CreateTopics"
    assert sent.validate_only and sent.timeout_ms == 1234
    assert controller.timeouts == [1234]  # through an election for as long as the client waits
    assert [t.name for t in sent.topics] == ["a", "b"]  # the null config is not forwarded
    assert dict(sent.topics[0].configs) == {"retention.ms": "5"}
    assert [list(a.broker_ids) for a in sent.topics[0].assignments] == [[1, 2]]
    assert sent.topics[0].num_partitions == -1
    results = [(t.name, t.error_code, t.num_partitions, t.topic_id) for t in response.topics]
    assert results == [
        ("a", 0, 3, topic_id(9)),
        ("null", INVALID_CONFIG, -1, ZERO_UUID),
        ("b", PolicyViolationError.code, -1, ZERO_UUID),
    ]
    assert "null value not supported" in response.topics[1].error_message
    assert response.topics[2].error_message == "no b"


@pytest.mark.parametrize("version", [2, 7])
@pytest.mark.parametrize(
    "failure",
    [RequestTimedOutError("no controller answered"), PolicyViolationError("too many partitions")],
)
@pytest.mark.asyncio
async def test_a_failed_controller_request_is_every_topics_error(
    failure: Exception, version: int
) -> None:
    if isinstance(failure, RequestTimedOutError):
        controller = Controller(CreateTopics=failure)
    else:
        controller = Controller(CreateTopics=cpb.CreateTopicsResponse(error=failed(failure)))
    body = ct.CreateTopicsRequest(topics=[ct.CreatableTopic(name="a"), ct.CreatableTopic(name="b")])
    response = await answer(admin(controller), body, version)
    assert [(t.name, t.error_code, t.error_message) for t in response.topics] == [
        ("a", getattr(failure, "code", None), str(failure)),
        ("b", getattr(failure, "code", None), str(failure)),
    ]


@pytest.mark.asyncio
async def test_delete_topics_by_name_and_by_id_match_the_controllers_order() -> None:
    controller = Controller(
        DeleteTopics=cpb.DeleteTopicsResponse(
            topics=[
                cpb.DeletableTopicResult(name="a", topic_id=topic_id(1).bytes),
                cpb.DeletableTopicResult(error=failed(UnknownTopicOrPartitionError("no id 2"))),
            ]
        )
    )
    body = dt.DeleteTopicsRequest(
        topics=[dt.DeleteTopicState(topic_id=topic_id(2)), dt.DeleteTopicState(name="a")],
        timeout_ms=50,
    )
    response = await answer(admin(controller), body, 6)
    ((_, sent),) = controller.sent
    assert list(sent.topic_names) == ["a"] and list(sent.topic_ids) == [topic_id(2).bytes]
    assert [(r.name, r.topic_id, r.error_code) for r in response.responses] == [
        (None, topic_id(2), UnknownTopicOrPartitionError.code),
        ("a", topic_id(1), 0),
    ]
    old = dt.DeleteTopicsRequest(topic_names=["a", "b"])
    controller = Controller(
        DeleteTopics=cpb.DeleteTopicsResponse(
            topics=[cpb.DeletableTopicResult(name="a"), cpb.DeletableTopicResult(name="b")]
        )
    )
    response = await answer(admin(controller), old, 1)
    assert [(r.name, r.error_code) for r in response.responses] == [("a", 0), ("b", 0)]


@pytest.mark.asyncio
async def test_create_partitions_forwards_counts_and_assignments() -> None:
    controller = Controller(
        CreatePartitions=cpb.CreatePartitionsResponse(
            results=[
                cpb.CreatePartitionsTopicResult(name="a"),
                cpb.CreatePartitionsTopicResult(
                    name="b", error=failed(UnknownTopicOrPartitionError("no b"))
                ),
            ]
        )
    )
    body = cp.CreatePartitionsRequest(
        topics=[
            cp.CreatePartitionsTopic(
                name="a", count=3, assignments=[cp.CreatePartitionsAssignment(broker_ids=[2])]
            ),
            cp.CreatePartitionsTopic(name="b", count=2, assignments=None),
        ],
        validate_only=True,
    )
    response = await answer(admin(controller), body, 3)
    ((_, sent),) = controller.sent
    assert [
        (t.name, t.count, [list(a.broker_ids) for a in t.assignments]) for t in sent.topics
    ] == [
        ("a", 3, [[2]]),
        ("b", 2, []),
    ]
    assert sent.validate_only
    assert [(r.name, r.error_code) for r in response.results] == [
        ("a", 0),
        ("b", UnknownTopicOrPartitionError.code),
    ]


# --- configs ----------------------------------------------------------------------------------


def describing(
    resource_type: int, name: str, *entries: tuple[str, str, str]
) -> cpb.DescribeConfigsResponse:
    """The controller's DescribeConfigs answer of one resource: (key, value, source) each."""
    configs = [cpb.ConfigEntry(name=k, value=v, source=source) for k, v, source in entries]
    result = cpb.DescribeConfigsResult(
        resource_type=resource_type, resource_name=name, configs=configs
    )
    return cpb.DescribeConfigsResponse(results=[result])


@pytest.mark.asyncio
async def test_describe_configs_names_source_type_and_synonym() -> None:
    controller = Controller(
        DescribeConfigs=describing(
            2,
            "orders",
            ("retention.ms", "1000", "TOPIC_CONFIG"),
            ("segment.bytes", "5", "STATIC_BROKER_CONFIG"),
        )
    )
    body = dcf.DescribeConfigsRequest(
        resources=[
            dcf.DescribeConfigsResource(resource_type=16, resource_name="metrics"),
            dcf.DescribeConfigsResource(resource_type=2, resource_name="orders"),
        ],
        include_synonyms=True,
    )
    response = await answer(admin(controller), body, 4)
    ((_, sent),) = controller.sent
    assert [(r.resource_type, r.resource_name) for r in sent.resources] == [(2, "orders")]
    # Bounded well inside the client's timeout, so that the image can answer after it.
    assert controller.timeouts == [DESCRIBE_FORWARD_TIMEOUT_MS]
    metrics, orders = response.results
    assert metrics.error_code == INVALID_REQUEST and "type 16" in metrics.error_message
    retention, segment = orders.configs
    assert (retention.name, retention.value, retention.config_source) == ("retention.ms", "1000", 1)
    assert retention.config_type == 5  # LONG
    assert [(s.name, s.source) for s in segment.synonyms] == [("log.segment.bytes", 4)]


def configs_of(result: Any) -> dict[str, tuple[str | None, int]]:
    return {c.name: (c.value, c.config_source) for c in result.configs}


DESCRIBED_HERE = dcf.DescribeConfigsRequest(
    resources=[
        dcf.DescribeConfigsResource(
            resource_type=2,
            resource_name="orders",
            configuration_keys=["retention.ms", "segment.bytes"],
        ),
        dcf.DescribeConfigsResource(resource_type=2, resource_name="gone"),
        dcf.DescribeConfigsResource(
            resource_type=4, resource_name="2", configuration_keys=["log.segment.bytes"]
        ),
        dcf.DescribeConfigsResource(resource_type=4, resource_name="1"),
    ]
)


@pytest.mark.asyncio
async def test_describe_configs_with_no_quorum_leader_is_answered_from_the_image() -> None:
    """The quorum lost: a topic's and this broker's configs come from the image over the
    node's static configs, at once; only another broker's resource is forwarded."""
    controller = Controller(
        DescribeConfigs=describing(4, "1", ("log.segment.bytes", "9", "DEFAULT_CONFIG"))
    )
    apis = admin(controller, quorum_leader=lambda: None, static_configs={"log.segment.bytes": "5"})
    response = await answer(apis, DESCRIBED_HERE, 4)
    ((_, sent),) = controller.sent
    assert [(r.resource_type, r.resource_name) for r in sent.resources] == [(4, "1")]
    orders, gone, mine, other = response.results
    assert configs_of(orders) == {"retention.ms": ("1000", 1), "segment.bytes": ("5", 4)}
    assert gone.error_code == UNKNOWN_TOPIC_OR_PARTITION and "'gone'" in gone.error_message
    assert configs_of(mine) == {"log.segment.bytes": ("5", 4)}
    assert configs_of(other) == {"log.segment.bytes": ("9", 5)}


@pytest.mark.asyncio
async def test_describe_configs_no_controller_answers_is_answered_from_the_image() -> None:
    """A quorum leader known but no controller answering in time: the image answers what
    this broker can; another broker's resource carries the time-out."""
    controller = Controller(DescribeConfigs=RequestTimedOutError("no controller answered"))
    response = await answer(admin(controller, quorum_leader=lambda: 1), DESCRIBED_HERE, 4)
    assert len(controller.sent) == 1
    orders, gone, mine, other = response.results
    assert configs_of(orders) == {"retention.ms": ("1000", 1), "segment.bytes": ("1073741824", 5)}
    assert gone.error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert configs_of(mine) == {"log.segment.bytes": ("1073741824", 5)}
    assert other.error_code == REQUEST_TIMED_OUT and other.configs == []


@pytest.mark.asyncio
async def test_alter_configs_replaces_the_resource_and_incremental_alters_as_asked() -> None:
    outcome = cpb.IncrementalAlterConfigsResponse(
        results=[cpb.AlterConfigsResult(resource_type=2, resource_name="orders")]
    )
    controller = Controller(IncrementalAlterConfigs=outcome)
    body = ac.AlterConfigsRequest(
        resources=[
            ac.AlterConfigsResource(
                resource_type=2,
                resource_name="orders",
                configs=[ac.AlterableConfig(name="retention.ms", value="7")],
            ),
            ac.AlterConfigsResource(resource_type=16, resource_name="metrics"),
        ],
        validate_only=True,
    )
    response = await answer(admin(controller), body, 2)
    ((_, sent),) = controller.sent
    (resource,) = sent.resources
    ops = [
        (c.name, c.operation, c.value if c.HasField("value") else None) for c in resource.configs
    ]
    # The controller deletes the keys not given (cleanup.policy), from its own state.
    assert ops == [("retention.ms", 0, "7")] and resource.replace
    assert sent.validate_only
    assert [(r.resource_name, r.error_code) for r in response.responses] == [
        ("orders", 0),
        ("metrics", INVALID_REQUEST),
    ]
    controller = Controller(IncrementalAlterConfigs=outcome)
    body2 = iac.IncrementalAlterConfigsRequest(
        resources=[
            iac.AlterConfigsResource(
                resource_type=2,
                resource_name="orders",
                configs=[
                    iac.AlterableConfig(name="cleanup.policy", config_operation=2, value="delete"),
                    iac.AlterableConfig(name="retention.ms", config_operation=1, value=None),
                ],
            )
        ]
    )
    response2 = await answer(admin(controller), body2, 1)
    ((_, sent2),) = controller.sent
    assert [(c.name, c.operation, c.HasField("value")) for c in sent2.resources[0].configs] == [
        ("cleanup.policy", 2, True),
        ("retention.ms", 1, False),
    ]
    assert [r.error_code for r in response2.responses] == [0] and not sent2.resources[0].replace


@pytest.mark.asyncio
async def test_group_configs_go_to_the_controller_with_their_source_and_refusal() -> None:
    """KIP-848's GROUP resource (32): described with source GROUP_CONFIG (8), a value from the
    broker's setting named by its broker key; the controller's INVALID_CONFIG, naming the
    bound, reaches the client."""
    refusal = InvalidConfigError(
        "group 'g': consumer.session.timeout.ms must be greater than or equal to "
        "group.consumer.min.session.timeout.ms"
    )
    controller = Controller(
        DescribeConfigs=describing(
            32,
            "g",
            ("consumer.heartbeat.interval.ms", "5000", "STATIC_BROKER_CONFIG"),
            ("consumer.session.timeout.ms", "50000", "GROUP_CONFIG"),
        ),
        IncrementalAlterConfigs=cpb.IncrementalAlterConfigsResponse(
            results=[
                cpb.AlterConfigsResult(resource_type=32, resource_name="g", error=failed(refusal))
            ]
        ),
    )
    body = dcf.DescribeConfigsRequest(
        resources=[dcf.DescribeConfigsResource(resource_type=32, resource_name="g")],
        include_synonyms=True,
    )
    (described,) = (await answer(admin(controller), body, 4)).results
    interval, session = described.configs
    assert (session.value, session.config_source, session.config_type) == ("50000", 8, 3)
    assert [(s.name, s.source) for s in session.synonyms] == [("consumer.session.timeout.ms", 8)]
    assert [(s.name, s.source) for s in interval.synonyms] == [
        ("group.consumer.heartbeat.interval.ms", 4)
    ]
    alter = iac.IncrementalAlterConfigsRequest(
        resources=[
            iac.AlterConfigsResource(
                resource_type=32,
                resource_name="g",
                configs=[
                    iac.AlterableConfig(
                        name="consumer.session.timeout.ms", config_operation=0, value="1"
                    )
                ],
            )
        ]
    )
    (altered,) = (await answer(admin(controller), alter, 1)).responses
    assert altered.error_code == INVALID_CONFIG
    assert "group.consumer.min.session.timeout.ms" in altered.error_message
    assert [(method, r.resources[0].resource_type) for method, r in controller.sent] == [
        ("DescribeConfigs", 32),
        ("IncrementalAlterConfigs", 32),
    ]


@pytest.mark.parametrize("version", [1, 4])
@pytest.mark.asyncio
async def test_a_request_of_unserved_resource_types_only_answers_each_with_its_error(
    version: int,
) -> None:
    """Nothing to forward: each resource gets INVALID_REQUEST naming its type, and the
    connection stays open (no controller answer is read when nothing was forwarded)."""
    controller = Controller()
    apis = admin(controller)
    described = await answer(
        apis,
        dcf.DescribeConfigsRequest(
            resources=[
                dcf.DescribeConfigsResource(resource_type=16, resource_name="m"),
                dcf.DescribeConfigsResource(resource_type=0, resource_name="x"),
            ]
        ),
        version,
    )
    assert [(r.resource_type, r.error_code) for r in described.results] == [
        (16, INVALID_REQUEST),
        (0, INVALID_REQUEST),
    ]
    assert "config resource type 16 is not supported" in described.results[0].error_message
    unserved = [ac.AlterConfigsResource(resource_type=16, resource_name="m")]
    legacy = await answer(apis, ac.AlterConfigsRequest(resources=unserved), min(version, 2))
    incremental_unserved = [iac.AlterConfigsResource(resource_type=16, resource_name="m")]
    incremental = await answer(
        apis, iac.IncrementalAlterConfigsRequest(resources=incremental_unserved), min(version, 1)
    )
    assert [r.error_code for r in (*legacy.responses, *incremental.responses)] == [
        INVALID_REQUEST,
        INVALID_REQUEST,
    ]
    assert controller.sent == []


def logger_tree() -> RuntimeLoggers:
    """Node 2's loggers in a hierarchy of their own: root at WARNING, `app.io` at DEBUG,
    `app.server.calls` inheriting (`app` and `app.server` are placeholders)."""
    manager = logging.Manager(logging.RootLogger(logging.WARNING))
    manager.getLogger("app.io").setLevel(logging.DEBUG)
    manager.getLogger("app.server.calls")
    return RuntimeLoggers(2, manager)


@pytest.mark.asyncio
async def test_broker_logger_describes_this_nodes_loggers_and_their_levels() -> None:
    controller = Controller()
    apis = admin(controller, loggers=logger_tree())
    body = dcf.DescribeConfigsRequest(
        resources=[
            dcf.DescribeConfigsResource(resource_type=8, resource_name="2"),
            dcf.DescribeConfigsResource(
                resource_type=8, resource_name="2", configuration_keys=["app.io", "nope"]
            ),
            dcf.DescribeConfigsResource(resource_type=8, resource_name="3"),
            dcf.DescribeConfigsResource(resource_type=8, resource_name=""),
        ],
        include_synonyms=True,
    )
    every, some, other, empty = (await answer(apis, body, 4)).results
    assert every.error_code == 0
    assert [(c.name, c.value) for c in every.configs] == [
        ("app", "WARN"),
        ("app.io", "DEBUG"),
        ("app.server", "WARN"),
        ("app.server.calls", "WARN"),
        ("root", "WARN"),
    ]
    assert {(c.config_source, c.read_only, c.is_sensitive) for c in every.configs} == {
        (6, False, False)  # DYNAMIC_BROKER_LOGGER_CONFIG
    }
    assert all(c.synonyms == [] for c in every.configs)
    assert [(c.name, c.value) for c in some.configs] == [("app.io", "DEBUG")]
    assert (other.error_code, other.error_message) == (
        INVALID_REQUEST,
        "Unexpected broker id, expected 2 but received 3",
    )
    assert (empty.error_code, empty.error_message) == (
        INVALID_REQUEST,
        "Broker id must not be empty",
    )
    assert controller.sent == []


def logger_ops(name: str, *ops: tuple[str, int, str | None]) -> iac.AlterConfigsResource:
    return iac.AlterConfigsResource(
        resource_type=8,
        resource_name=name,
        configs=[iac.AlterableConfig(name=k, config_operation=o, value=v) for k, o, v in ops],
    )


@pytest.mark.asyncio
async def test_broker_logger_levels_change_at_run_time_next_to_forwarded_resources() -> None:
    loggers = logger_tree()
    controller = Controller(
        IncrementalAlterConfigs=cpb.IncrementalAlterConfigsResponse(
            results=[cpb.AlterConfigsResult(resource_type=2, resource_name="orders")]
        )
    )
    apis = admin(controller, loggers=loggers)
    topic = iac.AlterConfigsResource(
        resource_type=2,
        resource_name="orders",
        configs=[iac.AlterableConfig(name="retention.ms", config_operation=0, value="5")],
    )
    body = iac.IncrementalAlterConfigsRequest(
        resources=[
            logger_ops("2", ("app.server.calls", 0, "DEBUG"), ("app", 0, "ERROR")),
            topic,
            logger_ops("2", ("app.io", 1, None)),
        ]
    )
    response = await answer(apis, body, 1)
    assert [(r.resource_type, r.resource_name, r.error_code) for r in response.responses] == [
        (8, "2", 0),
        (2, "orders", 0),
        (8, "2", 0),
    ]
    ((_, sent),) = controller.sent
    assert [r.resource_type for r in sent.resources] == [2]
    # DELETE unsets the level: app.io now inherits from app.
    levels = loggers.loggers()
    assert (levels["app.server.calls"], levels["app"], levels["app.io"]) == (
        "DEBUG",
        "ERROR",
        "ERROR",
    )


@pytest.mark.parametrize(
    ("ops", "code", "message"),
    [
        ([("nope", 0, "DEBUG")], INVALID_CONFIG, "Logger nope does not exist!"),
        (
            [("app.io", 0, "INFO"), ("app", 0, "debug")],
            INVALID_CONFIG,
            "Cannot set the log level of app to debug as it is not a supported log level. "
            "Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN",
        ),
        ([("app", 0, "OFF")], INVALID_CONFIG, "Valid log levels are"),
        ([("root", 1, None)], INVALID_REQUEST, "Removing the log level of the root logger"),
        ([("app", 2, "INFO")], INVALID_REQUEST, "APPEND operation is not allowed"),
        ([("app", 3, "INFO")], INVALID_REQUEST, "SUBTRACT operation is not allowed"),
        ([("app", 0, None)], INVALID_REQUEST, "Null value not supported for : app"),
        ([("app", 0, "INFO"), ("app", 1, None)], INVALID_REQUEST, "duplicate config keys"),
    ],
)
@pytest.mark.asyncio
async def test_a_refused_broker_logger_change_changes_nothing(
    ops: list[tuple[str, int, str | None]], code: int, message: str
) -> None:
    loggers = logger_tree()
    before = loggers.loggers()
    response = await answer(
        admin(loggers=loggers),
        iac.IncrementalAlterConfigsRequest(resources=[logger_ops("2", *ops)]),
        1,
    )
    ((error_code, error_message),) = [(r.error_code, r.error_message) for r in response.responses]
    assert error_code == code and message in error_message
    assert loggers.loggers() == before


@pytest.mark.asyncio
async def test_broker_logger_is_refused_by_legacy_alter_configs_and_kept_by_validate_only() -> None:
    loggers = logger_tree()
    before = loggers.loggers()
    apis = admin(loggers=loggers)
    legacy = ac.AlterConfigsRequest(
        resources=[
            ac.AlterConfigsResource(
                resource_type=8,
                resource_name="2",
                configs=[ac.AlterableConfig(name="app", value="DEBUG")],
            )
        ]
    )
    (refused,) = (await answer(apis, legacy, 2)).responses
    assert refused.error_code == INVALID_REQUEST
    assert "IncrementalAlterConfigs only" in refused.error_message
    checked = iac.IncrementalAlterConfigsRequest(
        resources=[logger_ops("2", ("app", 0, "DEBUG"))], validate_only=True
    )
    assert [r.error_code for r in (await answer(apis, checked, 1)).responses] == [0]
    wrong_node = iac.IncrementalAlterConfigsRequest(
        resources=[logger_ops("1", ("app", 0, "DEBUG"))]
    )
    (other,) = (await answer(apis, wrong_node, 1)).responses
    assert (other.error_code, other.error_message) == (
        INVALID_REQUEST,
        "Unexpected node id. Expected 2, but received 1",
    )
    assert loggers.loggers() == before


# --- cluster ----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_describe_cluster_lists_brokers_at_the_clients_listener() -> None:
    apis = admin()
    response = await answer(apis, dc.DescribeClusterRequest(), 2)
    # The answering broker, not the Raft leader, which may be dead: Kafka's rule (KIP-590).
    assert (response.cluster_id, response.controller_id) == ("c1", 2)
    assert [(b.broker_id, b.host, b.port) for b in response.brokers] == [
        (1, "b1", 9091),
        (2, "b2", 9092),
    ]
    with_fenced = await answer(apis, dc.DescribeClusterRequest(include_fenced_brokers=True), 2)
    assert [(b.broker_id, b.is_fenced) for b in with_fenced.brokers] == [
        (1, False),
        (2, False),
        (4, True),
    ]
    assert len((await answer(apis, dc.DescribeClusterRequest(), 0)).brokers) == 2
    controllers = await answer(apis, dc.DescribeClusterRequest(endpoint_type=2), 1)
    assert controllers.error_code == 115 and controllers.brokers == []


@pytest.mark.asyncio
async def test_a_fenced_broker_names_a_live_one_as_controller() -> None:
    current = image()
    fenced = KafkaAdminApis(4, cluster_id="c1", image=lambda: current)
    for _ in range(20):
        response = await answer(fenced, dc.DescribeClusterRequest(include_fenced_brokers=True), 2)
        assert response.controller_id in (1, 2)


@pytest.mark.asyncio
async def test_unregister_broker_is_forwarded_and_answers_the_controllers_error() -> None:
    controller = Controller(UnregisterBroker=cpb.UnregisterBrokerResponse(controller_id=1))
    done = await answer(admin(controller), UnregisterBrokerRequest(broker_id=3), 0)
    assert (done.error_code, done.error_message) == (0, None)
    assert controller.sent == [("UnregisterBroker", cpb.UnregisterBrokerRequest(broker_id=3))]
    unknown = Controller(
        UnregisterBroker=cpb.UnregisterBrokerResponse(
            error=failed(BrokerIdNotRegisteredError("broker 9 is not registered"))
        )
    )
    refused = await answer(admin(unknown), UnregisterBrokerRequest(broker_id=9), 0)
    assert refused.error_code == BrokerIdNotRegisteredError.code == 102
    assert "broker 9" in refused.error_message
    gone = Controller(UnregisterBroker=RequestTimedOutError("no controller within 5 s"))
    late = await answer(admin(gone), UnregisterBrokerRequest(broker_id=3), 0)
    assert late.error_code == RequestTimedOutError.code


@pytest.mark.asyncio
async def test_elect_leaders_and_reassignments_go_to_the_controller() -> None:
    controller = Controller(
        ElectLeaders=cpb.ElectLeadersResponse(
            results=[
                cpb.PartitionElectionResult(topic="orders", partition_index=0),
                cpb.PartitionElectionResult(
                    topic="orders", partition_index=1, error=failed(PolicyViolationError("x"))
                ),
            ]
        ),
        AlterPartitionReassignments=cpb.AlterPartitionReassignmentsResponse(
            results=[
                cpb.ReassignablePartitionResult(topic="orders", partition_index=0),
                cpb.ReassignablePartitionResult(topic="orders", partition_index=1),
            ]
        ),
        ListPartitionReassignments=cpb.ListPartitionReassignmentsResponse(
            reassignments=[
                cpb.OngoingReassignment(
                    topic="orders", partition_index=0, replicas=[1, 2], adding_replicas=[2]
                )
            ]
        ),
    )
    apis = admin(controller)
    elected = await answer(apis, el.ElectLeadersRequest(topic_partitions=None), 2)
    ((_, sent),) = controller.sent
    assert list(sent.partitions) == [] and sent.election_type == 0
    ((topic, partitions),) = [
        (r.topic, [(p.partition_id, p.error_code) for p in r.partition_result])
        for r in elected.replica_election_results
    ]
    assert (topic, partitions) == ("orders", [(0, 0), (1, PolicyViolationError.code)])
    body = apr.AlterPartitionReassignmentsRequest(
        topics=[
            apr.ReassignableTopic(
                name="orders",
                partitions=[
                    apr.ReassignablePartition(partition_index=0, replicas=[2, 1]),
                    apr.ReassignablePartition(partition_index=1, replicas=None),
                ],
            )
        ]
    )
    altered = await answer(apis, body, 0)
    sent_partitions = controller.sent[-1][1].topics[0].partitions
    assert [(p.partition_index, p.HasField("replicas")) for p in sent_partitions] == [
        (0, True),
        (1, False),  # null replicas: cancel
    ]
    assert list(sent_partitions[0].replicas.broker_ids) == [2, 1]
    assert [p.error_code for p in altered.responses[0].partitions] == [0, 0]
    listed = await answer(apis, lpr.ListPartitionReassignmentsRequest(topics=None), 0)
    ((ongoing,),) = [t.partitions for t in listed.topics]
    assert (ongoing.replicas, ongoing.adding_replicas) == ([1, 2], [2])


# --- this broker's data -----------------------------------------------------------------------


class Service:
    """The Broker service's DeleteRecords and DescribeLogDirs cores, recorded."""

    def __init__(self) -> None:
        self.sent: list[Any] = []

    async def delete_records(self, request: m.DeleteRecordsRequest) -> m.DeleteRecordsResponse:
        self.sent.append(request)
        return m.DeleteRecordsResponse(
            (
                m.DeleteRecordsPartitionResult("orders", 0, low_watermark=5),
                m.DeleteRecordsPartitionResult("orders", 1, NotLeaderOrFollowerError("b1 leads")),
            )
        )

    def describe_log_dirs(self, request: m.DescribeLogDirsRequest) -> m.DescribeLogDirsResponse:
        self.sent.append(request)
        return m.DescribeLogDirsResponse(
            (
                m.LogDirDescription(
                    "/",
                    None,
                    (
                        m.ReplicaLogInfo("orders", 0, 10, 0, False, 2, 9, 8, dirty_ratio=0.25),
                        m.ReplicaLogInfo("orders", 1, 20, 0, False, 0, 0, 0),
                    ),
                ),
            )
        )


@pytest.mark.asyncio
async def test_delete_records_and_describe_log_dirs_go_through_the_broker_cores() -> None:
    service = Service()
    apis = admin(broker_service=cast(BrokerCores, service))
    body = dr.DeleteRecordsRequest(
        topics=[
            dr.DeleteRecordsTopic(
                name="orders",
                partitions=[
                    dr.DeleteRecordsPartition(partition_index=0, offset=5),
                    dr.DeleteRecordsPartition(partition_index=1, offset=-1),
                ],
            )
        ],
        timeout_ms=100,
    )
    deleted = await answer(apis, body, 2)
    (sent,) = service.sent
    assert sent == m.DeleteRecordsRequest(
        (m.DeleteRecordsPartition("orders", 0, 5), m.DeleteRecordsPartition("orders", 1, -1)), 100
    )
    assert [(p.low_watermark, p.error_code) for p in deleted.topics[0].partitions] == [
        (5, 0),
        (-1, NotLeaderOrFollowerError.code),
    ]
    only_zero = dld.DescribeLogDirsRequest(
        topics=[dld.DescribableLogDirTopic(topic="orders", partitions=[0])]
    )
    described = await answer(apis, only_zero, 4)
    assert list(service.sent[-1].topics) == ["orders"]
    (log_dir,) = described.results
    assert [(p.partition_index, p.partition_size) for p in log_dir.topics[0].partitions] == [
        (0, 10)
    ]
    assert log_dir.total_bytes > 0 and log_dir.usable_bytes >= 0
    # replog's offsets, in a tagged field that Kafka's clients skip (it encodes at v2+).
    (zero,) = log_dir.topics[0].partitions
    assert replica_offsets_tag.decode(zero.unknown_tagged_fields) == (2, 9, 8)
    # A compacted log's dirty ratio, in a tag of its own (none for a log without one).
    assert replica_offsets_tag.decode_dirty_ratio(zero.unknown_tagged_fields) == 0.25
    everything = await answer(apis, dld.DescribeLogDirsRequest(topics=None), 4)
    one = everything.results[0].topics[0].partitions[1]
    assert replica_offsets_tag.decode_dirty_ratio(one.unknown_tagged_fields) is None


@pytest.mark.asyncio
async def test_describe_producers_answers_the_replica_managers_producers() -> None:
    def producers(topic: str, partition: int) -> tuple[ProducerEntry, ...]:
        if partition == 1:
            raise NotLeaderOrFollowerError(f"{topic}-1: broker 1 leads it")
        return (
            ProducerEntry(7, 2, (BatchMetadata(0, 4, 10, 14, 99),), 99),
            # A transaction open since offset 15, its last marker from coordinator epoch 3.
            ProducerEntry(8, 0, (BatchMetadata(0, 0, 15, 15, 99),), 99, 15, 3),
        )

    body = dp.DescribeProducersRequest(
        topics=[dp.TopicRequest(name="orders", partition_indexes=[0, 1])]
    )
    response = await answer(admin(describe_producers=producers), body, 0)
    zero, one = response.topics[0].partitions
    ((producer_id, epoch, sequence, timestamp), _) = [
        (p.producer_id, p.producer_epoch, p.last_sequence, p.last_timestamp)
        for p in zero.active_producers
    ]
    assert (producer_id, epoch, sequence, timestamp) == (7, 2, 4, 99)
    assert [(p.current_txn_start_offset, p.coordinator_epoch) for p in zero.active_producers] == [
        (-1, -1),
        (15, 3),
    ]
    assert one.error_code == NotLeaderOrFollowerError.code and "broker 1" in one.error_message


# --- ApiVersions -----------------------------------------------------------------------------


def test_api_versions_advertises_the_core_and_admin_tables_once_each() -> None:
    current = image()
    apis = KafkaApis(2, cluster_id="c1", image=lambda: current, extensions=[admin()])
    advertised = {
        k.api_key: (k.min_version, k.max_version)
        for k in apis.api_versions(ApiVersionsRequest(), 2).api_keys
    }
    assert advertised == {**SERVED, **ADMIN_SERVED}
    assert advertised[19] == (2, 7) and advertised[44] == (0, 1) and advertised[60] == (0, 2)
    with pytest.raises(ValueError, match="two handlers of Kafka API key 19"):
        KafkaApis(2, cluster_id="c1", image=lambda: current, extensions=[admin(), admin()])


@pytest.mark.asyncio
async def test_the_core_hands_an_admin_request_to_its_handlers() -> None:
    current = image()
    apis = KafkaApis(2, cluster_id="c1", image=lambda: current, extensions=[admin()])
    response = await apis.handle(request(dc.DescribeClusterRequest(), 0), "PLAINTEXT")
    assert response is not None and getattr(response, "cluster_id", None) == "c1"


def test_no_admin_api_is_advertised_beyond_what_its_codec_reads() -> None:
    from replog.kafka.messages import REQUESTS

    for key, (low, high) in ADMIN_SERVED.items():
        codec = REQUESTS[key]
        assert codec.MIN_VERSION <= low <= high <= codec.MAX_VERSION, codec.NAME
