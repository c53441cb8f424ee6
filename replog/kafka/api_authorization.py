"""The per-API authorization rules of a broker's Kafka listener (Kafka's KafkaApis and
ControllerApis: each handler's authorize and filterByAuthorized calls), as one table.

`gate(api_key, version, body, caller)` asks the caller's authorizer what the request needs
and gives None when everything is allowed (the handler sees the request untouched), else a
`Gated`: the request the handler is given (only its allowed entries; None: the handler is not
asked) and how its answer becomes the client's (the refused entries added with their errors).

Rules (Kafka 4.x; the CLUSTER resource is named "kafka-cluster"):
- Refused entries get Kafka's codes: TOPIC_AUTHORIZATION_FAILED (29), GROUP_AUTHORIZATION_FAILED
  (30), CLUSTER_AUTHORIZATION_FAILED (31), TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53), and are
  added after the handler's entries. A request refused as a whole is answered here with its
  error in every entry (or its top-level error) without asking the handler.
- Topics: Produce WRITE (a transactional producer WRITE on its transactional id first, the
  whole request refused without it; acks=0 with any refusal closes the connection, as Kafka
  closes it on an acks=0 error), ListOffsets and OffsetForLeaderEpoch DESCRIBE, DeleteRecords
  DELETE, DescribeProducers READ, CreateTopics CREATE on the cluster or the topic, DeleteTopics
  DELETE (by id: DESCRIBE, else UNKNOWN_TOPIC_ID so that no id is confirmed), CreatePartitions
  ALTER. Fetch READ is the Fetch handler's own question (`fetch_refused`): a fetch session's
  partitions are known only there.
- Metadata: a topic asked for without DESCRIBE is TOPIC_AUTHORIZATION_FAILED with no id; a
  request for every topic lists only the topics the caller may DESCRIBE (Kafka hides the others;
  topics are never created automatically here, so CREATE is never asked). DescribeTopicPartitions
  the same, asked by its handler (`describable`): its pages are cut after the refusals.
- Groups: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, ConsumerGroupHeartbeat READ;
  OffsetCommit READ group then READ per topic; OffsetFetch DESCRIBE group then DESCRIBE per topic
  (topics the caller may not DESCRIBE are left out of an all-topics answer); DescribeGroups and
  ConsumerGroupDescribe DESCRIBE per group; DeleteGroups DELETE per group; OffsetDelete DELETE
  group then READ per topic; ListGroups lists every group with DESCRIBE on the cluster, else
  those the caller may DESCRIBE; FindCoordinator DESCRIBE on the group or transactional id.
- Transactions: InitProducerId WRITE on the transactional id, or without one IDEMPOTENT_WRITE on
  the cluster or WRITE on some topic (`may_any`); AddPartitionsToTxn (v0-3) WRITE on the
  transactional id, then WRITE per topic (any refusal leaves the others OPERATION_NOT_ATTEMPTED);
  AddOffsetsToTxn WRITE transactional id and READ group; TxnOffsetCommit WRITE transactional id,
  READ group, READ per topic; EndTxn WRITE transactional id; DescribeTransactions DESCRIBE per
  id; ListTransactions lists the ids the caller may DESCRIBE.
- Configs: Describe/AlterConfigs and IncrementalAlterConfigs DESCRIBE_CONFIGS / ALTER_CONFIGS on
  the topic (TOPIC_AUTHORIZATION_FAILED), the group (GROUP_AUTHORIZATION_FAILED), or the cluster
  for broker and broker-logger resources (CLUSTER_AUTHORIZATION_FAILED).
- Cluster: ElectLeaders, AlterPartitionReassignments, UnregisterBroker, UpdateFeatures,
  CreateAcls, DeleteAcls ALTER; ListPartitionReassignments, DescribeLogDirs, DescribeQuorum,
  DescribeAcls DESCRIBE; WriteTxnMarkers and AddPartitionsToTxn v4+ (brokers' calls)
  CLUSTER_ACTION.
- Not asked: ApiVersions, and DescribeCluster on a broker (as Kafka). A controller's Kafka
  listener (`controller_gate`) asks ALTER on the cluster for DescribeCluster, as Kafka's
  ControllerApis does (it tells the controllers only to an admin).
- Pure: messages in, messages out; the caller answers the questions.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar
from uuid import UUID

from replog.common.acl_codes import AclOperation, ResourceType
from replog.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    OperationNotAttemptedError,
    RequestRefusedError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
    UnknownTopicIdError,
)
from replog.kafka.messages import add_offsets_to_txn_response as aotr
from replog.kafka.messages import add_partitions_to_txn_response as aptr
from replog.kafka.messages import alter_configs_response as acr
from replog.kafka.messages import alter_partition_reassignments_response as aprr
from replog.kafka.messages import consumer_group_describe_response as cgdr
from replog.kafka.messages import consumer_group_heartbeat_response as cghr
from replog.kafka.messages import create_acls_response as cacr
from replog.kafka.messages import create_partitions_response as cpr
from replog.kafka.messages import create_topics_response as ctr
from replog.kafka.messages import delete_acls_response as dacr
from replog.kafka.messages import delete_groups_response as dgr
from replog.kafka.messages import delete_records_response as drr
from replog.kafka.messages import delete_topics_response as dtr
from replog.kafka.messages import describe_acls_response as dsar
from replog.kafka.messages import describe_cluster_response as dclr
from replog.kafka.messages import describe_configs_response as dcr
from replog.kafka.messages import describe_groups_response as dgsr
from replog.kafka.messages import describe_log_dirs_response as dldr
from replog.kafka.messages import describe_producers_response as dpr
from replog.kafka.messages import describe_quorum_response as dqr
from replog.kafka.messages import describe_transactions_response as dtxr
from replog.kafka.messages import elect_leaders_response as elr
from replog.kafka.messages import end_txn_response as etr
from replog.kafka.messages import find_coordinator_response as fcr
from replog.kafka.messages import heartbeat_response as hbr
from replog.kafka.messages import incremental_alter_configs_response as iacr
from replog.kafka.messages import init_producer_id_response as ipr
from replog.kafka.messages import join_group_response as jgr
from replog.kafka.messages import leave_group_response as lgr
from replog.kafka.messages import list_groups_response as lsgr
from replog.kafka.messages import list_offsets_response as lor
from replog.kafka.messages import list_partition_reassignments_response as lprr
from replog.kafka.messages import list_transactions_response as ltr
from replog.kafka.messages import metadata_response as mr
from replog.kafka.messages import offset_commit_response as ocr
from replog.kafka.messages import offset_delete_response as odr
from replog.kafka.messages import offset_fetch_response as ofr
from replog.kafka.messages import offset_for_leader_epoch_response as oflr
from replog.kafka.messages import produce_response as pr
from replog.kafka.messages import sync_group_response as sgr
from replog.kafka.messages import txn_offset_commit_response as tocr
from replog.kafka.messages import unregister_broker_response as ubr
from replog.kafka.messages import update_features_response as ufr
from replog.kafka.messages import write_txn_markers_response as wtmr
from replog.kafka.protocol.codec import ZERO_UUID, Message

CLUSTER_NAME = "kafka-cluster"
TOPIC_DENIED = TopicAuthorizationFailedError.code
GROUP_DENIED = GroupAuthorizationFailedError.code
CLUSTER_DENIED = ClusterAuthorizationFailedError.code
TXN_ID_DENIED = TransactionalIdAuthorizationFailedError.code
NOT_ATTEMPTED = OperationNotAttemptedError.code
UNKNOWN_TOPIC_ID = UnknownTopicIdError.code
# Config resource types on the wire: TOPIC 2, BROKER 4, BROKER_LOGGER 8, GROUP 32.
CONFIG_RESOURCES = {
    2: (ResourceType.TOPIC, TOPIC_DENIED),
    4: (ResourceType.CLUSTER, CLUSTER_DENIED),
    8: (ResourceType.CLUSTER, CLUSTER_DENIED),
    32: (ResourceType.GROUP, GROUP_DENIED),
}
GROUP_KEY, TRANSACTION_KEY = 0, 1  # FindCoordinator key types
OFFSET_FETCH_GROUPS_VERSION = 8  # OffsetFetch's first version asking for several groups

READ, WRITE, CREATE, DELETE = (
    AclOperation.READ,
    AclOperation.WRITE,
    AclOperation.CREATE,
    AclOperation.DELETE,
)
ALTER, DESCRIBE = AclOperation.ALTER, AclOperation.DESCRIBE
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
TXN_ID = ResourceType.TRANSACTIONAL_ID
E = TypeVar("E")


class Caller(Protocol):
    """The authorizer's answers for one request's principal and host."""

    def may(
        self, operation: AclOperation, resource_type: ResourceType, name: str, *, log: bool = True
    ) -> bool:
        """May the caller do `operation` on the resource (`log`: a refusal is worth a line)."""
        ...

    def may_any(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """May the caller do `operation` on at least one resource of the type."""
        ...

    def topic_name(self, topic_id: UUID) -> str | None:
        """The topic with that id in the broker's metadata (None: none)."""
        ...


