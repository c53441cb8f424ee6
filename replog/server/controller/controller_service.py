"""The `Controller` gRPC servicer: admin and broker requests to the quorum controller.

Thin: each method decodes the request (`controller_codec`), hands a write or a read to the
`ControllerDriver`, and encodes the answer; the controller decides everything.

Rules:
- Writes go to the controller whatever its role: a standby answers NOT_CONTROLLER at once,
  naming the active controller in the message and in `controller_id`.
- Reads (DescribeCluster, Metadata, ListPartitionReassignments, DescribeConfigs) are served by
  every controller node at its committed (last stable) offset.
- A Metadata answer says how current it is (`metadata_staleness`): whether the node has not
  heard from a quorum leader within the fetch timeout and does not lead (`stale`), how long
  since it last heard from one, and,
  when stale for longer than `broker.session.timeout.ms`, the brokers it has not heard from
  within that timeout.
- Every response carries `controller_id`; a failure of the whole request is its `error`
  (a request that cannot be decoded: INVALID_REQUEST naming the field). DescribeCluster also
  carries the controllers' addresses (`controller.quorum.voters`), so a client that knows one
  node can reach the controller another node names by id.
- A write waits at most the request's `timeout_ms` (0 or absent: `request_timeout_ms`), and
  ends a little before the caller's gRPC deadline; then it answers REQUEST_TIMED_OUT (the
  write may still commit).
- AlterUserScramCredentials is a write whose decisions are `replog.security.scram_control`'s
  over the controller's SCRAM credentials (`ScramCredentials`, its timeline state): the
  quorum layer lies below security, so the decision comes in with the write.
- CreateAcls and DeleteAcls are the controller's `write_acls` with Kafka's AclControlManager
  decisions (`replog.security.acl_control`): one atomic batch per request, an answer per
  creation or filter; new ACL ids are random UUIDs.
- UpdateFeatures is the controller's `update_features` (`feature_updates`): one error or none
  for the whole request, as Kafka's controller answers it.
- Registered with `add_controller_service`: bytes that are not a request of the method's type
  fail with INVALID_ARGUMENT naming them (`tolerant_service`), not gRPC's UNKNOWN.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeAlias, TypeVar

from replog.common.feature_update import FeatureUpdate, UpgradeType
from replog.errors import KafkaError
from replog.pb import controller_pb2 as pb
from replog.pb import controller_pb2_grpc
from replog.quorum.controller import reads
from replog.quorum.raft.config import VoterAddress
from replog.security.acl_control import create_acls, delete_acls
from replog.security.acl_index import AclIndex
from replog.security.scram_control import ScramDeletion, ScramUpsertion, alter_credentials_write
from replog.server.controller.controller_driver import ControllerAnswer, ControllerDriver
from replog.server.raft.voter_endpoints import voter_endpoints
from replog.server.runtime.tolerant_service import add_guarded_service
from replog.wire import acl_codec
from replog.wire import controller_codec as codec

Context: TypeAlias = Any  # grpc.aio.ServicerContext (grpc ships no type hints)
R = TypeVar("R")

log = logging.getLogger("replog.server.controller")


class _Response(Protocol):
    controller_id: int


M = TypeVar("M", bound=_Response)

# Kafka's request.timeout.ms: how long a request waits for its answer when it names no timeout.
REQUEST_TIMEOUT_MS_DEFAULT = 30_000
# Answer this long before the caller's gRPC deadline, so it gets REQUEST_TIMED_OUT with the
# write named rather than a bare DEADLINE_EXCEEDED.
DEADLINE_MARGIN_MS = 20


def _respond(make: Callable[..., M], answer: ControllerAnswer[R], encode: Callable[[R], M]) -> M:
    """The response to `answer`: its error alone, or its value encoded; with controller_id."""
    if answer.error is not None:
        return make(controller_id=answer.controller_id, error=codec.error_status(answer.error))
    response = encode(answer.result())
    response.controller_id = answer.controller_id
    return response


class ControllerService(controller_pb2_grpc.ControllerServicer):
    def __init__(
        self,
        driver: ControllerDriver,
        request_timeout_ms: int = REQUEST_TIMEOUT_MS_DEFAULT,
        voters: Iterable[VoterAddress] = (),
    ) -> None:
        self._driver = driver
        self._request_timeout_ms = request_timeout_ms
        self._controllers = voter_endpoints(voters)

    @property
    def driver(self) -> ControllerDriver:
        """The controller driver every request goes to."""
        return self._driver

    def _refuse(self, make: Callable[..., M], error: KafkaError) -> M:
        return make(controller_id=self._driver.controller_id, error=codec.error_status(error))

    def _timeout_ms(self, requested_ms: int, context: Context) -> int:
        timeout_ms = requested_ms if requested_ms > 0 else self._request_timeout_ms
        remaining_s = None if context is None else context.time_remaining()
        if remaining_s is not None:
            timeout_ms = min(timeout_ms, max(0, int(remaining_s * 1000) - DEADLINE_MARGIN_MS))
        return timeout_ms

    # --- topics and partitions -------------------------------------------------------------------

    async def CreateTopics(
        self, request: pb.CreateTopicsRequest, context: Context
    ) -> pb.CreateTopicsResponse:
        topics = codec.create_topics_from_proto(request)
        answer = await self._driver.write(
            lambda c, now: c.create_topics(topics, now, validate_only=request.validate_only),
            self._timeout_ms(request.timeout_ms, context),
        )
        return _respond(
            pb.CreateTopicsResponse,
            answer,
            codec.create_topics_to_proto,
        )

    async def DeleteTopics(
        self, request: pb.DeleteTopicsRequest, context: Context
    ) -> pb.DeleteTopicsResponse:
        try:
            topic_ids = codec.delete_topic_ids_from_proto(request)
        except KafkaError as error:
            return self._refuse(pb.DeleteTopicsResponse, error)
        names = list(request.topic_names)
        answer = await self._driver.write(
            lambda c, now: c.delete_topics(now, names, topic_ids),
            self._timeout_ms(request.timeout_ms, context),
        )
        return _respond(
            pb.DeleteTopicsResponse,
            answer,
            codec.delete_topics_to_proto,
        )

    async def CreatePartitions(
        self, request: pb.CreatePartitionsRequest, context: Context
    ) -> pb.CreatePartitionsResponse:
        topics = codec.create_partitions_from_proto(request)
        answer = await self._driver.write(
            lambda c, now: c.create_partitions(topics, now, validate_only=request.validate_only),
            self._timeout_ms(request.timeout_ms, context),
        )
        return _respond(
            pb.CreatePartitionsResponse,
            answer,
            codec.create_partitions_to_proto,
        )

    # --- reads at the committed offset ------------------------------------------------------------

    async def DescribeCluster(
        self, request: pb.DescribeClusterRequest, context: Context
    ) -> pb.DescribeClusterResponse:
        answer = await self._driver.read(reads.describe_cluster())
        response = _respond(pb.DescribeClusterResponse, answer, codec.describe_cluster_to_proto)
        response.controllers.extend(self._controllers)  # with an error too: where to go next
        return response

    async def Metadata(self, request: pb.MetadataRequest, context: Context) -> pb.MetadataResponse:
        answer = await self._driver.read(reads.metadata(list(request.topics) or None))
        response = _respond(pb.MetadataResponse, answer, codec.metadata_to_proto)
        # How current it is (module docstring): said on every answer, an error's too.
        staleness, contact_ms = self._driver.metadata_staleness(
            b.broker_id for b in response.brokers
        )
        response.stale = staleness.stale
        response.metadata_age_ms = staleness.age_ms
        response.quorum_contact_time_ms = contact_ms
        response.unreachable_broker_ids.extend(sorted(staleness.unreachable))
        response.answering_node_id = self._driver.node_id
        return response

    async def ListPartitionReassignments(
        self, request: pb.ListPartitionReassignmentsRequest, context: Context
    ) -> pb.ListPartitionReassignmentsResponse:
        partitions = codec.list_reassignments_from_proto(request)
        answer = await self._driver.read(reads.list_partition_reassignments(partitions))
        return _respond(
            pb.ListPartitionReassignmentsResponse,
            answer,
            codec.ongoing_reassignments_to_proto,
        )

    async def DescribeConfigs(
        self, request: pb.DescribeConfigsRequest, context: Context
    ) -> pb.DescribeConfigsResponse:
        try:
            resources = codec.describe_configs_from_proto(request)
        except KafkaError as error:
            return self._refuse(pb.DescribeConfigsResponse, error)
        answer = await self._driver.read(reads.describe_configs(resources))
        return _respond(
            pb.DescribeConfigsResponse,
            answer,
            codec.describe_configs_to_proto,
        )

    # --- broker lifecycle -------------------------------------------------------------------------

    async def BrokerRegistration(
        self, request: pb.BrokerRegistrationRequest, context: Context
    ) -> pb.BrokerRegistrationResponse:
        try:
            registration = codec.broker_registration_from_proto(request)
        except KafkaError as error:
            return self._refuse(pb.BrokerRegistrationResponse, error)
        answer = await self._driver.write(
            lambda c, now: c.register_broker(registration, now), self._timeout_ms(0, context)
        )
        return _respond(
            pb.BrokerRegistrationResponse,
            answer,
            codec.broker_registration_to_proto,
        )

    async def BrokerHeartbeat(
        self, request: pb.BrokerHeartbeatRequest, context: Context
    ) -> pb.BrokerHeartbeatResponse:
        heartbeat = codec.broker_heartbeat_from_proto(request)
        answer = await self._driver.write(
            lambda c, now: c.broker_heartbeat(heartbeat, now), self._timeout_ms(0, context)
        )
        return _respond(
            pb.BrokerHeartbeatResponse,
            answer,
            codec.broker_heartbeat_to_proto,
        )

    # --- partition state --------------------------------------------------------------------------

    async def AlterPartition(
        self, request: pb.AlterPartitionRequest, context: Context
    ) -> pb.AlterPartitionResponse:
        try:
            items = codec.alter_partition_from_proto(request)
        except KafkaError as error:
            return self._refuse(pb.AlterPartitionResponse, error)
        broker_id, broker_epoch = request.broker_id, request.broker_epoch
        answer = await self._driver.write(
            lambda c, now: c.alter_partition(broker_id, broker_epoch, items, now),
            self._timeout_ms(0, context),
        )
        return _respond(
            pb.AlterPartitionResponse,
            answer,
            codec.alter_partition_to_proto,
        )

    async def AlterPartitionReassignments(
        self, request: pb.AlterPartitionReassignmentsRequest, context: Context
    ) -> pb.AlterPartitionReassignmentsResponse:
        partitions = codec.reassignments_from_proto(request)
        answer = await self._driver.write(
            lambda c, now: c.alter_partition_reassignments(partitions, now),
            self._timeout_ms(request.timeout_ms, context),
        )
        return _respond(
            pb.AlterPartitionReassignmentsResponse,
            answer,
            codec.reassignments_to_proto,
        )

    async def ElectLeaders(
        self, request: pb.ElectLeadersRequest, context: Context
    ) -> pb.ElectLeadersResponse:
        try:
            election_type, partitions = codec.elect_leaders_from_proto(request)
        except KafkaError as error:
            return self._refuse(pb.ElectLeadersResponse, error)
        answer = await self._driver.write(
            lambda c, now: c.elect_leaders(election_type, now, partitions),
            self._timeout_ms(request.timeout_ms, context),
        )
        return _respond(
            pb.ElectLeadersResponse,
            answer,
            codec.elect_leaders_to_proto,
        )

    # --- configs and producer ids -----------------------------------------------------------------

    async def IncrementalAlterConfigs(
        self, request: pb.IncrementalAlterConfigsRequest, context: Context
    ) -> pb.IncrementalAlterConfigsResponse:
        try:
            changes = codec.alter_configs_from_proto(request)
            replaced = codec.replaced_resources_from_proto(request)
        except KafkaError as error:
            return self._refuse(pb.IncrementalAlterConfigsResponse, error)
        answer = await self._driver.write(
            lambda c, now: c.incremental_alter_configs(
                changes, now, validate_only=request.validate_only, replaced=replaced
            ),
            self._timeout_ms(0, context),
        )
        return _respond(
            pb.IncrementalAlterConfigsResponse,
            answer,
            codec.alter_configs_to_proto,
        )

    async def AllocateProducerIds(
        self, request: pb.AllocateProducerIdsRequest, context: Context
    ) -> pb.AllocateProducerIdsResponse:
        broker_id, broker_epoch = request.broker_id, request.broker_epoch
        answer = await self._driver.write(
            lambda c, now: c.allocate_producer_ids(broker_id, broker_epoch, now),
            self._timeout_ms(0, context),
        )
        return _respond(
            pb.AllocateProducerIdsResponse,
            answer,
            codec.producer_ids_to_proto,
        )

    async def UnregisterBroker(
        self, request: pb.UnregisterBrokerRequest, context: Context
    ) -> pb.UnregisterBrokerResponse:
        broker_id = request.broker_id
        answer = await self._driver.write(
            lambda c, now: c.unregister_broker(broker_id, now),
            self._timeout_ms(request.timeout_ms, context),
        )
        return _respond(
            pb.UnregisterBrokerResponse, answer, lambda _: pb.UnregisterBrokerResponse()
        )

    async def AlterUserScramCredentials(
        self, request: pb.AlterUserScramCredentialsRequest, context: Context
    ) -> pb.AlterUserScramCredentialsResponse:
        deletions = [ScramDeletion(d.name, d.mechanism) for d in request.deletions]
        upsertions = [
            ScramUpsertion(u.name, u.mechanism, u.iterations, u.salt, u.salted_password)
            for u in request.upsertions
        ]
        alter = alter_credentials_write(deletions, upsertions)
        answer = await self._driver.write(
            lambda c, now: c.write(alter, now, "alter SCRAM credentials"),
            self._timeout_ms(request.timeout_ms, context),
        )
        return _respond(
            pb.AlterUserScramCredentialsResponse,
            answer,
            lambda answers: pb.AlterUserScramCredentialsResponse(
                results=[
                    pb.AlterUserScramCredentialsResult(user=user, error=codec.error_status(error))
                    for user, error in answers.items()
                ]
            ),
        )

    # --- ACLs ------------------------------------------------------------------------------------

    async def CreateAcls(
        self, request: pb.CreateAclsRequest, context: Context
    ) -> pb.CreateAclsResponse:
        bindings = [acl_codec.binding_from_proto(b) for b in request.creations]
        answer = await self._driver.write(
            lambda c, now: c.write_acls(
                lambda acls: create_acls(AclIndex(acls), bindings, uuid.uuid4),
                now,
                f"create {len(bindings)} ACLs",
            ),
            self._timeout_ms(request.timeout_ms, context),
        )
        return _respond(pb.CreateAclsResponse, answer, acl_codec.create_results_to_proto)

    async def DeleteAcls(
        self, request: pb.DeleteAclsRequest, context: Context
    ) -> pb.DeleteAclsResponse:
        filters = [acl_codec.filter_from_proto(f) for f in request.filters]
        answer = await self._driver.write(
            lambda c, now: c.write_acls(
                lambda acls: delete_acls(AclIndex(acls), filters),
                now,
                f"delete the ACLs of {len(filters)} filters",
            ),
            self._timeout_ms(request.timeout_ms, context),
        )
        return _respond(pb.DeleteAclsResponse, answer, acl_codec.delete_results_to_proto)

    # --- features --------------------------------------------------------------------------------

    async def UpdateFeatures(
        self, request: pb.UpdateFeaturesRequest, context: Context
    ) -> pb.UpdateFeaturesResponse:
        updates = [
            FeatureUpdate(u.feature, u.max_version_level, UpgradeType.of(u.upgrade_type))
            for u in request.updates
        ]
        answer = await self._driver.write(
            lambda c, now: c.update_features(updates, now, validate_only=request.validate_only),
            self._timeout_ms(request.timeout_ms, context),
        )
        return _respond(pb.UpdateFeaturesResponse, answer, lambda _: pb.UpdateFeaturesResponse())


def add_controller_service(service: ControllerService, server: Any, *, node_id: int) -> None:
    """Register `service` on a grpc.aio server, guarded (module docstring)."""
    descriptor = pb.DESCRIPTOR.services_by_name["Controller"]
    add_guarded_service(server, service, descriptor, who=f"node {node_id}", log=log)
