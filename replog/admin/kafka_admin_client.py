"""`AsyncKafkaAdminClient` and `KafkaAdminClient`: the admin calls of the `replog` commands and
of the Python Admin client, made with Kafka's admin APIs on the brokers' Kafka listeners.

The asyncio client serves the Admin client; the blocking one runs it on an event loop of its
own in a daemon thread, for the CLI. Both take and return the dataclasses of `cluster_metadata`
and `controller_results` (`kafka_cluster_answers` and `kafka_answers` translate).

Where requests go:
- Any Kafka listener answers every admin API (a broker forwards the controller's requests to the
  active controller itself, KIP-590), so a call goes to the address that answered last, else
  to the bootstrap addresses in turn, else to the brokers an earlier Metadata answer listed:
  one bootstrap address is enough, as with Kafka's `--bootstrap-server`. With
  `--bootstrap-controller` the addresses are controllers' Kafka listeners (DescribeQuorum,
  DescribeCluster, UpdateFeatures and the features of ApiVersions).

Timeouts and retries:
- Each call has a deadline (`timeout_s`, else `default_timeout_s`); each attempt is bounded by
  `request_timeout_s` and what is left of it, and the request's own `timeout_ms` (how long the
  controller may wait for the commit) is a little shorter, so that a change that cannot commit
  in time comes back as the broker's REQUEST_TIMED_OUT naming the cause.
- Retried at the next address until the deadline: a connection that fails or is lost, an
  attempt with no answer, NOT_CONTROLLER for the whole request or for every item of it. After
  each round the client backs off (`retry_backoff_s`, doubling up to `max_retry_backoff_s`).
- When every address refuses the connection and none has answered during the call, the call
  raises NoBrokersAvailableError naming the addresses once the refusals have lasted
  `refused_timeout_s` (Kafka's `socket.connection.setup.timeout.max.ms`), instead of waiting
  out its deadline. An address that answers and is no Kafka listener (a gRPC port, a metrics
  port) fails the call at once (`NotAKafkaListenerError`, naming what answered).
- At the deadline: `KafkaTimeoutError` naming each address tried and what it last said.
- Per-item errors are returned in each item's `error`; an error of the whole request raises.

Thread safety: the asyncio client belongs to the event loop it was first used on; the blocking
one may be shared between threads.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import ssl
import threading
from collections.abc import Callable, Collection, Coroutine, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID

from replog.admin import kafka_cluster_answers as cluster_answers
from replog.admin.bootstrap import parse_bootstrap
from replog.admin.call_budget import (
    DEFAULT_TIMEOUT_S,
    MAX_RETRY_BACKOFF_S,
    REFUSED_TIMEOUT_S,
    REQUEST_TIMEOUT_S,
    RETRY_BACKOFF_S,
    server_wait_ms,
)
from replog.admin.cluster_metadata import ClusterDescription, ClusterMetadata
from replog.admin.feature_metadata import FeatureMetadata
from replog.clock import monotonic_ms
from replog.common import TopicPartition
from replog.common.feature_update import FeatureUpdate
from replog.errors import (
    BrokerNotAvailableError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    KafkaError,
    KafkaTimeoutError,
    LeaderNotAvailableError,
    NetworkError,
    NoBrokersAvailableError,
    NotControllerError,
    NotCoordinatorError,
    NotLeaderOrFollowerError,
    ReplogError,
    RequestTimedOutError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
    answer_error,
)
from replog.kafka.messages.alter_partition_reassignments_response import (
    AlterPartitionReassignmentsResponse,
)
from replog.kafka.messages.api_versions_request import ApiVersionsRequest
from replog.kafka.messages.api_versions_response import ApiVersionsResponse
from replog.kafka.messages.create_acls_request import AclCreation, CreateAclsRequest
from replog.kafka.messages.create_acls_response import AclCreationResult, CreateAclsResponse
from replog.kafka.messages.create_partitions_response import CreatePartitionsResponse
from replog.kafka.messages.create_topics_response import CreateTopicsResponse
from replog.kafka.messages.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from replog.kafka.messages.delete_acls_response import DeleteAclsFilterResult, DeleteAclsResponse
from replog.kafka.messages.delete_records_response import DeleteRecordsResponse
from replog.kafka.messages.delete_topics_response import DeleteTopicsResponse
from replog.kafka.messages.describe_acls_request import DescribeAclsRequest
from replog.kafka.messages.describe_acls_response import DescribeAclsResponse
from replog.kafka.messages.describe_cluster_request import DescribeClusterRequest
from replog.kafka.messages.describe_cluster_response import DescribeClusterResponse
from replog.kafka.messages.describe_configs_response import DescribeConfigsResponse
from replog.kafka.messages.describe_log_dirs_request import DescribeLogDirsRequest
from replog.kafka.messages.describe_log_dirs_response import DescribeLogDirsResponse
from replog.kafka.messages.describe_producers_response import DescribeProducersResponse
from replog.kafka.messages.describe_quorum_request import (
    DescribeQuorumRequest,
    PartitionData,
    TopicData,
)
from replog.kafka.messages.describe_quorum_response import DescribeQuorumResponse
from replog.kafka.messages.describe_transactions_request import DescribeTransactionsRequest
from replog.kafka.messages.describe_transactions_response import DescribeTransactionsResponse
from replog.kafka.messages.elect_leaders_response import ElectLeadersResponse
from replog.kafka.messages.find_coordinator_request import FindCoordinatorRequest
from replog.kafka.messages.find_coordinator_response import FindCoordinatorResponse
from replog.kafka.messages.incremental_alter_configs_response import (
    IncrementalAlterConfigsResponse,
)
from replog.kafka.messages.list_partition_reassignments_response import (
    ListPartitionReassignmentsResponse,
)
from replog.kafka.messages.list_transactions_response import ListTransactionsResponse
from replog.kafka.messages.metadata_response import MetadataResponse
from replog.kafka.messages.update_features_request import FeatureUpdateKey, UpdateFeaturesRequest
from replog.kafka.messages.update_features_response import UpdateFeaturesResponse
from replog.kafka.messages.write_txn_markers_response import WriteTxnMarkersResponse
from replog.kafka.protocol.codec import Message
from replog.net_address import format_host_port
from replog.wire.kafka_connection import SOFTWARE_NAME, SOFTWARE_VERSION, KafkaConnections
from replog.wire.sasl_authentication import SaslCredentials

SETUP_TIMEOUT_MS = 10_000  # Kafka: socket.connection.setup.timeout.ms

if TYPE_CHECKING:
    # The requests and results of changes (`kafka_answers`) load with the call that makes one:
    # a command that only reads the cluster loads none of them.
    from replog.admin.controller_results import (
        AlterConfigOp,
        ConfigResource,
        ConfigsAltered,
        CreatedTopic,
        DeletedTopic,
        ElectionResult,
        ElectionType,
        NewPartitions,
        NewTopic,
        OngoingReassignment,
        PartitionsCreated,
        ReassignmentResult,
        ResourceConfigs,
    )
    from replog.admin.transaction_results import (
        AbortSpec,
        ProducerState,
        TransactionDescription,
        TransactionListing,
    )
    from replog.admin.user_scram_credentials import (
        ScramUserDeletion,
        ScramUserUpsertion,
        UserScramCredentials,
    )
    from replog.replication import messages as m

CLIENT_ID = "replog-admin"
METADATA_TOPIC = "__cluster_metadata"
PREFERRED_ELECTION = 0  # ElectLeaders' election type; v0 knows no other
BROKER_ENDPOINTS, CONTROLLER_ENDPOINTS = 1, 2  # DescribeCluster's endpoint types (KIP-919)
_REFUSED = "connection refused"
TRANSACTION_KEY_TYPE = 1  # FindCoordinator's key type of a transactional id
# A transaction coordinator loading, moved or not yet created: found anew and asked again.
_COORDINATOR_MOVING = (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    NotCoordinatorError,
)

T = TypeVar("T")
A = TypeVar("A", bound=Message)  # the answer a call expects

log = logging.getLogger("replog.admin")


class AsyncKafkaAdminClient:
    """The asyncio admin client (module docstring). `bootstrap`: `"host:port,..."` or a
    sequence of such entries (an `id@` prefix is accepted and ignored: any listener answers)."""

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        client_id: str = CLIENT_ID,
        default_timeout_s: float = DEFAULT_TIMEOUT_S,
        request_timeout_s: float = REQUEST_TIMEOUT_S,
        retry_backoff_s: float = RETRY_BACKOFF_S,
        max_retry_backoff_s: float = MAX_RETRY_BACKOFF_S,
        refused_timeout_s: float = REFUSED_TIMEOUT_S,
        setup_timeout_ms: int = SETUP_TIMEOUT_MS,
        controllers: bool = False,
        sasl: SaslCredentials | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        """`controllers`: the bootstrap addresses are controllers' Kafka listeners
        (`bootstrap.controllers`), whose DescribeCluster lists controllers. `tls`: the TLS
        context of every connection (None: plaintext)."""
        self.controllers = controllers
        self.bootstrap: tuple[str, ...] = parse_bootstrap(bootstrap).addresses
        self.default_timeout_s = default_timeout_s
        self.request_timeout_s = request_timeout_s
        self.retry_backoff_s = retry_backoff_s
        self.max_retry_backoff_s = max_retry_backoff_s
        self.refused_timeout_s = refused_timeout_s
        self._connections = KafkaConnections(
            client_id=client_id,
            setup_timeout_ms=setup_timeout_ms,
            tls=tls,
            sasl=sasl,
        )
        self._answered: str | None = None  # the address that answered last
        self._brokers: tuple[str, ...] = ()  # the brokers the last Metadata answer listed
        self._closed = False

    async def close(self) -> None:
        self._closed = True
        await self._connections.close()

    async def __aenter__(self) -> AsyncKafkaAdminClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # --- topics and partitions ----------------------------------------------------------------

    async def create_topics(
        self,
        topics: Sequence[NewTopic],
        *,
        validate_only: bool = False,
        timeout_s: float | None = None,
    ) -> list[CreatedTopic]:
        from replog.admin import kafka_answers as answers

        answer = await self._call(
            CreateTopicsResponse,
            lambda wait_ms: answers.create_topics_request(topics, validate_only, wait_ms),
            timeout_s,
        )
        return answers.created_topics(answer)

    async def delete_topics(
        self,
        names: Sequence[str] = (),
        *,
        topic_ids: Sequence[UUID] = (),
        timeout_s: float | None = None,
    ) -> list[DeletedTopic]:
        from replog.admin import kafka_answers as answers

        # Topic ids need v6; names alone go at any version the broker serves.
        answer = await self._call(
            DeleteTopicsResponse,
            lambda wait_ms: answers.delete_topics_request(names, topic_ids, wait_ms),
            timeout_s,
            min_version=6 if topic_ids else 0,
        )
        return answers.deleted_topics(answer)

    async def create_partitions(
        self,
        increases: Sequence[NewPartitions],
        *,
        validate_only: bool = False,
        timeout_s: float | None = None,
    ) -> list[PartitionsCreated]:
        from replog.admin import kafka_answers as answers

        answer = await self._call(
            CreatePartitionsResponse,
            lambda wait_ms: answers.create_partitions_request(increases, validate_only, wait_ms),
            timeout_s,
        )
        return answers.partitions_created(answer)

    # --- the cluster --------------------------------------------------------------------------

    async def describe_cluster(self, *, timeout_s: float | None = None) -> ClusterDescription:
        answer = await self._call(
            DescribeClusterResponse,
            lambda wait_ms: DescribeClusterRequest(
                endpoint_type=CONTROLLER_ENDPOINTS if self.controllers else BROKER_ENDPOINTS,
                include_fenced_brokers=not self.controllers,
            ),
            timeout_s,
            min_version=1 if self.controllers else 0,
        )
        found = cluster_answers.error(answer.error_code, answer.error_message)
        if found is not None:
            raise found
        return cluster_answers.cluster_description(answer)

    async def metadata(
        self,
        topics: Sequence[str] | None = None,
        *,
        with_reassignments: bool = False,
        timeout_s: float | None = None,
    ) -> ClusterMetadata:
        """The brokers and the topics named (None or empty: every topic); with
        `with_reassignments`, each partition's replicas being added and removed too (one
        ListPartitionReassignments more, skipped when the answer says no controller is active:
        none could answer it; when it fails, the metadata comes back without them, saying why
        in `reassignments_unknown`)."""
        deadline_ms = self._deadline_ms(timeout_s)
        answer = await self._call(
            MetadataResponse,
            lambda wait_ms: cluster_answers.metadata_request(topics),
            self._left_s(deadline_ms),
        )
        self._brokers = tuple(format_host_port(b.host, b.port) for b in answer.brokers)
        found = cluster_answers.cluster_metadata(answer)
        # Without an active controller nothing can say which reassignments are in progress;
        # the answer itself says it may be stale.
        if not with_reassignments or not found.topics or found.controller_id is None or found.stale:
            return found
        try:
            moving = await self.list_partition_reassignments(
                None if not topics else _partitions_of(answer), timeout_s=self._left_s(deadline_ms)
            )
        except (KafkaError, KafkaTimeoutError) as exc:
            # The metadata is still worth having (a controller lost in the meantime): it says
            # what it could not read.
            return dataclasses.replace(found, reassignments_unknown=f"{type(exc).__name__}: {exc}")
        return cluster_answers.cluster_metadata(answer, moving)

    # --- configs ------------------------------------------------------------------------------

    async def describe_configs(
        self,
        resources: Sequence[ConfigResource],
        *,
        keys: Sequence[str] = (),
        timeout_s: float | None = None,
    ) -> list[ResourceConfigs]:
        """Every config of each resource, or only `keys` when given."""
        from replog.admin import kafka_answers as answers

        answer = await self._call(
            DescribeConfigsResponse,
            lambda wait_ms: answers.describe_configs_request(resources, keys),
            timeout_s,
        )
        return answers.resource_configs(answer)

    async def incremental_alter_configs(
        self,
        changes: Mapping[ConfigResource, Sequence[AlterConfigOp]],
        *,
        validate_only: bool = False,
        timeout_s: float | None = None,
    ) -> list[ConfigsAltered]:
        from replog.admin import kafka_answers as answers

        answer = await self._call(
            IncrementalAlterConfigsResponse,
            lambda wait_ms: answers.incremental_alter_configs_request(changes, validate_only),
            timeout_s,
        )
        return answers.configs_altered(answer)

    # --- SCRAM credentials --------------------------------------------------------------------

    async def alter_user_scram_credentials(
        self,
        deletions: Sequence[ScramUserDeletion] = (),
        upsertions: Sequence[ScramUserUpsertion] = (),
        *,
        timeout_s: float | None = None,
    ) -> dict[str, KafkaError | None]:
        """Each user's answer (None: done); passwords are salted here (`user_scram_credentials`)."""
        from replog.admin import user_scram_credentials as scram
        from replog.kafka.messages.alter_user_scram_credentials_response import (
            AlterUserScramCredentialsResponse,
        )

        request = scram.alter_request(list(deletions), list(upsertions))
        answer = await self._call(AlterUserScramCredentialsResponse, lambda _: request, timeout_s)
        return scram.altered(answer)

    async def describe_user_scram_credentials(
        self, users: Sequence[str] | None = None, *, timeout_s: float | None = None
    ) -> list[UserScramCredentials]:
        """The mechanisms and iterations of `users` (None or empty: every user with any)."""
        from replog.admin import user_scram_credentials as scram
        from replog.kafka.messages.describe_user_scram_credentials_response import (
            DescribeUserScramCredentialsResponse,
        )

        answer = await self._call(
            DescribeUserScramCredentialsResponse,
            lambda _: scram.describe_request(None if users is None else list(users)),
            timeout_s,
        )
        return scram.described(answer)

    # --- elections and reassignments ----------------------------------------------------------

    async def elect_leaders(
        self,
        election_type: ElectionType,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout_s: float | None = None,
    ) -> list[ElectionResult]:
        """Elect leaders of `partitions` (None: every eligible partition)."""
        from replog.admin import kafka_answers as answers

        chosen = None if partitions is None else list(partitions)
        answer = await self._call(
            ElectLeadersResponse,
            lambda wait_ms: answers.elect_leaders_request(int(election_type), chosen, wait_ms),
            timeout_s,
            min_version=1 if int(election_type) != PREFERRED_ELECTION else 0,  # unclean: v1+
        )
        return answers.election_results(answer)

    async def list_partition_reassignments(
        self,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout_s: float | None = None,
    ) -> list[OngoingReassignment]:
        """The ongoing reassignments of `partitions` (None: of every partition)."""
        from replog.admin import kafka_answers as answers

        chosen = None if partitions is None else list(partitions)
        answer = await self._call(
            ListPartitionReassignmentsResponse,
            lambda wait_ms: answers.list_partition_reassignments_request(chosen, wait_ms),
            timeout_s,
        )
        found = cluster_answers.error(answer.error_code, answer.error_message)
        if found is not None:
            raise found
        return answers.ongoing_reassignments(answer)

    async def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, Sequence[int] | None],
        *,
        timeout_s: float | None = None,
    ) -> list[ReassignmentResult]:
        """Move each partition to the replicas given; None cancels its ongoing reassignment."""
        from replog.admin import kafka_answers as answers

        answer = await self._call(
            AlterPartitionReassignmentsResponse,
            lambda wait_ms: answers.alter_partition_reassignments_request(reassignments, wait_ms),
            timeout_s,
        )
        return answers.reassignment_results(answer)

    # --- the metadata quorum ------------------------------------------------------------------

    async def describe_quorum(
        self, *, timeout_s: float | None = None
    ) -> tuple[DescribeQuorumResponse, str]:
        """The metadata quorum as its leader describes it (Kafka's DescribeQuorum of
        `__cluster_metadata`-0) and the address that answered. A NOT_LEADER_OR_FOLLOWER answer
        (no leader yet) is retried until the deadline."""
        request = DescribeQuorumRequest(
            topics=[TopicData(topic_name=METADATA_TOPIC, partitions=[PartitionData()])]
        )
        answer = await self._call(DescribeQuorumResponse, lambda wait_ms: request, timeout_s)
        assert self._answered is not None
        return answer, self._answered

    # --- one broker: what only a partition's leader answers, or one broker's own view ---------

    async def metadata_at(
        self, address: str, topics: Sequence[str], *, timeout_ms: int
    ) -> ClusterMetadata:
        """Metadata of `topics` as the broker at `address` sees it: one attempt; a failure to
        get an answer raises NetworkError or RequestTimedOutError."""
        answer = await self._once(
            MetadataResponse, address, cluster_answers.metadata_request(topics), timeout_ms
        )
        return cluster_answers.cluster_metadata(answer)

    async def delete_records_at(
        self, address: str, before: Mapping[TopicPartition, int], *, timeout_ms: int
    ) -> dict[TopicPartition, int | KafkaError]:
        """DeleteRecords at the leader at `address`: per partition its new low watermark, or
        its error. One attempt, as `metadata_at`."""
        from replog.admin import kafka_answers as answers

        request = answers.delete_records_request(before, server_wait_ms(timeout_ms))
        answer = await self._once(DeleteRecordsResponse, address, request, timeout_ms)
        return answers.records_deleted(answer, before, address)

    async def describe_log_dirs_at(
        self, address: str, topics: Collection[str] = (), *, timeout_ms: int
    ) -> m.DescribeLogDirsResponse:
        """The log dirs of the broker at `address` and the replicas in them (only `topics`'
        when given: Kafka's request names partitions, so every topic is asked for and the
        answer filtered). One attempt, as `metadata_at`."""
        answer = await self._once(
            DescribeLogDirsResponse, address, DescribeLogDirsRequest(topics=None), timeout_ms
        )
        return cluster_answers.log_dirs(answer, topics)

    async def _once(
        self,
        answer_type: type[A],
        address: str,
        request: Message,
        timeout_ms: int,
        *,
        min_version: int = 0,
    ) -> A:
        if self._closed:
            raise ReplogError("the admin client is closed")
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                connection = await self._connections.get(address)
        except TimeoutError:
            self._connections.drop(address)
            raise RequestTimedOutError(
                f"no connection to {address} within {timeout_ms} ms"
            ) from None
        try:
            response, _ = await connection.call(
                request, timeout_ms=timeout_ms, min_version=min_version
            )
        except (NetworkError, RequestTimedOutError):
            self._connections.drop(address)
            raise
        return _expected(answer_type, response, address)

    # --- transactions (kafka-transactions.sh's calls) ------------------------------------------

    async def find_transaction_coordinator(
        self, transactional_id: str, *, timeout_s: float | None = None
    ) -> tuple[int, str]:
        """(node id, Kafka listener) of the coordinator of `transactional_id` (FindCoordinator
        key type 1); its error (COORDINATOR_NOT_AVAILABLE, ...) raised."""
        from replog.admin.transaction_results import the_one

        request = FindCoordinatorRequest(
            key_type=TRANSACTION_KEY_TYPE, coordinator_keys=[transactional_id]
        )
        answer = await self._call(
            FindCoordinatorResponse, lambda wait_ms: request, timeout_s, min_version=4
        )
        one = the_one(
            [c for c in answer.coordinators if c.key == transactional_id],
            "FindCoordinator",
            f"coordinators of transactional id {transactional_id!r}",
        )
        about = f"finding the coordinator of transactional id {transactional_id!r}"
        failed = answer_error(one.error_code, one.error_message, about)
        if failed is not None:
            raise failed
        return one.node_id, format_host_port(one.host, one.port)

    async def describe_transaction(
        self, transactional_id: str, *, timeout_s: float | None = None
    ) -> TransactionDescription:
        """DescribeTransactions at the id's coordinator, found anew and asked again while the
        coordinator is loading, moving or not yet available, until the deadline."""
        from replog.admin import transaction_results as results

        deadline_ms = self._deadline_ms(timeout_s)
        backoff_s = self.retry_backoff_s
        moving: Exception | None = None  # the last answer that said to ask again
        while True:
            if moving is not None and monotonic_ms() >= deadline_ms:
                raise moving  # the backoff's sleep ran past the deadline (a busy machine)
            try:
                node_id, address = await self.find_transaction_coordinator(
                    transactional_id, timeout_s=self._left_s(deadline_ms)
                )
                answer = await self._once(
                    DescribeTransactionsResponse,
                    address,
                    DescribeTransactionsRequest(transactional_ids=[transactional_id]),
                    self._attempt_ms(deadline_ms),
                )
                return results.transaction_description(answer, transactional_id, node_id)
            except _COORDINATOR_MOVING as exc:
                if monotonic_ms() + backoff_s * 1000 >= deadline_ms:
                    raise
                moving = exc
            except KafkaTimeoutError as exc:
                if moving is None:
                    raise
                raise moving from exc  # what the cluster last said, not the deadline's leftover
            await asyncio.sleep(backoff_s)
            backoff_s = min(backoff_s * 2, self.max_retry_backoff_s)

    # --- ACLs (Kafka's DescribeAcls, CreateAcls, DeleteAcls; messages as on the wire) ---------

    async def describe_acls(
        self, request: DescribeAclsRequest, *, timeout_s: float | None = None
    ) -> DescribeAclsResponse:
        """The ACLs the request's filter matches; its error (SECURITY_DISABLED,
        CLUSTER_AUTHORIZATION_FAILED, ...) raised."""
        answer = await self._call(DescribeAclsResponse, lambda wait_ms: request, timeout_s)
        found = cluster_answers.error(answer.error_code, answer.error_message)
        if found is not None:
            raise found
        return answer

    async def create_acls(
        self, creations: Sequence[AclCreation], *, timeout_s: float | None = None
    ) -> list[AclCreationResult]:
        """One result per creation, in order (its error code and message)."""
        answer = await self._call(
            CreateAclsResponse,
            lambda wait_ms: CreateAclsRequest(creations=list(creations)),
            timeout_s,
        )
        return list(answer.results)

    async def delete_acls(
        self, filters: Sequence[DeleteAclsFilter], *, timeout_s: float | None = None
    ) -> list[DeleteAclsFilterResult]:
        """One result per filter, in order: its error, or the ACLs it removed."""
        answer = await self._call(
            DeleteAclsResponse, lambda wait_ms: DeleteAclsRequest(filters=list(filters)), timeout_s
        )
        return list(answer.filter_results)

    # --- features (KIP-584) -----------------------------------------------------------------

    async def describe_features(self, *, timeout_s: float | None = None) -> FeatureMetadata:
        """The features the answering node supports and the finalized levels with their epoch
        (its ApiVersions v3+ answer, as Kafka's `Admin.describeFeatures`)."""
        request = ApiVersionsRequest(
            client_software_name=SOFTWARE_NAME, client_software_version=SOFTWARE_VERSION
        )
        answer = await self._call(
            ApiVersionsResponse, lambda wait_ms: request, timeout_s, min_version=3
        )
        return FeatureMetadata.of(answer)

    async def update_features(
        self,
        updates: Sequence[FeatureUpdate],
        *,
        validate_only: bool = False,
        timeout_s: float | None = None,
    ) -> None:
        """UpdateFeatures: every update done (or, with `validate_only`, found possible), or the
        controller's refusal of the whole request raised. Sent at v1 or later, whose
        `upgrade_type` says each update's type (every listener serving UpdateFeatures since
        Kafka 3.3 serves v1)."""

        def build(wait_ms: int) -> UpdateFeaturesRequest:
            return UpdateFeaturesRequest(
                timeout_ms=wait_ms,
                feature_updates=[
                    FeatureUpdateKey(
                        feature=u.feature,
                        max_version_level=u.level,
                        upgrade_type=u.upgrade_type,
                    )
                    for u in updates
                ],
                validate_only=validate_only,
            )

        answer = await self._call(UpdateFeaturesResponse, build, timeout_s, min_version=1)
        errors = [(answer.error_code, answer.error_message)] + [
            (r.error_code, r.error_message) for r in answer.results
        ]
        for code, message in errors:
            error = cluster_answers.error(code, message)
            if error is not None:
                raise error

    async def list_transactions(
        self,
        *,
        states: Collection[str] = (),
        producer_ids: Collection[int] = (),
        duration_ms: int | None = None,
        timeout_s: float | None = None,
    ) -> tuple[list[TransactionListing], dict[int, ReplogError]]:
        """Every unfenced broker's ListTransactions (each lists the transactions it
        coordinates), filtered as given (the duration filter needs v1), and the error of each
        broker that did not answer."""
        from replog.admin import transaction_results as results

        deadline_ms = self._deadline_ms(timeout_s)
        cluster = await self.describe_cluster(timeout_s=self._left_s(deadline_ms))
        request = results.list_transactions_request(states, producer_ids, duration_ms)
        listings: list[TransactionListing] = []
        failures: dict[int, ReplogError] = {}
        for broker in sorted(cluster.brokers, key=lambda b: b.broker_id):
            if broker.fenced:
                continue
            address = format_host_port(broker.host, broker.port)
            try:
                answer = await self._once(
                    ListTransactionsResponse,
                    address,
                    request,
                    self._attempt_ms(deadline_ms),
                    min_version=0 if duration_ms is None else 1,
                )
                listings += results.transaction_listings(answer, broker.broker_id, address)
            except ReplogError as error:
                failures[broker.broker_id] = error
        return listings, failures

    async def describe_producers(
        self,
        partitions: Sequence[TopicPartition],
        *,
        broker_id: int | None = None,
        timeout_s: float | None = None,
    ) -> dict[TopicPartition, list[ProducerState] | KafkaError]:
        """DescribeProducers of each partition at its leader (or at `broker_id`, a replica):
        its active producers, or its error."""
        from replog.admin import transaction_results as results

        deadline_ms = self._deadline_ms(timeout_s)
        found: dict[TopicPartition, list[ProducerState] | KafkaError] = {}
        for address, asked in (await self._where(partitions, broker_id, deadline_ms)).items():
            if isinstance(address, KafkaError):
                found |= dict.fromkeys(asked, address)
                continue
            answer = await self._once(
                DescribeProducersResponse,
                address,
                results.describe_producers_request(asked),
                self._attempt_ms(deadline_ms),
            )
            found |= results.producer_states(answer, asked, address)
        return {tp: found[tp] for tp in partitions}

    async def abort_transaction(self, spec: AbortSpec, *, timeout_s: float | None = None) -> None:
        """Kafka's admin abortTransaction: WriteTxnMarkers with an ABORT marker to the
        partition's leader, with the producer id, epoch and coordinator epoch of `spec`; the
        marker's error raised."""
        from replog.admin import transaction_results as results

        deadline_ms = self._deadline_ms(timeout_s)
        ((address, _),) = (await self._where([spec.partition], None, deadline_ms)).items()
        if isinstance(address, KafkaError):
            raise address
        answer = await self._once(
            WriteTxnMarkersResponse,
            address,
            results.abort_request(spec),
            self._attempt_ms(deadline_ms),
        )
        results.abort_result(answer, spec, address)

    async def _where(
        self, partitions: Sequence[TopicPartition], broker_id: int | None, deadline_ms: int
    ) -> dict[str | KafkaError, list[TopicPartition]]:
        """The partitions by the Kafka listener to ask (the leader's, or `broker_id`'s when it
        holds a replica), or by the error that leaves none to ask."""
        found = await self.metadata(
            sorted({tp.topic for tp in partitions}), timeout_s=self._left_s(deadline_ms)
        )
        addresses = {b.broker_id: format_host_port(b.host, b.port) for b in found.brokers}
        topics = {t.name: t for t in found.topics}
        where: dict[str | KafkaError, list[TopicPartition]] = {}
        for tp in partitions:
            where.setdefault(_listener(tp, topics, addresses, broker_id), []).append(tp)
        return where

    def _attempt_ms(self, deadline_ms: int) -> int:
        return max(min(int(self.request_timeout_s * 1000), deadline_ms - monotonic_ms()), 1)

    # --- running a call -----------------------------------------------------------------------

    def _deadline_ms(self, timeout_s: float | None) -> int:
        budget_s = self.default_timeout_s if timeout_s is None else timeout_s
        return monotonic_ms() + int(budget_s * 1000)

    @staticmethod
    def _left_s(deadline_ms: int) -> float:
        return max(deadline_ms - monotonic_ms(), 0) / 1000

    def _round(self) -> list[str]:
        """Where to ask, in order (module docstring)."""
        first = [self._answered] if self._answered is not None else []
        return list(dict.fromkeys([*first, *self.bootstrap, *self._brokers]))

    async def _call(
        self,
        answer_type: type[A],
        build: Callable[[int], Message],
        timeout_s: float | None,
        *,
        min_version: int = 0,
    ) -> A:
        """The answer to `build(server_wait_ms)` from the first listener that gives one that is
        not to be retried (module docstring)."""
        if self._closed:
            raise ReplogError("the admin client is closed")
        budget_s = self.default_timeout_s if timeout_s is None else timeout_s
        started_ms = monotonic_ms()
        deadline_ms = started_ms + int(budget_s * 1000)
        said: dict[str, str] = {}
        answered = False
        backoff_s = self.retry_backoff_s
        name = answer_type.__name__.removesuffix("Response")  # the request's, before any is built
        while True:
            for address in self._round():
                remaining_ms = deadline_ms - monotonic_ms()
                if remaining_ms <= 0:
                    break
                attempt_ms = min(int(self.request_timeout_s * 1000), remaining_ms)
                request = build(server_wait_ms(attempt_ms))
                name = request.NAME.removesuffix("Request")
                try:
                    async with asyncio.timeout(attempt_ms / 1000):
                        connection = await self._connections.get(address)
                    response, _ = await connection.call(
                        request, timeout_ms=attempt_ms, min_version=min_version
                    )
                except TimeoutError:
                    self._connections.drop(address)
                    said[address] = f"no answer within {attempt_ms / 1000:g} s"
                    continue
                except (NetworkError, RequestTimedOutError) as exc:
                    self._connections.drop(address)
                    cause = _REFUSED if _REFUSED in str(exc) else str(exc)
                    if cause == _REFUSED and said.get(address) != _REFUSED and not answered:
                        # Said at once: the call may wait refused_timeout_s before it fails.
                        log.warning(
                            "broker at %s unreachable for %s: %s; retrying for up to "
                            "socket.connection.setup.timeout.max.ms=%d ms",
                            address,
                            name,
                            cause,
                            int(self.refused_timeout_s * 1000),
                        )
                    said[address] = cause
                    continue
                answered = True
                retry = _retry_reason(response)
                if retry is None:
                    self._answered = address
                    return _expected(answer_type, response, address)
                said[address] = retry
            now_ms = monotonic_ms()
            if (
                not answered
                and said
                and all(what == _REFUSED for what in said.values())
                and now_ms - started_ms >= self.refused_timeout_s * 1000
            ):
                raise NoBrokersAvailableError(
                    f"{name}: connection refused by {', '.join(said)} for "
                    f"{self.refused_timeout_s:g} s: is the cluster running, and is the bootstrap "
                    "address a Kafka listener?"
                )
            if now_ms >= deadline_ms:
                raise KafkaTimeoutError(
                    f"{name}: no answer within {budget_s:g} s: {_summary(said)}"
                )
            pause_s = min(backoff_s, (deadline_ms - now_ms) / 1000)
            if not answered and said and all(what == _REFUSED for what in said.values()):
                pause_s = min(
                    pause_s, max(started_ms / 1000 + self.refused_timeout_s - now_ms / 1000, 0)
                )
            await asyncio.sleep(pause_s)
            backoff_s = min(backoff_s * 2, self.max_retry_backoff_s)


