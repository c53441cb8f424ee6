"""TxnVerifier: a broker's questions to the transaction coordinator of a transactional id
(Kafka's `AddPartitionsToTxnManager`, KIP-890): add partitions to a producer's transaction
(transaction version 2) or verify that they are in it, for a partition leader about to append a
transaction's first batch and for a group coordinator about to stage a TxnOffsetCommit.

Rules:
- The coordinator is the leader of the transactional id's `__transaction_state` partition in
  this broker's image: no such topic or no leader is COORDINATOR_NOT_AVAILABLE for every
  partition asked. This broker's own coordinator is asked directly (`answer`), another
  broker's over its Broker service (`GrpcMarkerChannel.add_partitions`); a call that fails
  as a whole is every partition's error (NETWORK_EXCEPTION for a lost broker).
- `answer` is the coordinator's side, the same for both: verify-only asks
  `TransactionCoordinator.verify_partitions` (per partition), an add
  `TransactionCoordinator.add_partitions` with transaction version 2 (one error for all).
- The answer is the coordinator's, untranslated: what a client is told is
  `txn_verification.client_error`'s.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from replog.common.topic_partition import TopicPartitionKey
from replog.coordinator.transaction_log_replay import partition_for_transactional_id
from replog.errors import CoordinatorNotAvailableError, KafkaError
from replog.quorum.metadata.image import MetadataImage
from replog.replication import messages as m
from replog.server.transactions.transaction_coordinator import TransactionCoordinator
from replog.topic_names import TRANSACTION_STATE_TOPIC

Answers = dict[TopicPartitionKey, KafkaError | None]


class CoordinatorChannel(Protocol):
    """What the verifier needs of the inter-broker channel (`GrpcMarkerChannel`)."""

    def add_partitions(
        self, broker_id: int, request: m.TxnPartitionsRequest
    ) -> Awaitable[Answers]: ...


async def answer(
    coordinator: TransactionCoordinator | None, request: m.TxnPartitionsRequest, broker_id: int
) -> Answers:
    """The coordinator's answer to `request` (module Rules); None: this broker coordinates no
    transactions yet (or any more)."""
    if coordinator is None:
        return dict.fromkeys(
            request.partitions,
            CoordinatorNotAvailableError(
                f"broker {broker_id} coordinates no transactions yet (its data plane is "
                "starting) or any more (it is stopping)"
            ),
        )
    if request.verify_only:
        return coordinator.verify_partitions(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            request.partitions,
        )
    error = await coordinator.add_partitions(
        request.transactional_id,
        request.producer_id,
        request.producer_epoch,
        request.partitions,
        transaction_version=2,
    )
    return dict.fromkeys(request.partitions, error)


async def answer_to_wire(
    coordinator: TransactionCoordinator | None, request: m.TxnPartitionsRequest, broker_id: int
) -> m.TxnPartitionsResponse:
    """`answer` as the Broker service sends it back."""
    found = await answer(coordinator, request, broker_id)
    return m.TxnPartitionsResponse(
        tuple(m.TxnMarkerPartitionResult(tp[0], tp[1], found[tp]) for tp in request.partitions)
    )


class TxnVerifier:
    """Asks the coordinator of a transactional id about partitions (module Rules)."""

    def __init__(
        self,
        broker_id: int,
        coordinator: Callable[[], TransactionCoordinator | None],
        image: Callable[[], MetadataImage],
        channel: CoordinatorChannel,
    ) -> None:
        self.broker_id = broker_id
        self._coordinator = coordinator
        self._image = image
        self._channel = channel

    async def ask(self, request: m.TxnPartitionsRequest) -> Answers:
        """Each partition of `request` with the coordinator's error, None where it is (now) in
        the transaction."""
        leader = self._coordinator_id(request.transactional_id)
        if isinstance(leader, KafkaError):
            return dict.fromkeys(request.partitions, leader)
        if leader == self.broker_id:
            return await answer(self._coordinator(), request, self.broker_id)
        try:
            return await self._channel.add_partitions(leader, request)
        except KafkaError as error:
            return dict.fromkeys(request.partitions, error)

    def _coordinator_id(self, transactional_id: str) -> int | KafkaError:
        topic = self._image().topics.by_name.get(TRANSACTION_STATE_TOPIC)
        who = f"the transaction coordinator of {transactional_id!r}"
        if topic is None or not topic.partitions:
            return CoordinatorNotAvailableError(f"{who}: {TRANSACTION_STATE_TOPIC} does not exist")
        partition_id = partition_for_transactional_id(transactional_id, len(topic.partitions))
        registration = topic.partitions.get(partition_id)
        if registration is None or registration.leader < 0:
            return CoordinatorNotAvailableError(
                f"{who}: {TRANSACTION_STATE_TOPIC}-{partition_id} has no leader"
            )
        return registration.leader
