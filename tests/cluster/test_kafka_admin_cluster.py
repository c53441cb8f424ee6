"""A 2-node local cluster started by `replog cluster start --kafka-base-port`, administered by
Kafka's own admin clients through its Kafka listeners (one module-scoped cluster):

- `cluster status --json` names each node's Kafka address (key `kafka`) and its controller's
  (`kafka_controller`), and each node's server.properties declares them as Kafka does;
- every Kafka listener, a broker's or a controller's, answers DescribeQuorum as the leader
  describes the quorum; a controller's lists the controllers (DescribeCluster type 2) and the
  finalized features; UnregisterBroker of an unknown id is BROKER_ID_NOT_REGISTERED;
- confluent-kafka's AdminClient (librdkafka), bootstrapped at one node, creates topics (with a
  config, and one refused), describes the cluster and a topic's configs, alters configs
  incrementally and as a whole, adds partitions, deletes records and topics; every change is
  seen through Metadata and through replog's own admin tools;
- kafka-python's KafkaAdminClient does the same at its own versions;
- a transactional producer initializes (the broker creates `__transaction_state`) and commits.
"""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import kafka
import pytest
from cluster_helpers import LoopbackCluster
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # no __all__ there
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

from replog.admin.controller_client import ControllerClient
from replog.kafka.messages.api_versions_request import ApiVersionsRequest
from replog.kafka.messages.describe_cluster_request import DescribeClusterRequest
from replog.kafka.messages.describe_quorum_request import DescribeQuorumRequest
from replog.kafka.messages.describe_quorum_request import PartitionData as DescribeQuorumPartition
from replog.kafka.messages.describe_quorum_request import TopicData as DescribeQuorumTopic
from replog.kafka.messages.request_header import RequestHeader
from replog.kafka.messages.unregister_broker_request import UnregisterBrokerRequest
from replog.kafka.protocol.codec import Message
from replog.kafka.protocol.framing import decode_response, encode_request
from tests.confluent_producer import confluent_producer
from tests.eventually import wait_until
from tests.local_ports import KAFKA_CONTROLLER_PORT_OFFSET, KAFKA_PORT_OFFSET, free_base_port

NODES = 2
TIMEOUT_S = 30


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackCluster]:
    started = LoopbackCluster(
        tmp_path_factory.mktemp("kafka-admin") / "cluster", free_base_port(NODES), NODES
    )
    try:
        started.start()
        yield started
    finally:
        started.kill_everything()  # nothing to keep: no graceful stop needed


def kafka_addresses(cluster: LoopbackCluster) -> list[str]:
    return [f"127.0.0.1:{cluster.base_port + KAFKA_PORT_OFFSET + i}" for i in range(NODES)]


@pytest.fixture
def admin(cluster: LoopbackCluster) -> Iterator[AdminClient]:
    """confluent-kafka's AdminClient, bootstrapped at the last node: its admin requests reach
    whichever controller is active, that node's or the other's. Destroyed after the test: a
    future keeps the exception `pytest.raises` checks, whose traceback holds the test's frame
    in a reference cycle, and a client left to be freed with that frame reconnects to the
    stopped cluster until the garbage collector frees it."""
    with AdminClient({"bootstrap.servers": kafka_addresses(cluster)[-1]}) as client:
        yield client


def done(futures: dict[Any, Any]) -> dict[Any, Any]:
    return {key: future.result(TIMEOUT_S) for key, future in futures.items()}


def topics(admin: AdminClient) -> dict[str, int]:
    listed = admin.list_topics(timeout=TIMEOUT_S).topics
    return {name: len(t.partitions) for name, t in listed.items() if not name.startswith("__")}


def controller_addresses(cluster: LoopbackCluster) -> list[str]:
    base = cluster.base_port + KAFKA_CONTROLLER_PORT_OFFSET
    return [f"127.0.0.1:{base + i}" for i in range(NODES)]


