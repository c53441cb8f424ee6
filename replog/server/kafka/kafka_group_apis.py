"""The Kafka listener's consumer group APIs: each request translated for the broker's
`GroupCoordinator` (docs/groups.md), its answer into Kafka's response.

Rules:
- `GROUP_SERVED` holds the versions handled, Kafka 4.x's ranges; the broker runtime passes
  these handlers to `kafka_apis.KafkaApis` as an extension, which advertises them. Until the
  broker's data plane runs (no coordinator yet), every group request is answered
  COORDINATOR_NOT_AVAILABLE, which clients retry.
- FindCoordinator (v0-3 one key, v4+ a batch of keys) finds group coordinators (key type 0)
  and transaction coordinators (key type 1, the broker's `TransactionCoordinator`;
  COORDINATOR_NOT_AVAILABLE while it has none); another key type is INVALID_REQUEST. The
  coordinator is named by its endpoint of the listener the client connected through.
- JoinGroup, SyncGroup, Heartbeat, LeaveGroup (v0-2: one member; v3+: a batch), DescribeGroups,
  ListGroups and DeleteGroups are the classic protocol's; the JoinGroup's client id is the
  request header's, its client host the connection's peer (described as Kafka writes it,
  "/127.0.0.1"). DescribeGroups v6+ answers a group that does not exist with
  GROUP_ID_NOT_FOUND (KIP-1043), older versions with state Dead. ListGroups' type filter keeps
  "classic" groups (every group here is one).
- ConsumerGroupHeartbeat (v0-1) and ConsumerGroupDescribe (v0-1) are the consumer protocol's
  (KIP-848): translated field for field; the heartbeat's client id is the request header's,
  its client host the connection's peer. Topic names in a description come from the image;
  v1's member type (KIP-1099) is "consumer" for every member.
  ListGroups v5 names each group's type ("classic" or "consumer") and filters by it.
- OffsetCommit (v2-10) is fenced by the group's generation and member (and instance id, v7+),
  or for a consumer-protocol group by the member epoch (v9+ carries it); v10 names topics by id
  (an unknown id: UNKNOWN_TOPIC_ID). A request-level error is every partition's error. The
  committer is the header's client id, the peer's host and the instance replog's tag names
  (v8+, `wire.shared_commit_tags`); the other consumers committing the same partitions are
  answered in replog's tag.
  OffsetFetch (v1-7 one group, v8+ a batch; v9+ with a member id and epoch, fenced for
  consumer-protocol groups; v10 topics by id) answers the committed offset, -1 where none;
  with require_stable (v7+), UNSTABLE_OFFSET_COMMIT for a partition an open transaction
  commits.
- TxnOffsetCommit (v0-5; v3+ with the group's generation, member and instance id): the
  coordinator appends the offsets in the producer's transaction and applies them at its COMMIT
  marker (`GroupCoordinator.txn_offset_commit`). A request-level error is every partition's.
- OffsetDelete (v0): a partition the image does not have is UNKNOWN_TOPIC_OR_PARTITION, as
  Kafka's KafkaApis answers it; the coordinator decides the rest (`offset_deletion`). A
  request-level error is the response's error code, with no topics.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from uuid import UUID

from replog.coordinator import classic_group_messages as gm
from replog.coordinator import consumer_group_messages as cgm
from replog.coordinator import messages as cm
from replog.errors import (
    GroupIdNotFoundError,
    InvalidRequestError,
    KafkaError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from replog.kafka.connection import KafkaRequest
from replog.kafka.messages.consumer_group_describe_request import ConsumerGroupDescribeRequest
from replog.kafka.messages.consumer_group_describe_response import (
    Assignment as DescribedAssignment,
)
from replog.kafka.messages.consumer_group_describe_response import (
    ConsumerGroupDescribeResponse,
)
from replog.kafka.messages.consumer_group_describe_response import (
    DescribedGroup as ConsumerDescribedGroup,
)
from replog.kafka.messages.consumer_group_describe_response import Member as ConsumerDescribedMember
from replog.kafka.messages.consumer_group_describe_response import (
    TopicPartitions as DescribedTopicPartitions,
)
from replog.kafka.messages.consumer_group_heartbeat_request import ConsumerGroupHeartbeatRequest
from replog.kafka.messages.consumer_group_heartbeat_response import (
    Assignment,
    ConsumerGroupHeartbeatResponse,
    TopicPartitions,
)
from replog.kafka.messages.delete_groups_request import DeleteGroupsRequest
from replog.kafka.messages.delete_groups_response import (
    DeletableGroupResult,
    DeleteGroupsResponse,
)
from replog.kafka.messages.describe_groups_request import DescribeGroupsRequest
from replog.kafka.messages.describe_groups_response import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsResponse,
)
from replog.kafka.messages.find_coordinator_request import FindCoordinatorRequest
from replog.kafka.messages.find_coordinator_response import Coordinator, FindCoordinatorResponse
from replog.kafka.messages.heartbeat_request import HeartbeatRequest
from replog.kafka.messages.heartbeat_response import HeartbeatResponse
from replog.kafka.messages.join_group_request import JoinGroupRequest
from replog.kafka.messages.join_group_response import JoinGroupResponse, JoinGroupResponseMember
from replog.kafka.messages.leave_group_request import LeaveGroupRequest
from replog.kafka.messages.leave_group_response import LeaveGroupResponse, MemberResponse
from replog.kafka.messages.list_groups_request import ListGroupsRequest
from replog.kafka.messages.list_groups_response import ListedGroup, ListGroupsResponse
from replog.kafka.messages.offset_commit_request import OffsetCommitRequest
from replog.kafka.messages.offset_commit_response import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from replog.kafka.messages.offset_delete_request import OffsetDeleteRequest
from replog.kafka.messages.offset_delete_response import (
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from replog.kafka.messages.offset_fetch_request import OffsetFetchRequest
from replog.kafka.messages.offset_fetch_response import (
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)
from replog.kafka.messages.sync_group_request import SyncGroupRequest
from replog.kafka.messages.sync_group_response import SyncGroupResponse
from replog.kafka.messages.txn_offset_commit_request import TxnOffsetCommitRequest
from replog.kafka.messages.txn_offset_commit_response import (
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from replog.kafka.protocol.codec import ZERO_UUID, Message
from replog.quorum.metadata.image import MetadataImage
from replog.server.kafka.coordinator_requests import CoordinatorRequests, UnavailableCoordinator
from replog.server.transactions.transaction_coordinator import TransactionCoordinator
from replog.wire import shared_commit_tags

OFFSET_COMMIT = 8
OFFSET_FETCH = 9
TXN_OFFSET_COMMIT = 28
FIND_COORDINATOR = 10
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
DELETE_GROUPS = 42
OFFSET_DELETE = 47
CONSUMER_GROUP_HEARTBEAT = 68
CONSUMER_GROUP_DESCRIBE = 69
# ConsumerGroupDescribe v1's member type (KIP-1099): -1 unknown, 0 classic, 1 consumer.
MEMBER_TYPES = {cgm.CLASSIC_MEMBER: 0, cgm.CONSUMER_MEMBER: 1}
GROUP_SERVED: Mapping[int, tuple[int, int]] = {
    OFFSET_COMMIT: (2, 10),
    OFFSET_FETCH: (1, 10),
    FIND_COORDINATOR: (0, 6),
    JOIN_GROUP: (0, 9),
    HEARTBEAT: (0, 4),
    LEAVE_GROUP: (0, 5),
    SYNC_GROUP: (0, 5),
    DESCRIBE_GROUPS: (0, 6),
    LIST_GROUPS: (0, 5),
    DELETE_GROUPS: (0, 2),
    OFFSET_DELETE: (0, 0),
    CONSUMER_GROUP_HEARTBEAT: (0, 1),
    CONSUMER_GROUP_DESCRIBE: (0, 1),
    TXN_OFFSET_COMMIT: (0, 5),
}
GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
# The first versions of: JoinGroup's nullable protocol name, OffsetCommit's and OffsetFetch's
# topic ids, OffsetFetch's batch of groups, DescribeGroups' GROUP_ID_NOT_FOUND, LeaveGroup's batch.
JOIN_NULLABLE_PROTOCOL_VERSION = 7
TOPIC_ID_VERSION = 10
OFFSET_FETCH_GROUPS_VERSION = 8
DESCRIBE_NOT_FOUND_VERSION = 6
LEAVE_BATCH_VERSION = 3
FIND_COORDINATOR_BATCH_VERSION = 4


class KafkaGroupApis:
    """The group handlers of one broker's Kafka listeners."""

    def __init__(
        self,
        broker_id: int,
        coordinator: Callable[[], CoordinatorRequests | None],
        image: Callable[[], MetadataImage],
        transactions: Callable[[], TransactionCoordinator | None] = lambda: None,
    ) -> None:
        self.broker_id = broker_id
        self._coordinator = coordinator
        self._transactions = transactions
        self._image = image

    @property
    def served(self) -> Mapping[int, tuple[int, int]]:
        return GROUP_SERVED

    async def handle(self, request: KafkaRequest, listener_name: str) -> Message:
        body, version = request.body, request.api_version
        coordinator = self._coordinator()
        if coordinator is None:
            coordinator = UnavailableCoordinator(self.broker_id)
        if isinstance(body, FindCoordinatorRequest):
            return self.find_coordinator(coordinator, body, version, listener_name)
        if isinstance(body, JoinGroupRequest):
            return await self.join_group(
                coordinator, body, version, request.header.client_id, _host(request.peer)
            )
        if isinstance(body, SyncGroupRequest):
            return await self.sync_group(coordinator, body)
        if isinstance(body, HeartbeatRequest):
            return HeartbeatResponse(
                error_code=_code(
                    coordinator.heartbeat(
                        gm.HeartbeatRequest(
                            body.group_id,
                            body.member_id,
                            body.generation_id,
                            body.group_instance_id,
                        )
                    )
                )
            )
        if isinstance(body, LeaveGroupRequest):
            return await self.leave_group(coordinator, body, version)
        if isinstance(body, DescribeGroupsRequest):
            return self.describe_groups(coordinator, body, version)
        if isinstance(body, ListGroupsRequest):
            return self.list_groups(coordinator, body)
        if isinstance(body, DeleteGroupsRequest):
            answers = await coordinator.delete_groups(body.groups_names)
            return DeleteGroupsResponse(
                results=[
                    DeletableGroupResult(group_id=group_id, error_code=_code(error))
                    for group_id, error in answers
                ]
            )
        if isinstance(body, OffsetCommitRequest):
            return await self.offset_commit(
                coordinator, body, version, request.header.client_id, _host(request.peer)
            )
        if isinstance(body, OffsetFetchRequest):
            return self.offset_fetch(coordinator, body, version)
        if isinstance(body, TxnOffsetCommitRequest):
            return await self.txn_offset_commit(coordinator, body, version)
        if isinstance(body, OffsetDeleteRequest):
            return await self.offset_delete(coordinator, body)
        if isinstance(body, ConsumerGroupHeartbeatRequest):
            return await self.consumer_group_heartbeat(
                coordinator, body, version, request.header.client_id, _host(request.peer)
            )
        if isinstance(body, ConsumerGroupDescribeRequest):
            return self.consumer_group_describe(coordinator, body)
        raise InvalidRequestError(f"no group handler for {type(body).__name__}")

    # --- FindCoordinator -----------------------------------------------------------------------

    def find_coordinator(
        self,
        coordinator: CoordinatorRequests,
        request: FindCoordinatorRequest,
        version: int,
        listener_name: str,
    ) -> FindCoordinatorResponse:
        keys = (
            list(request.coordinator_keys)
            if version >= FIND_COORDINATOR_BATCH_VERSION
            else [request.key]
        )
        found = [
            (key, self._coordinator_of(coordinator, request.key_type, key, listener_name))
            for key in keys
        ]
        if version >= FIND_COORDINATOR_BATCH_VERSION:
            return FindCoordinatorResponse(
                coordinators=[
                    Coordinator(
                        key=key,
                        node_id=answer.node_id,
                        host=answer.host,
                        port=answer.port,
                        error_code=_code(answer.error),
                        error_message=_message(answer.error),
                    )
                    for key, answer in found
                ]
            )
        ((_, answer),) = found
        return FindCoordinatorResponse(
            error_code=_code(answer.error),
            error_message=_message(answer.error),
            node_id=answer.node_id,
            host=answer.host,
            port=answer.port,
        )

    def _coordinator_of(
        self, coordinator: CoordinatorRequests, key_type: int, key: str, listener_name: str
    ) -> cm.FindCoordinatorResponse:
        if key_type == GROUP_KEY_TYPE:
            return coordinator.find_coordinator(key, listener_name)
        if key_type == TRANSACTION_KEY_TYPE:
            transactions = self._transactions()
            if transactions is None:
                return UnavailableCoordinator(self.broker_id).find_coordinator(key)
            return transactions.find_coordinator(key, listener_name)
        return cm.FindCoordinatorResponse(
            InvalidRequestError(
                f"key type {key_type}: only group (0) and transaction (1) coordinators are found"
            )
        )

    # --- JoinGroup, SyncGroup, LeaveGroup ------------------------------------------------------

    async def join_group(
        self,
        coordinator: CoordinatorRequests,
        request: JoinGroupRequest,
        version: int,
        client_id: str | None,
        client_host: str = "",
    ) -> JoinGroupResponse:
        answer = await coordinator.join_group(
            gm.JoinGroupRequest(
                group_id=request.group_id,
                member_id=request.member_id,
                protocol_type=request.protocol_type,
                protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
                session_timeout_ms=request.session_timeout_ms,
                rebalance_timeout_ms=request.rebalance_timeout_ms if version >= 1 else -1,
                group_instance_id=request.group_instance_id,
                client_id=client_id or "",
                client_host=client_host,
                api_version=version,
                reason=request.reason,
            )
        )
        nullable = version >= JOIN_NULLABLE_PROTOCOL_VERSION
        return JoinGroupResponse(
            error_code=_code(answer.error),
            generation_id=answer.generation_id,
            protocol_type=answer.protocol_type,
            protocol_name=(answer.protocol_name if nullable or answer.protocol_name else ""),
            leader=answer.leader,
            skip_assignment=answer.skip_assignment,
            member_id=answer.member_id,
            members=[
                JoinGroupResponseMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    metadata=m.metadata,
                )
                for m in answer.members
            ],
        )

    async def sync_group(
        self, coordinator: CoordinatorRequests, request: SyncGroupRequest
    ) -> SyncGroupResponse:
        answer = await coordinator.sync_group(
            gm.SyncGroupRequest(
                group_id=request.group_id,
                member_id=request.member_id,
                generation_id=request.generation_id,
                group_instance_id=request.group_instance_id,
                protocol_type=request.protocol_type,
                protocol_name=request.protocol_name,
                assignments=tuple((a.member_id, bytes(a.assignment)) for a in request.assignments),
            )
        )
        return SyncGroupResponse(
            error_code=_code(answer.error),
            protocol_type=answer.protocol_type,
            protocol_name=answer.protocol_name,
            assignment=answer.assignment,
        )

    async def leave_group(
        self, coordinator: CoordinatorRequests, request: LeaveGroupRequest, version: int
    ) -> LeaveGroupResponse:
        if version >= LEAVE_BATCH_VERSION:
            members = tuple(
                gm.LeaveMember(m.member_id, m.group_instance_id, m.reason) for m in request.members
            )
        else:
            members = (gm.LeaveMember(request.member_id),)
        answer = await coordinator.leave_group(gm.LeaveGroupRequest(request.group_id, members))
        if version >= LEAVE_BATCH_VERSION:
            return LeaveGroupResponse(
                error_code=_code(answer.error),
                members=[
                    MemberResponse(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        error_code=_code(m.error),
                    )
                    for m in answer.members
                ],
            )
        error = answer.error
        if error is None and answer.members:
            error = answer.members[0].error
        return LeaveGroupResponse(error_code=_code(error))

    # --- DescribeGroups, ListGroups ------------------------------------------------------------

    def describe_groups(
        self, coordinator: CoordinatorRequests, request: DescribeGroupsRequest, version: int
    ) -> DescribeGroupsResponse:
        groups: list[DescribedGroup] = []
        for group in coordinator.describe_groups(request.groups):
            error = group.error
            if error is None and group.state == "Dead" and version >= DESCRIBE_NOT_FOUND_VERSION:
                error = GroupIdNotFoundError(f"group {group.group_id!r} does not exist")
            groups.append(
                DescribedGroup(
                    error_code=_code(error),
                    # The message is a field from v6 on; before, the code alone.
                    error_message=_message(error)
                    if version >= DESCRIBE_NOT_FOUND_VERSION
                    else None,
                    group_id=group.group_id,
                    group_state=group.state,
                    protocol_type=group.protocol_type,
                    protocol_data=group.protocol_data,
                    members=[
                        DescribedGroupMember(
                            member_id=m.member_id,
                            group_instance_id=m.group_instance_id,
                            client_id=m.client_id,
                            # Kafka's form of an address: "/127.0.0.1".
                            client_host=f"/{m.client_host}" if m.client_host else "",
                            member_metadata=m.metadata,
                            member_assignment=m.assignment,
                        )
                        for m in group.members
                    ],
                )
            )
        return DescribeGroupsResponse(groups=groups)

    def list_groups(
        self, coordinator: CoordinatorRequests, request: ListGroupsRequest
    ) -> ListGroupsResponse:
        types = {t.lower() for t in request.types_filter}
        error, listed = coordinator.list_groups(request.states_filter)
        if types:
            listed = [g for g in listed if g.group_type in types]
        return ListGroupsResponse(
            error_code=_code(error),
            groups=[
                ListedGroup(
                    group_id=g.group_id,
                    protocol_type=g.protocol_type,
                    group_state=g.state,
                    group_type=g.group_type,
                )
                for g in listed
            ],
        )

    # --- OffsetCommit, OffsetFetch -------------------------------------------------------------

    async def offset_commit(
        self,
        coordinator: CoordinatorRequests,
        request: OffsetCommitRequest,
        version: int,
        client_id: str | None,
        client_host: str = "",
    ) -> OffsetCommitResponse:
        by_id = version >= TOPIC_ID_VERSION
        names = self._topic_names([t.topic_id for t in request.topics] if by_id else [])
        entries: list[cm.CommitEntry] = []
        unknown: list[tuple[int, int]] = []  # (topic index, partition) of unknown topic ids
        for index, topic in enumerate(request.topics):
            name = names.get(topic.topic_id) if by_id else topic.name
            for p in topic.partitions:
                if name is None:
                    unknown.append((index, p.partition_index))
                    continue
                entries.append(
                    cm.CommitEntry(
                        name,
                        p.partition_index,
                        p.committed_offset,
                        p.committed_leader_epoch,
                        p.committed_metadata or "",
                    )
                )
        answer = await coordinator.offset_commit(
            cm.OffsetCommitRequest(
                request.group_id,
                tuple(entries),
                request.generation_id_or_member_epoch,
                request.member_id,
                shared_commit_tags.committer_from_tags(
                    request.unknown_tagged_fields, client_id or "", client_host
                ),
                request.group_instance_id,
                version,
            )
        )
        errors: dict[tuple[str, int], KafkaError | None] = {
            (r.topic, r.partition): r.error for r in answer.partitions
        }
        topics: list[OffsetCommitResponseTopic] = []
        for index, topic in enumerate(request.topics):
            name = names.get(topic.topic_id) if by_id else topic.name
            partitions: list[OffsetCommitResponsePartition] = []
            for p in topic.partitions:
                error: KafkaError | None
                if name is None or (index, p.partition_index) in unknown:
                    error = UnknownTopicIdError(f"no topic has id {topic.topic_id}")
                else:
                    error = answer.error or errors.get((name, p.partition_index))
                partitions.append(
                    OffsetCommitResponsePartition(
                        partition_index=p.partition_index, error_code=_code(error)
                    )
                )
            topics.append(
                OffsetCommitResponseTopic(
                    name=topic.name, topic_id=topic.topic_id, partitions=partitions
                )
            )
        response = OffsetCommitResponse(topics=topics)
        response.unknown_tagged_fields = shared_commit_tags.shared_tags(answer.shared)
        return response

    async def txn_offset_commit(
        self, coordinator: CoordinatorRequests, request: TxnOffsetCommitRequest, version: int
    ) -> TxnOffsetCommitResponse:
        answer = await coordinator.txn_offset_commit(
            cm.TxnOffsetCommitRequest(
                request.transactional_id,
                request.group_id,
                request.producer_id,
                request.producer_epoch,
                tuple(
                    cm.CommitEntry(
                        topic.name,
                        p.partition_index,
                        p.committed_offset,
                        p.committed_leader_epoch,
                        p.committed_metadata or "",
                    )
                    for topic in request.topics
                    for p in topic.partitions
                ),
                request.generation_id,
                request.member_id,
                request.group_instance_id,
                version,
            )
        )
        errors = {(r.topic, r.partition): r.error for r in answer.partitions}
        return TxnOffsetCommitResponse(
            topics=[
                TxnOffsetCommitResponseTopic(
                    name=topic.name,
                    partitions=[
                        TxnOffsetCommitResponsePartition(
                            partition_index=p.partition_index,
                            error_code=_code(
                                answer.error or errors.get((topic.name, p.partition_index))
                            ),
                        )
                        for p in topic.partitions
                    ],
                )
                for topic in request.topics
            ]
        )

    async def offset_delete(
        self, coordinator: CoordinatorRequests, request: OffsetDeleteRequest
    ) -> OffsetDeleteResponse:
        """Partitions the image does not have are UNKNOWN_TOPIC_OR_PARTITION here, as Kafka's
        KafkaApis answers them; the others go to the coordinator."""
        topics = self._image().topics.by_name
        existing = [
            (t.name, p.partition_index)
            for t in request.topics
            for p in t.partitions
            if t.name in topics and p.partition_index in topics[t.name].partitions
        ]
        answer = await coordinator.offset_delete(
            cm.OffsetDeleteRequest(request.group_id, tuple(existing))
        )
        if answer.error is not None:
            return OffsetDeleteResponse(error_code=answer.error.code)
        errors = {(r.topic, r.partition): r.error for r in answer.partitions}
        answered: list[OffsetDeleteResponseTopic] = []
        for topic in request.topics:
            partitions: list[OffsetDeleteResponsePartition] = []
            for p in topic.partitions:
                key = (topic.name, p.partition_index)
                error = (
                    errors.get(key)
                    if key in errors
                    else UnknownTopicOrPartitionError(f"no partition {topic.name}-{key[1]}")
                )
                partitions.append(
                    OffsetDeleteResponsePartition(
                        partition_index=p.partition_index, error_code=_code(error)
                    )
                )
            answered.append(OffsetDeleteResponseTopic(name=topic.name, partitions=partitions))
        return OffsetDeleteResponse(topics=answered)

    def offset_fetch(
        self, coordinator: CoordinatorRequests, request: OffsetFetchRequest, version: int
    ) -> OffsetFetchResponse:
        if version < OFFSET_FETCH_GROUPS_VERSION:
            wanted = (
                None
                if request.topics is None
                else [(t.name, list(t.partition_indexes)) for t in request.topics]
            )
            answer = coordinator.offset_fetch(
                _fetch_request(request.group_id, wanted, require_stable=request.require_stable)
            )
            fetched_offsets = answer.partitions
            if answer.error is not None and wanted is not None:
                # v1 has no request-level error: every partition asked for carries it.
                fetched_offsets = tuple(
                    cm.FetchedOffset(name, partition, error=answer.error)
                    for name, partitions in wanted
                    for partition in partitions
                )
            return OffsetFetchResponse(
                error_code=_code(answer.error),
                topics=[
                    OffsetFetchResponseTopic(
                        name=name,
                        partitions=[
                            OffsetFetchResponsePartition(
                                partition_index=f.partition,
                                committed_offset=f.offset,
                                committed_leader_epoch=f.leader_epoch,
                                metadata=f.metadata,
                                error_code=_code(f.error),
                            )
                            for f in fetched
                        ],
                    )
                    for name, fetched in _by_topic(fetched_offsets)
                ],
            )
        by_id = version >= TOPIC_ID_VERSION
        groups: list[OffsetFetchResponseGroup] = []
        for group in request.groups:
            names: dict[UUID, str] = {}
            ids: dict[str, UUID] = {}
            if by_id:
                names = self._topic_names([t.topic_id for t in group.topics or ()])
                ids = {name: topic_id for topic_id, name in names.items()}
            wanted = (
                None
                if group.topics is None
                else [
                    (names.get(t.topic_id, "") if by_id else t.name, list(t.partition_indexes))
                    for t in group.topics
                ]
            )
            answer = coordinator.offset_fetch(
                _fetch_request(
                    group.group_id,
                    wanted,
                    group.member_id,
                    group.member_epoch,
                    require_stable=request.require_stable,
                )
            )
            groups.append(
                OffsetFetchResponseGroup(
                    group_id=group.group_id,
                    error_code=_code(answer.error),
                    topics=[
                        OffsetFetchResponseTopics(
                            name=name,
                            topic_id=ids.get(name, self._topic_id(name) if by_id else ZERO_UUID),
                            partitions=[
                                OffsetFetchResponsePartitions(
                                    partition_index=f.partition,
                                    committed_offset=f.offset,
                                    committed_leader_epoch=f.leader_epoch,
                                    metadata=f.metadata,
                                    error_code=_code(f.error),
                                )
                                for f in fetched
                            ],
                        )
                        for name, fetched in _by_topic(answer.partitions)
                    ],
                )
            )
        return OffsetFetchResponse(groups=groups)

    # --- ConsumerGroupHeartbeat, ConsumerGroupDescribe -----------------------------------------

    async def consumer_group_heartbeat(
        self,
        coordinator: CoordinatorRequests,
        request: ConsumerGroupHeartbeatRequest,
        version: int,
        client_id: str | None,
        client_host: str,
    ) -> ConsumerGroupHeartbeatResponse:
        answer = await coordinator.consumer_group_heartbeat(
            cgm.ConsumerGroupHeartbeatRequest(
                group_id=request.group_id,
                member_id=request.member_id,
                member_epoch=request.member_epoch,
                instance_id=request.instance_id,
                rack_id=request.rack_id,
                rebalance_timeout_ms=request.rebalance_timeout_ms,
                subscribed_topic_names=(
                    None
                    if request.subscribed_topic_names is None
                    else tuple(request.subscribed_topic_names)
                ),
                subscribed_topic_regex=request.subscribed_topic_regex,
                server_assignor=request.server_assignor,
                owned=(
                    None
                    if request.topic_partitions is None
                    else tuple((t.topic_id, tuple(t.partitions)) for t in request.topic_partitions)
                ),
                client_id=client_id or "",
                client_host=f"/{client_host}" if client_host else "",
                api_version=version,
            )
        )
        return ConsumerGroupHeartbeatResponse(
            error_code=_code(answer.error),
            error_message=_message(answer.error),
            member_id=answer.member_id,
            member_epoch=answer.member_epoch,
            heartbeat_interval_ms=answer.heartbeat_interval_ms,
            assignment=(
                None
                if answer.assignment is None
                else Assignment(
                    topic_partitions=[
                        TopicPartitions(topic_id=topic_id, partitions=list(partitions))
                        for topic_id, partitions in answer.assignment
                    ]
                )
            ),
        )

    def consumer_group_describe(
        self, coordinator: CoordinatorRequests, request: ConsumerGroupDescribeRequest
    ) -> ConsumerGroupDescribeResponse:
        def assignment(partitions: cgm.NamedTopicPartitions) -> DescribedAssignment:
            return DescribedAssignment(
                topic_partitions=[
                    DescribedTopicPartitions(
                        topic_id=topic_id, topic_name=name, partitions=list(ps)
                    )
                    for topic_id, name, ps in partitions
                ]
            )

        return ConsumerGroupDescribeResponse(
            groups=[
                ConsumerDescribedGroup(
                    error_code=_code(g.error),
                    error_message=_message(g.error),
                    group_id=g.group_id,
                    group_state=g.state,
                    group_epoch=g.group_epoch,
                    assignment_epoch=g.assignment_epoch,
                    assignor_name=g.assignor_name,
                    members=[
                        ConsumerDescribedMember(
                            member_id=m.member_id,
                            instance_id=m.instance_id,
                            rack_id=m.rack_id,
                            member_epoch=m.member_epoch,
                            client_id=m.client_id,
                            client_host=m.client_host,
                            subscribed_topic_names=list(m.subscribed_topic_names),
                            subscribed_topic_regex=m.subscribed_topic_regex,
                            assignment=assignment(m.assignment),
                            target_assignment=assignment(m.target_assignment),
                            member_type=MEMBER_TYPES.get(m.member_type, -1),
                        )
                        for m in g.members
                    ],
                )
                for g in coordinator.consumer_group_describe(request.group_ids)
            ]
        )

    def _topic_names(self, topic_ids: Iterable[UUID]) -> dict[UUID, str]:
        by_id = self._image().topics.by_id
        return {t: by_id[t].name for t in topic_ids if t in by_id}

    def _topic_id(self, name: str) -> UUID:
        topic = self._image().topics.by_name.get(name)
        return ZERO_UUID if topic is None else topic.topic_id


def _fetch_request(
    group_id: str,
    wanted: list[tuple[str, list[int]]] | None,
    member_id: str | None = None,
    member_epoch: int = -1,
    *,
    require_stable: bool = False,
) -> cm.OffsetFetchRequest:
    return cm.OffsetFetchRequest(
        group_id,
        None
        if wanted is None
        else tuple((name, partition) for name, partitions in wanted for partition in partitions),
        member_id,
        member_epoch,
        require_stable,
    )


def _by_topic(
    fetched: Iterable[cm.FetchedOffset],
) -> list[tuple[str, list[cm.FetchedOffset]]]:
    """The fetched offsets grouped by topic, topics in first-seen order."""
    topics: dict[str, list[cm.FetchedOffset]] = {}
    for f in fetched:
        topics.setdefault(f.topic, []).append(f)
    return list(topics.items())


def _host(peer: str) -> str:
    """The host of a connection's `host:port` (`[::1]:5000`: `::1`); "" if none."""
    if ":" not in peer:
        return ""
    return peer.rsplit(":", 1)[0].strip("[]")


def _code(error: KafkaError | None) -> int:
    return 0 if error is None else error.code


def _message(error: KafkaError | None) -> str | None:
    return None if error is None else str(error)
