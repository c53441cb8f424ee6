"""The Python Admin client (`replog.Admin`, `replog.aio.Admin`) against scripted fake Kafka
listeners: its calls are Kafka's admin APIs at `bootstrap.servers` (or, with
`bootstrap.controllers`, at the controllers' listeners); `create_topics` waits until each live
broker's own Metadata shows the new partitions led; `delete_records` goes to each partition's
leader at its Kafka listener; `describe_quorum` reads DescribeQuorum; a refused bootstrap is
NoBrokersAvailableError for `describe_quorum`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fake_kafka_listener import FakeKafkaListener, listening

import replog
from replog.client.admin import NewTopic
from replog.client.records import TopicPartition
from replog.errors import NoBrokersAvailableError, UnknownTopicOrPartitionError
from replog.kafka.messages import create_topics_response as ctr
from replog.kafka.messages import delete_records_response as drr
from replog.kafka.messages import delete_topics_response as dtr
from replog.kafka.messages import describe_quorum_response as dqr
from replog.kafka.messages import elect_leaders_response as elr
from replog.kafka.messages import metadata_response as mr
from replog.kafka.messages.metadata_request import MetadataRequest
from tests.local_ports import free_port


@pytest.fixture
def brokers() -> Iterator[list[FakeKafkaListener]]:
    with listening(2) as listeners:
        yield listeners


def cluster(
    one: FakeKafkaListener, two: FakeKafkaListener, *, led: bool = True, deleted: bool = False
) -> Any:
    """Brokers 1 and 2 at the fakes' addresses; topic t with partition 0 led by 1 and 1 by 2
    (no leaders with `led` false; unknown with `deleted`); any other name is unknown."""

    def answer(request: MetadataRequest) -> mr.MetadataResponse:
        topics = []
        for name in [t.name for t in request.topics] if request.topics else ["t"]:
            if name != "t" or deleted:
                topics.append(mr.MetadataResponseTopic(name=name, error_code=3))
                continue
            partitions = [
                mr.MetadataResponsePartition(
                    partition_index=p,
                    leader_id=(p + 1) if led else -1,
                    replica_nodes=[1, 2],
                    isr_nodes=[1, 2],
                    error_code=0 if led else 5,
                )
                for p in (0, 1)
            ]
            topics.append(mr.MetadataResponseTopic(name="t", partitions=partitions))
        return mr.MetadataResponse(
            controller_id=1,
            cluster_id="c",
            brokers=[
                mr.MetadataResponseBroker(node_id=i, host="127.0.0.1", port=node.port)
                for i, node in ((1, one), (2, two))
            ],
            topics=topics,
        )

    return answer


def test_create_topics_waits_until_every_broker_sees_the_partitions_led(
    brokers: list[FakeKafkaListener],
) -> None:
    one, two = brokers
    one.script("CreateTopics", ctr.CreateTopicsResponse(
        topics=[ctr.CreatableTopicResult(name="t", num_partitions=2, replication_factor=2)]
    ))  # fmt: skip
    one.script("Metadata", cluster(one, two))
    # Broker 2 learns of the leaders only on its third answer.
    two.script("Metadata", cluster(one, two, led=False), cluster(one, two, led=False),
               cluster(one, two))  # fmt: skip
    with replog.Admin(bootstrap_servers=one.address) as admin:
        (created,) = admin.create_topics([NewTopic("t", 2, 2)])
    assert (created.name, created.num_partitions) == ("t", 2)
    assert len(two.asked("Metadata")) == 3  # asked until it showed them led
    assert [t.name for t in two.asked("Metadata")[0].topics] == ["t"]


def test_delete_records_goes_to_each_leader(brokers: list[FakeKafkaListener]) -> None:
    one, two = brokers
    for node in brokers:
        node.script("Metadata", cluster(one, two))

    def deleted(low: int) -> drr.DeleteRecordsResponse:
        return drr.DeleteRecordsResponse(
            topics=[
                drr.DeleteRecordsTopicResult(
                    name="t",
                    partitions=[
                        drr.DeleteRecordsPartitionResult(
                            partition_index=low // 10, low_watermark=low
                        )
                    ],
                )
            ]
        )

    one.script("DeleteRecords", deleted(5))
    two.script("DeleteRecords", deleted(17))
    with replog.Admin(bootstrap_servers=one.address) as admin:
        found = admin.delete_records({TopicPartition("t", 0): 5, TopicPartition("t", 1): 17})
        with pytest.raises(UnknownTopicOrPartitionError, match="topic 'nope' does not exist"):
            admin.delete_records({TopicPartition("nope", 0): 1}, timeout_ms=2_000)
    assert found == {TopicPartition("t", 0): 5, TopicPartition("t", 1): 17}
    ((topic_one,),) = [r.topics for r in one.asked("DeleteRecords")]
    ((topic_two,),) = [r.topics for r in two.asked("DeleteRecords")]
    assert [(p.partition_index, p.offset) for p in topic_one.partitions] == [(0, 5)]
    assert [(p.partition_index, p.offset) for p in topic_two.partitions] == [(1, 17)]


def test_describe_quorum_and_the_controllers_bootstrap(brokers: list[FakeKafkaListener]) -> None:
    broker, controller = brokers
    voters = [dqr.ReplicaState(replica_id=1, log_end_offset=5)]
    quorum = dqr.DescribeQuorumResponse(
        topics=[
            dqr.TopicData(
                topic_name="__cluster_metadata",
                partitions=[
                    dqr.PartitionData(
                        leader_id=1, leader_epoch=2, high_watermark=5, current_voters=voters
                    )
                ],
            )
        ]
    )
    controller.script("DescribeQuorum", quorum)
    with replog.Admin(
        bootstrap_servers=broker.address, bootstrap_controllers=controller.address
    ) as admin:
        described = admin.describe_quorum()
        admin.describe_cluster()
    assert (described.leader_id, described.high_watermark, described.voters) == (1, 5, (1,))
    assert broker.requests == []  # the controllers' listeners only
    (asked,) = controller.asked("DescribeCluster")
    assert asked.endpoint_type == 2


def test_describe_quorum_of_a_refused_bootstrap_is_no_brokers_available() -> None:
    dead = f"127.0.0.1:{free_port()}"
    with (
        replog.Admin(bootstrap_servers=dead) as admin,
        pytest.raises(NoBrokersAvailableError, match=dead),
    ):
        admin.describe_quorum(timeout_ms=800)


def test_delete_topics_waits_until_no_broker_shows_the_topic(
    brokers: list[FakeKafkaListener],
) -> None:
    one, two = brokers
    one.script("DeleteTopics", dtr.DeleteTopicsResponse(
        responses=[dtr.DeletableTopicResult(name="t")]
    ))  # fmt: skip
    shown, gone = cluster(one, two), cluster(one, two, deleted=True)
    one.script("Metadata", gone)
    two.script("Metadata", shown, shown, gone)  # broker 2 learns of it on its third answer
    with replog.Admin(bootstrap_servers=one.address) as admin:
        admin.delete_topics(["t"], timeout_ms=20_000)
    assert len(two.asked("Metadata")) == 3  # asked until it no longer showed the topic
    assert len(one.asked("Metadata")) == 2  # the brokers, then its own view: done at once


def test_a_preferred_election_waits_until_every_broker_shows_the_preferred_leader(
    brokers: list[FakeKafkaListener],
) -> None:
    one, two = brokers

    def led_by(leader: int) -> mr.MetadataResponse:
        partition = mr.MetadataResponsePartition(
            partition_index=0, leader_id=leader, replica_nodes=[2, 1], isr_nodes=[1, 2]
        )
        return mr.MetadataResponse(
            brokers=[
                mr.MetadataResponseBroker(node_id=i, host="127.0.0.1", port=node.port)
                for i, node in ((1, one), (2, two))
            ],
            topics=[mr.MetadataResponseTopic(name="t", partitions=[partition])],
        )

    one.script("ElectLeaders", elr.ElectLeadersResponse(replica_election_results=[
        elr.ReplicaElectionResult(topic="t", partition_result=[elr.PartitionResult()])
    ]))  # fmt: skip
    one.script("Metadata", led_by(2))
    two.script("Metadata", led_by(1), led_by(1), led_by(2))  # learns of it on its third answer
    with replog.Admin(bootstrap_servers=one.address) as admin:
        (result,) = admin.elect_leaders("preferred", [TopicPartition("t", 0)], timeout_ms=20_000)
    assert result.error is None
    assert len(two.asked("Metadata")) == 3
