"""DescribeTopicPartitions from a broker's image (`describe_topic_partitions` module Rules):
the eligible leader replicas, the listener's view of leaders and offline replicas, pages and
cursors, and errors, through the broker's handler table."""

from __future__ import annotations

from uuid import UUID

from replog.common.acl_codes import AclOperation, AclPermissionType, PatternType, ResourceType
from replog.errors import InvalidRequestError, InvalidTopicError, UnknownTopicOrPartitionError
from replog.kafka.connection import KafkaRequest
from replog.kafka.messages import describe_topic_partitions_request as dtpq
from replog.kafka.messages import describe_topic_partitions_response as dtp
from replog.kafka.messages.request_header import RequestHeader
from replog.kafka.protocol.codec import ZERO_UUID
from replog.quorum.metadata.image import MetadataImage
from replog.quorum.metadata.records import (
    NO_LEADER,
    AccessControlEntryRecord,
    PartitionChangeRecord,
)
from replog.server.config.authorizer_config import AuthorizerConfig
from replog.server.kafka.broker_authorizer import BrokerAuthorizer
from replog.server.kafka.describe_topic_partitions import DESCRIBE_TOPIC_PARTITIONS
from replog.server.kafka.kafka_apis import KafkaApis
from tests.metadata.metadata_helpers import create_topic, replayed, topic_id
from tests.server.kafka.test_kafka_admin_apis import image as admin_image

# Kafka's "not filled" value of an authorized-operations field, and a topic's every supported
# operation (READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS).
NOT_FILLED = -(2**31)
ALL_TOPIC_OPERATIONS = 3576


def image() -> MetadataImage:
    """Brokers 1 and 2, 3 without a Kafka listener, 4 fenced, and topic orders-0 on (1, 2)
    (`test_kafka_admin_apis`), with these topics."""
    return replayed(
        admin_image(),
        *create_topic("payments", topic_id(3), (1, 2, 4), (2, 1, 4), (4, 1, 2)),
        *create_topic("audit", topic_id(2), (3, 1)),
        # payments-2: its leader 4 fenced, the ISR emptied into the ELR (KIP-966).
        PartitionChangeRecord(topic_id(3), 2, isr=(), leader=NO_LEADER, elr=(1, 4)),
        PartitionChangeRecord(topic_id(3), 2, last_known_elr=(4,)),
    )


def ask(
    *names: str, limit: int = 2000, cursor: tuple[str, int] | None = None
) -> dtp.DescribeTopicPartitionsResponse:
    current = image()
    apis = KafkaApis(2, cluster_id="c1", image=lambda: current)
    body = dtpq.DescribeTopicPartitionsRequest(
        topics=[dtpq.TopicRequest(name=n) for n in names],
        response_partition_limit=limit,
        cursor=None
        if cursor is None
        else dtpq.Cursor(topic_name=cursor[0], partition_index=cursor[1]),
    )
    header = RequestHeader(
        request_api_key=DESCRIBE_TOPIC_PARTITIONS, request_api_version=0, correlation_id=1
    )
    answer = apis.handle(KafkaRequest(0, header, body, 0), "PLAINTEXT")
    assert isinstance(answer, dtp.DescribeTopicPartitionsResponse)
    return answer


def rows(answer: dtp.DescribeTopicPartitionsResponse) -> list[tuple[object, ...]]:
    return [
        (t.name, p.partition_index, p.leader_id, p.isr_nodes, p.eligible_leader_replicas)
        for t in answer.topics
        for p in t.partitions
    ]


def test_every_topic_sorted_with_the_eligible_leader_replicas() -> None:
    answer = ask()
    assert [(t.name, t.topic_id, t.error_code) for t in answer.topics] == [
        ("audit", topic_id(2), 0),
        ("orders", topic_id(1), 0),
        ("payments", topic_id(3), 0),
    ]
    (payments_2,) = [p for p in answer.topics[2].partitions if p.partition_index == 2]
    assert (payments_2.leader_id, payments_2.isr_nodes) == (-1, [])
    assert (payments_2.eligible_leader_replicas, payments_2.last_known_elr) == ([1, 4], [4])
    assert payments_2.replica_nodes == [4, 1, 2]
    assert answer.next_cursor is None


def test_leaders_and_offline_replicas_are_the_listeners() -> None:
    answer = ask("audit", "payments")
    audit_0 = answer.topics[0].partitions[0]
    # Broker 3 leads audit-0 but has no PLAINTEXT listener: -1, and offline for this client.
    assert (audit_0.leader_id, audit_0.offline_replicas) == (-1, [3])
    payments_0 = answer.topics[1].partitions[0]
    assert (payments_0.leader_id, payments_0.offline_replicas) == (1, [4])  # 4 is fenced


