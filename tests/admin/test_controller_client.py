"""`ControllerClient` against scripted in-process fake controllers (no real cluster).

What it must do: find the active controller (follow NOT_CONTROLLER to the named node, by the
addresses it was given, `id@` bootstrap entries, or by trying each bootstrap address), retry
unreachable nodes and NOT_CONTROLLER until the deadline, give up with a typed error naming
every address, raise each Kafka error code as its `replog.errors` class with the server's
message, translate every RPC's request and answer, and stop at once on Ctrl-C.
"""

from __future__ import annotations

import inspect
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from fake_controller import (
    HANG,
    Abort,
    FakeController,
    interrupt_main_when,
    not_controller,
    running,
    status,
)

from replog.admin import controller_client as controller_client_module
from replog.admin.bootstrap import Bootstrap, endpoint_addresses, parse_bootstrap
from replog.admin.controller_client import AsyncControllerClient, ControllerClient
from replog.admin.controller_errors import raise_first_error
from replog.admin.controller_results import (
    AlterConfigOp,
    AlterConfigOpType,
    ConfigResource,
    ConfigResourceType,
    ElectionType,
    NewPartitions,
    NewTopic,
)
from replog.common import TopicPartition
from replog.common.ids import topic_id_text
from replog.errors import (
    ConfigError,
    ElectionNotNeededError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    KafkaError,
    KafkaTimeoutError,
    LeaderNotAvailableError,
    NotControllerError,
    ReplogError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
    wire_error_classes,
)
from replog.pb import common_pb2
from replog.pb import controller_pb2 as pb
from tests.eventually import wait_until
from tests.local_ports import free_port

TOPIC_ID = uuid.UUID("5d2a6f1e-8c3b-4a7d-9e0f-112233445566")
# Every wire error but NOT_CONTROLLER, which the client retries instead of raising.
RAISED_CODES = sorted(c for c in wire_error_classes() if c != NotControllerError.code)


@pytest.fixture
def make_client() -> Iterator[Callable[..., ControllerClient]]:
    """Clients with short timeouts and backoff (tests wait for nothing), closed at the end."""
    clients: list[ControllerClient] = []

    def make(bootstrap: str, **options: Any) -> ControllerClient:
        options.setdefault("default_timeout_s", 5.0)
        options.setdefault("request_timeout_s", 2.0)
        options.setdefault("retry_backoff_s", 0.01)
        options.setdefault("max_retry_backoff_s", 0.05)
        client = ControllerClient(bootstrap, **options)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture(scope="module")
def shared_node() -> Iterator[FakeController]:
    """One fake for the many error-code cases (one server, not one per case)."""
    with running(1) as (node,):
        yield node


@pytest.fixture
def node(shared_node: FakeController) -> FakeController:
    shared_node.reset()
    return shared_node


def created(name: str, code: int = 0, message: str = "") -> pb.CreatableTopicResult:
    return pb.CreatableTopicResult(
        name=name,
        topic_id=TOPIC_ID.bytes if code == 0 else b"",
        error=status(code, message) if code else None,
        num_partitions=3 if code == 0 else -1,
        replication_factor=2 if code == 0 else -1,
    )


def create_ok(controller_id: int, name: str = "orders") -> pb.CreateTopicsResponse:
    return pb.CreateTopicsResponse(controller_id=controller_id, topics=[created(name)])


# --- bootstrap ----------------------------------------------------------------------------------


def test_node_endpoints_read_as_addresses_with_ipv6_in_brackets() -> None:
    endpoints = [
        common_pb2.NodeEndpoint(node_id=1, host="10.0.0.1", port=9093),
        common_pb2.NodeEndpoint(node_id=2, host="::1", port=9093),
        common_pb2.NodeEndpoint(node_id=3, host="", port=9093),  # unknown: left out
        common_pb2.NodeEndpoint(node_id=4, host="h", port=0),
    ]
    assert endpoint_addresses(endpoints) == {1: "10.0.0.1:9093", 2: "[::1]:9093"}


def test_bootstrap_lists_parse_like_kafka_and_controller_quorum_voters() -> None:
    assert parse_bootstrap(" a:1, 2@b:2,[::1]:3,a:1") == Bootstrap(
        ("a:1", "b:2", "[::1]:3"), {2: "b:2"}
    )
    assert parse_bootstrap(["1@a:1", "b:2"]) == Bootstrap(("a:1", "b:2"), {1: "a:1"})
    for bad in ("", "a", "a:", ":1", "x@a:1", "a:1,", "a:port"):
        with pytest.raises(ConfigError, match="expected host:port"):
            parse_bootstrap(bad)
    with pytest.raises(ConfigError, match="--bootstrap-server: 'a'"):
        parse_bootstrap("a", what="--bootstrap-server")


# --- translating requests and answers -----------------------------------------------------------


