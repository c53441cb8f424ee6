"""The Controller service's translation layer: protobuf requests to the controller's types and
its results back, -1 and empty ids as "none", errors as ErrorStatus naming what they are about,
and INVALID_REQUEST for what the controller's types cannot hold."""

from __future__ import annotations

from uuid import UUID

import pytest

from replog.errors import (
    InvalidReplicationFactorError,
    InvalidRequestError,
    NotControllerError,
    TopicAlreadyExistsError,
)
from replog.pb import common_pb2
from replog.pb import controller_pb2 as pb
from replog.quorum.controller.broker_heartbeat import BrokerHeartbeatReply
from replog.quorum.controller.config_control import AlterConfigOpType, ConfigSource, DescribedConfig
from replog.quorum.controller.producer_id_control import ProducerIdsBlock
from replog.quorum.controller.reads import (
    BrokerView,
    ClusterDescription,
    ConfigDescription,
    MetadataView,
    PartitionView,
    TopicView,
)
from replog.quorum.controller.replication_control import (
    AlterPartitionResult,
    ApiError,
    CreateTopicResult,
    DeleteTopicResult,
    ElectionType,
)
from replog.quorum.metadata.image import ConfigResource
from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.quorum.metadata.records import (
    ConfigResourceType,
    Endpoint,
    FeatureRange,
    LeaderRecoveryState,
)
from replog.wire import controller_codec as codec

TOPIC_ID = UUID(int=0xA1)
TOPIC = ConfigResource(ConfigResourceType.TOPIC, "orders")


def test_error_status_carries_code_name_and_message() -> None:
    assert codec.error_status(None) is None
    status = codec.error_status(NotControllerError("node 1 is not; node 3 is"))
    assert status is not None
    assert (status.code, status.error_name, status.message) == (
        41,
        "NOT_CONTROLLER",
        "node 1 is not; node 3 is",
    )
    status = codec.error_status(ApiError(TopicAlreadyExistsError, "topic 'a' exists"))
    assert status is not None and (status.code, status.error_name) == (36, "TOPIC_ALREADY_EXISTS")


def test_create_topics_request_and_results() -> None:
    request = pb.CreateTopicsRequest(
        topics=[
            pb.CreatableTopic(name="a", num_partitions=-1, replication_factor=-1),
            pb.CreatableTopic(
                name="b",
                num_partitions=-1,
                replication_factor=-1,
                assignments=[pb.ReplicaAssignment(partition_index=0, broker_ids=[2, 1])],
                configs={"retention.ms": "5"},
            ),
        ]
    )
    a, b = codec.create_topics_from_proto(request)
    assert (a.name, a.num_partitions, a.replication_factor, dict(a.assignments)) == (
        "a",
        -1,
        -1,
        {},
    )
    assert dict(b.assignments) == {0: (2, 1)} and dict(b.configs) == {"retention.ms": "5"}
    response = codec.create_topics_to_proto(
        [
            CreateTopicResult("a", TOPIC_ID, 6, 3),
            CreateTopicResult(
                "b", error=ApiError(InvalidReplicationFactorError, "factor 4 > 3 brokers")
            ),
        ]
    )
    ok, failed = response.topics
    assert UUID(bytes=ok.topic_id) == TOPIC_ID and not ok.HasField("error")
    assert (ok.num_partitions, ok.replication_factor) == (6, 3)
    assert failed.topic_id == b"" and failed.error.message == "factor 4 > 3 brokers"


def test_topic_ids_must_be_16_bytes() -> None:
    with pytest.raises(InvalidRequestError, match="topic_ids must be 16 bytes, got 3"):
        codec.delete_topic_ids_from_proto(pb.DeleteTopicsRequest(topic_ids=[b"abc"]))
    response = codec.delete_topics_to_proto([DeleteTopicResult(None, TOPIC_ID)])
    assert response.topics[0].name == "" and response.topics[0].topic_id == TOPIC_ID.bytes


def test_create_partitions_without_assignments_is_none() -> None:
    (topic,) = codec.create_partitions_from_proto(
        pb.CreatePartitionsRequest(topics=[pb.CreatePartitionsTopic(name="a", count=4)])
    )
    assert topic.assignments is None