def kafka_call(address: str, body: Message, version: int) -> Any:
    """One request on a fresh connection to a Kafka listener, and its decoded answer."""
    host, port = address.rsplit(":", 1)
    header = RequestHeader(
        request_api_key=body.API_KEY,
        request_api_version=version,
        correlation_id=1,
        client_id="test",
    )
    with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as sock:
        sock.sendall(encode_request(header, body))
        stream = sock.makefile("rb")
        (size,) = struct.unpack(">i", stream.read(4))
        _, answer = decode_response(stream.read(size), body.API_KEY, version)
    return answer


def test_status_names_each_nodes_kafka_listeners(cluster: LoopbackCluster) -> None:
    status = cluster.ask("status", "--json")
    assert status.returncode == 0, status.stderr
    rows = json.loads(status.stdout)["nodes"]
    assert [row["kafka"] for row in rows] == kafka_addresses(cluster)
    assert [row["kafka_controller"] for row in rows] == controller_addresses(cluster)
    properties = Path(cluster.layout.node(NODES).config_path).read_text()
    grpc = cluster.base_port + NODES - 1
    kafka_port = cluster.base_port + KAFKA_PORT_OFFSET + NODES - 1
    controller_port = cluster.base_port + KAFKA_CONTROLLER_PORT_OFFSET + NODES - 1
    listeners = (
        f"CONTROLLER://127.0.0.1:{grpc},PLAINTEXT://127.0.0.1:{kafka_port},"
        f"CONTROLLER_KAFKA://127.0.0.1:{controller_port}"
    )
    assert f"\nlisteners={listeners}\n" in properties
    assert f"\nadvertised.listeners={listeners}\n" in properties
    assert "\ncontroller.listener.names=CONTROLLER,CONTROLLER_KAFKA\n" in properties
    assert (
        "\nlistener.security.protocol.map="
        "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,CONTROLLER_KAFKA:PLAINTEXT\n"
    ) in properties
    table = cluster.ask("status")
    assert "KAFKA" in table.stdout and kafka_addresses(cluster)[0] in table.stdout
    assert controller_addresses(cluster)[0] in table.stdout


def quorum_request() -> DescribeQuorumRequest:
    return DescribeQuorumRequest(
        topics=[
            DescribeQuorumTopic(
                topic_name="__cluster_metadata", partitions=[DescribeQuorumPartition()]
            )
        ]
    )


def test_describe_quorum_through_brokers_and_controllers(cluster: LoopbackCluster) -> None:
    leader = cluster.ask("status", "--json")
    for address in (*kafka_addresses(cluster), *controller_addresses(cluster)):
        answer = kafka_call(address, quorum_request(), 2)
        assert answer.error_code == 0, answer.error_message
        (partition,) = answer.topics[0].partitions
        voters = [r.replica_id for r in partition.current_voters]
        assert voters[0] == partition.leader_id and sorted(voters) == [1, 2], leader.stdout
        assert partition.high_watermark > 0 and partition.observers == []
        assert all(r.log_end_offset >= 0 for r in partition.current_voters)
        # Each voter is named at its controller's Kafka listener.
        assert [
            (n.node_id, [(x.name, f"{x.host}:{x.port}") for x in n.listeners]) for n in answer.nodes
        ] == [
            (i + 1, [("CONTROLLER_KAFKA", controller_addresses(cluster)[i])]) for i in range(NODES)
        ]


