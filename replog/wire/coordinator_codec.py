"""Translation between the GroupCoordinator service's protobuf messages and
`replog.coordinator.messages` (offsets), `replog.coordinator.classic_group_messages` (the
classic group protocol) and `replog.coordinator.consumer_group_messages` (KIP-848's).

Both directions of every message: the service decodes requests and encodes responses,
`CoordinatorClient` the opposite. No protocol decision is made here.

Rules:
- The wire groups partitions by topic (in the order topics first appear); the dataclasses hold
  one flat entry per partition, and decoding keeps the wire's order.
- Errors cross the wire as `ErrorStatus` (`broker_codec.error_to_proto`); decoding gives the
  `replog.errors` class of the code, so clients raise the coordinator's types.
- An unset optional string (a group instance id, a protocol) is None; so is an unset
  ConsumerGroupHeartbeat list (Kafka's null: unchanged), which differs from an empty one.
- A request the dataclasses cannot hold (a partition named twice, a negative partition number
  in an OffsetFetch) is `InvalidRequestError` naming it; the service answers it as gRPC
  INVALID_ARGUMENT.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from replog.coordinator import classic_group_messages as gm
from replog.coordinator import consumer_group_messages as cgm
from replog.coordinator import messages as cm
from replog.errors import InvalidRequestError, KafkaError
from replog.pb import coordinator_pb2 as pb
from replog.wire.broker_codec import error_from_proto, error_to_proto, topic_id_from_proto

T = TypeVar("T")


def _grouped(items: Iterable[T], topic: Callable[[T], str]) -> dict[str, list[T]]:
    """Items by topic, topics in first-seen order."""
    by_topic: dict[str, list[T]] = {}
    for item in items:
        by_topic.setdefault(topic(item), []).append(item)
    return by_topic


def _check_unique(keys: Sequence[tuple[str, int]], what: str) -> None:
    seen: set[tuple[str, int]] = set()
    for topic, partition in keys:
        if (topic, partition) in seen:
            raise InvalidRequestError(f"{what} names {topic}-{partition} more than once")
        seen.add((topic, partition))


# --- FindCoordinator ----------------------------------------------------------------------------


def find_coordinator_response_to_proto(
    response: cm.FindCoordinatorResponse,
) -> pb.FindCoordinatorResponse:
    return pb.FindCoordinatorResponse(
        error=error_to_proto(response.error),
        node_id=response.node_id,
        host=response.host,
        port=response.port,
    )


def find_coordinator_response_from_proto(
    message: pb.FindCoordinatorResponse,
) -> cm.FindCoordinatorResponse:
    return cm.FindCoordinatorResponse(
        error_from_proto(message), message.node_id, message.host, message.port
    )


# --- OffsetCommit -------------------------------------------------------------------------------


def offset_commit_request_to_proto(request: cm.OffsetCommitRequest) -> pb.OffsetCommitRequest:
    return pb.OffsetCommitRequest(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        topics=[
            pb.OffsetCommitTopic(
                name=topic,
                partitions=[
                    pb.OffsetCommitPartition(
                        partition=e.partition,
                        committed_offset=e.offset,
                        committed_leader_epoch=e.leader_epoch,
                        committed_metadata=e.metadata,
                    )
                    for e in entries
                ],
            )
            for topic, entries in _grouped(request.entries, lambda e: e.topic).items()
        ],
        client_id=request.committer.client_id,
        client_instance_id=request.committer.instance_id,
        group_instance_id=request.group_instance_id,
    )


def offset_commit_request_from_proto(message: pb.OffsetCommitRequest) -> cm.OffsetCommitRequest:
    entries = tuple(
        cm.CommitEntry(
            topic.name,
            p.partition,
            p.committed_offset,
            p.committed_leader_epoch,
            p.committed_metadata,
        )
        for topic in message.topics
        for p in topic.partitions
    )
    _check_unique([(e.topic, e.partition) for e in entries], "OffsetCommit")
    return cm.OffsetCommitRequest(
        message.group_id,
        entries,
        message.generation_id,
        message.member_id,
        cm.Committer(message.client_id, message.client_instance_id),
        _optional(message, "group_instance_id"),
    )


def offset_commit_response_to_proto(response: cm.OffsetCommitResponse) -> pb.OffsetCommitResponse:
    return pb.OffsetCommitResponse(
        error=error_to_proto(response.error),
        topics=[
            pb.OffsetCommitTopicResponse(
                name=topic,
                partitions=[
                    pb.OffsetCommitPartitionResponse(
                        partition=r.partition, error=error_to_proto(r.error)
                    )
                    for r in results
                ],
            )
            for topic, results in _grouped(response.partitions, lambda r: r.topic).items()
        ],
        shared_commits=[
            pb.SharedCommit(
                client_id=shared.other.client_id,
                client_instance_id=shared.other.instance_id,
                host=shared.other.host,
                partitions=[
                    pb.OffsetFetchTopic(name=topic, partitions=[p for _, p in tps])
                    for topic, tps in _grouped(shared.partitions, lambda tp: tp[0]).items()
                ],
                last_commit_age_ms=shared.last_commit_age_ms,
            )
            for shared in response.shared
        ],
    )


def offset_commit_response_from_proto(message: pb.OffsetCommitResponse) -> cm.OffsetCommitResponse:
    return cm.OffsetCommitResponse(
        error_from_proto(message),
        tuple(
            cm.OffsetCommitPartitionResult(topic.name, p.partition, error_from_proto(p))
            for topic in message.topics
            for p in topic.partitions
        ),
        tuple(
            cm.SharedCommit(
                cm.Committer(shared.client_id, shared.client_instance_id, shared.host),
                tuple((topic.name, p) for topic in shared.partitions for p in topic.partitions),
                shared.last_commit_age_ms,
            )
            for shared in message.shared_commits
        ),
    )


# --- OffsetFetch --------------------------------------------------------------------------------


def offset_fetch_request_to_proto(request: cm.OffsetFetchRequest) -> pb.OffsetFetchRequest:
    if request.partitions is None:
        return pb.OffsetFetchRequest(group_id=request.group_id, all_partitions=True)
    return pb.OffsetFetchRequest(
        group_id=request.group_id,
        topics=[
            pb.OffsetFetchTopic(name=topic, partitions=[p for _, p in tps])
            for topic, tps in _grouped(request.partitions, lambda tp: tp[0]).items()
        ],
    )


def offset_fetch_request_from_proto(message: pb.OffsetFetchRequest) -> cm.OffsetFetchRequest:
    if message.all_partitions:
        if len(message.topics):
            raise InvalidRequestError("OffsetFetch with all_partitions must name no topics")
        return cm.OffsetFetchRequest(message.group_id, None)
    partitions = tuple((topic.name, p) for topic in message.topics for p in topic.partitions)
    for topic_name, partition in partitions:
        if partition < 0:
            raise InvalidRequestError(
                f"OffsetFetch names {topic_name}-{partition}: a partition number must be >= 0"
            )
    _check_unique(partitions, "OffsetFetch")
    return cm.OffsetFetchRequest(message.group_id, partitions)


def _fetched_to_proto(fetched: cm.FetchedOffset) -> pb.OffsetFetchPartitionResponse:
    return pb.OffsetFetchPartitionResponse(
        partition=fetched.partition,
        committed_offset=fetched.offset,
        committed_leader_epoch=fetched.leader_epoch,
        metadata=fetched.metadata,
        error=error_to_proto(fetched.error),
    )


def offset_fetch_response_to_proto(response: cm.OffsetFetchResponse) -> pb.OffsetFetchResponse:
    return pb.OffsetFetchResponse(
        error=error_to_proto(response.error),
        topics=[
            pb.OffsetFetchTopicResponse(
                name=topic, partitions=[_fetched_to_proto(f) for f in fetched]
            )
            for topic, fetched in _grouped(response.partitions, lambda f: f.topic).items()
        ],
    )


def offset_fetch_response_from_proto(message: pb.OffsetFetchResponse) -> cm.OffsetFetchResponse:
    return cm.OffsetFetchResponse(
        error_from_proto(message),
        tuple(
            cm.FetchedOffset(
                topic.name,
                p.partition,
                p.committed_offset,
                p.committed_leader_epoch,
                p.metadata,
                error_from_proto(p),
            )
            for topic in message.topics
            for p in topic.partitions
        ),
    )


# --- the classic group protocol -----------------------------------------------------------------


def _optional(message: Any, name: str) -> str | None:
    """An optional string field: None when unset."""
    return getattr(message, name) if message.HasField(name) else None


def join_group_request_to_proto(request: gm.JoinGroupRequest) -> pb.JoinGroupRequest:
    return pb.JoinGroupRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id,
        protocol_type=request.protocol_type,
        protocols=[pb.JoinGroupProtocol(name=n, metadata=m) for n, m in request.protocols],
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        client_id=request.client_id,
    )


def join_group_request_from_proto(
    message: pb.JoinGroupRequest, host: str = ""
) -> gm.JoinGroupRequest:
    return gm.JoinGroupRequest(
        group_id=message.group_id,
        member_id=message.member_id,
        protocol_type=message.protocol_type,
        protocols=tuple((p.name, p.metadata) for p in message.protocols),
        session_timeout_ms=message.session_timeout_ms,
        rebalance_timeout_ms=message.rebalance_timeout_ms,
        group_instance_id=_optional(message, "group_instance_id"),
        client_id=message.client_id,
        client_host=host,
    )


def join_group_response_to_proto(response: gm.JoinGroupResponse) -> pb.JoinGroupResponse:
    return pb.JoinGroupResponse(
        error=error_to_proto(response.error),
        member_id=response.member_id,
        generation_id=response.generation_id,
        protocol_type=response.protocol_type,
        protocol_name=response.protocol_name,
        leader=response.leader,
        skip_assignment=response.skip_assignment,
        members=[
            pb.JoinGroupMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata
            )
            for m in response.members
        ],
    )


def join_group_response_from_proto(message: pb.JoinGroupResponse) -> gm.JoinGroupResponse:
    return gm.JoinGroupResponse(
        0,
        error_from_proto(message),
        message.member_id,
        message.generation_id,
        _optional(message, "protocol_type"),
        _optional(message, "protocol_name"),
        message.leader,
        message.skip_assignment,
        tuple(
            gm.JoinMember(m.member_id, _optional(m, "group_instance_id"), m.metadata)
            for m in message.members
        ),
    )


def sync_group_request_to_proto(request: gm.SyncGroupRequest) -> pb.SyncGroupRequest:
    return pb.SyncGroupRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        generation_id=request.generation_id,
        group_instance_id=request.group_instance_id,
        protocol_type=request.protocol_type,
        protocol_name=request.protocol_name,
        assignments=[
            pb.SyncGroupAssignment(member_id=m, assignment=a) for m, a in request.assignments
        ],
    )


def sync_group_request_from_proto(message: pb.SyncGroupRequest) -> gm.SyncGroupRequest:
    assigned = [a.member_id for a in message.assignments]
    if len(set(assigned)) != len(assigned):
        raise InvalidRequestError("SyncGroup assigns to a member more than once")
    return gm.SyncGroupRequest(
        message.group_id,
        message.member_id,
        message.generation_id,
        _optional(message, "group_instance_id"),
        _optional(message, "protocol_type"),
        _optional(message, "protocol_name"),
        tuple((a.member_id, a.assignment) for a in message.assignments),
    )


def sync_group_response_to_proto(response: gm.SyncGroupResponse) -> pb.SyncGroupResponse:
    return pb.SyncGroupResponse(
        error=error_to_proto(response.error),
        protocol_type=response.protocol_type,
        protocol_name=response.protocol_name,
        assignment=response.assignment,
    )


def sync_group_response_from_proto(message: pb.SyncGroupResponse) -> gm.SyncGroupResponse:
    return gm.SyncGroupResponse(
        0,
        error_from_proto(message),
        _optional(message, "protocol_type"),
        _optional(message, "protocol_name"),
        message.assignment,
    )


def heartbeat_request_to_proto(request: gm.HeartbeatRequest) -> pb.HeartbeatRequest:
    return pb.HeartbeatRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        generation_id=request.generation_id,
        group_instance_id=request.group_instance_id,
    )


def heartbeat_request_from_proto(message: pb.HeartbeatRequest) -> gm.HeartbeatRequest:
    return gm.HeartbeatRequest(
        message.group_id,
        message.member_id,
        message.generation_id,
        _optional(message, "group_instance_id"),
    )


def leave_group_request_to_proto(request: gm.LeaveGroupRequest) -> pb.LeaveGroupRequest:
    return pb.LeaveGroupRequest(
        group_id=request.group_id,
        members=[
            pb.LeaveGroupMember(member_id=m.member_id, group_instance_id=m.group_instance_id)
            for m in request.members
        ],
    )


def leave_group_request_from_proto(message: pb.LeaveGroupRequest) -> gm.LeaveGroupRequest:
    return gm.LeaveGroupRequest(
        message.group_id,
        tuple(
            gm.LeaveMember(m.member_id, _optional(m, "group_instance_id")) for m in message.members
        ),
    )


def leave_group_response_to_proto(response: gm.LeaveGroupResponse) -> pb.LeaveGroupResponse:
    return pb.LeaveGroupResponse(
        error=error_to_proto(response.error),
        members=[
            pb.LeaveGroupMemberResponse(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                error=error_to_proto(m.error),
            )
            for m in response.members
        ],
    )


def leave_group_response_from_proto(message: pb.LeaveGroupResponse) -> gm.LeaveGroupResponse:
    return gm.LeaveGroupResponse(
        error_from_proto(message),
        tuple(
            gm.LeaveMemberResponse(
                m.member_id, _optional(m, "group_instance_id"), error_from_proto(m)
            )
            for m in message.members
        ),
    )


def describe_groups_response_to_proto(
    groups: Sequence[gm.DescribedGroup],
) -> pb.DescribeGroupsResponse:
    return pb.DescribeGroupsResponse(
        groups=[
            pb.DescribedGroup(
                group_id=g.group_id,
                error=error_to_proto(g.error),
                state=g.state,
                protocol_type=g.protocol_type,
                protocol=g.protocol_data,
                members=[
                    pb.DescribedMember(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        metadata=m.metadata,
                        assignment=m.assignment,
                        member_type=m.member_type,
                    )
                    for m in g.members
                ],
            )
            for g in groups
        ]
    )


def describe_groups_response_from_proto(
    message: pb.DescribeGroupsResponse,
) -> list[gm.DescribedGroup]:
    return [
        gm.DescribedGroup(
            g.group_id,
            error_from_proto(g),
            g.state,
            g.protocol_type,
            g.protocol,
            tuple(
                gm.DescribedMember(
                    m.member_id,
                    _optional(m, "group_instance_id"),
                    m.client_id,
                    m.client_host,
                    m.metadata,
                    m.assignment,
                    m.member_type or cgm.CLASSIC_MEMBER,
                )
                for m in g.members
            ),
        )
        for g in message.groups
    ]


def list_groups_response_to_proto(
    error: KafkaError | None, groups: Sequence[gm.ListedGroup]
) -> pb.ListGroupsResponse:
    return pb.ListGroupsResponse(
        error=error_to_proto(error),
        groups=[
            pb.ListedGroup(
                group_id=g.group_id,
                protocol_type=g.protocol_type,
                state=g.state,
                group_type=g.group_type,
            )
            for g in groups
        ],
    )


def list_groups_response_from_proto(
    message: pb.ListGroupsResponse,
) -> tuple[KafkaError | None, list[gm.ListedGroup]]:
    return error_from_proto(message), [
        gm.ListedGroup(g.group_id, g.protocol_type, g.state, g.group_type or "classic")
        for g in message.groups
    ]


def _named_to_proto(partitions: cgm.NamedTopicPartitions) -> list[pb.DescribedTopicPartitions]:
    return [
        pb.DescribedTopicPartitions(topic_id=t.bytes, topic_name=name, partitions=list(ps))
        for t, name, ps in partitions
    ]


def _named_from_proto(
    partitions: Iterable[pb.DescribedTopicPartitions], where: str
) -> cgm.NamedTopicPartitions:
    named = []
    for p in partitions:
        topic_id = topic_id_from_proto(p.topic_id, where)
        if topic_id is None:
            raise InvalidRequestError(f"{where}: a topic without its id")
        named.append((topic_id, p.topic_name, tuple(p.partitions)))
    return tuple(named)


def _partitions_to_proto(
    partitions: cgm.TopicPartitions | None,
) -> pb.HeartbeatPartitions | None:
    if partitions is None:
        return None
    return pb.HeartbeatPartitions(
        topics=[
            pb.HeartbeatTopicPartitions(topic_id=t.bytes, partitions=list(ps))
            for t, ps in partitions
        ]
    )


def _partitions_from_proto(message: Any, name: str, where: str) -> cgm.TopicPartitions | None:
    """A `HeartbeatPartitions` field: None when unset (Kafka's null)."""
    if not message.HasField(name):
        return None
    topics = []
    for t in getattr(message, name).topics:
        topic_id = topic_id_from_proto(t.topic_id, where)
        if topic_id is None:
            raise InvalidRequestError(f"{where}: a topic without its id")
        topics.append((topic_id, tuple(t.partitions)))
    return tuple(topics)


def consumer_group_heartbeat_request_to_proto(
    request: cgm.ConsumerGroupHeartbeatRequest,
) -> pb.ConsumerGroupHeartbeatRequest:
    names = request.subscribed_topic_names
    return pb.ConsumerGroupHeartbeatRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        subscribed_topic_names=None if names is None else pb.SubscribedTopicNames(names=names),
        subscribed_topic_regex=request.subscribed_topic_regex,
        server_assignor=request.server_assignor,
        owned=_partitions_to_proto(request.owned),
        client_id=request.client_id,
    )


