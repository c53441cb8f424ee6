"""`KafkaAdminClient` against scripted fake Kafka listeners: where a call goes, what it retries,
how it fails, and how Kafka's answers become the admin dataclasses.

- A dead bootstrap address is passed over; NOT_CONTROLLER (whole request or every item) and
  NOT_LEADER_OR_FOLLOWER are asked again elsewhere; a per-item error is the item's answer.
- A listener that never answers is given up at the deadline, naming it; refusals for
  `refused_timeout_s` are NoBrokersAvailableError; a gRPC port is named at once.
- Requests carry what the API needs: topic ids at DeleteTopics v6, an unclean election at v1+,
  controllers' endpoints with `controllers`, nulls for "every partition".
- Answers: config sources by name, the staleness tag, reassignments merged into Metadata.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from fake_kafka_listener import HANG, FakeKafkaListener, http2_server, listening

from replog.admin.controller_results import (
    AlterConfigOp,
    AlterConfigOpType,
    ConfigResource,
    ElectionType,
    NewPartitions,
    NewTopic,
)
from replog.admin.kafka_admin_client import KafkaAdminClient
from replog.admin.kafka_cluster_answers import quorum_description
from replog.common import TopicPartition
from replog.errors import (
    KafkaStorageError,
    KafkaTimeoutError,
    MalformedResponseError,
    NoBrokersAvailableError,
    NotAKafkaListenerError,
    NotControllerError,
    NotLeaderOrFollowerError,
    PolicyViolationError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from replog.kafka import replica_offsets_tag, staleness_tag
from replog.kafka.messages import create_topics_response as ctr
from replog.kafka.messages import delete_records_response as drr
from replog.kafka.messages import describe_configs_response as dcr
from replog.kafka.messages import describe_log_dirs_response as dld
from replog.kafka.messages import describe_quorum_response as dqr
from replog.kafka.messages import list_partition_reassignments_response as lpr
from replog.kafka.messages import metadata_response as mr
from replog.kafka.replica_offsets_tag import ReplicaOffsets
from tests.local_ports import free_port


@pytest.fixture
def two() -> Iterator[list[FakeKafkaListener]]:
    with listening(2) as listeners:
        yield listeners


def created(*results: tuple[str, int]) -> ctr.CreateTopicsResponse:
    return ctr.CreateTopicsResponse(
        topics=[
            ctr.CreatableTopicResult(name=name, error_code=code, num_partitions=3)
            for name, code in results
        ]
    )


def test_a_dead_bootstrap_address_is_passed_over(two: list[FakeKafkaListener]) -> None:
    (alive, _) = two
    alive.script("CreateTopics", created(("t", 0)))
    with KafkaAdminClient([f"127.0.0.1:{free_port()}", alive.address]) as client:
        (result,) = client.create_topics([NewTopic("t", 3, 2, {"retention.ms": "1"})])
    assert (result.name, result.num_partitions, result.error) == ("t", 3, None)
    (request,) = alive.asked("CreateTopics")
    (topic,) = request.topics
    assert (topic.name, topic.num_partitions, topic.replication_factor) == ("t", 3, 2)
    assert [(c.name, c.value) for c in topic.configs] == [("retention.ms", "1")]
    assert 0 < request.timeout_ms < 30_000  # room left for the answer


def test_not_controller_is_asked_again_elsewhere_and_item_errors_are_answers(
    two: list[FakeKafkaListener],
) -> None:
    standby, active = two
    standby.script("CreateTopics", created(("a", NotControllerError.code), ("b", 41)))
    active.script("CreateTopics", created(("a", 0), ("b", TopicAlreadyExistsError.code)))
    with KafkaAdminClient([standby.address, active.address]) as client:
        a, b = client.create_topics([NewTopic("a"), NewTopic("b")])
        assert a.error is None and isinstance(b.error, TopicAlreadyExistsError)
        # The address that answered is asked first from then on.
        client.create_topics([NewTopic("c")])
    assert (len(standby.asked("CreateTopics")), len(active.asked("CreateTopics"))) == (1, 2)


def test_one_item_not_controller_among_others_is_not_retried(
    two: list[FakeKafkaListener],
) -> None:
    first, second = two
    first.script("CreateTopics", created(("a", NotControllerError.code), ("b", 0)))
    with KafkaAdminClient([first.address, second.address]) as client:
        a, b = client.create_topics([NewTopic("a"), NewTopic("b")])
    assert isinstance(a.error, NotControllerError) and b.error is None
    assert second.asked("CreateTopics") == []


def test_a_listener_that_never_answers_is_given_up_at_the_deadline_naming_it(
    two: list[FakeKafkaListener],
) -> None:
    hung, _ = two
    hung.script("Metadata", HANG)
    with KafkaAdminClient(hung.address, default_timeout_s=0.5) as client:
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError) as raised:
            client.metadata()
    assert time.monotonic() - started < 3
    text = str(raised.value)
    assert text.startswith(f"Metadata: no answer within 0.5 s: {hung.address}: "), text
    assert f"{hung.address} did not answer Metadata within " in text


def test_refusals_for_the_refused_timeout_are_no_brokers_available() -> None:
    dead = f"127.0.0.1:{free_port()}"
    with KafkaAdminClient(dead, default_timeout_s=30, refused_timeout_s=0.3) as client:
        started = time.monotonic()
        with pytest.raises(NoBrokersAvailableError, match=f"connection refused by {dead}"):
            client.describe_cluster()
    assert time.monotonic() - started < 3


def test_a_grpc_port_is_named_at_once() -> None:
    with http2_server() as address, KafkaAdminClient(address, default_timeout_s=30) as client:
        started = time.monotonic()
        with pytest.raises(NotAKafkaListenerError, match="answered HTTP/2"):
            client.metadata()
    assert time.monotonic() - started < 3


def test_requests_carry_what_each_api_needs(two: list[FakeKafkaListener]) -> None:
    broker, _ = two
    topic_id = uuid.uuid4()
    with KafkaAdminClient(broker.address) as client:
        client.delete_topics(["a"])
        client.delete_topics(topic_ids=[topic_id])
        client.elect_leaders(ElectionType.UNCLEAN, [TopicPartition("t", 0), TopicPartition("t", 2)])
        client.elect_leaders(ElectionType.PREFERRED)
        client.create_partitions([NewPartitions("t", 5, [[1, 2], [2, 3]]), NewPartitions("u", 2)])
        client.alter_partition_reassignments({TopicPartition("t", 0): [1, 2], ("t", 1): None})
        client.list_partition_reassignments()
        client.incremental_alter_configs(
            {ConfigResource.topic("t"): [AlterConfigOp("retention.ms", AlterConfigOpType.DELETE)]}
        )
        client.describe_configs([ConfigResource.broker(1)], keys=["log.retention.ms"])
    by_id = broker.asked("DeleteTopics")[1]
    assert [t.topic_id for t in by_id.topics] == [topic_id] and broker.versions("DeleteTopics")[
        1
    ] == 6
    unclean, preferred = broker.asked("ElectLeaders")
    assert unclean.election_type == 1 and broker.versions("ElectLeaders")[0] >= 1
    assert [(t.topic, t.partitions) for t in unclean.topic_partitions] == [("t", [0, 2])]
    assert preferred.topic_partitions is None  # every eligible partition
    (grow,) = broker.asked("CreatePartitions")
    assert [(t.name, t.count) for t in grow.topics] == [("t", 5), ("u", 2)]
    assert [a.broker_ids for a in grow.topics[0].assignments] == [[1, 2], [2, 3]]
    assert grow.topics[1].assignments is None
    (move,) = broker.asked("AlterPartitionReassignments")
    assert [(p.partition_index, p.replicas) for p in move.topics[0].partitions] == [
        (0, [1, 2]),
        (1, None),  # cancels
    ]
    assert broker.asked("ListPartitionReassignments")[0].topics is None
    (alter,) = broker.asked("IncrementalAlterConfigs")
    assert [(c.name, c.config_operation, c.value) for c in alter.resources[0].configs] == [
        ("retention.ms", 1, None)
    ]
    (describe,) = broker.asked("DescribeConfigs")
    assert [
        (r.resource_type, r.resource_name, r.configuration_keys) for r in describe.resources
    ] == [(4, "1", ["log.retention.ms"])]


def test_describe_cluster_asks_for_brokers_or_controllers(two: list[FakeKafkaListener]) -> None:
    broker, controller = two
    with KafkaAdminClient(broker.address) as client:
        client.describe_cluster()
    with KafkaAdminClient(controller.address, controllers=True) as client:
        client.describe_cluster()
    (brokers,) = broker.asked("DescribeCluster")
    (controllers,) = controller.asked("DescribeCluster")
    assert (brokers.endpoint_type, brokers.include_fenced_brokers) == (1, True)
    assert controllers.endpoint_type == 2


def test_answers_become_the_admin_dataclasses(two: list[FakeKafkaListener]) -> None:
    broker, _ = two
    topic_id = uuid.uuid4()
    broker.script(
        "Metadata",
        mr.MetadataResponse(
            cluster_id="c",
            controller_id=2,
            brokers=[mr.MetadataResponseBroker(node_id=2, host="h", port=9)],
            topics=[
                mr.MetadataResponseTopic(
                    name="t",
                    topic_id=topic_id,
                    partitions=[
                        mr.MetadataResponsePartition(
                            partition_index=1, leader_id=-1, replica_nodes=[1, 2], error_code=5
                        ),
                        mr.MetadataResponsePartition(
                            partition_index=0, leader_id=2, replica_nodes=[2, 3], isr_nodes=[2]
                        ),
                    ],
                ),
                mr.MetadataResponseTopic(name="gone", error_code=3),
            ],
        ),
    )
    moving = lpr.OngoingPartitionReassignment(
        partition_index=0, replicas=[2, 3, 4], adding_replicas=[4], removing_replicas=[3]
    )
    broker.script(
        "ListPartitionReassignments",
        lpr.ListPartitionReassignmentsResponse(
            topics=[lpr.OngoingTopicReassignment(name="t", partitions=[moving])]
        ),
    )
    broker.script(
        "DescribeConfigs",
        dcr.DescribeConfigsResponse(
            results=[
                dcr.DescribeConfigsResult(
                    resource_type=2,
                    resource_name="t",
                    configs=[
                        dcr.DescribeConfigsResourceResult(name="a", value="1", config_source=1),
                        dcr.DescribeConfigsResourceResult(name="b", value="2", config_source=5),
                        dcr.DescribeConfigsResourceResult(
                            name="s", value=None, config_source=2, is_sensitive=True
                        ),
                    ],
                )
            ]
        ),
    )
    with KafkaAdminClient(broker.address) as client:
        cluster = client.metadata(["t", "gone"], with_reassignments=True)
        plain = client.metadata(["t"])
        (configs,) = client.describe_configs([ConfigResource.topic("t")])
    t, gone = cluster.topics
    assert (cluster.cluster_id, cluster.controller_id, cluster.stale) == ("c", 2, False)
    assert (t.topic_id, [p.partition for p in t.partitions]) == (topic_id, [0, 1])
    first, second = t.partitions
    assert (first.leader, first.isr, first.adding_replicas, first.removing_replicas) == (
        2,
        (2,),
        (4,),
        (3,),
    )
    assert second.leader is None and second.error is not None
    assert isinstance(gone.error, UnknownTopicOrPartitionError)
    assert str(gone.error) == "topic 'gone' does not exist"
    assert plain.topics[0].partitions[0].adding_replicas == ()
    assert len(broker.asked("ListPartitionReassignments")) == 1
    assert [(e.name, e.value, e.source, e.is_default, e.is_sensitive) for e in configs.entries] == [
        ("a", "1", "TOPIC_CONFIG", False, False),
        ("b", "2", "DEFAULT_CONFIG", True, False),
        ("s", None, "DYNAMIC_BROKER_CONFIG", False, True),
    ]


def test_the_staleness_tag_makes_the_metadata_stale(two: list[FakeKafkaListener]) -> None:
    broker, _ = two
    staleness = staleness_tag.MetadataStaleness(True, False, 42_000, 1_000, 3, frozenset({1, 2}))
    answer = mr.MetadataResponse(controller_id=1, cluster_id="c")
    answer.unknown_tagged_fields = (staleness_tag.encode(staleness),)
    broker.script("Metadata", answer)
    with KafkaAdminClient(broker.address) as client:
        cluster = client.metadata()
    assert (cluster.stale, cluster.controller_id, cluster.metadata_age_ms) == (True, None, 42_000)
    assert (cluster.quorum_contact_time_ms, cluster.answering_node_id) == (1_000, 3)
    assert cluster.unreachable_brokers == {1, 2}


def test_the_staleness_tag_round_trips_and_garbage_is_ignored() -> None:
    staleness = staleness_tag.MetadataStaleness(False, True, 5, None, 1, frozenset())
    assert staleness_tag.decode([(1, b"x"), staleness_tag.encode(staleness)]) == staleness
    tag, value = staleness_tag.encode(staleness)
    assert staleness_tag.decode([(tag, value[:-1])]) is None
    assert staleness_tag.decode([(tag, value + b"\0")]) is None
    assert staleness_tag.decode([]) is None


def quorum(error_code: int = 0) -> dqr.DescribeQuorumResponse:
    def replica(node: int, end: int, caught_up: int) -> dqr.ReplicaState:
        return dqr.ReplicaState(
            replica_id=node,
            log_end_offset=end,
            last_fetch_timestamp=caught_up,
            last_caught_up_timestamp=caught_up,
        )

    return dqr.DescribeQuorumResponse(
        topics=[
            dqr.TopicData(
                topic_name="__cluster_metadata",
                partitions=[
                    dqr.PartitionData(
                        error_code=error_code,
                        error_message="no leader" if error_code else None,
                        leader_id=2,
                        leader_epoch=7,
                        high_watermark=100,
                        current_voters=[replica(1, 90, 5_000), replica(2, 100, 9_000)],
                        observers=[replica(4, -1, -1)],
                    )
                ],
            )
        ],
        nodes=[
            dqr.Node(
                node_id=n,
                listeners=[dqr.Listener(name="CONTROLLER_KAFKA", host="127.0.0.1", port=9092 + n)],
            )
            for n in (1, 2)
        ],
    )


def test_describe_quorum_retries_no_leader_and_reads_the_leaders_answer(
    two: list[FakeKafkaListener],
) -> None:
    broker, _ = two
    broker.script("DescribeQuorum", quorum(NotLeaderOrFollowerError.code), quorum())
    with KafkaAdminClient(broker.address) as client:
        description = quorum_description(*client.describe_quorum())
    assert (description.leader_id, description.leader_epoch, description.high_watermark) == (
        2,
        7,
        100,
    )
    assert [(r.node_id, r.status, r.lag) for r in description.replicas] == [
        (2, "Leader", 0),
        (1, "Follower", 10),
        (4, "Observer", None),
    ]
    assert description.max_follower_lag_time_ms == 4_000
    assert description.status(description.voter_addresses)["current_voters"][0] == {
        "id": 1,
        "endpoints": ["CONTROLLER_KAFKA://127.0.0.1:9093"],
    }
    (request, _) = broker.asked("DescribeQuorum")
    assert [(t.topic_name, [p.partition_index for p in t.partitions]) for t in request.topics] == [
        ("__cluster_metadata", [0])
    ]


def records_deleted(*results: tuple[int, int, int]) -> drr.DeleteRecordsResponse:
    """A DeleteRecords answer for topic t: (partition, low watermark, error code) each."""
    partitions = [
        drr.DeleteRecordsPartitionResult(partition_index=p, low_watermark=low, error_code=code)
        for p, low, code in results
    ]
    return drr.DeleteRecordsResponse(
        topics=[drr.DeleteRecordsTopicResult(name="t", partitions=partitions)]
    )


def test_a_whole_request_error_raises_and_delete_records_reads_each_partition(
    two: list[FakeKafkaListener],
) -> None:
    broker, _ = two
    broker.script(
        "DescribeQuorum",
        dqr.DescribeQuorumResponse(error_code=PolicyViolationError.code, error_message="no"),
    )
    broker.script("DeleteRecords", records_deleted((0, 7, 0), (1, 0, 1)))
    with KafkaAdminClient(broker.address) as client:
        with pytest.raises(PolicyViolationError, match="no"):
            quorum_description(*client.describe_quorum())
        found = client._run(
            client._async.delete_records_at(
                broker.address, {TopicPartition("t", 0): 7, ("t", 1): 99}, timeout_ms=5_000
            )
        )
    assert found[TopicPartition("t", 0)] == 7
    assert repr(found[TopicPartition("t", 1)]) == (
        "OffsetOutOfRangeError('offset 99: OFFSET_OUT_OF_RANGE')"  # the offset asked for
    )
    (request,) = broker.asked("DeleteRecords")
    assert [(p.partition_index, p.offset) for p in request.topics[0].partitions] == [
        (0, 7),
        (1, 99),
    ]


def test_log_dirs_carry_replogs_offsets_and_keep_the_topics_asked_for(
    two: list[FakeKafkaListener],
) -> None:
    broker, _ = two
    tagged = dld.DescribeLogDirsPartition(partition_index=0, partition_size=100)
    tagged.unknown_tagged_fields = (
        replica_offsets_tag.encode(ReplicaOffsets(1, 9, 8)),
        replica_offsets_tag.encode_dirty_ratio(0.25),
    )
    untagged = dld.DescribeLogDirsPartition(partition_index=0, partition_size=5)
    broker.script(
        "DescribeLogDirs",
        dld.DescribeLogDirsResponse(
            results=[
                dld.DescribeLogDirsResult(
                    log_dir="/d",
                    topics=[
                        dld.DescribeLogDirsTopic(name="t", partitions=[tagged]),
                        dld.DescribeLogDirsTopic(name="u", partitions=[untagged]),
                    ],
                ),
                dld.DescribeLogDirsResult(log_dir="/e", error_code=KafkaStorageError.code),
            ]
        ),
    )
    with KafkaAdminClient(broker.address) as client:
        every = client.describe_log_dirs_at(broker.address, timeout_ms=5_000)
        only_t = client.describe_log_dirs_at(broker.address, ["t"], timeout_ms=5_000)
    d, e = every.log_dirs
    assert [(r.topic, r.size, r.log_start_offset, r.log_end_offset, r.high_watermark)
            for r in d.replicas] == [("t", 100, 1, 9, 8), ("u", 5, -1, -1, -1)]  # fmt: skip
    assert [r.dirty_ratio for r in d.replicas] == [0.25, None]
    assert isinstance(e.error, KafkaStorageError) and e.replicas == ()
    assert [r.topic for r in only_t.log_dirs[0].replicas] == ["t"]
    assert all(request.topics is None for request in broker.asked("DescribeLogDirs"))


@pytest.mark.parametrize(
    ("results", "what"),
    [
        ([(0, 3, 0), (0, 3, 0)], "partition t-0 twice"),
        ([(0, 3, 0), (9, 3, 0)], "a partition it did not ask for: t-9"),
        ([(0, -5, 0)], "low_watermark -5 for t-0 beside no error"),
        ([], "no result for t-0"),
    ],
)
def test_a_delete_records_answer_that_cannot_be_is_malformed(
    two: list[FakeKafkaListener], results: list[tuple[int, int, int]], what: str
) -> None:
    broker, _ = two
    broker.script("DeleteRecords", records_deleted(*results))
    with (
        KafkaAdminClient(broker.address) as client,
        pytest.raises(MalformedResponseError) as raised,
    ):
        client._run(
            client._async.delete_records_at(
                broker.address, {TopicPartition("t", 0): 3}, timeout_ms=5_000
            )
        )
    assert str(raised.value) == f"broker at {broker.address} answered DeleteRecords with {what}"