def test_a_controller_lists_the_controllers_and_its_features(cluster: LoopbackCluster) -> None:
    for address in controller_addresses(cluster):
        described = kafka_call(address, DescribeClusterRequest(endpoint_type=2), 1)
        assert described.error_code == 0, described.error_message
        assert [f"{b.host}:{b.port}" for b in described.brokers] == controller_addresses(cluster)
        assert described.controller_id in (1, 2)
        request = ApiVersionsRequest(client_software_name="test", client_software_version="1")
        versions = kafka_call(address, request, 3)
        assert {k.api_key for k in versions.api_keys} == {17, 18, 36, 55, 57, 60, 64}
        assert [(f.name, f.max_version_level) for f in versions.finalized_features] == [
            ("metadata.version", 12),
            ("transaction.version", 2),
        ]
        assert versions.finalized_features_epoch > 0
    broker = kafka_call(kafka_addresses(cluster)[0], request, 3)
    assert [(f.name, f.max_version_level) for f in broker.finalized_features] == [
        ("metadata.version", 12),
        ("transaction.version", 2),
    ]


def test_unregistering_an_unknown_broker_is_refused(cluster: LoopbackCluster) -> None:
    for address in (kafka_addresses(cluster)[0], controller_addresses(cluster)[0]):
        answer = kafka_call(address, UnregisterBrokerRequest(broker_id=9), 0)
        assert answer.error_code in (102, 41), answer.error_message  # or NOT_CONTROLLER
    by_broker = kafka_call(kafka_addresses(cluster)[0], UnregisterBrokerRequest(broker_id=9), 0)
    assert by_broker.error_code == 102  # BROKER_ID_NOT_REGISTERED: forwarded to the active one
    assert "broker 9" in by_broker.error_message


def test_confluent_admin_client_manages_topics_and_configs(
    cluster: LoopbackCluster, admin: AdminClient
) -> None:
    created = admin.create_topics(
        [
            NewTopic("events", 2, 2, config={"retention.ms": "3600000"}),
            NewTopic("doomed", 1, 1),
            NewTopic("bad", 1, 1, config={"no.such.config": "1"}),
        ],
        operation_timeout=TIMEOUT_S,
    )
    assert created["events"].result(TIMEOUT_S) is None
    assert created["doomed"].result(TIMEOUT_S) is None
    with pytest.raises(confluent_kafka.KafkaException, match=r"no\.such\.config"):
        created["bad"].result(TIMEOUT_S)
    wait_until(
        lambda: topics(admin).get("events") == 2 and "doomed" in topics(admin),
        "the new topics in Metadata",
        timeout_s=TIMEOUT_S,
    )

    described = admin.describe_cluster(request_timeout=TIMEOUT_S).result(TIMEOUT_S)
    assert sorted(f"{n.host}:{n.port}" for n in described.nodes) == kafka_addresses(cluster)
    assert described.controller is not None

    topic = ConfigResource("topic", "events")
    (configs,) = done(admin.describe_configs([topic])).values()
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["cleanup.policy"].value == "delete" and configs["cleanup.policy"].is_default

    change = ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)
    done(
        admin.incremental_alter_configs(
            [ConfigResource("topic", "events", incremental_configs=[change])]
        )
    )
    (configs,) = done(admin.describe_configs([topic])).values()
    assert configs["cleanup.policy"].value == "compact"
    assert configs["retention.ms"].value == "3600000"
    # The whole-resource form replaces: retention.ms and cleanup.policy go back to defaults.
    whole = ConfigResource("topic", "events", set_config={"segment.ms": "1"})
    with pytest.warns(DeprecationWarning, match="alter_configs has been deprecated"):
        done(admin.alter_configs([whole]))
    (configs,) = done(admin.describe_configs([topic])).values()
    assert configs["segment.ms"].value == "1"
    assert configs["cleanup.policy"].value == "delete"
    assert configs["retention.ms"].is_default

    done(admin.create_partitions([NewPartitions("events", 4)]))
    wait_until(lambda: topics(admin)["events"] == 4, "4 partitions of events", timeout_s=TIMEOUT_S)
    with pytest.raises(confluent_kafka.KafkaException, match=r"INVALID_PARTITIONS|partitions"):
        done(admin.create_partitions([NewPartitions("events", 3)]))

    with confluent_producer({"bootstrap.servers": kafka_addresses(cluster)[0]}) as producer:
        for i in range(5):
            producer.produce("doomed", value=b"%d" % i, partition=0)
        assert producer.flush(TIMEOUT_S) == 0
    partition = confluent_kafka.TopicPartition("doomed", 0, 3)
    (deleted,) = done(admin.delete_records([partition])).values()
    assert deleted.low_watermark == 3

    done(admin.delete_topics(["doomed"], operation_timeout=TIMEOUT_S))
    wait_until(lambda: "doomed" not in topics(admin), "doomed deleted", timeout_s=TIMEOUT_S)
    # Every node's image gets there, each in its own time: the gRPC view may lag the Kafka one.
    with ControllerClient(",".join(cluster.addresses.values()), default_timeout_s=TIMEOUT_S) as c:
        wait_until(
            lambda: {t.name for t in c.metadata().topics} & {"events", "doomed"} == {"events"},
            "doomed deleted in replog's own metadata",
            timeout_s=TIMEOUT_S,
        )


