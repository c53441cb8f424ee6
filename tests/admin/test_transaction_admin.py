"""The admin client's DescribeTransactions against a scripted Kafka listener: FindCoordinator
with key type 1 and the transactional id, then DescribeTransactions at the coordinator named;
a coordinator not available, loading or moved (NOT_COORDINATOR) is found anew and asked again
until the call's deadline, when the last error is raised naming the id."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from replog.admin.kafka_admin_client import TRANSACTION_KEY_TYPE, AsyncKafkaAdminClient
from replog.common import TopicPartition
from replog.errors import CoordinatorNotAvailableError, TransactionalIdNotFoundError
from replog.kafka.messages import describe_transactions_response as dtr
from replog.kafka.messages.find_coordinator_response import Coordinator, FindCoordinatorResponse
from tests.wire.kafka_group_fake import ScriptedKafka

FIND_COORDINATOR, DESCRIBE_TRANSACTIONS = 10, 65
COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, TRANSACTIONAL_ID_NOT_FOUND = 15, 16, 105


def coordinator(fake: ScriptedKafka, error_code: int = 0) -> FindCoordinatorResponse:
    host, port = fake.address.rsplit(":", 1)
    return FindCoordinatorResponse(
        coordinators=[
            Coordinator(key="tx", node_id=4, host=host, port=int(port), error_code=error_code)
        ]
    )


def description(error_code: int = 0) -> dtr.DescribeTransactionsResponse:
    return dtr.DescribeTransactionsResponse(
        transaction_states=[
            dtr.TransactionState(
                error_code=error_code,
                transactional_id="tx",
                transaction_state="Ongoing",
                transaction_timeout_ms=60_000,
                transaction_start_time_ms=1_000,
                producer_id=8,
                producer_epoch=2,
                topics=[dtr.TopicData(topic="t", partitions=[0])],
            )
        ]
    )


def scripted(find: Any, describe: Any) -> ScriptedKafka:
    return ScriptedKafka(
        {FIND_COORDINATOR: find, DESCRIBE_TRANSACTIONS: describe},
        versions={DESCRIBE_TRANSACTIONS: (0, 0)},
    )


def client(fake: ScriptedKafka) -> AsyncKafkaAdminClient:
    return AsyncKafkaAdminClient(fake.address, retry_backoff_s=0.05, max_retry_backoff_s=0.1)


async def describe_with_no_coordinator_available() -> ScriptedKafka:
    """DescribeTransactions of 'tx' for 0.5 s while every FindCoordinator answers
    COORDINATOR_NOT_AVAILABLE: that error is raised, naming the id."""
    fake: ScriptedKafka
    fake = scripted(
        lambda r, v: coordinator(fake, COORDINATOR_NOT_AVAILABLE), lambda r, v: description()
    )
    async with fake, client(fake) as admin:
        with pytest.raises(CoordinatorNotAvailableError, match="transactional id 'tx'"):
            await admin.describe_transaction("tx", timeout_s=0.5)
    return fake


@pytest.mark.asyncio
async def test_a_moved_coordinator_is_found_anew_and_asked_again() -> None:
    answers = iter([description(NOT_COORDINATOR), description()])
    fake: ScriptedKafka
    fake = scripted(lambda r, v: coordinator(fake), lambda r, v: next(answers))
    async with fake, client(fake) as admin:
        got = await admin.describe_transaction("tx", timeout_s=5)
    assert (got.coordinator_id, got.state, got.partitions) == (
        4,
        "Ongoing",
        (TopicPartition("t", 0),),
    )
    finds = [body for key, _, body in fake.seen if key == FIND_COORDINATOR]
    assert len(finds) == 2
    assert all(f.key_type == TRANSACTION_KEY_TYPE and f.coordinator_keys == ["tx"] for f in finds)


@pytest.mark.asyncio
async def test_a_coordinator_never_available_is_its_error_at_the_deadline() -> None:
    fake = await describe_with_no_coordinator_available()
    assert sum(key == FIND_COORDINATOR for key, _, _ in fake.seen) > 1
    assert not any(key == DESCRIBE_TRANSACTIONS for key, _, _ in fake.seen)


@pytest.mark.asyncio
async def test_a_backoff_woken_past_the_deadline_raises_the_coordinators_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a busy machine a backoff's sleep ends after the deadline it was taken before: the
    call raises what the cluster last said, not a timeout of a request left no time."""
    sleep = asyncio.sleep

    async def oversleep(delay: float, result: Any = None) -> Any:
        return await sleep(delay * 4, result)

    monkeypatch.setattr(asyncio, "sleep", oversleep)
    fake = await describe_with_no_coordinator_available()
    assert sum(key == FIND_COORDINATOR for key, _, _ in fake.seen) > 1


@pytest.mark.asyncio
async def test_an_unknown_transactional_id_is_not_asked_again() -> None:
    fake: ScriptedKafka
    fake = scripted(
        lambda r, v: coordinator(fake), lambda r, v: description(TRANSACTIONAL_ID_NOT_FOUND)
    )
    async with fake, client(fake) as admin:
        with pytest.raises(TransactionalIdNotFoundError, match="'tx' from coordinator 4"):
            await admin.describe_transaction("tx", timeout_s=5)
    assert sum(key == DESCRIBE_TRANSACTIONS for key, _, _ in fake.seen) == 1
