"""A cluster that finalizes transaction version 1 (`bootstrap.transaction.version=1`, as Kafka's
`kafka-storage format --feature transaction.version=1`): its brokers advertise it, and replog's
own transactional producer stays on version 1 there (AddPartitionsToTxn and AddOffsetsToTxn
before it writes, which each leader and the group coordinator verify, KIP-890; no epoch bump at
EndTxn): a commit is read once by read_committed, an abort only by read_uncommitted, and the
offsets sent to the committed transaction are the group's."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from client_cluster import NO_GROUP_DELAY, ClientCluster, client_cluster
from cluster_helpers import wait_for

from replog import OffsetAndMetadata, TopicPartition
from replog.kafka.messages.api_versions_request import ApiVersionsRequest
from replog.kafka.messages.api_versions_response import ApiVersionsResponse
from replog.wire.kafka_connection import KafkaConnection
from tests.cluster.test_cluster_transactions import (
    TIMEOUT_S,
    _describe,
    copier_consumer,
    polled,
    replog_read,
    wait_state,
)
from tests.local_ports import free_base_port

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClientCluster]:
    with client_cluster(
        tmp_path_factory.mktemp("txn-v1") / "cluster",
        1,
        *NO_GROUP_DELAY,
        "--override",
        "transaction.state.log.num.partitions=1",
        "--override",
        "bootstrap.transaction.version=1",
        base_port=free_base_port(1),
    ) as running:
        yield running


async def _finalized(address: str) -> dict[str, int]:
    connection = await KafkaConnection.open(address, client_id="tests", setup_timeout_ms=2000)
    try:
        request = ApiVersionsRequest(client_software_name="tests", client_software_version="1")
        answer, _ = await connection.call(request, timeout_ms=5000, min_version=3)
    finally:
        connection.close()
    assert isinstance(answer, ApiVersionsResponse)
    return {f.name: f.max_version_level for f in answer.finalized_features}


def test_replogs_producer_uses_transaction_version_1_where_it_is_finalized(
    cluster: ClientCluster,
) -> None:
    (address,) = cluster.kafka_addresses.values()
    assert asyncio.run(_finalized(address))["transaction.version"] == 1
    source = TopicPartition("v1-in", 0)
    with (
        copier_consumer(cluster, "v1-in", "v1-out", [b"in-%d" % n for n in range(3)]) as consumer,
        cluster.producer(transactional_id="v1-tx") as producer,
    ):
        producer.init_transactions()
        copied = polled(consumer, 3)
        assert copied == [b"in-0", b"in-1", b"in-2"]
        producer.begin_transaction()
        producer.send("v1-out", b"aborted", partition=0)
        producer.flush()
        producer.abort_transaction()
        wait_state(cluster, "v1-tx", "CompleteAbort")
        producer.begin_transaction()
        for value in copied:
            producer.send("v1-out", value, partition=0)
        producer.send_offsets_to_transaction(
            {source: OffsetAndMetadata(3)}, consumer.group_metadata()
        )
        producer.commit_transaction()
        wait_for(lambda: consumer.committed(source) == 3, TIMEOUT_S, "v1-out-copier's offset 3")
    wait_state(cluster, "v1-tx", "CompleteCommit")
    assert replog_read(cluster, "v1-out", "read_committed", 3) == copied
    assert replog_read(cluster, "v1-out", "read_uncommitted", 4) == [b"aborted", *copied]
    # Version 1 bumps the epoch at InitProducerId only: still the first epoch after two ends.
    assert asyncio.run(_describe(address, "v1-tx")).producer_epoch == 0
