"""A client of a broker's group coordinator over Kafka's protocol: find a group's coordinator,
commit and fetch its offsets, the classic and consumer-protocol (KIP-848) group calls, list,
describe and delete groups, in `replog.coordinator`'s types (the interface the gRPC
`CoordinatorClient` had).

Rules:
- Requests go over `KafkaConnections` (the client's pool, or one of its own): the membership
  calls (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, ConsumerGroupHeartbeat) on lane
  `MEMBERSHIP_LANE`, every other call on the client's default connection to the broker
  (`COORDINATOR_LANE`, which no long poll holds), so that a commit never waits behind a
  JoinGroup parked until the group's rebalance ends (a broker answers one connection's
  requests in order), nor a heartbeat behind a long-poll fetch.
- Versions: each API at the highest both sides serve up to the newest that names topics by
  name (OffsetCommit v9 and OffsetFetch v9; v10 names them by id). DescribeGroups stops at v5,
  which describes a missing group as state "Dead" (v6 answers GROUP_ID_NOT_FOUND).
- A refused, lost or unreachable connection is a NetworkError, an unanswered request a
  RequestTimedOutError (both retriable); a peer that is not a Kafka listener a
  NotAKafkaListenerError; an answer that is not one this request can have a
  MalformedResponseError. The deadline of a call is `timeout_ms` (default
  `request_timeout_ms`).
- A request-level error of an answer (INVALID_GROUP_ID, NOT_COORDINATOR,
  COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, ...) is raised as its
  `replog.errors` class, naming the coordinator and the group; per-partition errors of a commit
  are returned, one per partition asked. The classic calls and ConsumerGroupHeartbeat return
  their answer's error (it steers the member), never raise it.
- A commit names its committer's instance in a tagged field of OffsetCommit v8+
  (`shared_commit_tags`); a replog coordinator answers, in another, the other consumers that
  commit the same partitions of the group. Other brokers ignore both tags.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from replog.common import OffsetAndMetadata, TopicPartition
from replog.coordinator import classic_group_messages as gm
from replog.coordinator import consumer_group_messages as cgm
from replog.coordinator import messages as cm
from replog.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidGroupIdError,
    KafkaError,
    MalformedResponseError,
    NotCoordinatorError,
    UnknownServerError,
    UnsupportedVersionError,
    answer_error,
)
from replog.kafka.messages.consumer_group_describe_request import ConsumerGroupDescribeRequest
from replog.kafka.messages.consumer_group_describe_response import (
    Assignment as DescribedAssignment,
)
from replog.kafka.messages.consumer_group_describe_response import ConsumerGroupDescribeResponse
from replog.kafka.messages.consumer_group_heartbeat_request import (
    ConsumerGroupHeartbeatRequest,
)
from replog.kafka.messages.consumer_group_heartbeat_request import (
    TopicPartitions as OwnedPartitions,
)
from replog.kafka.messages.consumer_group_heartbeat_response import (
    ConsumerGroupHeartbeatResponse,
)
from replog.kafka.messages.delete_groups_request import DeleteGroupsRequest
from replog.kafka.messages.delete_groups_response import DeleteGroupsResponse
from replog.kafka.messages.describe_groups_request import DescribeGroupsRequest
from replog.kafka.messages.describe_groups_response import DescribeGroupsResponse
from replog.kafka.messages.find_coordinator_request import FindCoordinatorRequest
from replog.kafka.messages.find_coordinator_response import FindCoordinatorResponse
from replog.kafka.messages.heartbeat_request import HeartbeatRequest
from replog.kafka.messages.heartbeat_response import HeartbeatResponse
from replog.kafka.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from replog.kafka.messages.join_group_response import JoinGroupResponse
from replog.kafka.messages.leave_group_request import LeaveGroupRequest, MemberIdentity
from replog.kafka.messages.leave_group_response import LeaveGroupResponse
from replog.kafka.messages.list_groups_request import ListGroupsRequest
from replog.kafka.messages.list_groups_response import ListGroupsResponse
from replog.kafka.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from replog.kafka.messages.offset_commit_response import OffsetCommitResponse
from replog.kafka.messages.offset_fetch_request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from replog.kafka.messages.offset_fetch_response import OffsetFetchResponse
from replog.kafka.messages.sync_group_request import SyncGroupRequest, SyncGroupRequestAssignment
from replog.kafka.messages.sync_group_response import SyncGroupResponse
from replog.kafka.protocol.codec import Message
from replog.net_address import format_host_port
from replog.wire import shared_commit_tags
from replog.wire.kafka_connection import KafkaConnections
from replog.wire.sasl_authentication import SaslCredentials

M = TypeVar("M", bound=Message)


# The API key of each answer built by version (`_call`).
_API_KEYS: dict[type[Message], int] = {
    FindCoordinatorResponse: FindCoordinatorRequest.API_KEY,
    OffsetCommitResponse: OffsetCommitRequest.API_KEY,
    OffsetFetchResponse: OffsetFetchRequest.API_KEY,
    LeaveGroupResponse: LeaveGroupRequest.API_KEY,
}


class _Grouped(Protocol):
    @property
    def group_id(self) -> str: ...


G = TypeVar("G", bound=_Grouped)

MEMBERSHIP_LANE = "group"
COORDINATOR_LANE = ""  # the client's default connection to the broker (metadata, offsets)
REQUEST_TIMEOUT_MS_DEFAULT = 30_000
SETUP_TIMEOUT_MS_DEFAULT = 10_000  # Kafka's socket.connection.setup.timeout.ms
GROUP_KEY_TYPE = 0
FIND_COORDINATOR_BATCH_VERSION = 4
OFFSET_FETCH_GROUPS_VERSION = 8
BY_NAME_MAX_VERSION = 9  # OffsetCommit and OffsetFetch v10 name topics by id
DESCRIBE_DEAD_MAX_VERSION = 5
LEAVE_BATCH_VERSION = 3
MEMBER_TYPES = {0: cgm.CLASSIC_MEMBER, 1: cgm.CONSUMER_MEMBER}


class KafkaCoordinatorClient:
    """The group coordinator calls to the broker at `address` (module docstring)."""

    def __init__(
        self,
        address: str,
        *,
        request_timeout_ms: int = REQUEST_TIMEOUT_MS_DEFAULT,
        connections: KafkaConnections | None = None,
        client_id: str = "replog",
        setup_timeout_ms: int = SETUP_TIMEOUT_MS_DEFAULT,
        tls: ssl.SSLContext | None = None,
        sasl: SaslCredentials | None = None,
    ) -> None:
        """`connections`: the client's pool (closed by its owner); without, the client opens
        its own, closed by `close`, over TLS with the context `tls` (None: plaintext),
        authenticated with `sasl` (None: no SASL)."""
        self.address = address
        self.request_timeout_ms = request_timeout_ms
        self._owns_connections = connections is None
        self._connections = connections or KafkaConnections(
            client_id=client_id, setup_timeout_ms=setup_timeout_ms, tls=tls, sasl=sasl
        )

    def reconnect(self) -> None:
        """Drop the connections to the broker: the next call dials again at once."""
        self._connections.drop(self.address, MEMBERSHIP_LANE)
        self._connections.drop(self.address, COORDINATOR_LANE)

    async def _call(
        self,
        request: Message | Callable[[int], Message],
        answer_type: type[M],
        timeout_ms: int | None,
        *,
        lane: str = COORDINATOR_LANE,
        max_version: int | None = None,
    ) -> tuple[M, int]:
        """The answer to `request` and the version it went at (module docstring); a callable
        `request` builds the request for the version agreed (fields differ by version)."""
        deadline_ms = self.request_timeout_ms if timeout_ms is None else timeout_ms
        connection = await self._connections.get(self.address, lane)
        if not isinstance(request, Message):
            api_key = _API_KEYS[answer_type]
            version = connection.version(api_key, max_version=max_version)
            request = request(version)
            max_version = version
        answer, version = await connection.call(
            request, timeout_ms=deadline_ms, max_version=max_version
        )
        if not isinstance(answer, answer_type):
            raise MalformedResponseError(
                f"the broker at {self.address} answered {type(request).__name__} with "
                f"{type(answer).__name__}"
            )
        return answer, version

    def _error(
        self, code: int, message: str | None = None, about: str = "", who: str = "coordinator"
    ) -> KafkaError | None:
        """The error an answer's `code` stands for, naming this `who` and `about`."""
        where = f" for {about}" if about else ""
        return answer_error(code, message, f"from the {who} at {self.address}{where}")

    async def find_coordinator(
        self, group_id: str, *, timeout_ms: int | None = None, key_type: int = GROUP_KEY_TYPE
    ) -> tuple[int, str]:
        """(node id, "host:port") of the group's coordinator (`key_type` 1: the transaction
        coordinator of the transactional id `group_id`); raises the answer's error."""
        kind = "group" if key_type == GROUP_KEY_TYPE else "transactional id"

        def build(version: int) -> Message:
            if version >= FIND_COORDINATOR_BATCH_VERSION:
                return FindCoordinatorRequest(key_type=key_type, coordinator_keys=[group_id])
            return FindCoordinatorRequest(key=group_id, key_type=key_type)

        answer, version = await self._call(
            build,
            FindCoordinatorResponse,
            timeout_ms,
        )
        if version >= FIND_COORDINATOR_BATCH_VERSION:
            found = [c for c in answer.coordinators if c.key == group_id]
            if len(found) != 1:
                raise MalformedResponseError(
                    f"the broker at {self.address} answered FindCoordinator for {kind} "
                    f"{group_id!r} with {len(found)} coordinators of that {kind}"
                )
            (one,) = found
            code, message, node_id, host, port = (
                one.error_code,
                one.error_message,
                one.node_id,
                one.host,
                one.port,
            )
        else:
            code, message, node_id, host, port = (
                answer.error_code,
                answer.error_message,
                answer.node_id,
                answer.host,
                answer.port,
            )
        error = self._error(
            code, message, about=f"FindCoordinator of {kind} '{group_id}'", who="broker"
        )
        if error is not None:
            raise error
        return node_id, format_host_port(host, port)

    async def offset_commit(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        *,
        generation_id: int = -1,
        member_id: str = "",
        committer: cm.Committer = cm.NO_COMMITTER,
        group_instance_id: str | None = None,
        timeout_ms: int | None = None,
    ) -> tuple[dict[TopicPartition, KafkaError | None], tuple[cm.SharedCommit, ...]]:
        """Commit `offsets` (the next offset to read of each partition) as `committer`;
        per-partition errors and other committers are returned (module docstring)."""
        topics: dict[str, list[OffsetCommitRequestPartition]] = {}
        for tp, om in offsets.items():
            topics.setdefault(tp.topic, []).append(
                OffsetCommitRequestPartition(
                    partition_index=tp.partition,
                    committed_offset=om.offset,
                    committed_leader_epoch=om.leader_epoch,
                    committed_metadata=om.metadata or "",
                )
            )

        def build(version: int) -> Message:
            request = OffsetCommitRequest(
                group_id=group_id,
                generation_id_or_member_epoch=generation_id,
                member_id=member_id,
                group_instance_id=group_instance_id,
                topics=[
                    OffsetCommitRequestTopic(name=topic, partitions=partitions)
                    for topic, partitions in topics.items()
                ],
            )
            if version >= OffsetCommitRequest.FLEXIBLE_MIN_VERSION:
                request.unknown_tagged_fields = shared_commit_tags.committer_tags(committer)
            return request

        answer, _ = await self._call(
            build, OffsetCommitResponse, timeout_ms, max_version=BY_NAME_MAX_VERSION
        )
        what = f"group '{group_id}'"
        results: dict[TopicPartition, KafkaError | None] = {}
        for topic in answer.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                results[tp] = self._error(
                    p.error_code, about=f"{what}, partition {tp.topic}-{tp.partition}"
                )
        # OffsetCommit has no request-level error: a broker answers one (NOT_COORDINATOR, ...)
        # on every partition. Such an error is about the group, and raised as such.
        answered = list(results.values())
        first = answered[0] if answered else None
        if (
            first is not None
            and _request_level(first)
            and all(type(e) is type(first) for e in answered)
        ):
            raise first
        shared = shared_commit_tags.shared_from_tags(answer.unknown_tagged_fields, self.address)
        return {
            tp: results[tp]
            if tp in results
            else UnknownServerError(
                f"coordinator at {self.address} gave no answer for {tp.topic}-{tp.partition}"
            )
            for tp in offsets
        }, shared

    async def offset_fetch(
        self,
        group_id: str,
        partitions: Sequence[TopicPartition] | None,
        *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets of `partitions` (None values: nothing committed), or
        of every partition it committed when `partitions` is None; raises the answer's
        request-level error, or a partition's."""
        wanted: dict[str, list[int]] | None = None
        if partitions is not None:
            wanted = {}
            for tp in partitions:
                wanted.setdefault(tp.topic, []).append(tp.partition)

        def build(version: int) -> Message:
            if version >= OFFSET_FETCH_GROUPS_VERSION:
                return OffsetFetchRequest(
                    groups=[
                        OffsetFetchRequestGroup(
                            group_id=group_id,
                            topics=None
                            if wanted is None
                            else [
                                OffsetFetchRequestTopics(name=topic, partition_indexes=indexes)
                                for topic, indexes in wanted.items()
                            ],
                        )
                    ]
                )
            return OffsetFetchRequest(
                group_id=group_id,
                topics=None
                if wanted is None
                else [
                    OffsetFetchRequestTopic(name=topic, partition_indexes=indexes)
                    for topic, indexes in wanted.items()
                ],
            )

        answer, version = await self._call(
            build, OffsetFetchResponse, timeout_ms, max_version=BY_NAME_MAX_VERSION
        )
        what = f"group '{group_id}'"
        if version >= OFFSET_FETCH_GROUPS_VERSION:
            groups = [g for g in answer.groups if g.group_id == group_id]
            if len(groups) != 1:
                raise MalformedResponseError(
                    f"the coordinator at {self.address} answered OffsetFetch for {what} with "
                    f"{len(groups)} answers for that group"
                )
            (group,) = groups
            request_error = self._error(group.error_code, about=what)
            topics: Sequence[Any] = group.topics  # OffsetFetchResponseTopics
        else:
            request_error = self._error(answer.error_code, about=what)
            topics = answer.topics  # OffsetFetchResponseTopic: the same fields
        if request_error is not None:
            raise request_error
        committed: dict[TopicPartition, OffsetAndMetadata | None] = {}
        for t in topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                error = self._error(
                    p.error_code, about=f"{what}, partition {t.name}-{tp.partition}"
                )
                if error is not None:
                    raise error
                offset, epoch = p.committed_offset, p.committed_leader_epoch
                committed[tp] = (
                    None if offset < 0 else OffsetAndMetadata(offset, p.metadata or "", epoch)
                )
        if partitions is not None:
            return {tp: committed.get(tp) for tp in partitions}
        return committed

    # The classic group protocol: answers carry their error (MEMBER_ID_REQUIRED,
    # REBALANCE_IN_PROGRESS, ... steer the member), never raised. JoinGroup and SyncGroup wait
    # for the other members: give them a timeout longer than the group's rebalance timeout.

    async def join_group(
        self, request: gm.JoinGroupRequest, *, timeout_ms: int | None = None
    ) -> gm.JoinGroupResponse:
        answer, _ = await self._call(
            JoinGroupRequest(
                group_id=request.group_id,
                session_timeout_ms=request.session_timeout_ms,
                rebalance_timeout_ms=request.rebalance_timeout_ms,
                member_id=request.member_id,
                group_instance_id=request.group_instance_id,
                protocol_type=request.protocol_type,
                protocols=[
                    JoinGroupRequestProtocol(name=name, metadata=metadata)
                    for name, metadata in request.protocols
                ],
                reason=request.reason,  # v8+; older versions do not carry it
            ),
            JoinGroupResponse,
            timeout_ms,
            lane=MEMBERSHIP_LANE,
        )
        return gm.JoinGroupResponse(
            0,
            self._error(answer.error_code, about=f"JoinGroup of group '{request.group_id}'"),
            answer.member_id,
            answer.generation_id,
            answer.protocol_type,
            answer.protocol_name,
            answer.leader,
            answer.skip_assignment,
            tuple(
                gm.JoinMember(m.member_id, m.group_instance_id, bytes(m.metadata))
                for m in answer.members
            ),
        )

    async def sync_group(
        self, request: gm.SyncGroupRequest, *, timeout_ms: int | None = None
    ) -> gm.SyncGroupResponse:
        answer, _ = await self._call(
            SyncGroupRequest(
                group_id=request.group_id,
                generation_id=request.generation_id,
                member_id=request.member_id,
                group_instance_id=request.group_instance_id,
                protocol_type=request.protocol_type,
                protocol_name=request.protocol_name,
                assignments=[
                    SyncGroupRequestAssignment(member_id=member, assignment=assignment)
                    for member, assignment in request.assignments
                ],
            ),
            SyncGroupResponse,
            timeout_ms,
            lane=MEMBERSHIP_LANE,
        )
        return gm.SyncGroupResponse(
            0,
            self._error(answer.error_code, about=f"SyncGroup of group '{request.group_id}'"),
            answer.protocol_type,
            answer.protocol_name,
            bytes(answer.assignment),
        )

    async def heartbeat(
        self, request: gm.HeartbeatRequest, *, timeout_ms: int | None = None
    ) -> KafkaError | None:
        answer, _ = await self._call(
            HeartbeatRequest(
                group_id=request.group_id,
                generation_id=request.generation_id,
                member_id=request.member_id,
                group_instance_id=request.group_instance_id,
            ),
            HeartbeatResponse,
            timeout_ms,
            lane=MEMBERSHIP_LANE,
        )
        return self._error(answer.error_code, about=f"Heartbeat of group '{request.group_id}'")

    async def leave_group(
        self, request: gm.LeaveGroupRequest, *, timeout_ms: int | None = None
    ) -> gm.LeaveGroupResponse:
        def build(version: int) -> Message:
            if version >= LEAVE_BATCH_VERSION:
                return LeaveGroupRequest(
                    group_id=request.group_id,
                    members=[
                        MemberIdentity(
                            member_id=m.member_id,
                            group_instance_id=m.group_instance_id,
                            reason=m.reason,  # v5+
                        )
                        for m in request.members
                    ],
                )
            if len(request.members) != 1:
                raise UnsupportedVersionError(
                    f"the broker at {self.address} serves LeaveGroup only for one member "
                    f"(v{version}); {len(request.members)} asked to leave"
                )
            return LeaveGroupRequest(
                group_id=request.group_id, member_id=request.members[0].member_id
            )

        answer, version = await self._call(
            build,
            LeaveGroupResponse,
            timeout_ms,
            lane=MEMBERSHIP_LANE,
        )
        about = f"LeaveGroup of group '{request.group_id}'"
        error = self._error(answer.error_code, about=about)
        if version >= LEAVE_BATCH_VERSION:
            members = tuple(
                gm.LeaveMemberResponse(
                    m.member_id, m.group_instance_id, self._error(m.error_code, about=about)
                )
                for m in answer.members
            )
        else:
            members = tuple(
                gm.LeaveMemberResponse(m.member_id, m.group_instance_id, error)
                for m in request.members
            )
        return gm.LeaveGroupResponse(error, members)

    async def consumer_group_heartbeat(
        self, request: cgm.ConsumerGroupHeartbeatRequest, *, timeout_ms: int | None = None
    ) -> cgm.ConsumerGroupHeartbeatResponse:
        answer, _ = await self._call(
            ConsumerGroupHeartbeatRequest(
                group_id=request.group_id,
                member_id=request.member_id,
                member_epoch=request.member_epoch,
                instance_id=request.instance_id,
                rack_id=request.rack_id,
                rebalance_timeout_ms=request.rebalance_timeout_ms,
                subscribed_topic_names=None
                if request.subscribed_topic_names is None
                else list(request.subscribed_topic_names),
                subscribed_topic_regex=request.subscribed_topic_regex,
                server_assignor=request.server_assignor,
                topic_partitions=None
                if request.owned is None
                else [
                    OwnedPartitions(topic_id=topic_id, partitions=list(partitions))
                    for topic_id, partitions in request.owned
                ],
            ),
            ConsumerGroupHeartbeatResponse,
            timeout_ms,
            lane=MEMBERSHIP_LANE,
        )
        return cgm.ConsumerGroupHeartbeatResponse(
            self._error(
                answer.error_code,
                answer.error_message,
                about=f"ConsumerGroupHeartbeat of group '{request.group_id}'",
            ),
            answer.member_id,
            answer.member_epoch,
            answer.heartbeat_interval_ms,
            None
            if answer.assignment is None
            else tuple(
                (t.topic_id, tuple(sorted(t.partitions)))
                for t in answer.assignment.topic_partitions
            ),
        )

    async def list_groups(
        self, states: Sequence[str] = (), *, timeout_ms: int | None = None
    ) -> list[gm.ListedGroup]:
        """The groups this broker coordinates (in `states` when given); raises the answer's
        error (COORDINATOR_LOAD_IN_PROGRESS while a partition loads)."""
        answer, _ = await self._call(
            ListGroupsRequest(states_filter=list(states)), ListGroupsResponse, timeout_ms
        )
        error = self._error(answer.error_code, about="ListGroups")
        if error is not None:
            raise error
        return [
            gm.ListedGroup(g.group_id, g.protocol_type, g.group_state, g.group_type or "classic")
            for g in answer.groups
        ]

    async def describe_group(
        self, group_id: str, *, timeout_ms: int | None = None
    ) -> gm.DescribedGroup:
        """The group's state and members (ask its coordinator); raises the group's error."""
        answer, _ = await self._call(
            DescribeGroupsRequest(groups=[group_id]),
            DescribeGroupsResponse,
            timeout_ms,
            max_version=DESCRIBE_DEAD_MAX_VERSION,
        )
        group = self._only(answer.groups, group_id, "DescribeGroups")
        error = self._error(group.error_code, group.error_message, about=f"group '{group_id}'")
        if error is not None:
            raise error
        return gm.DescribedGroup(
            group.group_id,
            None,
            group.group_state,
            group.protocol_type,
            group.protocol_data,
            tuple(
                gm.DescribedMember(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    # Kafka writes an address as "/127.0.0.1"; the host is what follows.
                    m.client_host.removeprefix("/"),
                    bytes(m.member_metadata),
                    bytes(m.member_assignment),
                )
                for m in group.members
            ),
        )

    async def describe_consumer_group(
        self, group_id: str, *, timeout_ms: int | None = None
    ) -> cgm.DescribedConsumerGroup:
        """A consumer-protocol (KIP-848) group's epochs and members (ask its coordinator);
        raises the group's error (GROUP_ID_NOT_FOUND: not such a group)."""
        answer, _ = await self._call(
            ConsumerGroupDescribeRequest(group_ids=[group_id]),
            ConsumerGroupDescribeResponse,
            timeout_ms,
        )
        group = self._only(answer.groups, group_id, "ConsumerGroupDescribe")
        error = self._error(group.error_code, group.error_message, about=f"group '{group_id}'")
        if error is not None:
            raise error
        return cgm.DescribedConsumerGroup(
            group.group_id,
            None,
            group.group_state,
            group.group_epoch,
            group.assignment_epoch,
            group.assignor_name,
            tuple(
                cgm.DescribedConsumerMember(
                    m.member_id,
                    m.instance_id,
                    m.rack_id,
                    m.member_epoch,
                    m.client_id,
                    m.client_host,
                    tuple(m.subscribed_topic_names),
                    m.subscribed_topic_regex,
                    _named(m.assignment),
                    _named(m.target_assignment),
                    MEMBER_TYPES.get(m.member_type, cgm.CONSUMER_MEMBER),
                )
                for m in group.members
            ),
        )

    async def delete_groups(
        self, group_ids: Sequence[str], *, timeout_ms: int | None = None
    ) -> list[tuple[str, KafkaError | None]]:
        """Each group and its error (None: deleted with its committed offsets); ask the
        groups' coordinator."""
        answer, _ = await self._call(
            DeleteGroupsRequest(groups_names=list(group_ids)), DeleteGroupsResponse, timeout_ms
        )
        return [
            (r.group_id, self._error(r.error_code, about=f"group '{r.group_id}'"))
            for r in answer.results
        ]

    def _only(self, groups: Sequence[G], group_id: str, api: str) -> G:
        found = [g for g in groups if g.group_id == group_id]
        if len(found) != 1:
            raise MalformedResponseError(
                f"the coordinator at {self.address} answered {api} of group {group_id!r} "
                f"with {len(found)} descriptions of it"
            )
        return found[0]

    async def close(self) -> None:
        if self._owns_connections:
            await self._connections.close()

    async def __aenter__(self) -> KafkaCoordinatorClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


def _request_level(error: KafkaError) -> bool:
    """Whether a commit's per-partition `error` is about the group rather than a partition."""
    return isinstance(
        error,
        NotCoordinatorError
        | CoordinatorNotAvailableError
        | CoordinatorLoadInProgressError
        | InvalidGroupIdError,
    )


def _named(assignment: DescribedAssignment) -> cgm.NamedTopicPartitions:
    return tuple(
        (t.topic_id, t.topic_name, tuple(sorted(t.partitions))) for t in assignment.topic_partitions
    )
