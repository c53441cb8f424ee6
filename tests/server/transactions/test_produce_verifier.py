"""The leader's verification of transactional produces (KIP-890), against a fake coordinator:
only a transactional produce whose batch begins its producer's transaction on the partition
asks; v11- verifies, v12 adds; a refusal is the client's error for the version; one producer's
requests keep their order while one waits; a verification a marker overtook is refused; an add
answered CONCURRENT_TRANSACTIONS is asked again for a while; with
transaction.partition.verification.enable false only v12's add is asked."""

from __future__ import annotations

import asyncio

import pytest

from replog.common.offsets import NO_OFFSET
from replog.errors import (
    ConcurrentTransactionsError,
    CoordinatorNotAvailableError,
    InvalidTxnStateError,
    KafkaError,
    NotEnoughReplicasError,
    TransactionAbortableError,
)
from replog.record.builder import BatchBuilder
from replog.replication import messages as m
from replog.replication.producer_state import ProducerEntry
from replog.replication.txn_verification import ADD_RETRY_BACKOFF_MS, ADD_RETRY_MAX_MS
from replog.server.transactions.produce_verifier import ProduceVerifier
from replog.server.transactions.txn_verifier import Answers

PID = 7


def batch(*, transactional: bool = True, epoch: int = 0, pid: int = PID) -> bytes:
    builder = BatchBuilder(
        producer_id=pid, producer_epoch=epoch, base_sequence=0, is_transactional=transactional
    )
    builder.append(1, b"k", b"v")
    return builder.build()


def entry(epoch: int = 0, txn_first: int = NO_OFFSET) -> ProducerEntry:
    return ProducerEntry(PID, epoch, (), 0, txn_first)


class Coordinator:
    """Answers each question when told to (`answer`), recording what was asked."""

    def __init__(self) -> None:
        self.asked: list[m.TxnPartitionsRequest] = []
        self.pending: list[asyncio.Future[Answers]] = []

    def ask(self, request: m.TxnPartitionsRequest) -> asyncio.Future[Answers]:
        self.asked.append(request)
        future: asyncio.Future[Answers] = asyncio.get_running_loop().create_future()
        self.pending.append(future)
        return future

    def answer(self, errors: dict[tuple[str, int], KafkaError | None] | None = None) -> None:
        request, future = self.asked[len(self.asked) - len(self.pending)], self.pending.pop(0)
        found = dict.fromkeys(request.partitions, None)
        found.update(errors or {})
        future.set_result(found)


class Partitions:
    """The producer entries of partitions led here, as the replica manager holds them."""

    def __init__(self) -> None:
        self.entries: dict[tuple[str, int], ProducerEntry | None] = {}
        self.led = {("t", 0), ("t", 1)}

    def lookup(
        self, topic: str, partition: int, producer_id: int
    ) -> tuple[bool, ProducerEntry | None]:
        return (topic, partition) in self.led, self.entries.get((topic, partition))


def setup() -> tuple[Coordinator, Partitions, ProduceVerifier]:
    coordinator, partitions = Coordinator(), Partitions()
    return coordinator, partitions, ProduceVerifier(coordinator, partitions.lookup)


def produced(*records: tuple[str, int, bytes]) -> tuple[m.ProducePartition, ...]:
    return tuple(m.ProducePartition(t, p, r) for t, p, r in records)


@pytest.mark.asyncio
async def test_nothing_is_asked_unless_a_batch_begins_a_transaction_here() -> None:
    coordinator, partitions, verifier = setup()
    assert await verifier.verify(None, produced(("t", 0, batch())), 11) == {}
    assert await verifier.verify("tx", produced(("t", 0, batch(transactional=False))), 11) == {}
    assert await verifier.verify("tx", produced(("elsewhere", 0, batch())), 11) == {}
    partitions.entries[("t", 0)] = entry(0, txn_first=4)
    assert await verifier.verify("tx", produced(("t", 0, batch(epoch=0))), 11) == {}
    assert await verifier.verify("tx", produced(("t", 0, b"short")), 11) == {}
    assert coordinator.asked == []