def consumer_group_heartbeat_request_from_proto(
    message: pb.ConsumerGroupHeartbeatRequest, client_host: str
) -> cgm.ConsumerGroupHeartbeatRequest:
    where = f"ConsumerGroupHeartbeat of group {message.group_id!r}"
    return cgm.ConsumerGroupHeartbeatRequest(
        message.group_id,
        message.member_id,
        message.member_epoch,
        instance_id=_optional(message, "instance_id"),
        rack_id=_optional(message, "rack_id"),
        rebalance_timeout_ms=message.rebalance_timeout_ms,
        subscribed_topic_names=(
            tuple(message.subscribed_topic_names.names)
            if message.HasField("subscribed_topic_names")
            else None
        ),
        subscribed_topic_regex=_optional(message, "subscribed_topic_regex"),
        server_assignor=_optional(message, "server_assignor"),
        owned=_partitions_from_proto(message, "owned", where),
        client_id=message.client_id,
        client_host=client_host,
    )


def consumer_group_heartbeat_response_to_proto(
    response: cgm.ConsumerGroupHeartbeatResponse,
) -> pb.ConsumerGroupHeartbeatResponse:
    return pb.ConsumerGroupHeartbeatResponse(
        error=error_to_proto(response.error),
        member_id=response.member_id,
        member_epoch=response.member_epoch,
        heartbeat_interval_ms=response.heartbeat_interval_ms,
        assignment=_partitions_to_proto(response.assignment),
    )