@dataclass(frozen=True, slots=True)
class Gated:
    body: Message | None  # what the handler is given; None: it is not asked
    complete: Callable[[Message | None], Message | None]  # its answer -> the client's


Rule = Callable[[Any, int, Caller], Gated | None]


def gate(api_key: int, version: int, body: Message, caller: Caller) -> Gated | None:
    """What `body` becomes under the caller's rights (module docstring); None: untouched."""
    rule = RULES.get(api_key)
    return None if rule is None else rule(body, version, caller)


def controller_gate(api_key: int, version: int, body: Message, caller: Caller) -> Gated | None:
    """`gate` for a controller's Kafka listener (module docstring)."""
    rule = CONTROLLER_RULES.get(api_key)
    return None if rule is None else rule(body, version, caller)


def describable(caller: Caller, *, log: bool) -> Callable[[str], bool]:
    """May the caller DESCRIBE a topic: DescribeTopicPartitions asks it of each topic in its
    handler, before the page is cut (`describe_topic_partitions`)."""
    return lambda topic: caller.may(DESCRIBE, TOPIC, topic, log=log)


def fetch_refused(topics: Iterable[str], caller: Caller) -> set[str]:
    """The topics of a Fetch the caller may not READ (TOPIC_AUTHORIZATION_FAILED each)."""
    return {topic for topic in set(topics) if not caller.may(READ, TOPIC, topic)}


