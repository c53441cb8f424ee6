"""The authorized-operations fields (`replog/security/authorized_operations.py`,
`replog/kafka/authorized_operations_fields.py`): Kafka's bit fields of AclOperation codes over
each resource type's supported operations, asked of StandardAuthorizer with its implications,
filled only when a request asks, refused entries left "not requested", every supported
operation with authorization off, and through the broker's `authorized` wrapper."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from acl_helpers import CLUSTER, GROUP, TOPIC, Op, acl
from test_api_authorization import Caller

from replog.common.acl_codes import ResourceType
from replog.kafka.authorized_operations_fields import operations_fill
from replog.kafka.connection import KafkaRequest
from replog.kafka.messages import consumer_group_describe_request as cgdq
from replog.kafka.messages import consumer_group_describe_response as cgdr
from replog.kafka.messages import describe_cluster_request as dcq
from replog.kafka.messages import describe_cluster_response as dcr
from replog.kafka.messages import describe_groups_request as dgq
from replog.kafka.messages import describe_groups_response as dgr
from replog.kafka.messages import metadata_request as mq
from replog.kafka.messages import metadata_response as mr
from replog.kafka.messages.request_header import RequestHeader
from replog.security.authorized_operations import (
    SUPPORTED_OPERATIONS,
    authorized_operations,
    bit_field,
)
from replog.server.kafka.broker_authorizer import authorized

NOT_REQUESTED = -(2**31)
# Every supported operation, as Kafka's answers carry them with no authorizer.
ALL_TOPIC, ALL_GROUP, ALL_CLUSTER = 3576, 3400, 8096


def test_the_bit_fields_are_kafkas() -> None:
    assert bit_field([Op.READ, Op.DESCRIBE]) == (1 << 3) | (1 << 8)
    assert authorized_operations(ResourceType.TOPIC, None) == ALL_TOPIC
    assert authorized_operations(ResourceType.GROUP, None) == ALL_GROUP
    assert authorized_operations(ResourceType.CLUSTER, None) == ALL_CLUSTER
    assert authorized_operations(ResourceType.TRANSACTIONAL_ID, None) == (1 << 8) | (1 << 4)
    # ALL is no supported operation: it never appears in a field.
    assert all(Op.ALL not in ops for ops in SUPPORTED_OPERATIONS.values())


def test_an_acl_gives_its_operation_and_what_it_implies() -> None:
    caller = Caller(acl(TOPIC, "paid", Op.READ), acl(TOPIC, "paid", Op.ALTER_CONFIGS))
    topic = authorized_operations(
        ResourceType.TOPIC, lambda op: caller.may(op, ResourceType.TOPIC, "paid")
    )
    # READ implies DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS (StandardAuthorizer).
    assert topic == bit_field([Op.READ, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS])
    everything = Caller(acl(TOPIC, "paid", Op.ALL))
    assert (
        authorized_operations(
            ResourceType.TOPIC, lambda op: everything.may(op, ResourceType.TOPIC, "paid")
        )
        == ALL_TOPIC
    )


def metadata_answer() -> mr.MetadataResponse:
    return mr.MetadataResponse(
        topics=[
            mr.MetadataResponseTopic(name="paid"),
            mr.MetadataResponseTopic(name="secret", error_code=29),
            mr.MetadataResponseTopic(name=None, error_code=100),
        ]
    )


def test_metadata_fills_what_it_asks_for_only() -> None:
    caller = Caller(
        acl(TOPIC, "paid", Op.WRITE), acl(CLUSTER, "kafka-cluster", Op.IDEMPOTENT_WRITE)
    )
    asked = mq.MetadataRequest(
        topics=None,
        include_topic_authorized_operations=True,
        include_cluster_authorized_operations=True,
    )
    fill = operations_fill(3, 10, asked, caller)
    assert fill is not None
    answer: Any = fill(metadata_answer())
    paid, secret, unnamed = answer.topics
    assert paid.topic_authorized_operations == bit_field([Op.WRITE, Op.DESCRIBE])
    assert secret.topic_authorized_operations == NOT_REQUESTED  # refused: left as Kafka leaves it
    assert unnamed.topic_authorized_operations == NOT_REQUESTED
    # Without DESCRIBE on the cluster its field is 0, whatever else is allowed (Kafka's
    # KafkaApis); ALTER implies DESCRIBE.
    assert answer.cluster_authorized_operations == 0
    admin = Caller(
        acl(CLUSTER, "kafka-cluster", Op.ALTER), acl(CLUSTER, "kafka-cluster", Op.IDEMPOTENT_WRITE)
    )
    filled: Any = operations_fill(3, 10, asked, admin)(metadata_answer())  # type: ignore[misc]
    assert filled.cluster_authorized_operations == bit_field(
        [Op.ALTER, Op.DESCRIBE, Op.IDEMPOTENT_WRITE]
    )
    assert operations_fill(3, 12, mq.MetadataRequest(topics=None), caller) is None
    assert operations_fill(3, 7, asked, caller) is None  # before v8 there are no such fields


def test_groups_and_the_cluster() -> None:
    caller = Caller(acl(GROUP, "billing", Op.READ))
    groups = dgr.DescribeGroupsResponse(
        groups=[
            dgr.DescribedGroup(group_id="billing"),
            dgr.DescribedGroup(group_id="x", error_code=30),
        ]
    )
    asked = dgq.DescribeGroupsRequest(groups=["billing", "x"], include_authorized_operations=True)
    fill = operations_fill(15, 5, asked, caller)
    assert fill is not None
    billing, refused = fill(groups).groups  # type: ignore[attr-defined]
    assert billing.authorized_operations == bit_field([Op.READ, Op.DESCRIBE])
    assert refused.authorized_operations == NOT_REQUESTED
    assert operations_fill(15, 2, asked, caller) is None
    consumer_groups = cgdr.ConsumerGroupDescribeResponse(
        groups=[cgdr.DescribedGroup(group_id="billing")]
    )
    consumer_asked = cgdq.ConsumerGroupDescribeRequest(
        group_ids=["billing"], include_authorized_operations=True
    )
    consumer_fill = operations_fill(69, 0, consumer_asked, None)
    assert consumer_fill is not None
    (group,) = consumer_fill(consumer_groups).groups  # type: ignore[attr-defined]
    assert group.authorized_operations == ALL_GROUP
    cluster_fill = operations_fill(
        60, 1, dcq.DescribeClusterRequest(include_cluster_authorized_operations=True), caller
    )
    assert cluster_fill is not None
    assert cluster_fill(dcr.DescribeClusterResponse()).cluster_authorized_operations == 0  # type: ignore[attr-defined]
    only_cluster_action = Caller(acl(CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION))
    no_describe = operations_fill(
        60,
        1,
        dcq.DescribeClusterRequest(include_cluster_authorized_operations=True),
        only_cluster_action,
    )
    assert no_describe is not None
    assert no_describe(dcr.DescribeClusterResponse()).cluster_authorized_operations == 0  # type: ignore[attr-defined]


@pytest.mark.parametrize("answered_later", [False, True])
def test_the_broker_wrapper_fills_them_with_authorization_off(answered_later: bool) -> None:
    body = mq.MetadataRequest(topics=None, include_topic_authorized_operations=True)
    header = RequestHeader(request_api_key=3, request_api_version=12, correlation_id=1)
    request = KafkaRequest(0, header, body, 0)

    async def later() -> mr.MetadataResponse:
        return metadata_answer()

    def handle(asked: KafkaRequest, caller: Any) -> Any:
        assert caller is None
        return later() if answered_later else metadata_answer()

    answer: Any = authorized(None, request, handle)
    if answered_later:
        answer = asyncio.run(answer)
    assert answer.topics[0].topic_authorized_operations == ALL_TOPIC
    plain = KafkaRequest(0, header, mq.MetadataRequest(topics=None), 0)
    untouched: Any = authorized(None, plain, lambda asked, caller: metadata_answer())
    assert untouched.topics[0].topic_authorized_operations == NOT_REQUESTED