def test_kafka_python_admin_client_manages_topics_and_configs(cluster: LoopbackCluster) -> None:
    admin: Any = kafka.KafkaAdminClient(
        bootstrap_servers=kafka_addresses(cluster)[0], request_timeout_ms=TIMEOUT_S * 1000
    )
    try:
        admin.create_topics(
            [kafka.admin.NewTopic("kp", 1, 1, topic_configs={"retention.ms": "60000"})]
        )
        wait_until(lambda: "kp" in admin.list_topics(), "kp listed", timeout_s=TIMEOUT_S)
        resource = kafka.admin.ConfigResource(kafka.admin.ConfigResourceType.TOPIC, "kp")
        values = configs_of_kp(admin, resource)
        assert values["retention.ms"] == "60000"
        admin.alter_configs(
            [
                kafka.admin.ConfigResource(
                    kafka.admin.ConfigResourceType.TOPIC, "kp", configs={"retention.ms": "70000"}
                )
            ]
        )
        values = configs_of_kp(admin, resource)
        assert values["retention.ms"] == "70000"
        admin.create_partitions({"kp": kafka.admin.NewPartitions(3)})
        wait_until(
            lambda: len(admin.describe_topics(["kp"])[0]["partitions"]) == 3,
            "3 partitions of kp",
            timeout_s=TIMEOUT_S,
        )
        admin.delete_topics(["kp"])
        wait_until(lambda: "kp" not in admin.list_topics(), "kp deleted", timeout_s=TIMEOUT_S)
    finally:
        admin.close()


def configs_of_kp(admin: Any, resource: Any) -> dict[str, str]:
    # kafka-python: {resource type: {resource name: {key: config data}}}, modified keys only.
    (by_name,) = admin.describe_configs([resource]).values()
    return {key: config["value"] for key, config in by_name["kp"].items()}


def test_a_transactional_producer_initializes_and_commits(
    cluster: LoopbackCluster, admin: AdminClient
) -> None:
    # The first FindCoordinator of a transactional id creates __transaction_state (50
    # partitions, its replication factor capped at the 2 brokers); librdkafka retries
    # COORDINATOR_NOT_AVAILABLE meanwhile.
    done(admin.create_topics([NewTopic("txn-orders", 1, 2)]))
    with confluent_producer(
        {"bootstrap.servers": kafka_addresses(cluster)[0], "transactional.id": "tx"}
    ) as producer:
        producer.init_transactions(TIMEOUT_S)
        producer.begin_transaction()
        producer.produce("txn-orders", value=b"paid", key=b"o-1")
        assert producer.flush(TIMEOUT_S) == 0
        producer.commit_transaction(TIMEOUT_S)
    state = admin.list_topics(topic="__transaction_state", timeout=TIMEOUT_S).topics
    partitions = state["__transaction_state"].partitions
    assert len(partitions) == 50
    assert {len(p.replicas) for p in partitions.values()} == {2}