def _expected(answer_type: type[A], response: Message, address: str) -> A:
    """`response`, if it is the answer the request expects (another type is a bug)."""
    if not isinstance(response, answer_type):
        raise UnknownServerError(
            f"{address} answered {answer_type.NAME} with a {type(response).__name__}"
        )
    return response


def _listener(
    tp: TopicPartition,
    topics: Mapping[str, Any],
    addresses: Mapping[int, str],
    broker_id: int | None,
) -> str | KafkaError:
    """The Kafka listener that answers for `tp` (`AsyncKafkaAdminClient._where`), or why none."""
    where = f"{tp.topic}-{tp.partition}"
    topic = topics.get(tp.topic)
    if topic is None or topic.error is not None:
        error = None if topic is None else topic.error
        return error or UnknownTopicOrPartitionError(f"topic {tp.topic!r} does not exist")
    partition = next((p for p in topic.partitions if p.partition == tp.partition), None)
    if partition is None:
        return UnknownTopicOrPartitionError(
            f"partition {where} does not exist (topic {tp.topic!r} has "
            f"{len(topic.partitions)} partitions)"
        )
    if broker_id is not None:
        if broker_id not in partition.replicas:
            return NotLeaderOrFollowerError(
                f"broker {broker_id} holds no replica of {where} (replicas {partition.replicas})"
            )
        chosen = broker_id
    elif partition.leader is None:
        return LeaderNotAvailableError(f"{where} has no leader")
    else:
        chosen = partition.leader
    address = addresses.get(chosen)
    if address is None:
        return BrokerNotAvailableError(f"broker {chosen} of {where} is not registered or fenced")
    return address


