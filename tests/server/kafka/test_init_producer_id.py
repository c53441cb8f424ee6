"""InitProducerId in front of a fake producer-id manager: through a real Kafka listener and
`KafkaBrokerClient`, a new id with epoch 0 and the manager's COORDINATOR_LOAD_IN_PROGRESS
reaching the client as its class (a broker without a manager answers the same); Kafka's
request checks (`KafkaApis.init_producer_id`): an idempotent producer's old id gets a new one,
a transactional id is UNSUPPORTED_VERSION there (the listener gives it to the transaction
coordinator when the broker has one), one of id/epoch -1 is INVALID_REQUEST."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from replog.errors import (
    CoordinatorLoadInProgressError,
    InvalidRequestError,
    KafkaError,
    UnsupportedVersionError,
)
from replog.kafka.messages.init_producer_id_request import InitProducerIdRequest
from replog.quorum.metadata.image import MetadataImage
from replog.replication import messages as m
from replog.server.data_plane.broker_cores import BrokerCores, init_producer_id
from replog.server.kafka.kafka_apis import KafkaApis
from tests.server.kafka.kafka_broker_listener import kafka_client_of


@dataclass
class FakeProducerIds:
    next_id: int = 4000
    refuse: KafkaError | None = None
    handed: list[int] = field(default_factory=list)

    def generate_producer_id(self) -> int:
        if self.refuse is not None:
            raise self.refuse
        producer_id = self.next_id
        self.next_id += 1
        self.handed.append(producer_id)
        return producer_id


def service() -> BrokerCores:
    return BrokerCores(3)


@pytest.mark.asyncio
async def test_a_new_producer_id_has_epoch_zero() -> None:
    ids = FakeProducerIds()
    async with kafka_client_of(service(), producer_ids=ids) as client:
        assert await client.init_producer_id() == (4000, 0)
        assert await client.init_producer_id(timeout_ms=2000) == (4001, 0)
    assert ids.handed == [4000, 4001]


def test_an_idempotent_producer_with_an_old_id_gets_a_new_one() -> None:
    # Kafka: without a transactional id, the old id and epoch are not checked.
    ids = FakeProducerIds()
    apis = KafkaApis(3, cluster_id="c1", image=lambda: MetadataImage.EMPTY, producer_ids=ids)
    answer = apis.init_producer_id(
        InitProducerIdRequest(transactional_id=None, producer_id=17, producer_epoch=3)
    )
    assert (answer.error_code, answer.producer_id, answer.producer_epoch) == (0, 4000, 0)


def test_a_transactional_id_is_unsupported_naming_transactions() -> None:
    ids = FakeProducerIds()
    for transactional_id in ("payments-tx", ""):
        answer = init_producer_id(
            3, m.InitProducerIdRequest(transactional_id=transactional_id), ids
        )
        assert isinstance(answer.error, UnsupportedVersionError)
        assert "served by the transaction coordinator" in str(answer.error)
        assert repr(transactional_id) in str(answer.error) and "broker 3" in str(answer.error)
        assert (answer.producer_id, answer.producer_epoch) == (-1, -1)
    apis = KafkaApis(3, cluster_id="c1", image=lambda: MetadataImage.EMPTY, producer_ids=ids)
    wire = apis.init_producer_id(InitProducerIdRequest(transactional_id="payments-tx"))
    assert wire.error_code == UnsupportedVersionError.code
    assert ids.handed == []


@pytest.mark.parametrize(("producer_id", "epoch"), [(-1, 0), (5, -1)])
def test_only_one_of_id_and_epoch_is_an_invalid_request(producer_id: int, epoch: int) -> None:
    ids = FakeProducerIds()
    answer = init_producer_id(
        3, m.InitProducerIdRequest(producer_id=producer_id, producer_epoch=epoch), ids
    )
    assert isinstance(answer.error, InvalidRequestError)
    assert f"producer_id {producer_id} and producer_epoch {epoch}" in str(answer.error)
    assert ids.handed == []


@pytest.mark.asyncio
async def test_no_id_yet_reaches_the_client_as_a_retriable_error() -> None:
    ids = FakeProducerIds(refuse=CoordinatorLoadInProgressError("broker 3 has no ids yet"))
    async with kafka_client_of(service(), producer_ids=ids) as client:
        with pytest.raises(CoordinatorLoadInProgressError) as refused:
            await client.init_producer_id()
        assert refused.value.retriable
        ids.refuse = None
        assert await client.init_producer_id() == (4000, 0)


@pytest.mark.asyncio
async def test_a_broker_without_a_manager_answers_load_in_progress() -> None:
    async with kafka_client_of(service()) as client:
        with pytest.raises(CoordinatorLoadInProgressError):
            await client.init_producer_id()
    answer = init_producer_id(3, m.InitProducerIdRequest(), None)
    assert isinstance(answer.error, CoordinatorLoadInProgressError)
    assert "broker 3" in str(answer.error)