def test_broker_registration_and_heartbeat() -> None:
    incarnation = UUID(int=7)
    request = pb.BrokerRegistrationRequest(
        broker_id=4,
        cluster_id="c",
        incarnation_id=incarnation.bytes,
        listeners=[pb.Listener(name="PLAINTEXT", host="h", port=9, security_protocol="PLAINTEXT")],
        features=[pb.SupportedFeature(name="metadata.version", min_supported_version=1,
                                      max_supported_version=7)],
    )  # fmt: skip
    registration = codec.broker_registration_from_proto(request)
    assert registration.incarnation_id == incarnation and registration.rack is None
    assert registration.endpoints == (Endpoint("PLAINTEXT", "h", 9, "PLAINTEXT"),)
    assert registration.features == (FeatureRange("metadata.version", 1, 7),)
    request.rack = "r1"
    assert codec.broker_registration_from_proto(request).rack == "r1"
    request.incarnation_id = b""
    with pytest.raises(InvalidRequestError, match="incarnation_id"):
        codec.broker_registration_from_proto(request)
    reply = codec.broker_heartbeat_to_proto(BrokerHeartbeatReply(True, False, False, True))
    assert (reply.is_caught_up, reply.is_fenced, reply.should_shut_down) == (True, False, True)


def test_alter_partition_groups_results_by_topic() -> None:
    other = UUID(int=0xB2)
    request = pb.AlterPartitionRequest(
        broker_id=1,
        broker_epoch=10,
        topics=[
            pb.AlterPartitionTopic(
                topic_id=TOPIC_ID.bytes,
                partitions=[
                    pb.AlterPartitionPartition(
                        partition_index=2,
                        leader_epoch=3,
                        new_isr=[pb.IsrMember(broker_id=1, broker_epoch=-1)],
                        partition_epoch=4,
                    )
                ],
            )
        ],
    )
    (item,) = codec.alter_partition_from_proto(request)
    assert (item.topic_id, item.partition_id, item.leader_epoch, item.partition_epoch) == (
        TOPIC_ID,
        2,
        3,
        4,
    )
    assert item.leader_recovery_state is LeaderRecoveryState.RECOVERED
    request.topics[0].partitions[0].leader_recovery_state = 5
    with pytest.raises(InvalidRequestError, match="leader_recovery_state 5"):
        codec.alter_partition_from_proto(request)
    response = codec.alter_partition_to_proto(
        [
            AlterPartitionResult(TOPIC_ID, 0, leader=1, leader_epoch=2, isr=(1,)),
            AlterPartitionResult(other, 0),
            AlterPartitionResult(TOPIC_ID, 1),
        ]
    )
    assert [UUID(bytes=t.topic_id) for t in response.topics] == [TOPIC_ID, other]
    assert [p.partition_index for p in response.topics[0].partitions] == [0, 1]


def test_elections_and_reassignments() -> None:
    election_type, partitions = codec.elect_leaders_from_proto(pb.ElectLeadersRequest())
    assert (election_type, partitions) == (ElectionType.PREFERRED, None)
    _, partitions = codec.elect_leaders_from_proto(
        pb.ElectLeadersRequest(
            election_type=1, partitions=[common_pb2.TopicPartition(topic="a", partition=2)]
        )
    )
    assert partitions == [("a", 2)]
    with pytest.raises(InvalidRequestError, match="election_type 9"):
        codec.elect_leaders_from_proto(pb.ElectLeadersRequest(election_type=9))
    target, cancel = codec.reassignments_from_proto(
        pb.AlterPartitionReassignmentsRequest(
            topics=[
                pb.ReassignableTopic(
                    name="a",
                    partitions=[
                        pb.ReassignablePartition(
                            partition_index=0, replicas=pb.BrokerIds(broker_ids=[3, 2])
                        ),
                        pb.ReassignablePartition(partition_index=1),
                    ],
                )
            ]
        )
    )
    assert target.replicas == (3, 2) and cancel.replicas is None