def test_create_topics_sends_the_topics_and_returns_typed_results(
    node: FakeController, make_client: Callable[..., ControllerClient]
) -> None:
    node.script(
        "CreateTopics",
        pb.CreateTopicsResponse(
            controller_id=1,
            topics=[
                created("orders"),
                created("bad", InvalidReplicationFactorError.code, "replication factor 5 > 3"),
            ],
        ),
    )
    client = make_client(node.address, request_timeout_s=1.5)
    results = client.create_topics(
        [
            NewTopic("orders", 3, 2, configs={"retention.ms": "1000"}),
            NewTopic("bad", replication_factor=5),
            NewTopic("placed", assignments={1: [2, 3], 0: [1, 2]}),
        ],
        validate_only=True,
    )
    (request,) = node.asked("CreateTopics")
    assert request.validate_only
    assert 1000 < request.timeout_ms < 1500  # the server gives up first, and says so
    first, second, third = request.topics
    assert (first.name, first.num_partitions, first.replication_factor) == ("orders", 3, 2)
    assert dict(first.configs) == {"retention.ms": "1000"}
    assert (second.num_partitions, second.replication_factor) == (-1, 5)
    assert [(a.partition_index, list(a.broker_ids)) for a in third.assignments] == [
        (0, [1, 2]),
        (1, [2, 3]),
    ]
    ok, bad = results
    assert (ok.name, ok.topic_id, ok.num_partitions, ok.replication_factor, ok.error) == (
        "orders",
        TOPIC_ID,
        3,
        2,
        None,
    )
    assert isinstance(bad.error, InvalidReplicationFactorError)
    assert str(bad.error) == "replication factor 5 > 3"
    assert (bad.topic_id, bad.num_partitions) == (None, None)
    with pytest.raises(InvalidReplicationFactorError, match="replication factor 5 > 3"):
        raise_first_error(results)


def test_delete_topics_and_create_partitions(
    node: FakeController, make_client: Callable[..., ControllerClient]
) -> None:
    node.script(
        "DeleteTopics",
        pb.DeleteTopicsResponse(
            controller_id=1,
            topics=[
                pb.DeletableTopicResult(name="orders", topic_id=TOPIC_ID.bytes),
                pb.DeletableTopicResult(
                    name="gone", error=status(UnknownTopicOrPartitionError.code, "no topic gone")
                ),
            ],
        ),
    )
    node.script(
        "CreatePartitions",
        pb.CreatePartitionsResponse(
            controller_id=1, results=[pb.CreatePartitionsTopicResult(name="orders")]
        ),
    )
    client = make_client(node.address)
    deleted = client.delete_topics(["orders", "gone"], topic_ids=[TOPIC_ID])
    (request,) = node.asked("DeleteTopics")
    assert list(request.topic_names) == ["orders", "gone"]
    assert list(request.topic_ids) == [TOPIC_ID.bytes]
    assert (deleted[0].name, deleted[0].topic_id, deleted[0].error) == ("orders", TOPIC_ID, None)
    assert isinstance(deleted[1].error, UnknownTopicOrPartitionError)

    grown = client.create_partitions([NewPartitions("orders", 5, [[1, 2], [2, 3]])])
    (request,) = node.asked("CreatePartitions")
    (topic,) = request.topics
    assert (topic.name, topic.count) == ("orders", 5)
    assert [(a.partition_index, list(a.broker_ids)) for a in topic.assignments] == [
        (3, [1, 2]),
        (4, [2, 3]),
    ]
    assert grown[0].topic == "orders" and grown[0].error is None