def _partitions_of(answer: Any) -> list[TopicPartition]:
    return [
        TopicPartition(t.name, p.partition_index)
        for t in answer.topics
        if t.name
        for p in t.partitions
    ]


def _retry_reason(response: Message) -> str | None:
    """Why `response` is to be asked again elsewhere: NOT_CONTROLLER or NOT_LEADER_OR_FOLLOWER
    for the whole request, or for every item; None when it is the answer."""
    errors = _errors(response)
    retriable = {NotControllerError.code, NotLeaderOrFollowerError.code}
    if errors and all(code in retriable for code, _ in errors):
        error = cluster_answers.error(*errors[0])
        return f"{type(error).__name__}: {error}" if error is not None else None
    return None


def _errors(message: Any) -> list[tuple[int, str | None]]:
    """The request-level error if set, else every item's (two levels deep): (code, message)."""
    whole = getattr(message, "error_code", 0)
    if whole:
        return [(whole, getattr(message, "error_message", None))]
    found: list[tuple[int, str | None]] = []
    for items in _lists(message):
        for item in items:
            if hasattr(item, "error_code"):
                found.append((item.error_code, getattr(item, "error_message", None)))
            else:
                found.extend(
                    (inner.error_code, getattr(inner, "error_message", None))
                    for inners in _lists(item)
                    for inner in inners
                    if hasattr(inner, "error_code")
                )
    return found