@pytest.mark.asyncio
async def test_old_versions_verify_v12_adds_and_refusals_are_the_versions_errors() -> None:
    coordinator, _, verifier = setup()
    records = produced(("t", 0, batch(epoch=2)), ("t", 1, batch(epoch=2)))
    for version, verify_only in ((9, True), (11, True), (12, False)):
        task = asyncio.ensure_future(verifier.verify("tx", records, version))
        await asyncio.sleep(0)
        assert coordinator.asked[-1] == m.TxnPartitionsRequest(
            "tx", PID, 2, (("t", 0), ("t", 1)), verify_only=verify_only
        )
        coordinator.answer({("t", 1): TransactionAbortableError("not added")})
        (refused,) = (await task).items()
        assert refused[0] == 1
        expected = InvalidTxnStateError if version < 11 else TransactionAbortableError
        assert type(refused[1]) is expected, refused
    task = asyncio.ensure_future(verifier.verify("tx", records, 12))
    await asyncio.sleep(0)
    coordinator.answer(dict.fromkeys([("t", 0), ("t", 1)], CoordinatorNotAvailableError("x")))
    assert {i: type(e) for i, e in (await task).items()} == {
        0: NotEnoughReplicasError,
        1: NotEnoughReplicasError,
    }


@pytest.mark.asyncio
async def test_one_producers_requests_keep_their_order_while_one_waits() -> None:
    coordinator, partitions, verifier = setup()
    order: list[str] = []

    async def produce(name: str) -> dict[int, KafkaError]:
        refused = await verifier.verify("tx", produced(("t", 0, batch())), 11)
        # The caller appends before its next await: the transaction is open from here on.
        partitions.entries[("t", 0)] = entry(0, txn_first=0)
        order.append(name)
        return refused

    first = asyncio.ensure_future(produce("first"))
    await asyncio.sleep(0)
    second = asyncio.ensure_future(produce("second"))  # nothing to ask, but one is ahead
    for _ in range(3):
        await asyncio.sleep(0)
    assert order == [] and len(coordinator.asked) == 1
    coordinator.answer()
    assert await first == {} and await second == {}
    assert order == ["first", "second"]
    assert len(coordinator.asked) == 1  # the second found the transaction open
    assert await verifier.verify("tx", produced(("t", 0, batch())), 11) == {}  # no queue left


@pytest.mark.asyncio
async def test_a_fencing_marker_during_the_verification_refuses_the_append() -> None:
    coordinator, partitions, verifier = setup()
    partitions.entries[("t", 0)] = entry(0)
    task = asyncio.ensure_future(verifier.verify("tx", produced(("t", 0, batch())), 12))
    await asyncio.sleep(0)
    partitions.entries[("t", 0)] = entry(1)  # the coordinator's abort, at a fenced epoch
    coordinator.answer()
    ((index, error),) = (await task).items()
    assert index == 0 and isinstance(error, InvalidTxnStateError)
    assert "not part of an ongoing transaction" in str(error)


@pytest.mark.asyncio
async def test_the_clients_own_abort_during_a_verification_refuses_the_append() -> None:
    """Before transaction version 2 the abort's marker keeps the epoch: the entry changed and
    its transaction is closed, so the verification no longer holds (Kafka's guard)."""
    coordinator, partitions, verifier = setup()
    partitions.entries[("t", 0)] = entry(0)
    task = asyncio.ensure_future(verifier.verify("tx", produced(("t", 0, batch())), 11))
    await asyncio.sleep(0)
    # A marker at epoch 0: none open, its timestamp and coordinator epoch.
    partitions.entries[("t", 0)] = ProducerEntry(PID, 0, (), 5, NO_OFFSET, 1)
    coordinator.answer()
    ((index, error),) = (await task).items()
    assert index == 0 and isinstance(error, InvalidTxnStateError)