def test_describe_cluster_and_metadata(
    node: FakeController, make_client: Callable[..., ControllerClient]
) -> None:
    brokers = [
        pb.BrokerEndpoint(broker_id=1, host="h1", port=9092, rack="r1", broker_epoch=7),
        pb.BrokerEndpoint(broker_id=2, host="h2", port=9093, fenced=True, broker_epoch=9),
    ]
    node.script(
        "DescribeCluster",
        pb.DescribeClusterResponse(
            controller_id=1, cluster_id="c-1", brokers=brokers, metadata_offset=42
        ),
    )
    node.script(
        "Metadata",
        pb.MetadataResponse(
            controller_id=1,
            cluster_id="c-1",
            brokers=brokers[:1],
            metadata_offset=43,
            topics=[
                pb.TopicMetadata(
                    name="orders",
                    topic_id=TOPIC_ID.bytes,
                    partitions=[
                        pb.PartitionMetadata(
                            partition_index=1,
                            leader_id=-1,
                            error=status(LeaderNotAvailableError.code, "orders-1: no leader"),
                            replicas=[2, 1],
                            offline_replicas=[2, 1],
                        ),
                        pb.PartitionMetadata(
                            partition_index=0,
                            leader_id=1,
                            leader_epoch=3,
                            partition_epoch=5,
                            replicas=[1, 2, 3],
                            isr=[1, 2],
                            adding_replicas=[3],
                        ),
                    ],
                ),
                pb.TopicMetadata(
                    name="nope", error=status(UnknownTopicOrPartitionError.code, "no topic nope")
                ),
            ],
        ),
    )
    client = make_client(node.address)
    cluster = client.describe_cluster()
    assert (cluster.cluster_id, cluster.controller_id, cluster.metadata_offset) == ("c-1", 1, 42)
    assert [
        (b.broker_id, b.host, b.port, b.rack, b.fenced, b.broker_epoch) for b in cluster.brokers
    ] == [
        (1, "h1", 9092, "r1", False, 7),
        (2, "h2", 9093, None, True, 9),
    ]

    metadata = client.metadata(["orders", "nope"])
    (request,) = node.asked("Metadata")
    assert list(request.topics) == ["orders", "nope"]
    orders, nope = metadata.topics
    assert (orders.name, orders.topic_id, orders.error) == ("orders", TOPIC_ID, None)
    p0, p1 = orders.partitions  # sorted by partition index
    assert (p0.partition, p0.leader, p0.leader_epoch, p0.partition_epoch) == (0, 1, 3, 5)
    assert (p0.replicas, p0.isr, p0.adding_replicas, p0.replication_factor) == (
        (1, 2, 3),
        (1, 2),
        (3,),
        2,
    )
    assert (p1.leader, p1.offline_replicas) == (None, (2, 1))
    assert isinstance(p1.error, LeaderNotAvailableError)
    assert isinstance(nope.error, UnknownTopicOrPartitionError) and nope.topic_id is None
    assert [b.broker_id for b in metadata.brokers] == [1]
    assert client.metadata().topics  # no names: every topic
    assert list(node.asked("Metadata")[-1].topics) == []


def test_configs(node: FakeController, make_client: Callable[..., ControllerClient]) -> None:
    node.script(
        "DescribeConfigs",
        pb.DescribeConfigsResponse(
            controller_id=1,
            results=[
                pb.DescribeConfigsResult(
                    resource_type=2,
                    resource_name="orders",
                    configs=[
                        pb.ConfigEntry(name="retention.ms", value="1000", source="TOPIC_CONFIG"),
                        pb.ConfigEntry(
                            name="segment.bytes",
                            value="1073741824",
                            is_default=True,
                            source="DEFAULT_CONFIG",
                        ),
                        pb.ConfigEntry(name="secret", is_sensitive=True, source="TOPIC_CONFIG"),
                    ],
                )
            ],
        ),
    )
    node.script(
        "IncrementalAlterConfigs",
        pb.IncrementalAlterConfigsResponse(
            controller_id=1,
            results=[
                pb.AlterConfigsResult(resource_type=2, resource_name="orders"),
                pb.AlterConfigsResult(
                    resource_type=4, resource_name="", error=status(40, "unknown config 'x'")
                ),
            ],
        ),
    )
    client = make_client(node.address)
    (described,) = client.describe_configs([ConfigResource.topic("orders")], keys=["retention.ms"])
    (request,) = node.asked("DescribeConfigs")
    (resource,) = request.resources
    assert (resource.resource_type, resource.resource_name) == (2, "orders")
    assert list(resource.configuration_keys) == ["retention.ms"]
    assert described.resource == ConfigResource(ConfigResourceType.TOPIC, "orders")
    assert described.overrides() == {"retention.ms": "1000", "secret": None}
    assert described.entries[1].is_default and described.entries[1].source == "DEFAULT_CONFIG"

    altered = client.incremental_alter_configs(
        {
            ConfigResource.topic("orders"): [
                AlterConfigOp("retention.ms", AlterConfigOpType.SET, "5"),
                AlterConfigOp("cleanup.policy", AlterConfigOpType.DELETE),
            ],
            ConfigResource.broker(): [AlterConfigOp("x", AlterConfigOpType.APPEND, "y")],
        },
        validate_only=True,
    )
    (request,) = node.asked("IncrementalAlterConfigs")
    assert request.validate_only
    topic, broker = request.resources
    assert [(c.name, c.operation, c.HasField("value")) for c in topic.configs] == [
        ("retention.ms", 0, True),
        ("cleanup.policy", 1, False),
    ]
    assert (broker.resource_type, broker.resource_name, broker.configs[0].operation) == (4, "", 2)
    assert altered[0].error is None
    assert altered[1].resource == ConfigResource.broker()
    assert str(altered[1].error) == "unknown config 'x'"