# --- building blocks ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Shape:
    """Where a request's topic entries keep their partitions and how its answer names them:
    what `errors` needs to answer every partition of refused topics."""

    topic: Callable[..., Any]  # the answer's topic entry
    partition: Callable[..., Any]  # the answer's partition entry
    asked: str = "partitions"  # the request topic's partition list
    answered: str = "partitions"  # the answer topic's partition list
    index: str = "partition_index"  # the answer partition's index field
    index_of: Callable[[Any], int] = lambda p: int(p.partition_index)
    copied: tuple[str, ...] = ("name",)  # fields the answer's topic entry repeats
    fields: tuple[tuple[str, Any], ...] = ()  # more fields of each answered partition


def errors(shape: Shape, topics: Sequence[Any], code: int) -> list[Any]:
    """Every partition of `topics` answered with `code`."""
    return [
        shape.topic(
            **{name: getattr(t, name) for name in shape.copied},
            **{
                shape.answered: [
                    shape.partition(
                        **{shape.index: shape.index_of(p)}, error_code=code, **dict(shape.fields)
                    )
                    for p in getattr(t, shape.asked)
                ]
            },
        )
        for t in topics
    ]


def _each(p: Any) -> int:
    """A partition list of bare indexes."""
    return int(p)


PRODUCE = Shape(
    pr.TopicProduceResponse,
    pr.PartitionProduceResponse,
    asked="partition_data",
    answered="partition_responses",
    index="index",
    index_of=lambda p: int(p.index),
    copied=("name", "topic_id"),
    fields=(("base_offset", -1),),
)
LIST_OFFSETS = Shape(
    lor.ListOffsetsTopicResponse,
    lor.ListOffsetsPartitionResponse,
    fields=(("timestamp", -1), ("offset", -1)),
)
OFFSET_FOR_LEADER_EPOCH = Shape(
    oflr.OffsetForLeaderTopicResult,
    oflr.EpochEndOffset,
    index="partition",
    index_of=lambda p: int(p.partition),
    copied=("topic",),
    fields=(("leader_epoch", -1), ("end_offset", -1)),
)
DELETE_RECORDS = Shape(
    drr.DeleteRecordsTopicResult,
    drr.DeleteRecordsPartitionResult,
    fields=(("low_watermark", -1),),
)
DESCRIBE_PRODUCERS = Shape(
    dpr.TopicResponse, dpr.PartitionResponse, asked="partition_indexes", index_of=_each
)
OFFSET_COMMIT = Shape(
    ocr.OffsetCommitResponseTopic,
    ocr.OffsetCommitResponsePartition,
    copied=("name", "topic_id"),
)
OFFSET_DELETE = Shape(odr.OffsetDeleteResponseTopic, odr.OffsetDeleteResponsePartition)
TXN_OFFSET_COMMIT = Shape(tocr.TxnOffsetCommitResponseTopic, tocr.TxnOffsetCommitResponsePartition)
TXN_MARKERS = Shape(
    wtmr.WritableTxnMarkerTopicResult,
    wtmr.WritableTxnMarkerPartitionResult,
    asked="partition_indexes",
    index_of=_each,
)
ELECTIONS = Shape(
    elr.ReplicaElectionResult,
    elr.PartitionResult,
    answered="partition_result",
    index="partition_id",
    index_of=_each,
    copied=("topic",),
    fields=(("error_message", "Authorization failed."),),
)


def _answered(response: Message) -> Gated:
    """The whole request answered here."""
    return Gated(None, lambda _: response)


def _with(body: Message, **fields: Any) -> Message:
    changed = copy.copy(body)
    for name, value in fields.items():
        setattr(changed, name, value)
    return changed


def _partial(
    body: Message | None,
    empty: Callable[[], Message],
    add: Callable[[Any], None],
) -> Gated:
    """The handler asked with `body` (None: not asked, `empty()` is the answer), then the
    refused entries added to its answer by `add`."""

    def complete(answer: Message | None) -> Message | None:
        if answer is None and body is not None:
            return None
        response = answer if answer is not None else empty()
        add(response)
        return response

    return Gated(body, complete)


def _split(entries: Sequence[E] | None, allowed: Callable[[E], bool]) -> tuple[list[E], list[E]]:
    kept: list[E] = []
    refused: list[E] = []
    for entry in entries or ():
        (kept if allowed(entry) else refused).append(entry)
    return kept, refused


def _topic_allowed(caller: Caller, operation: AclOperation) -> Callable[[Any], bool]:
    seen: dict[str, bool] = {}

    def allowed(entry: Any) -> bool:
        name = entry.name
        if name not in seen:
            seen[name] = caller.may(operation, TOPIC, name)
        return seen[name]

    return allowed


def _filter_topics(
    body: Any,
    caller: Caller,
    operation: AclOperation,
    empty: Callable[[], Message],
    add: Callable[[Any, list[Any]], None],
) -> Gated | None:
    """The request's `topics` the caller may do `operation` on go to the handler; `add` puts
    the refused ones into the answer."""
    kept, refused = _split(body.topics, _topic_allowed(caller, operation))
    if not refused:
        return None
    return _partial(_with(body, topics=kept) if kept else None, empty, lambda r: add(r, refused))


def _partitions_refused(shape: Shape) -> Callable[[Any, list[Any]], None]:
    """Every partition of the refused topics TOPIC_AUTHORIZATION_FAILED in the answer's
    `topics`."""
    return lambda r, refused: r.topics.extend(errors(shape, refused, TOPIC_DENIED))