@pytest.mark.asyncio
async def test_verification_turned_off_skips_the_verifying_versions_only() -> None:
    coordinator, partitions, _ = setup()
    enabled = [False]
    verifier = ProduceVerifier(coordinator, partitions.lookup, lambda: enabled[0])
    for version in (3, 11):
        assert await verifier.verify("tx", produced(("t", 0, batch())), version) == {}
    assert coordinator.asked == []
    # Transaction version 2 still adds the partition, as Kafka's leader does.
    task = asyncio.ensure_future(verifier.verify("tx", produced(("t", 0, batch())), 12))
    await asyncio.sleep(0)
    assert [a.verify_only for a in coordinator.asked] == [False]
    coordinator.answer()
    assert await task == {}
    # The setting is dynamic: read at each request.
    enabled[0] = True
    task = asyncio.ensure_future(verifier.verify("tx", produced(("t", 0, batch())), 11))
    await asyncio.sleep(0)
    assert [a.verify_only for a in coordinator.asked] == [False, True]
    coordinator.answer()
    assert await task == {}


@pytest.mark.asyncio
async def test_the_previous_transactions_marker_during_the_verification_is_no_refusal() -> None:
    """Transaction version 2: the next transaction's first produce (epoch 1) races the
    previous transaction's marker (written at the bumped epoch 1)."""
    coordinator, partitions, verifier = setup()
    partitions.entries[("t", 0)] = entry(0, txn_first=0)
    task = asyncio.ensure_future(verifier.verify("tx", produced(("t", 0, batch(epoch=1))), 12))
    await asyncio.sleep(0)
    partitions.entries[("t", 0)] = entry(1)  # the marker closing epoch 0's transaction
    coordinator.answer()
    assert await task == {}


async def answer_concurrent_until(coordinator: Coordinator, task: asyncio.Future[object]) -> None:
    """Answer every question CONCURRENT_TRANSACTIONS until `task` is done."""
    while not task.done():
        if coordinator.pending:
            coordinator.answer({("t", 0): ConcurrentTransactionsError("markers being written")})
        await asyncio.sleep(0.001)


@pytest.mark.asyncio
async def test_an_add_answered_concurrent_transactions_is_asked_again_for_a_while() -> None:
    coordinator, _, verifier = setup()
    records = produced(("t", 0, batch(epoch=2)))
    task = asyncio.ensure_future(verifier.verify("tx", records, 12))
    await asyncio.sleep(0)
    coordinator.answer({("t", 0): ConcurrentTransactionsError("markers being written")})
    for _ in range(1000):  # a second ask within ADD_RETRY_BACKOFF_MS and a scheduler's delay
        if len(coordinator.asked) == 2 or task.done():
            break
        await asyncio.sleep(0.001)
    assert not task.done(), await task
    assert coordinator.asked[0] == coordinator.asked[1]
    coordinator.answer()  # the markers are written: the partition is added
    assert await task == {}
    # Still completing after ADD_RETRY_MAX_MS: the client is told CONCURRENT_TRANSACTIONS.
    asked_before = len(coordinator.asked)
    task = asyncio.ensure_future(verifier.verify("tx", records, 12))
    await answer_concurrent_until(coordinator, task)
    (refused,) = (await task).values()
    assert type(refused) is ConcurrentTransactionsError
    asks = len(coordinator.asked) - asked_before
    assert 2 <= asks <= ADD_RETRY_MAX_MS // ADD_RETRY_BACKOFF_MS + 1, asks
    # A verification (v11) is not retried: NOT_ENOUGH_REPLICAS at once, the producer retries.
    asked_before = len(coordinator.asked)
    task = asyncio.ensure_future(verifier.verify("tx", records, 11))
    await answer_concurrent_until(coordinator, task)
    assert [type(e) for e in (await task).values()] == [NotEnoughReplicasError]
    assert len(coordinator.asked) - asked_before == 1
