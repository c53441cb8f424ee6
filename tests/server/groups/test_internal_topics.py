"""Internal topics (`__consumer_offsets`) on a real ReplicaManager over logs in tmp_path:
a client's Produce or DeleteRecords is INVALID_TOPIC_EXCEPTION naming the topic (through a
Kafka listener too) and touches nothing, while the other partitions of the request go on; the
broker's own writer (`internal_topics_allowed=True`, the group coordinator's entry point)
appends with acks=all and gets its ProduceResponse."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from replog.errors import InvalidTopicError
from replog.replication.messages import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    ProducePartition,
    ProduceRequest,
)
from replog.server.data_plane.broker_cores import BrokerCores
from replog.server.runtime.tolerant_service import Refused
from replog.testing import ManualClock
from replog.topic_names import CONSUMER_OFFSETS_TOPIC, INTERNAL_TOPICS, is_internal_topic
from tests.metadata.metadata_helpers import create_topic, topic_id
from tests.server.data_plane.test_replica_manager import Node, batch, cluster_image
from tests.server.kafka.kafka_broker_listener import kafka_client_of

OFFSETS = CONSUMER_OFFSETS_TOPIC


def solo_leader(tmp_path: Path) -> Node:
    """Broker 1, the only replica (so acks=all completes at once) of `__consumer_offsets`-0
    and of `t`-0."""
    node = Node(tmp_path, 1, ManualClock())
    topics = (*create_topic(OFFSETS, topic_id(9), (1,)), *create_topic("t", topic_id(1), (1,)))
    node.rm.apply_image(cluster_image(*topics))
    return node


def request(acks: int, *topics: str) -> ProduceRequest:
    return ProduceRequest(acks, 1000, tuple(ProducePartition(t, 0, batch()) for t in topics))


def test_the_internal_topics_are_kafkas() -> None:
    assert sorted(INTERNAL_TOPICS) == ["__consumer_offsets", "__transaction_state"]
    assert is_internal_topic("__consumer_offsets") and not is_internal_topic("consumer_offsets")


@pytest.mark.asyncio
@pytest.mark.parametrize("acks", [-1, 1, 0])
async def test_a_client_may_not_produce_to_an_internal_topic(tmp_path: Path, acks: int) -> None:
    node = solo_leader(tmp_path)
    response = await asyncio.wait_for(node.rm.produce(request(acks, OFFSETS, "t")), 5)
    refused = response.partitions[0]
    assert refused.topic == OFFSETS and isinstance(refused.error, InvalidTopicError)
    assert refused.error.error_name == "INVALID_TOPIC_EXCEPTION"
    assert f"internal topic '{OFFSETS}'" in str(refused.error)
    assert f"{OFFSETS}-0" in str(refused.error)
    assert node.log(OFFSETS).log_end_offset == 0
    if acks != 0:  # acks=0 answers the failures only
        assert response.partitions[1].error is None
    assert node.log("t").log_end_offset == 1


@pytest.mark.asyncio
async def test_the_broker_itself_appends_to_an_internal_topic_with_acks_all(
    tmp_path: Path,
) -> None:
    node = solo_leader(tmp_path)
    for expected_offset in (0, 1):
        response = await asyncio.wait_for(
            node.rm.produce(request(-1, OFFSETS), internal_topics_allowed=True), 5
        )
        (result,) = response.partitions
        assert result.error is None and result.base_offset == expected_offset
    assert node.log(OFFSETS).log_end_offset == 2
    assert node.leader(OFFSETS).high_watermark == 2


@pytest.mark.asyncio
async def test_a_client_may_not_delete_records_of_an_internal_topic(tmp_path: Path) -> None:
    node = solo_leader(tmp_path)
    await node.rm.produce(request(-1, OFFSETS), internal_topics_allowed=True)
    await node.rm.produce(request(-1, "t"))
    delete = DeleteRecordsRequest(
        (DeleteRecordsPartition(OFFSETS, 0, 1), DeleteRecordsPartition("t", 0, 1)), 0
    )
    refused, deleted = (await asyncio.wait_for(node.rm.delete_records(delete), 5)).partitions
    assert isinstance(refused.error, InvalidTopicError)
    assert f"cannot delete records of internal topic '{OFFSETS}'" in str(refused.error)
    assert node.log(OFFSETS).log_start_offset == 0
    assert deleted.error is None and node.log("t").log_start_offset == 1
    allowed = await node.rm.delete_records(
        DeleteRecordsRequest((DeleteRecordsPartition(OFFSETS, 0, 1),), 0),
        internal_topics_allowed=True,
    )
    assert allowed.partitions[0].error is None and node.log(OFFSETS).log_start_offset == 1


@pytest.mark.asyncio
async def test_the_broker_refuses_a_clients_produce_to_an_internal_topic(tmp_path: Path) -> None:
    node = solo_leader(tmp_path)
    service = BrokerCores(1, replica_manager=node.rm)
    async with kafka_client_of(service, image=lambda: node.rm.image) as client:
        response = await client.produce(request(-1, OFFSETS, "t"))
        refused, accepted = response.partitions
        assert isinstance(refused.error, InvalidTopicError)
        assert accepted.error is None and accepted.base_offset == 0
    # The broker's message (Kafka's answer carries the code alone), and acks=0: refused, so the
    # listener closes the connection.
    answered = await service.produce(request(-1, OFFSETS))
    assert answered is not None
    assert f"internal topic '{OFFSETS}'" in str(answered.partitions[0].error)
    with pytest.raises(Refused) as aborted:
        await service.produce(request(0, OFFSETS))
    assert "INVALID_TOPIC_EXCEPTION" in aborted.value.details
    assert node.log(OFFSETS).log_end_offset == 0
