"""What a broker's Kafka group handlers (`kafka_group_apis`) need of its group coordinator
(`CoordinatorRequests`, which `group_coordinator.GroupCoordinator` is), and the coordinator of
a broker that has none running (`UnavailableCoordinator`).

Rules:
- Until the broker's data plane runs and its coordinator exists, and after it stops, every
  call is answered with Kafka's COORDINATOR_NOT_AVAILABLE (retriable), as Kafka answers while
  its coordinator is not active.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from replog.coordinator import classic_group_messages as gm
from replog.coordinator import consumer_group_messages as cgm
from replog.coordinator import messages as cm
from replog.errors import CoordinatorNotAvailableError, KafkaError


class CoordinatorRequests(Protocol):
    """What the Kafka listener's group handlers need of the coordinator
    (`group_coordinator.GroupCoordinator`)."""

    def find_coordinator(
        self, group_id: str, listener_name: str | None = None
    ) -> cm.FindCoordinatorResponse: ...
    async def join_group(self, request: gm.JoinGroupRequest) -> gm.JoinGroupResponse: ...
    async def sync_group(self, request: gm.SyncGroupRequest) -> gm.SyncGroupResponse: ...
    def heartbeat(self, request: gm.HeartbeatRequest) -> KafkaError | None: ...
    async def leave_group(self, request: gm.LeaveGroupRequest) -> gm.LeaveGroupResponse: ...
    def describe_groups(self, group_ids: Iterable[str]) -> list[gm.DescribedGroup]: ...
    def list_groups(
        self, states: Iterable[str] = ()
    ) -> tuple[KafkaError | None, list[gm.ListedGroup]]: ...
    async def delete_groups(
        self, group_ids: Iterable[str]
    ) -> list[tuple[str, KafkaError | None]]: ...
    async def offset_commit(
        self, request: cm.OffsetCommitRequest, *, timeout_ms: int | None = None
    ) -> cm.OffsetCommitResponse: ...
    async def txn_offset_commit(
        self, request: cm.TxnOffsetCommitRequest
    ) -> cm.OffsetCommitResponse: ...
    def offset_fetch(self, request: cm.OffsetFetchRequest) -> cm.OffsetFetchResponse: ...
    async def offset_delete(self, request: cm.OffsetDeleteRequest) -> cm.OffsetDeleteResponse: ...
    async def consumer_group_heartbeat(
        self, request: cgm.ConsumerGroupHeartbeatRequest
    ) -> cgm.ConsumerGroupHeartbeatResponse: ...
    def consumer_group_describe(
        self, group_ids: Iterable[str]
    ) -> list[cgm.DescribedConsumerGroup]: ...


class UnavailableCoordinator:
    """The coordinator of a broker whose data plane is not running: every answer is
    COORDINATOR_NOT_AVAILABLE."""

    def __init__(self, broker_id: int) -> None:
        self.error = CoordinatorNotAvailableError(
            f"broker {broker_id} does not coordinate groups yet (its data plane is starting) "
            "or any more (it is stopping)"
        )

    def find_coordinator(
        self, group_id: str, listener_name: str | None = None
    ) -> cm.FindCoordinatorResponse:
        return cm.FindCoordinatorResponse(self.error)

    async def join_group(self, request: gm.JoinGroupRequest) -> gm.JoinGroupResponse:
        return gm.JoinGroupResponse(0, self.error, request.member_id)

    async def sync_group(self, request: gm.SyncGroupRequest) -> gm.SyncGroupResponse:
        return gm.SyncGroupResponse(0, self.error)

    def heartbeat(self, request: gm.HeartbeatRequest) -> KafkaError | None:
        return self.error

    async def leave_group(self, request: gm.LeaveGroupRequest) -> gm.LeaveGroupResponse:
        return gm.LeaveGroupResponse(self.error)

    def describe_groups(self, group_ids: Iterable[str]) -> list[gm.DescribedGroup]:
        return [gm.DescribedGroup(group_id, self.error, "") for group_id in group_ids]

    def list_groups(
        self, states: Iterable[str] = ()
    ) -> tuple[KafkaError | None, list[gm.ListedGroup]]:
        return self.error, []

    async def delete_groups(self, group_ids: Iterable[str]) -> list[tuple[str, KafkaError | None]]:
        return [(group_id, self.error) for group_id in group_ids]

    async def offset_commit(
        self, request: cm.OffsetCommitRequest, *, timeout_ms: int | None = None
    ) -> cm.OffsetCommitResponse:
        return cm.OffsetCommitResponse(self.error)

    async def txn_offset_commit(
        self, request: cm.TxnOffsetCommitRequest
    ) -> cm.OffsetCommitResponse:
        return cm.OffsetCommitResponse(self.error)

    def offset_fetch(self, request: cm.OffsetFetchRequest) -> cm.OffsetFetchResponse:
        return cm.OffsetFetchResponse(self.error)

    async def offset_delete(self, request: cm.OffsetDeleteRequest) -> cm.OffsetDeleteResponse:
        return cm.OffsetDeleteResponse(self.error)

    async def consumer_group_heartbeat(
        self, request: cgm.ConsumerGroupHeartbeatRequest
    ) -> cgm.ConsumerGroupHeartbeatResponse:
        return cgm.ConsumerGroupHeartbeatResponse(self.error)

    def consumer_group_describe(self, group_ids: Iterable[str]) -> list[cgm.DescribedConsumerGroup]:
        return [cgm.DescribedConsumerGroup(group_id, self.error) for group_id in group_ids]