def _cluster(operation: AclOperation, refusal: Callable[[], Message]) -> Rule:
    def rule(body: Any, version: int, caller: Caller) -> Gated | None:
        return None if caller.may(operation, CLUSTER, CLUSTER_NAME) else _answered(refusal())

    return rule


def _group(operation: AclOperation, refusal: Callable[[], Message]) -> Rule:
    def rule(body: Any, version: int, caller: Caller) -> Gated | None:
        return None if caller.may(operation, GROUP, body.group_id) else _answered(refusal())

    return rule


# --- topics -------------------------------------------------------------------------------------


def _produce(body: Any, version: int, caller: Caller) -> Gated | None:
    txn = body.transactional_id
    if txn is not None and not caller.may(WRITE, TXN_ID, txn):
        if body.acks == 0:
            raise RequestRefusedError(
                f"acks=0 Produce refused: may not WRITE transactional id {txn!r}"
            )
        return _answered(
            pr.ProduceResponse(responses=errors(PRODUCE, body.topic_data, TXN_ID_DENIED))
        )
    kept, refused = _split(body.topic_data, _topic_allowed(caller, WRITE))
    if not refused:
        return None
    if body.acks == 0:
        names = ", ".join(sorted({t.name for t in refused}))
        raise RequestRefusedError(f"acks=0 Produce refused: may not WRITE topics {names}")
    return _partial(
        _with(body, topic_data=kept) if kept else None,
        pr.ProduceResponse,
        lambda r: r.responses.extend(errors(PRODUCE, refused, TOPIC_DENIED)),
    )


def _list_offsets(body: Any, version: int, caller: Caller) -> Gated | None:
    return _filter_topics(
        body, caller, DESCRIBE, lor.ListOffsetsResponse, _partitions_refused(LIST_OFFSETS)
    )


def _offset_for_leader_epoch(body: Any, version: int, caller: Caller) -> Gated | None:
    if caller.may(AclOperation.CLUSTER_ACTION, CLUSTER, CLUSTER_NAME, log=False):
        return None
    kept, refused = _split(body.topics, lambda t: caller.may(DESCRIBE, TOPIC, t.topic))
    if not refused:
        return None
    return _partial(
        _with(body, topics=kept) if kept else None,
        oflr.OffsetForLeaderEpochResponse,
        lambda r: r.topics.extend(errors(OFFSET_FOR_LEADER_EPOCH, refused, TOPIC_DENIED)),
    )


def _delete_records(body: Any, version: int, caller: Caller) -> Gated | None:
    return _filter_topics(
        body, caller, DELETE, drr.DeleteRecordsResponse, _partitions_refused(DELETE_RECORDS)
    )


def _describe_producers(body: Any, version: int, caller: Caller) -> Gated | None:
    return _filter_topics(
        body, caller, READ, dpr.DescribeProducersResponse, _partitions_refused(DESCRIBE_PRODUCERS)
    )


def _metadata(body: Any, version: int, caller: Caller) -> Gated | None:
    everything = body.topics is None or (version == 0 and not body.topics)

    def complete(answer: Message | None) -> Message | None:
        assert isinstance(answer, mr.MetadataResponse)
        topics = []
        for topic in answer.topics:
            # A topic without a name is an unknown id's answer: nothing to ask about.
            if topic.name is None or caller.may(DESCRIBE, TOPIC, topic.name, log=not everything):
                topics.append(topic)
            elif not everything:
                topics.append(
                    mr.MetadataResponseTopic(
                        error_code=TOPIC_DENIED,
                        name=topic.name,
                        topic_id=ZERO_UUID,
                        is_internal=False,
                        partitions=[],
                    )
                )
        answer.topics = topics
        return answer

    return Gated(body, complete)


def _create_topics(body: Any, version: int, caller: Caller) -> Gated | None:
    if caller.may(CREATE, CLUSTER, CLUSTER_NAME, log=False):
        return None
    return _filter_topics(
        body,
        caller,
        CREATE,
        ctr.CreateTopicsResponse,
        lambda r, refused: r.topics.extend(
            ctr.CreatableTopicResult(
                name=t.name,
                error_code=TOPIC_DENIED,
                error_message="Authorization failed.",
                num_partitions=-1,
                replication_factor=-1,
                configs=None,
            )
            for t in refused
        ),
    )


def _delete_topics(body: Any, version: int, caller: Caller) -> Gated | None:
    if version < 6:
        kept, refused = _split(body.topic_names, lambda name: caller.may(DELETE, TOPIC, name))
        if not refused:
            return None
        return _partial(
            _with(body, topic_names=kept) if kept else None,
            dtr.DeleteTopicsResponse,
            lambda r: r.responses.extend(
                dtr.DeletableTopicResult(name=name, error_code=TOPIC_DENIED) for name in refused
            ),
        )
    answers: list[dtr.DeletableTopicResult] = []

    def allowed(topic: Any) -> bool:
        if topic.name is not None:
            if caller.may(DELETE, TOPIC, topic.name):
                return True
            answers.append(dtr.DeletableTopicResult(name=topic.name, error_code=TOPIC_DENIED))
            return False
        name = caller.topic_name(topic.topic_id)
        if name is None:
            return True  # the controller answers UNKNOWN_TOPIC_ID
        if not caller.may(DESCRIBE, TOPIC, name):
            answers.append(
                dtr.DeletableTopicResult(
                    name=None, topic_id=topic.topic_id, error_code=UNKNOWN_TOPIC_ID
                )
            )
            return False
        if caller.may(DELETE, TOPIC, name):
            return True
        answers.append(
            dtr.DeletableTopicResult(name=name, topic_id=topic.topic_id, error_code=TOPIC_DENIED)
        )
        return False

    kept, refused = _split(body.topics, allowed)
    if not refused:
        return None
    return _partial(
        _with(body, topics=kept) if kept else None,
        dtr.DeleteTopicsResponse,
        lambda r: r.responses.extend(answers),
    )