def test_elections_and_reassignments(
    node: FakeController, make_client: Callable[..., ControllerClient]
) -> None:
    node.script(
        "ElectLeaders",
        pb.ElectLeadersResponse(
            controller_id=1,
            results=[
                pb.PartitionElectionResult(topic="orders", partition_index=0),
                pb.PartitionElectionResult(
                    topic="orders",
                    partition_index=1,
                    error=status(ElectionNotNeededError.code, "orders-1: leader is preferred"),
                ),
            ],
        ),
    )
    node.script(
        "ListPartitionReassignments",
        pb.ListPartitionReassignmentsResponse(
            controller_id=1,
            reassignments=[
                pb.OngoingReassignment(
                    topic="orders",
                    partition_index=0,
                    replicas=[1, 2, 3],
                    adding_replicas=[3],
                    removing_replicas=[1],
                )
            ],
        ),
    )
    node.script(
        "AlterPartitionReassignments",
        pb.AlterPartitionReassignmentsResponse(
            controller_id=1,
            results=[
                pb.ReassignablePartitionResult(topic="orders", partition_index=0),
                pb.ReassignablePartitionResult(topic="orders", partition_index=1),
            ],
        ),
    )
    client = make_client(node.address)
    results = client.elect_leaders(ElectionType.UNCLEAN, [TopicPartition("orders", 0)])
    (request,) = node.asked("ElectLeaders")
    assert request.election_type == 1
    assert [(p.topic, p.partition) for p in request.partitions] == [("orders", 0)]
    assert results[0].topic_partition == ("orders", 0) and results[0].error is None
    assert isinstance(results[1].error, ElectionNotNeededError)
    client.elect_leaders(ElectionType.PREFERRED)
    assert list(node.asked("ElectLeaders")[-1].partitions) == []

    (ongoing,) = client.list_partition_reassignments([TopicPartition("orders", 0)])
    assert ongoing.topic_partition == TopicPartition("orders", 0)
    assert (ongoing.replicas, ongoing.adding_replicas, ongoing.removing_replicas) == (
        (1, 2, 3),
        (3,),
        (1,),
    )
    altered = client.alter_partition_reassignments(
        {TopicPartition("orders", 0): [2, 3], TopicPartition("orders", 1): None}
    )
    (request,) = node.asked("AlterPartitionReassignments")
    (topic,) = request.topics
    assert topic.name == "orders"
    assert topic.partitions[0].HasField("replicas")
    assert list(topic.partitions[0].replicas.broker_ids) == [2, 3]
    assert not topic.partitions[1].HasField("replicas")  # absent: cancel
    assert [r.error for r in altered] == [None, None]