def consumer_group_heartbeat_response_from_proto(
    message: pb.ConsumerGroupHeartbeatResponse,
) -> cgm.ConsumerGroupHeartbeatResponse:
    return cgm.ConsumerGroupHeartbeatResponse(
        error_from_proto(message),
        _optional(message, "member_id"),
        message.member_epoch,
        message.heartbeat_interval_ms,
        _partitions_from_proto(message, "assignment", "ConsumerGroupHeartbeat's answer"),
    )


def consumer_group_describe_response_to_proto(
    groups: Sequence[cgm.DescribedConsumerGroup],
) -> pb.ConsumerGroupDescribeResponse:
    return pb.ConsumerGroupDescribeResponse(
        groups=[
            pb.DescribedConsumerGroup(
                group_id=g.group_id,
                error=error_to_proto(g.error),
                state=g.state,
                group_epoch=g.group_epoch,
                assignment_epoch=g.assignment_epoch,
                assignor_name=g.assignor_name,
                members=[
                    pb.DescribedConsumerMember(
                        member_id=m.member_id,
                        instance_id=m.instance_id,
                        rack_id=m.rack_id,
                        member_epoch=m.member_epoch,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        subscribed_topic_names=list(m.subscribed_topic_names),
                        subscribed_topic_regex=m.subscribed_topic_regex,
                        assignment=_named_to_proto(m.assignment),
                        target_assignment=_named_to_proto(m.target_assignment),
                        member_type=m.member_type,
                    )
                    for m in g.members
                ],
            )
            for g in groups
        ]
    )


