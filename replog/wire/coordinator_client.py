"""A small asyncio client of one broker's `GroupCoordinator` service: find a group's
coordinator, commit and fetch its offsets, in `replog.common`'s types.

One gRPC channel per client (`RedialingChannel`, as `BrokerClient`).

Rules:
- Calls fail fast while the channel is down (no wait-for-ready); after UNAVAILABLE the channel
  is replaced, so the next call dials afresh. gRPC failures propagate as
  `grpc.aio.AioRpcError` (the client library turns them into typed errors).
- The deadline of a call is `timeout_ms` (default `request_timeout_ms`).
- A request-level error of the answer (INVALID_GROUP_ID, NOT_COORDINATOR,
  COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, and for a commit whose append
  failed REQUEST_TIMED_OUT or INVALID_COMMIT_OFFSET_SIZE) is raised as its `replog.errors`
  class; per-partition errors of a commit are returned, one per partition asked, with the
  other consumers the coordinator saw commit the same partitions (`cm.SharedCommit`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from replog.common import OffsetAndMetadata, TopicPartition
from replog.coordinator import classic_group_messages as gm
from replog.coordinator import consumer_group_messages as cgm
from replog.coordinator import messages as cm
from replog.errors import KafkaError, UnknownServerError
from replog.net_address import format_host_port
from replog.pb import coordinator_pb2 as pb
from replog.pb import coordinator_pb2_grpc
from replog.wire import coordinator_codec as codec
from replog.wire.broker_client import CHANNEL_OPTIONS, REQUEST_TIMEOUT_MS_DEFAULT
from replog.wire.broker_codec import error_from_proto
from replog.wire.redialing_channel import RedialingChannel

Stub = Any  # coordinator_pb2_grpc.GroupCoordinatorStub (generated code has no precise types)


class CoordinatorClient:
    def __init__(
        self, address: str, *, request_timeout_ms: int = REQUEST_TIMEOUT_MS_DEFAULT
    ) -> None:
        self.address = address
        self.request_timeout_ms = request_timeout_ms
        self._channel: RedialingChannel[Stub] = RedialingChannel(
            address,
            coordinator_pb2_grpc.GroupCoordinatorStub,
            CHANNEL_OPTIONS,
            peer="coordinator",
            service=pb.DESCRIPTOR.services_by_name["GroupCoordinator"],
        )

    def reconnect(self) -> None:
        """Drop the channel: the next call dials again at once."""
        self._channel.reconnect()

    async def _call(self, rpc: str, message: Any, timeout_ms: int | None) -> Any:
        """The answer of one call of the `GroupCoordinator` method `rpc` (an unparseable one
        raises MalformedResponseError, `RedialingChannel`)."""
        deadline_ms = self.request_timeout_ms if timeout_ms is None else timeout_ms
        return await self._channel.call_rpc(rpc, message, deadline_ms / 1000)

    async def find_coordinator(
        self, group_id: str, *, timeout_ms: int | None = None
    ) -> tuple[int, str]:
        """(node id, "host:port") of the group's coordinator; raises the answer's error."""
        answer = codec.find_coordinator_response_from_proto(
            await self._call(
                "FindCoordinator",
                pb.FindCoordinatorRequest(group_id=group_id),
                timeout_ms,
            )
        )
        if answer.error is not None:
            raise answer.error
        return answer.node_id, format_host_port(answer.host, answer.port)

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
        per-partition errors and other committers are returned, a request-level error raised
        (module docstring)."""
        request = cm.OffsetCommitRequest(
            group_id,
            tuple(
                cm.CommitEntry(
                    tp.topic, tp.partition, om.offset, om.leader_epoch, om.metadata or ""
                )
                for tp, om in offsets.items()
            ),
            generation_id,
            member_id,
            committer,
            group_instance_id,
        )
        answer = codec.offset_commit_response_from_proto(
            await self._call(
                "OffsetCommit", codec.offset_commit_request_to_proto(request), timeout_ms
            )
        )
        if answer.error is not None:
            raise answer.error
        results: dict[TopicPartition, KafkaError | None] = {
            TopicPartition(r.topic, r.partition): r.error for r in answer.partitions
        }
        return {
            tp: results[tp]
            if tp in results
            else UnknownServerError(
                f"coordinator at {self.address} gave no answer for {tp.topic}-{tp.partition}"
            )
            for tp in offsets
        }, answer.shared

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
        request = cm.OffsetFetchRequest(
            group_id,
            None if partitions is None else tuple((tp.topic, tp.partition) for tp in partitions),
        )
        answer = codec.offset_fetch_response_from_proto(
            await self._call(
                "OffsetFetch", codec.offset_fetch_request_to_proto(request), timeout_ms
            )
        )
        if answer.error is not None:
            raise answer.error
        committed: dict[TopicPartition, OffsetAndMetadata | None] = {}
        for fetched in answer.partitions:
            if fetched.error is not None:
                raise fetched.error
            committed[TopicPartition(fetched.topic, fetched.partition)] = (
                None
                if fetched.offset < 0
                else OffsetAndMetadata(fetched.offset, fetched.metadata, fetched.leader_epoch)
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
        return codec.join_group_response_from_proto(
            await self._call("JoinGroup", codec.join_group_request_to_proto(request), timeout_ms)
        )

    async def sync_group(
        self, request: gm.SyncGroupRequest, *, timeout_ms: int | None = None
    ) -> gm.SyncGroupResponse:
        return codec.sync_group_response_from_proto(
            await self._call("SyncGroup", codec.sync_group_request_to_proto(request), timeout_ms)
        )

    async def heartbeat(
        self, request: gm.HeartbeatRequest, *, timeout_ms: int | None = None
    ) -> KafkaError | None:
        answer = await self._call(
            "Heartbeat", codec.heartbeat_request_to_proto(request), timeout_ms
        )
        return error_from_proto(answer)

    async def leave_group(
        self, request: gm.LeaveGroupRequest, *, timeout_ms: int | None = None
    ) -> gm.LeaveGroupResponse:
        return codec.leave_group_response_from_proto(
            await self._call("LeaveGroup", codec.leave_group_request_to_proto(request), timeout_ms)
        )

    async def consumer_group_heartbeat(
        self, request: cgm.ConsumerGroupHeartbeatRequest, *, timeout_ms: int | None = None
    ) -> cgm.ConsumerGroupHeartbeatResponse:
        return codec.consumer_group_heartbeat_response_from_proto(
            await self._call(
                "ConsumerGroupHeartbeat",
                codec.consumer_group_heartbeat_request_to_proto(request),
                timeout_ms,
            )
        )

    async def list_groups(
        self, states: Sequence[str] = (), *, timeout_ms: int | None = None
    ) -> list[gm.ListedGroup]:
        """The groups this broker coordinates (in `states` when given); raises the answer's
        error (COORDINATOR_LOAD_IN_PROGRESS while a partition loads)."""
        error, groups = codec.list_groups_response_from_proto(
            await self._call("ListGroups", pb.ListGroupsRequest(states=list(states)), timeout_ms)
        )
        if error is not None:
            raise error
        return groups

    async def describe_group(
        self, group_id: str, *, timeout_ms: int | None = None
    ) -> gm.DescribedGroup:
        """The group's state and members (ask its coordinator); raises the group's error."""
        (group,) = codec.describe_groups_response_from_proto(
            await self._call(
                "DescribeGroups", pb.DescribeGroupsRequest(group_ids=[group_id]), timeout_ms
            )
        )
        if group.error is not None:
            raise group.error
        return group

    async def describe_consumer_group(
        self, group_id: str, *, timeout_ms: int | None = None
    ) -> cgm.DescribedConsumerGroup:
        """A consumer-protocol (KIP-848) group's epochs and members (ask its coordinator);
        raises the group's error (GROUP_ID_NOT_FOUND: not such a group)."""
        (group,) = codec.consumer_group_describe_response_from_proto(
            await self._call(
                "ConsumerGroupDescribe",
                pb.ConsumerGroupDescribeRequest(group_ids=[group_id]),
                timeout_ms,
            )
        )
        if group.error is not None:
            raise group.error
        return group

    async def delete_groups(
        self, group_ids: Sequence[str], *, timeout_ms: int | None = None
    ) -> list[tuple[str, KafkaError | None]]:
        """Each group and its error (None: deleted with its committed offsets); ask the
        groups' coordinator."""
        return codec.delete_groups_response_from_proto(
            await self._call(
                "DeleteGroups", pb.DeleteGroupsRequest(group_ids=list(group_ids)), timeout_ms
            )
        )

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> CoordinatorClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