def test_topic_ids_print_as_kafka_prints_them() -> None:
    assert topic_id_text(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert topic_id_text(None) == "AAAAAAAAAAAAAAAAAAAAAA"  # Kafka's ZERO_UUID
    text = topic_id_text(TOPIC_ID)
    assert len(text) == 22 and "=" not in text and "+" not in text and "/" not in text


# --- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize("code", RAISED_CODES)
def test_a_request_error_raises_its_class_with_the_servers_message(
    code: int, node: FakeController, make_client: Callable[..., ControllerClient]
) -> None:
    cls = wire_error_classes()[code]
    message = f"the cause of {cls.error_name}, named by the server"
    node.script(
        "CreateTopics", pb.CreateTopicsResponse(controller_id=1, error=status(code, message))
    )
    with pytest.raises(KafkaError) as raised:
        make_client(node.address).create_topics([NewTopic("orders")])
    assert type(raised.value) is cls
    assert str(raised.value) == message
    assert len(node.asked()) == 1  # not retried


@pytest.mark.parametrize("code", RAISED_CODES)
def test_an_item_error_is_returned_as_its_class_with_the_servers_message(
    code: int, node: FakeController, make_client: Callable[..., ControllerClient]
) -> None:
    cls = wire_error_classes()[code]
    message = f"orders: {cls.error_name}"
    node.script(
        "CreateTopics",
        pb.CreateTopicsResponse(controller_id=1, topics=[created("orders", code, message)]),
    )
    (result,) = make_client(node.address).create_topics([NewTopic("orders")])
    assert type(result.error) is cls
    assert str(result.error) == message


def test_an_error_code_the_client_does_not_know_keeps_its_name(
    node: FakeController, make_client: Callable[..., ControllerClient]
) -> None:
    error = common_pb2.ErrorStatus(code=9999, error_name="SOMETHING_NEW", message="it broke")
    node.script("Metadata", pb.MetadataResponse(controller_id=1, error=error))
    with pytest.raises(UnknownServerError, match=r"^SOMETHING_NEW: it broke$"):
        make_client(node.address).metadata()


def test_grpc_failures_become_typed_errors(
    node: FakeController, make_client: Callable[..., ControllerClient]
) -> None:
    node.script("Metadata", Abort(grpc.StatusCode.INTERNAL, "Exception calling application"))
    with pytest.raises(UnknownServerError, match="Metadata failed: INTERNAL: Exception") as raised:
        make_client(node.address).metadata()
    assert not isinstance(raised.value, grpc.RpcError)
    node.script("Metadata", Abort(grpc.StatusCode.INVALID_ARGUMENT, "cannot parse"))
    with pytest.raises(InvalidRequestError, match="Metadata: cannot parse"):
        make_client(node.address).metadata()


def test_a_node_without_the_controller_service_is_skipped(
    make_client: Callable[..., ControllerClient],
) -> None:
    with running(1, 2) as (old, new):
        old.script("Metadata", Abort(grpc.StatusCode.UNIMPLEMENTED, "Method not found!"))
        assert make_client(f"{old.address},{new.address}").metadata().topics == ()
        assert len(new.asked("Metadata")) == 1
        started = time.monotonic()
        with pytest.raises(UnsupportedVersionError, match="no node serves the Controller"):
            make_client(old.address, default_timeout_s=30).metadata()
        assert time.monotonic() - started < 5  # not retried until the deadline


# --- finding the active controller --------------------------------------------------------------


def test_not_controller_is_followed_to_the_node_it_names(
    make_client: Callable[..., ControllerClient],
) -> None:
    with running(1, 2) as (standby, active):
        standby.script("CreateTopics", not_controller("CreateTopics", 2))
        active.script("CreateTopics", create_ok(2))
        client = make_client(standby.address, node_addresses={2: active.address})
        (result,) = client.create_topics([NewTopic("orders")])
        assert result.error is None
        assert len(standby.asked()) == 1 and len(active.asked()) == 1
        assert client.controller_address == active.address
        client.create_topics([NewTopic("more")])  # straight to the known controller
        assert len(standby.asked()) == 1 and len(active.asked()) == 2


def standby_naming_the_active_controller(standby: FakeController, active: FakeController) -> None:
    """Node 1 a standby answering CreateTopics with NOT_CONTROLLER naming node 2, whose address
    its DescribeCluster lists; node 2 the active controller creating the topic."""
    standby.script("CreateTopics", not_controller("CreateTopics", 2))
    standby.script(
        "DescribeCluster",
        pb.DescribeClusterResponse(
            controller_id=2,
            controllers=[
                common_pb2.NodeEndpoint(node_id=1, host="127.0.0.1", port=standby.port),
                common_pb2.NodeEndpoint(node_id=2, host="127.0.0.1", port=active.port),
            ],
        ),
    )
    active.script("CreateTopics", create_ok(2))


def test_with_one_bootstrap_address_the_standby_says_where_the_controller_is(
    make_client: Callable[..., ControllerClient],
) -> None:
    # kafka-topics.sh --bootstrap-server one-node: the standby's NOT_CONTROLLER names node 2,
    # and its DescribeCluster lists the quorum's controllers (controller.quorum.voters).
    with running(1, 2) as (standby, active):
        standby_naming_the_active_controller(standby, active)
        client = make_client(standby.address)
        (result,) = client.create_topics([NewTopic("orders")])
        assert result.error is None
        assert len(standby.asked("CreateTopics")) == 1 and len(active.asked()) == 1
        assert client.node_addresses == {1: standby.address, 2: active.address}
        assert client.controller_address == active.address


def test_addresses_the_caller_gave_win_over_the_ones_a_node_lists(
    make_client: Callable[..., ControllerClient],
) -> None:
    with running(1, 2) as (standby, active):
        standby.script("DeleteTopics", not_controller("DeleteTopics", 2))
        standby.script(
            "DescribeCluster",
            pb.DescribeClusterResponse(
                controllers=[common_pb2.NodeEndpoint(node_id=3, host="::1", port=9093)]
            ),
        )
        active.script("DeleteTopics", pb.DeleteTopicsResponse(controller_id=2))
        client = make_client(standby.address, node_addresses={2: active.address})
        client.delete_topics(["orders"])
        # Node 2's address was given: no DescribeCluster needed.
        assert standby.asked("DescribeCluster") == [] and len(active.asked()) == 1
        assert client.node_addresses == {2: active.address}


def test_id_entries_in_the_bootstrap_list_name_the_controller(
    make_client: Callable[..., ControllerClient],
) -> None:
    with running(1, 2, 3) as (first, active, third):
        first.script("DeleteTopics", not_controller("DeleteTopics", 2))
        active.script("DeleteTopics", pb.DeleteTopicsResponse(controller_id=2))
        client = make_client(f"1@{first.address},3@{third.address},2@{active.address}")
        client.delete_topics(["orders"])
        assert third.asked() == []  # went to node 2 directly, not to the next in the list
        assert len(active.asked()) == 1


def test_without_addresses_for_ids_each_bootstrap_address_is_tried(
    make_client: Callable[..., ControllerClient],
) -> None:
    with running(1, 2, 3) as nodes:
        for standby in nodes[:2]:
            standby.script("CreateTopics", not_controller("CreateTopics", 3))
        nodes[2].script("CreateTopics", create_ok(3))
        client = make_client(",".join(n.address for n in nodes))
        (result,) = client.create_topics([NewTopic("orders")])
        assert result.error is None
        assert [len(n.asked("CreateTopics")) for n in nodes] == [1, 1, 1]
        # Each standby was asked once where node 3 is; their (unscripted) answers list none.
        assert [len(n.asked("DescribeCluster")) for n in nodes] == [1, 1, 0]
        # The node that accepted the write is node 3: later redirects to 3 go there at once.
        assert client.node_addresses == {3: nodes[2].address}
        assert client.controller_address == nodes[2].address


def test_not_controller_on_every_item_is_a_redirect_too(
    make_client: Callable[..., ControllerClient],
) -> None:
    with running(1, 2) as (standby, active):
        standby.script(
            "CreateTopics",
            pb.CreateTopicsResponse(
                controller_id=2,
                topics=[created("a", NotControllerError.code), created("b", 41)],
            ),
        )
        active.script("CreateTopics", create_ok(2))
        client = make_client(f"{standby.address},2@{active.address}")
        assert client.create_topics([NewTopic("a"), NewTopic("b")])[0].error is None
        assert len(active.asked()) == 1


def test_during_an_election_the_client_retries_until_a_controller_is_known(
    node: FakeController, make_client: Callable[..., ControllerClient]
) -> None:
    node.script(
        "CreateTopics",
        not_controller("CreateTopics", -1),
        not_controller("CreateTopics", -1),
        create_ok(1),
    )
    (result,) = make_client(node.address).create_topics([NewTopic("orders")])
    assert result.error is None
    assert len(node.asked()) == 3


def test_not_controller_until_the_deadline_is_a_timeout_naming_what_each_node_said(
    make_client: Callable[..., ControllerClient],
) -> None:
    with running(1, 2) as (first, second):
        first.script("CreateTopics", not_controller("CreateTopics", 3))
        second.script("CreateTopics", not_controller("CreateTopics", -1))
        client = make_client(f"{first.address},{second.address}", default_timeout_s=0.3)
        with pytest.raises(KafkaTimeoutError) as raised:
            client.create_topics([NewTopic("orders")])
    text = str(raised.value)
    assert text.startswith("CreateTopics: no answer from the active controller within 0.3 s")
    assert f"{first.address}: not the controller (the controller is node 3, whose address" in text
    assert f"{second.address}: not the controller (no active controller known)" in text


def test_an_attempt_the_deadline_cuts_short_keeps_what_the_node_said_before(
    make_client: Callable[..., ControllerClient],
) -> None:
    # The second attempt at `first` hangs until the call's deadline: its "no answer within"
    # a sliver of the budget would hide the redirect the node gave on the first attempt.
    with running(1, 2) as (first, second):
        first.script("CreateTopics", not_controller("CreateTopics", -1), HANG)
        second.script("CreateTopics", not_controller("CreateTopics", -1))
        client = make_client(f"{first.address},{second.address}", default_timeout_s=0.5)
        with pytest.raises(KafkaTimeoutError) as raised:
            client.create_topics([NewTopic("orders")])
        assert len(first.asked("CreateTopics")) == 2
    text = str(raised.value)
    assert f"{first.address}: not the controller (no active controller known)" in text
    assert "no answer within" not in text.split("within 0.5 s", 1)[1]


def test_reads_served_by_a_standby_are_asked_of_the_active_controller_too(
    make_client: Callable[..., ControllerClient],
) -> None:
    with running(1, 2) as (standby, active):
        standby.script("Metadata", pb.MetadataResponse(controller_id=2, metadata_offset=10))
        active.script("Metadata", pb.MetadataResponse(controller_id=2, metadata_offset=11))
        client = make_client(f"{standby.address},2@{active.address}")
        assert client.metadata().metadata_offset == 11
        assert client.metadata().metadata_offset == 11
        assert len(standby.asked()) == 1  # the second read went to the active controller
        active.stop()
        # The active controller gone: the standby's answer is better than none.
        assert client.metadata().metadata_offset == 10


# --- unreachable nodes, timeouts, Ctrl-C --------------------------------------------------------


def test_an_unreachable_node_is_skipped(
    node: FakeController, make_client: Callable[..., ControllerClient]
) -> None:
    dead = f"127.0.0.1:{free_port()}"
    node.script("CreateTopics", create_ok(1))
    (result,) = make_client(f"{dead},{node.address}").create_topics([NewTopic("orders")])
    assert result.error is None


def test_unavailable_is_retried_until_the_node_is_back(
    make_client: Callable[..., ControllerClient],
) -> None:
    port = free_port()
    started: list[FakeController] = []

    def start_later() -> None:
        time.sleep(0.3)
        late = FakeController(1, port=port, controller_id=1)
        late.script("Metadata", pb.MetadataResponse(controller_id=1, cluster_id="late"))
        started.append(late)

    starter = threading.Thread(target=start_later)
    starter.start()
    try:
        client = make_client(f"127.0.0.1:{port}", default_timeout_s=10)
        assert client.metadata().cluster_id == "late"
    finally:
        starter.join()
        for late in started:
            late.stop()


def test_unavailable_status_from_a_live_node_is_retried(
    node: FakeController, make_client: Callable[..., ControllerClient]
) -> None:
    node.script(
        "CreateTopics",
        Abort(grpc.StatusCode.UNAVAILABLE, "shutting down"),
        create_ok(1),
    )
    assert make_client(node.address).create_topics([NewTopic("orders")])[0].error is None
    assert len(node.asked()) == 2


def test_unavailable_drops_the_channel_and_its_other_calls_finish_before_it_closes(
    node: FakeController, make_client: Callable[..., ControllerClient]
) -> None:
    # One thread's call waits at the node while another's fails UNAVAILABLE: that one is
    # retried on a fresh channel, and the first is answered on the dropped one, which closes
    # once it is.
    release = threading.Event()

    def slow(request: pb.MetadataRequest) -> pb.MetadataResponse:
        release.wait(10)
        return pb.MetadataResponse(cluster_id="slow")

    node.script("Metadata", slow)
    node.script("CreateTopics", Abort(grpc.StatusCode.UNAVAILABLE, "shutting down"), create_ok(1))
    client = make_client(node.address, default_timeout_s=20, request_timeout_s=15)
    answers: list[str] = []
    reader = threading.Thread(target=lambda: answers.append(client.metadata().cluster_id))
    reader.start()
    try:
        wait_until(lambda: node.asked("Metadata"), "the slow call at the node")
        first = client._channels[node.address]
        assert client.create_topics([NewTopic("orders")])[0].error is None
        assert len(node.asked("CreateTopics")) == 2
        assert client._channels[node.address] is not first and first.dropped
    finally:
        release.set()
        reader.join(20)
    assert answers == ["slow"] and node.cancelled == [] and len(node.asked("Metadata")) == 1
    with pytest.raises(ValueError, match="closed channel"):
        first.channel.unary_unary("/any/Method")(b"")


def test_nobody_reachable_is_a_timeout_naming_each_address(
    make_client: Callable[..., ControllerClient],
) -> None:
    dead = [f"127.0.0.1:{free_port()}" for _ in range(2)]
    started = time.monotonic()
    with pytest.raises(KafkaTimeoutError) as raised:
        make_client(",".join(dead), default_timeout_s=0.4).describe_cluster()
    assert 0.35 < time.monotonic() - started < 3
    for address in dead:
        assert f"{address}: connection refused" in str(raised.value)


def test_a_refusal_is_not_hidden_by_the_vaguer_failures_to_connect_that_follow(
    make_client: Callable[..., ControllerClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    # gRPC's polling engine words a refused reconnection as a failure to connect; from about
    # 0.3 s of retries on, so a 0.4 s call's last attempts at a dead port said just that.
    refused_once: set[str] = set()
    classify = controller_client_module._classify

    def as_grpc_words_it(address: str, *args: Any) -> Exception:
        said = classify(address, *args)
        if address in refused_once:
            return controller_client_module._Unreachable(
                "cannot connect (nothing answers at this address)"
            )
        refused_once.add(address)
        return said

    monkeypatch.setattr(controller_client_module, "_classify", as_grpc_words_it)
    dead = f"127.0.0.1:{free_port()}"
    with pytest.raises(KafkaTimeoutError, match=f"{dead} within 0.5 s: connection refused$"):
        make_client(dead, default_timeout_s=0.5).describe_cluster()


def test_a_node_without_the_controller_service_is_not_said_to_give_no_answer(
    make_client: Callable[..., ControllerClient],
) -> None:
    # A broker-only node (UNIMPLEMENTED) did answer, so it is not listed among the addresses
    # that gave "no answer": the timeout is the active controller's.
    dead = f"127.0.0.1:{free_port()}"
    with running(1) as (broker_only,):
        broker_only.script("Metadata", Abort(grpc.StatusCode.UNIMPLEMENTED, "Method not found!"))
        with pytest.raises(KafkaTimeoutError) as raised:
            make_client(f"{broker_only.address},{dead}", default_timeout_s=0.4).metadata()
    message = str(raised.value)
    assert message.startswith("Metadata: no answer from the active controller within 0.4 s")
    assert f"{broker_only.address}: does not serve the Controller service" in message


def test_a_node_that_does_not_answer_times_out_at_the_deadline(
    node: FakeController, make_client: Callable[..., ControllerClient]
) -> None:
    node.script("CreateTopics", HANG)
    client = make_client(node.address, default_timeout_s=5)
    started = time.monotonic()
    # The call's budget, not its one attempt's (a millisecond less once the call has started).
    with pytest.raises(KafkaTimeoutError, match=r"no answer from \S+ within 0\.4 s"):
        client.create_topics([NewTopic("orders")], timeout_s=0.4)
    assert 0.35 < time.monotonic() - started < 3
    (request,) = node.asked("CreateTopics")
    assert 0 < request.timeout_ms <= 400


def test_a_slow_node_is_given_up_per_attempt_and_the_next_one_asked(
    make_client: Callable[..., ControllerClient],
) -> None:
    with running(1, 2) as (slow, fine):
        slow.script("Metadata", HANG)
        fine.script("Metadata", pb.MetadataResponse(controller_id=-1, cluster_id="fine"))
        client = make_client(f"{slow.address},{fine.address}", request_timeout_s=0.2)
        assert client.metadata().cluster_id == "fine"


def test_ctrl_c_interrupts_a_call_at_once_and_cancels_it(
    node: FakeController, make_client: Callable[..., ControllerClient]
) -> None:
    node.script("CreateTopics", HANG)
    client = make_client(node.address, default_timeout_s=30, request_timeout_s=30)
    started = time.monotonic()
    with (
        interrupt_main_when(lambda: bool(node.asked("CreateTopics"))),
        pytest.raises(KeyboardInterrupt),
    ):
        client.create_topics([NewTopic("orders")])
    assert time.monotonic() - started < 3
    deadline = time.monotonic() + 5
    while not node.cancelled and time.monotonic() < deadline:
        time.sleep(0.02)
    assert node.cancelled == ["CreateTopics"]  # the server stopped waiting too


def test_ctrl_c_interrupts_the_wait_between_retries(
    make_client: Callable[..., ControllerClient],
) -> None:
    dead = f"127.0.0.1:{free_port()}"
    client = make_client(dead, default_timeout_s=30, retry_backoff_s=5, max_retry_backoff_s=5)
    started = time.monotonic()
    # The first attempt is refused within milliseconds; 1 s in, the client is in its 5 s wait.
    with (
        interrupt_main_when(lambda: time.monotonic() - started > 1.0),
        pytest.raises(KeyboardInterrupt),
    ):
        client.describe_cluster()
    assert time.monotonic() - started < 3


def test_a_closed_client_refuses_calls(
    node: FakeController, make_client: Callable[..., ControllerClient]
) -> None:
    client = make_client(node.address)
    client.close()
    with pytest.raises(ReplogError, match="closed"):
        client.metadata()


class _Failed(grpc.RpcError):
    def __init__(self, details: str) -> None:
        self._details = details

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return self._details


@pytest.mark.parametrize(
    ("details", "said"),
    [
        (
            "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: Failed "
            "to connect to remote host: connect: Connection refused (111)",
            "connection refused",
        ),
        (
            # gRPC's polling engine, reconnecting to a port nobody listens on
            "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: Failed "
            "to connect to remote host: Timeout occurred: FD Shutdown (connect() timed out)",
            "cannot connect (nothing answers at this address)",
        ),
        ("Socket closed", "unavailable: Socket closed"),
    ],
)
def test_unreachable_addresses_are_named_in_plain_words(details: str, said: str) -> None:
    """Classified, not gRPC's text, which says "timed out" for a port that refused at
    once."""
    classified = controller_client_module._classify(
        "127.0.0.1:1", "Metadata", _Failed(details), 1000
    )
    assert str(classified) == said


# --- the asyncio client -------------------------------------------------------------------------


def test_the_asyncio_client_has_the_blocking_ones_methods_awaited() -> None:
    def methods(cls: type) -> dict[str, str]:
        return {
            name: str(inspect.signature(getattr(cls, name)))
            for name in dir(cls)
            if not name.startswith("_") and callable(getattr(cls, name))
        }

    assert methods(AsyncControllerClient) == methods(ControllerClient)
    assert all(
        inspect.iscoroutinefunction(getattr(AsyncControllerClient, name))
        for name in methods(AsyncControllerClient)
    )


@pytest.mark.asyncio
async def test_the_asyncio_client_follows_not_controller_and_retries_on_grpc_aio() -> None:
    # The same steps as the blocking client's (one routing core), run on grpc.aio: a standby's
    # NOT_CONTROLLER is followed through DescribeCluster, an unreachable address is retried.
    with running(1, 2) as (standby, active):
        standby_naming_the_active_controller(standby, active)
        dead = f"127.0.0.1:{free_port()}"
        async with AsyncControllerClient(
            f"{dead},{standby.address}",
            default_timeout_s=5.0,
            request_timeout_s=2.0,
            retry_backoff_s=0.01,
            max_retry_backoff_s=0.05,
        ) as client:
            (result,) = await client.create_topics([NewTopic("orders")])
            assert result.error is None and result.topic_id == TOPIC_ID
            assert client.controller_address == active.address
            assert len(active.asked("CreateTopics")) == 1
