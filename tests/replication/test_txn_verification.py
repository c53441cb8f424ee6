"""The leader's transaction verification rules (KIP-890): which batches ask the coordinator,
what they ask by request version, when a verification goes stale, what each coordinator
answer becomes for the client, and when an add is asked again (Kafka's
AddPartitionsToTxnManager and ReplicaManager)."""

from __future__ import annotations

import pytest

from replog.common.offsets import NO_OFFSET
from replog.errors import (
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTxnStateError,
    KafkaError,
    NetworkError,
    NotCoordinatorError,
    NotEnoughReplicasError,
    ProducerFencedError,
    RequestTimedOutError,
    TransactionAbortableError,
    error_for_code,
)
from replog.replication.producer_state import ProducerEntry
from replog.replication.txn_verification import (
    ADD_RETRY_BACKOFF_MS,
    ADD_RETRY_MAX_MS,
    TxnOperation,
    add_retry_delay_ms,
    client_error,
    needs_verification,
    operation_for_produce,
    operation_for_txn_offset_commit,
    still_verified,
)

DEFAULT, GENERIC, ADD = (
    TxnOperation.DEFAULT_ERROR,
    TxnOperation.GENERIC_ERROR_SUPPORTED,
    TxnOperation.ADD_PARTITION,
)


def entry(epoch: int, txn_first: int = NO_OFFSET) -> ProducerEntry:
    return ProducerEntry(7, epoch, (), 0, txn_first)


def test_the_request_version_says_whether_the_leader_adds_or_verifies() -> None:
    assert [operation_for_produce(v) for v in (3, 10, 11, 12)] == [DEFAULT, DEFAULT, GENERIC, ADD]
    assert [operation_for_txn_offset_commit(v) for v in (0, 3, 4, 5)] == [
        DEFAULT,
        DEFAULT,
        GENERIC,
        ADD,
    ]
    assert [op.adds for op in (DEFAULT, GENERIC, ADD)] == [False, False, True]


def test_only_a_batch_outside_an_open_transaction_at_its_epoch_asks() -> None:
    assert needs_verification(None, 0)  # unknown producer
    assert needs_verification(entry(0), 0)  # known, no transaction open
    assert not needs_verification(entry(0, txn_first=5), 0)  # its transaction is open
    # Transaction version 2 bumps the epoch at every EndTxn: a new epoch is a new transaction.
    assert needs_verification(entry(0, txn_first=5), 1)


def test_a_verification_goes_stale_only_when_a_later_epoch_ended_the_transaction() -> None:
    before = entry(0)
    assert still_verified(before, before, 0)  # nothing happened
    assert still_verified(None, None, 0)
    assert still_verified(before, entry(0, txn_first=9), 0)  # opened at the epoch: fine
    # Transaction version 2: the previous transaction's marker carries the bumped epoch, the
    # one the next transaction's first batch has; landing during the verification it ends
    # the previous transaction, not the verified one.
    assert still_verified(entry(0, txn_first=3), entry(1), 1)
    # The coordinator fenced and aborted the verified transaction: its marker's epoch is
    # above the batch's.
    assert not still_verified(entry(1), entry(2), 1)
    assert not still_verified(None, entry(1), 0)


@pytest.mark.parametrize(
    ("error", "operation", "produce", "expected"),
    [
        (ProducerFencedError("x"), ADD, True, InvalidProducerEpochError),
        (ProducerFencedError("x"), DEFAULT, False, InvalidProducerEpochError),
        (error_for_code(31), GENERIC, True, InvalidTxnStateError),  # CLUSTER_AUTHORIZATION
        (TransactionAbortableError("x"), DEFAULT, True, InvalidTxnStateError),
        (TransactionAbortableError("x"), GENERIC, True, TransactionAbortableError),
        (TransactionAbortableError("x"), ADD, False, TransactionAbortableError),
        (InvalidTxnStateError("x"), ADD, True, InvalidTxnStateError),
        (NetworkError("x"), ADD, True, NotEnoughReplicasError),
        (CoordinatorLoadInProgressError("x"), GENERIC, True, NotEnoughReplicasError),
        (CoordinatorNotAvailableError("x"), DEFAULT, True, NotEnoughReplicasError),
        (NotCoordinatorError("x"), ADD, True, NotEnoughReplicasError),
        # A TxnOffsetCommit's client retries these itself, with the group coordinator.
        (CoordinatorNotAvailableError("x"), ADD, False, CoordinatorNotAvailableError),
        # Transaction version 2 clients expect CONCURRENT_TRANSACTIONS while a commit ends.
        (ConcurrentTransactionsError("x"), GENERIC, True, NotEnoughReplicasError),
        (ConcurrentTransactionsError("x"), ADD, True, ConcurrentTransactionsError),
        (InvalidProducerIdMappingError("x"), ADD, True, InvalidProducerIdMappingError),
        (RequestTimedOutError("x"), ADD, True, RequestTimedOutError),
    ],
)
def test_the_coordinators_answer_as_the_client_is_told_it(
    error: KafkaError, operation: TxnOperation, produce: bool, expected: type[KafkaError]
) -> None:
    told = client_error(error, operation, produce=produce, where="t-0 (transactional id 'x')")
    assert type(told) is expected
    assert "t-0 (transactional id 'x')" in str(told) or told is error


def test_an_add_answered_concurrent_transactions_is_retried_for_a_while() -> None:
    concurrent = ConcurrentTransactionsError("markers being written")
    assert add_retry_delay_ms([None, concurrent], ADD, 0) == ADD_RETRY_BACKOFF_MS == 20
    assert add_retry_delay_ms([concurrent], ADD, ADD_RETRY_MAX_MS - 1) == ADD_RETRY_BACKOFF_MS
    assert add_retry_delay_ms([concurrent], ADD, ADD_RETRY_MAX_MS) is None
    # Verification (v11-) is answered at once; other errors and none are not retried.
    assert add_retry_delay_ms([concurrent], GENERIC, 0) is None
    assert add_retry_delay_ms([concurrent], DEFAULT, 0) is None
    assert add_retry_delay_ms([ProducerFencedError("x"), None], ADD, 0) is None
    assert add_retry_delay_ms([], ADD, 0) is None
