"""The per-API authorization rules (`replog/kafka/api_authorization.py`) over Kafka's
StandardAuthorizer: each rule's refusal with Kafka's error in the right entries, the allowed
entries passed on to the handler, every refusal the table builds encoding at every version
served, and every API a broker serves either asked or named as Kafka does not ask it."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest
from acl_helpers import CLUSTER, DENY, GROUP, PREFIXED, TOPIC, TXN, Op, acl

from replog.common.acl_codes import AclOperation, ResourceType
from replog.errors import RequestRefusedError
from replog.kafka import api_authorization as rules
from replog.kafka.api_authorization import CLUSTER_NAME, Gated, fetch_refused, gate
from replog.kafka.messages import REQUESTS, RESPONSES
from replog.kafka.messages import create_topics_request as ctq
from replog.kafka.messages import delete_topics_request as dtq
from replog.kafka.messages import describe_configs_request as dcq
from replog.kafka.messages import elect_leaders_request as elq
from replog.kafka.messages import find_coordinator_request as fcq
from replog.kafka.messages import list_groups_response as lgr
from replog.kafka.messages import metadata_request as mq
from replog.kafka.messages import metadata_response as mr
from replog.kafka.messages import offset_commit_request as ocq
from replog.kafka.messages import offset_fetch_request as ofq
from replog.kafka.messages import produce_request as pq
from replog.kafka.messages import produce_response as pr
from replog.kafka.messages.init_producer_id_request import InitProducerIdRequest
from replog.kafka.messages.join_group_request import JoinGroupRequest
from replog.kafka.protocol.codec import ZERO_UUID, Message
from replog.quorum.metadata.records import AccessControlEntryRecord
from replog.security.acl_index import AclIndex
from replog.security.authorizer import Action, Authorizer
from replog.security.principal import KafkaPrincipal
from replog.security.resource_type_authorization import authorize_by_resource_type
from replog.server.kafka.kafka_acl_apis import ACL_SERVED
from replog.server.kafka.kafka_admin_apis import ADMIN_SERVED
from replog.server.kafka.kafka_apis import SERVED
from replog.server.kafka.kafka_group_apis import GROUP_SERVED
from replog.server.kafka.kafka_quorum_apis import QUORUM_SERVED
from replog.server.kafka.kafka_txn_apis import TXN_SERVED

ALICE = KafkaPrincipal("User", "alice")
TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED = 29, 30, 31, 53
# Kafka asks nothing for these (ApiVersions, DescribeCluster); Fetch asks in its handler, where
# a fetch session's partitions are known (`fetch_refused`).
# Fetch and DescribeTopicPartitions ask in their handlers (`fetch_refused`, `describable`).
NOT_IN_TABLE = {18: "ApiVersions", 60: "DescribeCluster", 1: "Fetch", 75: "DescribeTopicPartitions"}


class Caller:
    """`api_authorization.Caller` over a StandardAuthorizer for alice at 10.0.0.1."""

    def __init__(self, *acls: AccessControlEntryRecord, topics: dict[UUID, str] | None = None):
        self.authorizer = Authorizer(AclIndex(acls), loaded=True)
        self.topics = topics or {}
        self.asked: list[tuple[AclOperation, ResourceType, str]] = []

    def may(
        self, operation: AclOperation, resource_type: ResourceType, name: str, *, log: bool = True
    ) -> bool:
        self.asked.append((operation, resource_type, name))
        return self.authorizer.authorize(
            ALICE, "10.0.0.1", Action(operation, resource_type, name)
        ).allowed

    def may_any(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        return authorize_by_resource_type(
            self.authorizer, ALICE, "10.0.0.1", operation, resource_type
        )

    def topic_name(self, topic_id: UUID) -> str | None:
        return self.topics.get(topic_id)


def produce(*topics: str, acks: int = -1, transactional_id: str | None = None) -> pq.ProduceRequest:
    return pq.ProduceRequest(
        transactional_id=transactional_id,
        acks=acks,
        timeout_ms=1000,
        topic_data=[
            pq.TopicProduceData(
                name=t, partition_data=[pq.PartitionProduceData(index=0, records=b"")]
            )
            for t in topics
        ],
    )


def handled(gated: Gated | None, answer: Message | None) -> Message | None:
    assert gated is not None
    return gated.complete(answer if gated.body is not None else None)


def test_produce_refuses_topics_without_write_and_passes_the_others_on() -> None:
    caller = Caller(acl(TOPIC, "paid", Op.WRITE))
    gated = gate(0, 9, produce("paid", "secret"), caller)
    assert gated is not None and gated.body is not None
    assert [t.name for t in gated.body.topic_data] == ["paid"]
    answer = pr.ProduceResponse(
        responses=[
            pr.TopicProduceResponse(
                name="paid", partition_responses=[pr.PartitionProduceResponse(index=0)]
            )
        ]
    )
    response = handled(gated, answer)
    assert isinstance(response, pr.ProduceResponse)
    codes = {t.name: [p.error_code for p in t.partition_responses] for t in response.responses}
    assert codes == {"paid": [0], "secret": [TOPIC_DENIED]}


def test_produce_with_every_topic_allowed_is_untouched_and_acks_0_refusals_close() -> None:
    caller = Caller(acl(TOPIC, "pa", Op.WRITE, pattern=PREFIXED))
    assert gate(0, 9, produce("paid", "past"), caller) is None
    with pytest.raises(RequestRefusedError, match="secret"):
        gate(0, 9, produce("paid", "secret", acks=0), caller)


def test_a_transactional_produce_needs_write_on_its_transactional_id() -> None:
    caller = Caller(acl(TOPIC, "paid", Op.WRITE))
    response = handled(gate(0, 9, produce("paid", transactional_id="tx"), caller), None)
    assert isinstance(response, pr.ProduceResponse)
    assert [p.error_code for t in response.responses for p in t.partition_responses] == [TXN_DENIED]
    caller = Caller(acl(TOPIC, "paid", Op.WRITE), acl(TXN, "tx", Op.WRITE))
    assert gate(0, 9, produce("paid", transactional_id="tx"), caller) is None


def test_deny_beats_allow_and_write_implies_describe() -> None:
    caller = Caller(acl(TOPIC, "*", Op.WRITE), acl(TOPIC, "secret", Op.WRITE, DENY))
    gated = gate(0, 9, produce("paid", "secret"), caller)
    assert gated is not None and [t.name for t in gated.body.topic_data] == ["paid"]  # type: ignore[union-attr]
    request = mq.MetadataRequest(topics=[mq.MetadataRequestTopic(name="paid")])
    answer = mr.MetadataResponse(
        topics=[mr.MetadataResponseTopic(name="paid", topic_id=UUID(int=1))]
    )
    response = handled(gate(3, 12, request, caller), answer)
    assert isinstance(response, mr.MetadataResponse) and response.topics[0].error_code == 0


def metadata_answer() -> mr.MetadataResponse:
    return mr.MetadataResponse(
        topics=[
            mr.MetadataResponseTopic(
                name=name, topic_id=UUID(int=i + 1), partitions=[mr.MetadataResponsePartition()]
            )
            for i, name in enumerate(["paid", "secret"])
        ]
    )


def test_metadata_hides_undescribable_topics_from_every_topic_and_refuses_named_ones() -> None:
    caller = Caller(acl(TOPIC, "paid", Op.READ))
    everything = handled(gate(3, 12, mq.MetadataRequest(topics=None), caller), metadata_answer())
    assert isinstance(everything, mr.MetadataResponse)
    assert [t.name for t in everything.topics] == ["paid"]
    named = mq.MetadataRequest(
        topics=[mq.MetadataRequestTopic(name="paid"), mq.MetadataRequestTopic(name="secret")]
    )
    answer = handled(gate(3, 12, named, caller), metadata_answer())
    assert isinstance(answer, mr.MetadataResponse)
    refused = answer.topics[1]
    assert (refused.name, refused.error_code, refused.topic_id, refused.partitions) == (
        "secret",
        TOPIC_DENIED,
        ZERO_UUID,
        [],
    )


def test_group_apis_need_read_on_the_group_then_read_on_each_topic() -> None:
    join = JoinGroupRequest(group_id="billing", protocol_type="consumer", protocols=[])
    response = handled(gate(11, 9, join, Caller(acl(TOPIC, "*", Op.ALL))), None)
    assert response is not None and response.error_code == GROUP_DENIED  # type: ignore[attr-defined]
    commit = ocq.OffsetCommitRequest(
        group_id="billing",
        topics=[
            ocq.OffsetCommitRequestTopic(
                name=t, partitions=[ocq.OffsetCommitRequestPartition(partition_index=0)]
            )
            for t in ("paid", "secret")
        ],
    )
    caller = Caller(acl(GROUP, "bill", Op.READ, pattern=PREFIXED), acl(TOPIC, "paid", Op.READ))
    gated = gate(8, 9, commit, caller)
    assert gated is not None and [t.name for t in gated.body.topics] == ["paid"]  # type: ignore[union-attr]
    assert (Op.READ, GROUP, "billing") in caller.asked


def test_offset_fetch_of_every_topic_leaves_out_the_undescribable() -> None:
    from replog.kafka.messages import offset_fetch_response as ofr

    caller = Caller(acl(GROUP, "billing", Op.DESCRIBE), acl(TOPIC, "paid", Op.DESCRIBE))
    request = ofq.OffsetFetchRequest(
        groups=[
            ofq.OffsetFetchRequestGroup(group_id="billing", topics=None),
            ofq.OffsetFetchRequestGroup(group_id="other", topics=None),
        ]
    )
    answer = ofr.OffsetFetchResponse(
        groups=[
            ofr.OffsetFetchResponseGroup(
                group_id="billing",
                topics=[ofr.OffsetFetchResponseTopics(name=t) for t in ("paid", "secret")],
            )
        ]
    )
    gated = gate(9, 8, request, caller)
    assert gated is not None and [g.group_id for g in gated.body.groups] == ["billing"]  # type: ignore[union-attr]
    response = gated.complete(answer)
    assert isinstance(response, ofr.OffsetFetchResponse)
    assert [(g.group_id, g.error_code, [t.name for t in g.topics]) for g in response.groups] == [
        ("billing", 0, ["paid"]),
        ("other", GROUP_DENIED, []),
    ]


def test_init_producer_id_idempotent_needs_idempotent_write_or_write_on_some_topic() -> None:
    request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1)
    refused = handled(gate(22, 4, request, Caller(acl(TOPIC, "paid", Op.READ))), None)
    assert refused is not None and refused.error_code == CLUSTER_DENIED  # type: ignore[attr-defined]
    assert gate(22, 4, request, Caller(acl(TOPIC, "pa", Op.WRITE, pattern=PREFIXED))) is None
    assert gate(22, 4, request, Caller(acl(CLUSTER, CLUSTER_NAME, Op.IDEMPOTENT_WRITE))) is None
    transactional = InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=1000)
    refused = handled(gate(22, 4, transactional, Caller(acl(TOPIC, "*", Op.ALL))), None)
    assert refused is not None and refused.error_code == TXN_DENIED  # type: ignore[attr-defined]


def test_cluster_apis_need_alter_on_the_cluster() -> None:
    request = elq.ElectLeadersRequest(
        election_type=0, topic_partitions=[elq.TopicPartitions(topic="paid", partitions=[0, 1])]
    )
    response = handled(gate(43, 2, request, Caller(acl(TOPIC, "*", Op.ALL))), None)
    assert response.error_code == CLUSTER_DENIED  # type: ignore[union-attr]
    codes = [p.error_code for r in response.replica_election_results for p in r.partition_result]  # type: ignore[union-attr]
    assert codes == [CLUSTER_DENIED, CLUSTER_DENIED]
    assert gate(43, 2, request, Caller(acl(CLUSTER, CLUSTER_NAME, Op.ALTER))) is None


def test_configs_ask_the_resource_of_their_type() -> None:
    request = dcq.DescribeConfigsRequest(
        resources=[
            dcq.DescribeConfigsResource(resource_type=2, resource_name="paid"),
            dcq.DescribeConfigsResource(resource_type=4, resource_name="1"),
            dcq.DescribeConfigsResource(resource_type=32, resource_name="billing"),
        ]
    )
    caller = Caller(acl(TOPIC, "paid", Op.ALTER_CONFIGS))  # implies DESCRIBE_CONFIGS
    gated = gate(32, 4, request, caller)
    assert gated is not None and [r.resource_name for r in gated.body.resources] == ["paid"]  # type: ignore[union-attr]
    response = gated.complete(RESPONSES[32]())
    assert [(r.resource_name, r.error_code) for r in response.results] == [  # type: ignore[union-attr]
        ("1", CLUSTER_DENIED),
        ("billing", GROUP_DENIED),
    ]


def test_create_topics_cluster_create_or_topic_create_and_delete_by_id_hides_the_name() -> None:
    create = ctq.CreateTopicsRequest(
        topics=[ctq.CreatableTopic(name=t) for t in ("paid", "secret")]
    )
    assert gate(19, 7, create, Caller(acl(CLUSTER, CLUSTER_NAME, Op.CREATE))) is None
    gated = gate(19, 7, create, Caller(acl(TOPIC, "paid", Op.CREATE)))
    assert gated is not None and [t.name for t in gated.body.topics] == ["paid"]  # type: ignore[union-attr]
    secret_id = UUID(int=7)
    delete = dtq.DeleteTopicsRequest(topics=[dtq.DeleteTopicState(name=None, topic_id=secret_id)])
    response = handled(gate(20, 6, delete, Caller(topics={secret_id: "secret"})), None)
    result = response.responses[0]  # type: ignore[union-attr]
    assert (result.name, result.error_code) == (None, 100)  # UNKNOWN_TOPIC_ID: no name confirmed


def test_find_coordinator_batches_refuse_each_key() -> None:
    request = fcq.FindCoordinatorRequest(key_type=0, coordinator_keys=["billing", "secret"])
    gated = gate(10, 4, request, Caller(acl(GROUP, "billing", Op.DESCRIBE)))
    assert gated is not None and gated.body.coordinator_keys == ["billing"]  # type: ignore[union-attr]
    response = gated.complete(RESPONSES[10]())
    assert [(c.key, c.error_code) for c in response.coordinators] == [("secret", GROUP_DENIED)]  # type: ignore[union-attr]


def test_list_groups_without_cluster_describe_lists_the_describable_groups() -> None:
    answer = lgr.ListGroupsResponse(
        groups=[lgr.ListedGroup(group_id=g) for g in ("billing", "secret")]
    )
    response = handled(gate(16, 5, REQUESTS[16](), Caller(acl(GROUP, "billing", Op.READ))), answer)
    assert [g.group_id for g in response.groups] == ["billing"]  # type: ignore[union-attr]


def test_fetch_refuses_topics_without_read() -> None:
    caller = Caller(
        acl(TOPIC, "paid", Op.READ), acl(TOPIC, "paid", Op.READ, DENY, principal="User:*")
    )
    assert fetch_refused(["paid", "paid", "other"], caller) == {"paid", "other"}


def served() -> dict[int, tuple[int, int]]:
    tables: list[Any] = [SERVED, ADMIN_SERVED, GROUP_SERVED, TXN_SERVED, QUORUM_SERVED, ACL_SERVED]
    found: dict[int, tuple[int, int]] = {27: (1, 2)}  # WriteTxnMarkers
    for table in tables:
        found.update(table)
    return found


def test_every_api_a_broker_serves_is_asked_or_named_as_kafka_asks_nothing() -> None:
    for key in served():
        assert key in rules.RULES or key in NOT_IN_TABLE, f"API key {key} has no rule"


@pytest.mark.parametrize("key", sorted(set(rules.RULES) & set(served())))
def test_every_refusal_the_table_builds_encodes_at_every_served_version(key: int) -> None:
    """Everything denied to a caller with no ACLs: what the table answers (or adds to an empty
    answer) encodes at each version the broker serves."""
    low, high = served()[key]
    for version in range(low, high + 1):
        request = sample_request(key, version)
        try:
            gated = gate(key, version, request, Caller())
        except RequestRefusedError:
            continue
        if gated is None:
            continue
        response = gated.complete(None if gated.body is None else RESPONSES[key]())
        assert response is not None
        response.encode(version)


def sample_request(key: int, version: int) -> Message:
    """A request naming one resource wherever the request names any (topic "paid" partition
    0, group "billing", transactional id "tx")."""
    request = REQUESTS[key]()
    for field in type(request).__slots__:
        value = getattr(request, field)
        if field in ("group_id", "transactional_id", "v3_and_below_transactional_id"):
            setattr(request, field, "billing" if "group" in field else "tx")
        elif (
            field
            in ("groups", "group_ids", "groups_names", "transactional_ids", "coordinator_keys")
            and isinstance(value, list)
            and key != 9
        ):
            setattr(request, field, ["billing"])
        elif field == "resources":
            setattr(request, field, [_resource(key)])
    return request


def _resource(key: int) -> Any:
    item = REQUESTS[key]().__class__
    module = __import__(item.__module__, fromlist=["x"])
    cls = getattr(module, "DescribeConfigsResource", None) or module.AlterConfigsResource
    return cls(resource_type=2, resource_name="paid")


def one_topic_requests() -> dict[int, Message]:
    """A request per API whose refusals answer each partition: topic "paid", partition 0."""
    from replog.kafka.messages import delete_records_request as drq
    from replog.kafka.messages import describe_producers_request as dpq
    from replog.kafka.messages import list_offsets_request as loq
    from replog.kafka.messages import offset_delete_request as odq
    from replog.kafka.messages import offset_for_leader_epoch_request as oflq
    from replog.kafka.messages import txn_offset_commit_request as tocq
    from replog.kafka.messages import write_txn_markers_request as wtmq

    return {
        0: produce("paid"),
        2: loq.ListOffsetsRequest(
            topics=[loq.ListOffsetsTopic(name="paid", partitions=[loq.ListOffsetsPartition()])]
        ),
        8: ocq.OffsetCommitRequest(
            group_id="billing",
            topics=[
                ocq.OffsetCommitRequestTopic(
                    name="paid", partitions=[ocq.OffsetCommitRequestPartition()]
                )
            ],
        ),
        21: drq.DeleteRecordsRequest(
            topics=[drq.DeleteRecordsTopic(name="paid", partitions=[drq.DeleteRecordsPartition()])]
        ),
        23: oflq.OffsetForLeaderEpochRequest(
            topics=[
                oflq.OffsetForLeaderTopic(
                    topic="paid", partitions=[oflq.OffsetForLeaderPartition()]
                )
            ]
        ),
        27: wtmq.WriteTxnMarkersRequest(
            markers=[
                wtmq.WritableTxnMarker(
                    topics=[wtmq.WritableTxnMarkerTopic(name="paid", partition_indexes=[0])]
                )
            ]
        ),
        28: tocq.TxnOffsetCommitRequest(
            transactional_id="tx",
            group_id="billing",
            topics=[
                tocq.TxnOffsetCommitRequestTopic(
                    name="paid", partitions=[tocq.TxnOffsetCommitRequestPartition()]
                )
            ],
        ),
        43: elq.ElectLeadersRequest(
            topic_partitions=[elq.TopicPartitions(topic="paid", partitions=[0])]
        ),
        47: odq.OffsetDeleteRequest(
            group_id="billing",
            topics=[
                odq.OffsetDeleteRequestTopic(
                    name="paid", partitions=[odq.OffsetDeleteRequestPartition()]
                )
            ],
        ),
        61: dpq.DescribeProducersRequest(
            topics=[dpq.TopicRequest(name="paid", partition_indexes=[0])]
        ),
    }


@pytest.mark.parametrize("key", sorted(one_topic_requests()))
def test_each_refused_partition_is_answered_at_every_served_version(key: int) -> None:
    """Every partition of a refused topic gets an entry with the refusal's code, and the
    answer encodes at each version served (the group and transactional id allowed, so that
    the topic, or for the cluster's APIs the cluster, is what is refused)."""
    caller = Caller(acl(GROUP, "billing", Op.ALL), acl(TXN, "tx", Op.ALL))
    low, high = served()[key]
    for version in range(low, high + 1):
        gated = gate(key, version, one_topic_requests()[key], caller)
        assert gated is not None
        response = gated.complete(None if gated.body is None else RESPONSES[key]())
        assert response is not None
        text = repr(vars_of(response))
        assert "'error_code': 29" in text or "'error_code': 31" in text, text
        response.encode(version)


def vars_of(message: Any) -> Any:
    """A message as nested dicts and lists, for searching its error codes."""
    if isinstance(message, list):
        return [vars_of(m) for m in message]
    slots = getattr(type(message), "__slots__", None)
    if slots is None:
        return message
    return {name: vars_of(getattr(message, name)) for name in slots}