def _lists(item: Any) -> list[list[Any]]:
    slots = getattr(type(item), "__slots__", ())
    return [v for s in slots if isinstance(v := getattr(item, s, None), list)]


def _summary(said: Mapping[str, str]) -> str:
    if not said:
        return "the deadline passed before any listener was asked"
    return "; ".join(f"{address}: {what}" for address, what in said.items())


class KafkaAdminClient:
    """The blocking admin client: `AsyncKafkaAdminClient`'s methods, run on an event loop of
    its own (module docstring). Ctrl-C interrupts a call at once."""

    def __init__(self, bootstrap: str | Sequence[str], **options: Any) -> None:
        self._async = AsyncKafkaAdminClient(bootstrap, **options)
        self.bootstrap = self._async.bootstrap
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="replog-admin", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            self._run(self._async.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()

    def __enter__(self) -> KafkaAdminClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result()
        except KeyboardInterrupt:
            future.cancel()  # the request in flight is abandoned with its connection
            raise

    def create_topics(self, *args: Any, **kwargs: Any) -> list[CreatedTopic]:
        return self._run(self._async.create_topics(*args, **kwargs))

    def delete_topics(self, *args: Any, **kwargs: Any) -> list[DeletedTopic]:
        return self._run(self._async.delete_topics(*args, **kwargs))

    def create_partitions(self, *args: Any, **kwargs: Any) -> list[PartitionsCreated]:
        return self._run(self._async.create_partitions(*args, **kwargs))

    def describe_cluster(self, **kwargs: Any) -> ClusterDescription:
        return self._run(self._async.describe_cluster(**kwargs))

    def metadata(self, *args: Any, **kwargs: Any) -> ClusterMetadata:
        return self._run(self._async.metadata(*args, **kwargs))

    def describe_configs(self, *args: Any, **kwargs: Any) -> list[ResourceConfigs]:
        return self._run(self._async.describe_configs(*args, **kwargs))

    def incremental_alter_configs(self, *args: Any, **kwargs: Any) -> list[ConfigsAltered]:
        return self._run(self._async.incremental_alter_configs(*args, **kwargs))

    def alter_user_scram_credentials(
        self, *args: Any, **kwargs: Any
    ) -> dict[str, KafkaError | None]:
        return self._run(self._async.alter_user_scram_credentials(*args, **kwargs))

    def describe_user_scram_credentials(
        self, *args: Any, **kwargs: Any
    ) -> list[UserScramCredentials]:
        return self._run(self._async.describe_user_scram_credentials(*args, **kwargs))

    def elect_leaders(self, *args: Any, **kwargs: Any) -> list[ElectionResult]:
        return self._run(self._async.elect_leaders(*args, **kwargs))

    def list_partition_reassignments(self, *args: Any, **kwargs: Any) -> list[OngoingReassignment]:
        return self._run(self._async.list_partition_reassignments(*args, **kwargs))

    def alter_partition_reassignments(self, *args: Any, **kwargs: Any) -> list[ReassignmentResult]:
        return self._run(self._async.alter_partition_reassignments(*args, **kwargs))

    def describe_quorum(self, **kwargs: Any) -> tuple[DescribeQuorumResponse, str]:
        return self._run(self._async.describe_quorum(**kwargs))

    def describe_log_dirs_at(self, *args: Any, **kwargs: Any) -> m.DescribeLogDirsResponse:
        return self._run(self._async.describe_log_dirs_at(*args, **kwargs))

    def describe_transaction(self, *args: Any, **kwargs: Any) -> TransactionDescription:
        return self._run(self._async.describe_transaction(*args, **kwargs))

    def list_transactions(
        self, **kwargs: Any
    ) -> tuple[list[TransactionListing], dict[int, ReplogError]]:
        return self._run(self._async.list_transactions(**kwargs))

    def describe_acls(self, *args: Any, **kwargs: Any) -> DescribeAclsResponse:
        return self._run(self._async.describe_acls(*args, **kwargs))

    def create_acls(self, *args: Any, **kwargs: Any) -> list[AclCreationResult]:
        return self._run(self._async.create_acls(*args, **kwargs))

    def delete_acls(self, *args: Any, **kwargs: Any) -> list[DeleteAclsFilterResult]:
        return self._run(self._async.delete_acls(*args, **kwargs))

    def describe_features(self, **kwargs: Any) -> FeatureMetadata:
        return self._run(self._async.describe_features(**kwargs))

    def update_features(self, *args: Any, **kwargs: Any) -> None:
        self._run(self._async.update_features(*args, **kwargs))

    def describe_producers(
        self, *args: Any, **kwargs: Any
    ) -> dict[TopicPartition, list[ProducerState] | KafkaError]:
        return self._run(self._async.describe_producers(*args, **kwargs))

    def abort_transaction(self, *args: Any, **kwargs: Any) -> None:
        return self._run(self._async.abort_transaction(*args, **kwargs))