def _create_partitions(body: Any, version: int, caller: Caller) -> Gated | None:
    return _filter_topics(
        body,
        caller,
        ALTER,
        cpr.CreatePartitionsResponse,
        lambda r, refused: r.results.extend(
            cpr.CreatePartitionsTopicResult(
                name=t.name, error_code=TOPIC_DENIED, error_message="Authorization failed."
            )
            for t in refused
        ),
    )


# --- configs ------------------------------------------------------------------------------------


def _configs(operation: AclOperation, empty: Callable[[], Message], field: str, make: Any) -> Rule:
    """Describe/AlterConfigs: each resource asked about on its own (module docstring)."""

    def rule(body: Any, version: int, caller: Caller) -> Gated | None:
        def allowed(resource: Any) -> bool:
            kind = CONFIG_RESOURCES.get(resource.resource_type)
            if kind is None:
                return True  # the handler refuses the type
            resource_type, _ = kind
            name = CLUSTER_NAME if resource_type == CLUSTER else resource.resource_name
            return caller.may(operation, resource_type, name)

        kept, refused = _split(body.resources, allowed)
        if not refused:
            return None
        return _partial(
            _with(body, resources=kept) if kept else None,
            empty,
            lambda r: getattr(r, field).extend(
                make(
                    error_code=CONFIG_RESOURCES[c.resource_type][1],
                    error_message="Authorization failed.",
                    resource_type=c.resource_type,
                    resource_name=c.resource_name,
                )
                for c in refused
            ),
        )

    return rule


# --- groups -------------------------------------------------------------------------------------


def _offset_commit(body: Any, version: int, caller: Caller) -> Gated | None:
    if not caller.may(READ, GROUP, body.group_id):
        return _answered(
            ocr.OffsetCommitResponse(topics=errors(OFFSET_COMMIT, body.topics, GROUP_DENIED))
        )
    named = _named_topics(body.topics, caller)
    kept, refused = _split(body.topics, lambda t: caller.may(READ, TOPIC, named(t)))
    if not refused:
        return None
    return _partial(
        _with(body, topics=kept) if kept else None,
        ocr.OffsetCommitResponse,
        lambda r: r.topics.extend(errors(OFFSET_COMMIT, refused, TOPIC_DENIED)),
    )


def _named_topics(topics: Sequence[Any], caller: Caller) -> Callable[[Any], str]:
    """A topic entry's name, its id looked up when it has one (OffsetCommit v10)."""

    def name(topic: Any) -> str:
        topic_id = getattr(topic, "topic_id", ZERO_UUID)
        if topic_id != ZERO_UUID:
            return caller.topic_name(topic_id) or str(topic.name)
        return str(topic.name)

    return name


def _fetch_topic_errors(topics: Sequence[Any], make_topic: Any, make_partition: Any) -> list[Any]:
    return [
        make_topic(
            name=t.name,
            partitions=[
                make_partition(
                    partition_index=p,
                    committed_offset=-1,
                    committed_leader_epoch=-1,
                    metadata="",
                    error_code=TOPIC_DENIED,
                )
                for p in t.partition_indexes
            ],
        )
        for t in topics
    ]


def _offset_fetch(body: Any, version: int, caller: Caller) -> Gated | None:
    if version >= OFFSET_FETCH_GROUPS_VERSION:
        return _offset_fetch_groups(body, caller)
    if not caller.may(DESCRIBE, GROUP, body.group_id):
        if version >= 2:
            return _answered(ofr.OffsetFetchResponse(error_code=GROUP_DENIED, topics=[]))
        # v0-1 have no top-level error: each partition asked carries it.
        topics = _fetch_topic_errors(
            body.topics or (), ofr.OffsetFetchResponseTopic, ofr.OffsetFetchResponsePartition
        )
        for topic in topics:
            for partition in topic.partitions:
                partition.error_code = GROUP_DENIED
        return _answered(ofr.OffsetFetchResponse(topics=topics))
    if body.topics is None:  # every topic: those the caller may not describe are left out
        return _drop_undescribed(body, caller, lambda r: [r])
    kept, refused = _split(body.topics, _topic_allowed(caller, DESCRIBE))
    if not refused:
        return None
    return _partial(
        _with(body, topics=kept) if kept else None,
        ofr.OffsetFetchResponse,
        lambda r: r.topics.extend(
            _fetch_topic_errors(
                refused, ofr.OffsetFetchResponseTopic, ofr.OffsetFetchResponsePartition
            )
        ),
    )


def _drop_undescribed(body: Any, caller: Caller, holders: Callable[[Any], list[Any]]) -> Gated:
    def complete(answer: Message | None) -> Message | None:
        for holder in holders(answer):
            if holder.topics:
                holder.topics = [
                    t for t in holder.topics if caller.may(DESCRIBE, TOPIC, t.name, log=False)
                ]
        return answer

    return Gated(body, complete)