def test_pages_end_at_the_limit_with_a_cursor_at_the_first_partition_left_out() -> None:
    first = ask("audit", "payments", limit=2)
    assert rows(first) == [("audit", 0, -1, [3, 1], []), ("payments", 0, 1, [1, 2, 4], [])]
    assert first.next_cursor is not None
    assert (first.next_cursor.topic_name, first.next_cursor.partition_index) == ("payments", 1)
    rest = ask("audit", "payments", limit=2, cursor=("payments", 1))
    assert rows(rest) == [("payments", 1, 2, [2, 1, 4], []), ("payments", 2, -1, [], [1, 4])]
    assert rest.next_cursor is None
    # A limit that ends exactly at a topic's end points at the next topic's first partition.
    exact = ask(limit=2)
    assert rows(exact) == [("audit", 0, -1, [3, 1], []), ("orders", 0, 1, [1, 2], [])]
    assert exact.next_cursor is not None
    assert (exact.next_cursor.topic_name, exact.next_cursor.partition_index) == ("payments", 0)


def test_absent_topics_are_named_with_their_error_only_when_asked_for() -> None:
    answer = ask("nope", "bad/name", "audit")
    errors = {t.name: (t.error_code, t.topic_id) for t in answer.topics}
    assert errors["nope"] == (UnknownTopicOrPartitionError.code, ZERO_UUID)
    assert errors["bad/name"] == (InvalidTopicError.code, ZERO_UUID)
    assert errors["audit"][0] == 0
    # Without an authorizer every entry, an absent topic's too, carries every operation a topic
    # supports, as Kafka's handler fills them with none configured.
    assert {t.name: t.topic_authorized_operations for t in answer.topics} == {
        "nope": ALL_TOPIC_OPERATIONS,
        "bad/name": ALL_TOPIC_OPERATIONS,
        "audit": ALL_TOPIC_OPERATIONS,
    }


def test_a_cursor_outside_the_named_topics_or_negative_is_an_invalid_request() -> None:
    for cursor in (("zzz", 0), ("payments", -1)):
        answer = ask("payments", cursor=cursor)
        assert [(t.name, t.error_code) for t in answer.topics] == [
            ("payments", InvalidRequestError.code)
        ]
        # Kafka's error response: no operations filled.
        assert answer.topics[0].topic_authorized_operations == NOT_FILLED


def test_with_an_authorizer_topics_not_describable_are_hidden_or_refused() -> None:
    """Only payments may be described: every topic lists it alone (no cursor names another);
    named, audit and a missing topic are TOPIC_AUTHORIZATION_FAILED with no id, after it."""
    allow = AccessControlEntryRecord(
        UUID(int=9),
        ResourceType.TOPIC,
        "payments",
        PatternType.LITERAL,
        "User:ANONYMOUS",
        "*",
        AclOperation.DESCRIBE,
        AclPermissionType.ALLOW,
    )
    current = replayed(image(), allow)
    authorizer = BrokerAuthorizer(AuthorizerConfig(enabled=True), lambda: current)
    apis = KafkaApis(2, cluster_id="c1", image=lambda: current, authorizer=authorizer)

    def asked(*names: str, limit: int = 2000) -> dtp.DescribeTopicPartitionsResponse:
        body = dtpq.DescribeTopicPartitionsRequest(
            topics=[dtpq.TopicRequest(name=n) for n in names], response_partition_limit=limit
        )
        header = RequestHeader(
            request_api_key=DESCRIBE_TOPIC_PARTITIONS, request_api_version=0, correlation_id=1
        )
        answer = apis.handle(KafkaRequest(0, header, body, 0), "PLAINTEXT")
        assert isinstance(answer, dtp.DescribeTopicPartitionsResponse)
        return answer

    every = asked(limit=3)
    assert [t.name for t in every.topics] == ["payments"] and every.next_cursor is None
    named = asked("audit", "payments", "nowhere")
    assert [(t.name, t.error_code, t.topic_id) for t in named.topics] == [
        ("payments", 0, topic_id(3)),
        ("audit", 29, ZERO_UUID),
        ("nowhere", 29, ZERO_UUID),
    ]
    # The caller's operations on each topic described (DESCRIBE only); the refused ones keep
    # the field unfilled, as Kafka adds them after filling.
    assert [t.topic_authorized_operations for t in named.topics] == [
        1 << AclOperation.DESCRIBE,
        NOT_FILLED,
        NOT_FILLED,
    ]
    assert every.topics[0].topic_authorized_operations == 1 << AclOperation.DESCRIBE