def test_config_requests() -> None:
    changes = codec.alter_configs_from_proto(
        pb.IncrementalAlterConfigsRequest(
            resources=[
                pb.AlterConfigsResource(
                    resource_type=2,
                    resource_name="orders",
                    configs=[
                        pb.AlterableConfig(name="retention.ms", operation=0, value="5"),
                        pb.AlterableConfig(name="segment.bytes", operation=1),
                    ],
                )
            ]
        )
    )
    set_op, delete_op = changes[TOPIC]
    assert (set_op.op, set_op.value) == (AlterConfigOpType.SET, "5")
    assert (delete_op.op, delete_op.value) == (AlterConfigOpType.DELETE, None)
    replacing = pb.IncrementalAlterConfigsRequest(
        resources=[
            pb.AlterConfigsResource(resource_type=2, resource_name="orders", replace=True),
            pb.AlterConfigsResource(resource_type=4, resource_name=""),
        ]
    )
    assert codec.replaced_resources_from_proto(replacing) == {TOPIC}
    twice = pb.IncrementalAlterConfigsRequest(
        resources=[pb.AlterConfigsResource(resource_type=4, resource_name="")] * 2
    )
    with pytest.raises(InvalidRequestError, match="more than once"):
        codec.alter_configs_from_proto(twice)
    bad_op = pb.IncrementalAlterConfigsRequest(
        resources=[
            pb.AlterConfigsResource(
                resource_type=2,
                resource_name="orders",
                configs=[pb.AlterableConfig(name="retention.ms", operation=7)],
            )
        ]
    )
    with pytest.raises(InvalidRequestError, match=r"config retention\.ms of TOPIC 'orders'"):
        codec.alter_configs_from_proto(bad_op)
    with pytest.raises(InvalidRequestError, match="resource_type 3"):
        codec.describe_configs_from_proto(
            pb.DescribeConfigsRequest(
                resources=[pb.ConfigResourceKeys(resource_type=3, resource_name="x")]
            )
        )
    ((resource, keys),) = codec.describe_configs_from_proto(
        pb.DescribeConfigsRequest(resources=[pb.ConfigResourceKeys(resource_type=2,
                                                                   resource_name="orders")])
    )  # fmt: skip
    assert (resource, keys) == (TOPIC, None)


def test_config_results() -> None:
    response = codec.describe_configs_to_proto(
        [
            ConfigDescription(
                TOPIC,
                (
                    DescribedConfig("retention.ms", "5", ConfigSource.TOPIC_CONFIG),
                    DescribedConfig("segment.ms", "604800000", ConfigSource.DEFAULT_CONFIG),
                ),
            )
        ]
    )
    (result,) = response.results
    assert (result.resource_type, result.resource_name) == (2, "orders")
    own, default = result.configs
    assert (own.value, own.source, own.is_default) == ("5", "TOPIC_CONFIG", False)
    assert (default.source, default.is_default) == ("DEFAULT_CONFIG", True)
    default = ConfigResource(ConfigResourceType.BROKER, "")
    altered = codec.alter_configs_to_proto({TOPIC: InvalidRequestError("bad"), default: None})
    failed, ok = altered.results
    assert (failed.resource_name, failed.error.message) == ("orders", "bad")
    assert (ok.resource_type, ok.HasField("error")) == (4, False)


def test_read_views() -> None:
    broker = BrokerView(1, Endpoint("PLAINTEXT", "h", 9), None, False, False, 12)
    cluster = codec.describe_cluster_to_proto(ClusterDescription("c", (broker,), 40))
    assert (cluster.cluster_id, cluster.metadata_offset) == ("c", 40)
    (endpoint,) = cluster.brokers
    assert (endpoint.host, endpoint.port, endpoint.broker_epoch) == ("h", 9, 12)
    assert not endpoint.HasField("rack")
    partition = PartitionView(
        0, PartitionRegistration(replicas=(1, 2), isr=(1,), leader=1, leader_epoch=3), (2,)
    )
    view = MetadataView("c", (broker,), (TopicView("orders", TOPIC_ID, (partition,)),), 41)
    response = codec.metadata_to_proto(view)
    (topic,) = response.topics
    (meta,) = topic.partitions
    assert (meta.leader_id, meta.leader_epoch, list(meta.replicas), list(meta.isr)) == (
        1,
        3,
        [1, 2],
        [1],
    )
    assert list(meta.offline_replicas) == [2] and not meta.HasField("error")


def test_producer_ids() -> None:
    response = codec.producer_ids_to_proto(ProducerIdsBlock(1, 2000, 1000))
    assert (response.producer_id_start, response.producer_id_len) == (2000, 1000)