def _offset_fetch_groups(body: Any, caller: Caller) -> Gated | None:
    """OffsetFetch v8+: each group on its own, then its topics."""
    refused_groups: list[Any] = []
    topic_errors: dict[str, list[Any]] = {}
    kept_groups: list[Any] = []
    every_topic: list[str] = []
    for group in body.groups:
        if not caller.may(DESCRIBE, GROUP, group.group_id):
            refused_groups.append(group)
            continue
        if group.topics is None:
            every_topic.append(group.group_id)
            kept_groups.append(group)
            continue
        kept, refused = _split(group.topics, _topic_allowed(caller, DESCRIBE))
        if refused:
            topic_errors[group.group_id] = _fetch_topic_errors(
                refused, ofr.OffsetFetchResponseTopics, ofr.OffsetFetchResponsePartitions
            )
            group = _with(group, topics=kept)
        kept_groups.append(group)
    if not refused_groups and not topic_errors and not every_topic:
        return None

    def add(response: Message) -> None:
        assert isinstance(response, ofr.OffsetFetchResponse)
        for answered in response.groups:
            answered.topics.extend(topic_errors.get(answered.group_id, ()))
            if answered.group_id in every_topic:
                answered.topics = [
                    t for t in answered.topics if caller.may(DESCRIBE, TOPIC, t.name, log=False)
                ]
        response.groups.extend(
            ofr.OffsetFetchResponseGroup(group_id=g.group_id, topics=[], error_code=GROUP_DENIED)
            for g in refused_groups
        )

    return _partial(
        _with(body, groups=kept_groups) if kept_groups else None, ofr.OffsetFetchResponse, add
    )


def _find_coordinator(body: Any, version: int, caller: Caller) -> Gated | None:
    def refusal(key_type: int, key: str) -> int | None:
        if key_type == GROUP_KEY and not caller.may(DESCRIBE, GROUP, key):
            return GROUP_DENIED
        if key_type == TRANSACTION_KEY and not caller.may(DESCRIBE, TXN_ID, key):
            return TXN_ID_DENIED
        return None

    if version < 4:
        code = refusal(body.key_type, body.key)
        if code is None:
            return None
        # v0 has no error message.
        message = "Authorization failed." if version >= 1 else ""
        return _answered(
            fcr.FindCoordinatorResponse(
                error_code=code, error_message=message, node_id=-1, host="", port=-1
            )
        )
    refused = {k: c for k in body.coordinator_keys if (c := refusal(body.key_type, k)) is not None}
    if not refused:
        return None
    kept = [k for k in body.coordinator_keys if k not in refused]
    return _partial(
        _with(body, coordinator_keys=kept) if kept else None,
        fcr.FindCoordinatorResponse,
        lambda r: r.coordinators.extend(
            fcr.Coordinator(
                key=k,
                node_id=-1,
                host="",
                port=-1,
                error_code=code,
                error_message="Authorization failed.",
            )
            for k, code in refused.items()
        ),
    )


def _describe_groups(body: Any, version: int, caller: Caller) -> Gated | None:
    kept, refused = _split(body.groups, lambda g: caller.may(DESCRIBE, GROUP, g))
    if not refused:
        return None
    return _partial(
        _with(body, groups=kept) if kept else None,
        dgsr.DescribeGroupsResponse,
        lambda r: r.groups.extend(
            dgsr.DescribedGroup(error_code=GROUP_DENIED, group_id=g) for g in refused
        ),
    )


def _consumer_group_describe(body: Any, version: int, caller: Caller) -> Gated | None:
    kept, refused = _split(body.group_ids, lambda g: caller.may(DESCRIBE, GROUP, g))
    if not refused:
        return None
    return _partial(
        _with(body, group_ids=kept) if kept else None,
        cgdr.ConsumerGroupDescribeResponse,
        lambda r: r.groups.extend(
            cgdr.DescribedGroup(
                error_code=GROUP_DENIED, error_message="Authorization failed.", group_id=g
            )
            for g in refused
        ),
    )


def _delete_groups(body: Any, version: int, caller: Caller) -> Gated | None:
    kept, refused = _split(body.groups_names, lambda g: caller.may(DELETE, GROUP, g))
    if not refused:
        return None
    return _partial(
        _with(body, groups_names=kept) if kept else None,
        dgr.DeleteGroupsResponse,
        lambda r: r.results.extend(
            dgr.DeletableGroupResult(group_id=g, error_code=GROUP_DENIED) for g in refused
        ),
    )


def _list_groups(body: Any, version: int, caller: Caller) -> Gated | None:
    if caller.may(DESCRIBE, CLUSTER, CLUSTER_NAME, log=False):
        return None

    def complete(answer: Message | None) -> Message | None:
        assert isinstance(answer, lsgr.ListGroupsResponse)
        answer.groups = [
            g for g in answer.groups if caller.may(DESCRIBE, GROUP, g.group_id, log=False)
        ]
        return answer

    return Gated(body, complete)


def _offset_delete(body: Any, version: int, caller: Caller) -> Gated | None:
    if not caller.may(DELETE, GROUP, body.group_id):
        return _answered(odr.OffsetDeleteResponse(error_code=GROUP_DENIED))
    return _filter_topics(
        body, caller, READ, odr.OffsetDeleteResponse, _partitions_refused(OFFSET_DELETE)
    )