def consumer_group_describe_response_from_proto(
    message: pb.ConsumerGroupDescribeResponse,
) -> list[cgm.DescribedConsumerGroup]:
    return [
        cgm.DescribedConsumerGroup(
            g.group_id,
            error_from_proto(g),
            g.state,
            g.group_epoch,
            g.assignment_epoch,
            g.assignor_name,
            tuple(
                cgm.DescribedConsumerMember(
                    m.member_id,
                    _optional(m, "instance_id"),
                    _optional(m, "rack_id"),
                    m.member_epoch,
                    m.client_id,
                    m.client_host,
                    tuple(m.subscribed_topic_names),
                    _optional(m, "subscribed_topic_regex"),
                    _named_from_proto(m.assignment, f"group {g.group_id!r}"),
                    _named_from_proto(m.target_assignment, f"group {g.group_id!r}"),
                    m.member_type or cgm.CONSUMER_MEMBER,
                )
                for m in g.members
            ),
        )
        for g in message.groups
    ]


def delete_groups_response_to_proto(
    results: Sequence[tuple[str, KafkaError | None]],
) -> pb.DeleteGroupsResponse:
    return pb.DeleteGroupsResponse(
        results=[
            pb.DeleteGroupResult(group_id=group_id, error=error_to_proto(error))
            for group_id, error in results
        ]
    )


def delete_groups_response_from_proto(
    message: pb.DeleteGroupsResponse,
) -> list[tuple[str, KafkaError | None]]:
    return [(r.group_id, error_from_proto(r)) for r in message.results]
