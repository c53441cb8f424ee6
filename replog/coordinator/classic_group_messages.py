"""The classic group protocol's requests and answers, as the group coordinator sees them.

One frozen dataclass per message (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups,
ListGroups, DeleteGroups), with Kafka's fields under snake_case names. Errors are
`replog.errors.KafkaError` instances naming what they are about; None means success.
JoinGroup and SyncGroup answers carry the shell's `request_id` of the request they answer:
those requests may wait (parked) until other members act or a timer fires.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from replog.coordinator.classic_group import Protocols
from replog.coordinator.consumer_group_messages import CLASSIC_MEMBER
from replog.coordinator.consumer_group_records import ConsumerGroupRecord
from replog.coordinator.group_records import GroupMetadataValue
from replog.coordinator.offsets_records import GroupMetadataKey
from replog.errors import KafkaError

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1


@dataclass(frozen=True, slots=True)
class JoinGroupRequest:
    group_id: str
    member_id: str
    protocol_type: str
    protocols: Protocols
    session_timeout_ms: int
    # -1 (JoinGroup v0 has none): the session timeout stands in.
    rebalance_timeout_ms: int = -1
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    # v4+ answers a first join with MEMBER_ID_REQUIRED; v9+ lets a static leader skip assigning.
    api_version: int = 9
    reason: str | None = None  # why the member (re)joins (v8+, KIP-800); the coordinator logs it


@dataclass(frozen=True, slots=True)
class SyncGroupRequest:
    group_id: str
    member_id: str
    generation_id: int
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    generation_id: int
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveMember:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None  # why it leaves (v5+, KIP-800); the coordinator logs it


@dataclass(frozen=True, slots=True)
class LeaveGroupRequest:
    group_id: str
    members: tuple[LeaveMember, ...]


@dataclass(frozen=True, slots=True)
class JoinMember:
    """A member as the leader sees it in its JoinGroup answer."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResponse:
    request_id: int
    error: KafkaError | None
    member_id: str = UNKNOWN_MEMBER_ID
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: tuple[JoinMember, ...] = ()


@dataclass(frozen=True, slots=True)
class SyncGroupResponse:
    request_id: int
    error: KafkaError | None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class LeaveMemberResponse:
    member_id: str
    group_instance_id: str | None
    error: KafkaError | None


@dataclass(frozen=True, slots=True)
class LeaveGroupResponse:
    error: KafkaError | None
    members: tuple[LeaveMemberResponse, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes
    member_type: str = CLASSIC_MEMBER  # consumer_group_messages: always classic here


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    group_id: str
    error: KafkaError | None
    state: str
    protocol_type: str = ""
    protocol_data: str = ""
    members: tuple[DescribedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"  # ListGroups v5's type: "classic" or "consumer" (KIP-848)


@dataclass(frozen=True, slots=True)
class GroupRecord:
    """A group membership record to append to `__consumer_offsets` (value None: tombstone)."""

    key: GroupMetadataKey
    value: GroupMetadataValue | None


@dataclass(slots=True)
class GroupResult:
    """What a request or a timer did besides its own answer.

    The shell appends `records` first and sends `joins` and `syncs` once they are committed
    (Kafka answers after the append). `superseded` are waiting requests a newer request of the
    same member replaced: the core never answers them (Kafka leaves them to time out).
    """

    joins: list[JoinGroupResponse] = field(default_factory=list)
    syncs: list[SyncGroupResponse] = field(default_factory=list)
    # With the tombstones of an Empty consumer-protocol group whose id a join takes over.
    records: list[GroupRecord | ConsumerGroupRecord] = field(default_factory=list)
    superseded: list[int] = field(default_factory=list)