# --- transactions -------------------------------------------------------------------------------


def _init_producer_id(body: Any, version: int, caller: Caller) -> Gated | None:
    txn = body.transactional_id
    if txn is not None:
        if caller.may(WRITE, TXN_ID, txn):
            return None
        return _answered(
            ipr.InitProducerIdResponse(error_code=TXN_ID_DENIED, producer_id=-1, producer_epoch=-1)
        )
    if caller.may(AclOperation.IDEMPOTENT_WRITE, CLUSTER, CLUSTER_NAME, log=False):
        return None
    if caller.may_any(WRITE, TOPIC):
        return None
    return _answered(
        ipr.InitProducerIdResponse(error_code=CLUSTER_DENIED, producer_id=-1, producer_epoch=-1)
    )


def _txn_id(refusal: Callable[[], Message], group: Callable[[], Message] | None = None) -> Rule:
    """EndTxn, AddOffsetsToTxn: WRITE on the transactional id (and READ on the group)."""

    def rule(body: Any, version: int, caller: Caller) -> Gated | None:
        if not caller.may(WRITE, TXN_ID, body.transactional_id):
            return _answered(refusal())
        if group is not None and not caller.may(READ, GROUP, body.group_id):
            return _answered(group())
        return None

    return rule


def _add_partitions_to_txn(body: Any, version: int, caller: Caller) -> Gated | None:
    if version >= 4:
        if caller.may(AclOperation.CLUSTER_ACTION, CLUSTER, CLUSTER_NAME):
            return None
        return _answered(aptr.AddPartitionsToTxnResponse(error_code=CLUSTER_DENIED))
    topics = body.v3_and_below_topics

    def answer(code_of: Callable[[str], int]) -> Gated:
        return _answered(
            aptr.AddPartitionsToTxnResponse(
                results_by_topic_v3_and_below=[
                    aptr.AddPartitionsToTxnTopicResult(
                        name=t.name,
                        results_by_partition=[
                            aptr.AddPartitionsToTxnPartitionResult(
                                partition_index=p, partition_error_code=code_of(t.name)
                            )
                            for p in t.partitions
                        ],
                    )
                    for t in topics
                ]
            )
        )

    if not caller.may(WRITE, TXN_ID, body.v3_and_below_transactional_id):
        return answer(lambda _: TXN_ID_DENIED)
    refused = {t.name for t in topics if not caller.may(WRITE, TOPIC, t.name)}
    if not refused:
        return None
    return answer(lambda name: TOPIC_DENIED if name in refused else NOT_ATTEMPTED)


def _txn_offset_commit(body: Any, version: int, caller: Caller) -> Gated | None:
    if not caller.may(WRITE, TXN_ID, body.transactional_id):
        return _answered(
            tocr.TxnOffsetCommitResponse(
                topics=errors(TXN_OFFSET_COMMIT, body.topics, TXN_ID_DENIED)
            )
        )
    if not caller.may(READ, GROUP, body.group_id):
        return _answered(
            tocr.TxnOffsetCommitResponse(
                topics=errors(TXN_OFFSET_COMMIT, body.topics, GROUP_DENIED)
            )
        )
    kept, refused = _split(body.topics, _topic_allowed(caller, READ))
    if not refused:
        return None
    return _partial(
        _with(body, topics=kept) if kept else None,
        tocr.TxnOffsetCommitResponse,
        lambda r: r.topics.extend(errors(TXN_OFFSET_COMMIT, refused, TOPIC_DENIED)),
    )


def _describe_transactions(body: Any, version: int, caller: Caller) -> Gated | None:
    kept, refused = _split(body.transactional_ids, lambda t: caller.may(DESCRIBE, TXN_ID, t))
    if not refused:
        return None
    return _partial(
        _with(body, transactional_ids=kept) if kept else None,
        dtxr.DescribeTransactionsResponse,
        lambda r: r.transaction_states.extend(
            dtxr.TransactionState(error_code=TXN_ID_DENIED, transactional_id=t) for t in refused
        ),
    )


def _list_transactions(body: Any, version: int, caller: Caller) -> Gated | None:
    def complete(answer: Message | None) -> Message | None:
        assert isinstance(answer, ltr.ListTransactionsResponse)
        answer.transaction_states = [
            s
            for s in answer.transaction_states
            if caller.may(DESCRIBE, TXN_ID, s.transactional_id, log=False)
        ]
        return answer

    return Gated(body, complete)


def _write_txn_markers(body: Any, version: int, caller: Caller) -> Gated | None:
    if caller.may(AclOperation.CLUSTER_ACTION, CLUSTER, CLUSTER_NAME):
        return None
    return _answered(
        wtmr.WriteTxnMarkersResponse(
            markers=[
                wtmr.WritableTxnMarkerResult(
                    producer_id=marker.producer_id,
                    topics=errors(TXN_MARKERS, marker.topics, CLUSTER_DENIED),
                )
                for marker in body.markers
            ]
        )
    )


# --- cluster ------------------------------------------------------------------------------------


