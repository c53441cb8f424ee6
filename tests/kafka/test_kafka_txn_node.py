"""A real node (`replog node`, broker and controller, one broker) serving a transactional
producer on its Kafka listener: confluent-kafka's `init_transactions` makes the broker create
`__transaction_state` (its replication factor capped at the one broker registered) and find
its coordinator, the transaction adds its partition and commits (EndTxn answered once
PrepareCommit is written); its marker goes through the broker's own Broker gRPC service, and
DescribeTransactions and ListTransactions then show it in CompleteCommit."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replog.admin.controller_client import ControllerClient
from replog.admin.controller_results import NewTopic
from replog.kafka.messages.describe_transactions_request import DescribeTransactionsRequest
from replog.kafka.messages.list_transactions_request import ListTransactionsRequest
from replog.kafka.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from replog.topic_names import TRANSACTION_STATE_TOPIC
from tests.confluent_producer import confluent_producer
from tests.eventually import wait_until
from tests.kafka.kafka_node import RunningNode, running_node
from tests.kafka.test_kafka_listener_node import ask, wait_serving


@pytest.fixture
def node(tmp_path: Path) -> Iterator[RunningNode]:
    properties = ["transaction.state.log.num.partitions=3"]
    with running_node(tmp_path, "kafka-txn-test", properties) as running:
        yield running


def test_a_transactional_producer_commits_through_a_real_node(node: RunningNode) -> None:
    wait_serving(node)
    with ControllerClient(f"127.0.0.1:{node.grpc_port}", default_timeout_s=30) as admin:
        (created,) = admin.create_topics([NewTopic("orders", 1, 1)])
        assert created.error is None, created
    with confluent_producer(
        {"bootstrap.servers": node.kafka_address, "transactional.id": "orders-tx"}
    ) as producer:
        producer.init_transactions(60)
        producer.begin_transaction()
        producer.produce("orders", value=b"paid", key=b"o-1", partition=0)
        assert producer.flush(30) == 0
        producer.commit_transaction(30)
    wanted = MetadataRequest(topics=[MetadataRequestTopic(name=TRANSACTION_STATE_TOPIC)])
    (described,) = ask(node, wanted, 9).topics
    assert described.error_code == 0 and len(described.partitions) == 3
    assert {tuple(p.replica_nodes) for p in described.partitions} == {(1,)}

    def state() -> tuple[int, str, list[Any]]:
        answer = ask(node, DescribeTransactionsRequest(transactional_ids=["orders-tx"]), 0)
        (found,) = answer.transaction_states
        return found.error_code, found.transaction_state, found.topics

    # Complete*: the marker is written and the transaction holds no partition any more.
    wait_until(lambda: state() == (0, "CompleteCommit", []), "the commit's marker written")
    listed = ask(node, ListTransactionsRequest(), 0)
    assert [(s.transactional_id, s.transaction_state) for s in listed.transaction_states] == [
        ("orders-tx", "CompleteCommit")
    ]