def _elect_leaders(body: Any, version: int, caller: Caller) -> Gated | None:
    if caller.may(ALTER, CLUSTER, CLUSTER_NAME):
        return None
    return _answered(
        elr.ElectLeadersResponse(
            error_code=CLUSTER_DENIED if version >= 1 else 0,  # v0 has no top-level error
            replica_election_results=errors(ELECTIONS, body.topic_partitions or (), CLUSTER_DENIED),
        )
    )


def _describe_log_dirs(body: Any, version: int, caller: Caller) -> Gated | None:
    if caller.may(DESCRIBE, CLUSTER, CLUSTER_NAME):
        return None
    # No dirs; v3+ say why (v1-2 have no error field).
    code = CLUSTER_DENIED if version >= 3 else 0
    return _answered(dldr.DescribeLogDirsResponse(error_code=code, results=[]))


def _create_acls(body: Any, version: int, caller: Caller) -> Gated | None:
    if caller.may(ALTER, CLUSTER, CLUSTER_NAME):
        return None
    return _answered(
        cacr.CreateAclsResponse(
            results=[
                cacr.AclCreationResult(
                    error_code=CLUSTER_DENIED, error_message="Authorization failed."
                )
                for _ in body.creations
            ]
        )
    )


def _delete_acls(body: Any, version: int, caller: Caller) -> Gated | None:
    if caller.may(ALTER, CLUSTER, CLUSTER_NAME):
        return None
    return _answered(
        dacr.DeleteAclsResponse(
            filter_results=[
                dacr.DeleteAclsFilterResult(
                    error_code=CLUSTER_DENIED, error_message="Authorization failed."
                )
                for _ in body.filters
            ]
        )
    )


def _refused(response: Callable[..., Message], code: int, **fields: Any) -> Callable[[], Message]:
    return lambda: response(error_code=code, **fields)


RULES: dict[int, Rule] = {
    0: _produce,
    2: _list_offsets,
    3: _metadata,
    8: _offset_commit,
    9: _offset_fetch,
    10: _find_coordinator,
    11: _group(READ, _refused(jgr.JoinGroupResponse, GROUP_DENIED, generation_id=-1)),
    12: _group(READ, _refused(hbr.HeartbeatResponse, GROUP_DENIED)),
    13: _group(READ, _refused(lgr.LeaveGroupResponse, GROUP_DENIED)),
    14: _group(READ, _refused(sgr.SyncGroupResponse, GROUP_DENIED)),
    15: _describe_groups,
    16: _list_groups,
    19: _create_topics,
    20: _delete_topics,
    21: _delete_records,
    22: _init_producer_id,
    23: _offset_for_leader_epoch,
    24: _add_partitions_to_txn,
    25: _txn_id(
        _refused(aotr.AddOffsetsToTxnResponse, TXN_ID_DENIED),
        _refused(aotr.AddOffsetsToTxnResponse, GROUP_DENIED),
    ),
    26: _txn_id(_refused(etr.EndTxnResponse, TXN_ID_DENIED, producer_id=-1, producer_epoch=-1)),
    27: _write_txn_markers,
    28: _txn_offset_commit,
    29: _cluster(
        DESCRIBE,
        _refused(dsar.DescribeAclsResponse, CLUSTER_DENIED, error_message="Authorization failed."),
    ),
    30: _create_acls,
    31: _delete_acls,
    32: _configs(
        AclOperation.DESCRIBE_CONFIGS,
        dcr.DescribeConfigsResponse,
        "results",
        dcr.DescribeConfigsResult,
    ),
    33: _configs(
        AclOperation.ALTER_CONFIGS,
        acr.AlterConfigsResponse,
        "responses",
        acr.AlterConfigsResourceResponse,
    ),
    35: _describe_log_dirs,
    37: _create_partitions,
    43: _elect_leaders,
    42: _delete_groups,
    44: _configs(
        AclOperation.ALTER_CONFIGS,
        iacr.IncrementalAlterConfigsResponse,
        "responses",
        iacr.AlterConfigsResourceResponse,
    ),
    45: _cluster(
        ALTER,
        _refused(
            aprr.AlterPartitionReassignmentsResponse,
            CLUSTER_DENIED,
            error_message="Authorization failed.",
        ),
    ),
    46: _cluster(
        DESCRIBE,
        _refused(
            lprr.ListPartitionReassignmentsResponse,
            CLUSTER_DENIED,
            error_message="Authorization failed.",
        ),
    ),
    47: _offset_delete,
    55: _cluster(DESCRIBE, _refused(dqr.DescribeQuorumResponse, CLUSTER_DENIED)),
    57: _cluster(
        ALTER,
        _refused(ufr.UpdateFeaturesResponse, CLUSTER_DENIED, error_message="Authorization failed."),
    ),
    61: _describe_producers,
    64: _cluster(
        ALTER,
        _refused(
            ubr.UnregisterBrokerResponse, CLUSTER_DENIED, error_message="Authorization failed."
        ),
    ),
    65: _describe_transactions,
    66: _list_transactions,
    68: _group(
        READ,
        _refused(
            cghr.ConsumerGroupHeartbeatResponse,
            GROUP_DENIED,
            error_message="Authorization failed.",
        ),
    ),
    69: _consumer_group_describe,
}

CONTROLLER_RULES: dict[int, Rule] = {
    **RULES,
    60: _cluster(
        ALTER,
        _refused(
            dclr.DescribeClusterResponse, CLUSTER_DENIED, error_message="Authorization failed."
        ),
    ),
}
