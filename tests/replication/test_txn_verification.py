"""The leader's transaction verification rules (KIP-890): which batches ask the coordinator,
what they ask by request version, when a verification goes stale (the race Kafka's
VerificationGuard closes, as a scenario on a partition's producer state), what each
coordinator answer becomes for the client, when an add is asked again (Kafka's
AddPartitionsToTxnManager and ReplicaManager), and transaction.partition.verification.enable."""

from __future__ import annotations

import pytest

from replog.common.offsets import NO_OFFSET
from replog.errors import (
    ConcurrentTransactionsError,
    ConfigError,
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
from replog.record.control_record import EndTxnMarker
from replog.replication.producer_state import ProducerEntry, ProducerStateTable
from replog.replication.txn_verification import (
    ADD_RETRY_BACKOFF_MS,
    ADD_RETRY_MAX_MS,
    VERIFICATION_ENABLE,
    TxnOperation,
    add_retry_delay_ms,
    check_static_verification,
    client_error,
    needs_verification,
    operation_for_produce,
    operation_for_txn_offset_commit,
    skips_verification,
    still_verified,
    verification_enabled,
)
from tests.replication.test_producer_state_transactions import marker_batch, txn_batch

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


def test_a_verification_holds_until_a_marker_ends_the_transaction() -> None:
    before = entry(0)
    for op in (DEFAULT, GENERIC, ADD):
        assert still_verified(before, before, 0, op)  # nothing happened
        assert still_verified(None, None, 0, op)
        assert still_verified(before, entry(0, txn_first=9), 0, op)  # opened at the epoch: fine
        # The coordinator fenced and aborted the verified transaction: its marker's epoch is
        # above the batch's.
        assert not still_verified(entry(1), entry(2), 1, op)
        assert not still_verified(None, entry(1), 0, op)
    # Transaction version 2: the previous transaction's marker carries the bumped epoch, the
    # one the next transaction's first batch has; landing during the verification it ends
    # the previous transaction, not the verified one.
    assert still_verified(entry(0, txn_first=3), entry(1), 1, ADD)
    # Before version 2 a marker at the batch's epoch is the client's own abort (or commit) of
    # the verified transaction: appending would open one the coordinator does not know.
    assert not still_verified(entry(0, txn_first=3), entry(0), 0, DEFAULT)
    # A same-epoch marker where no transaction was open: its timestamp and coordinator epoch.
    assert not still_verified(entry(0), ProducerEntry(7, 0, (), 5, NO_OFFSET, 3), 0, GENERIC)


def test_the_race_a_guard_closes_scenario_on_a_partitions_producer_state() -> None:
    """Kafka's VerificationGuard scenario on `__consumer_offsets`: a TxnOffsetCommit of a
    transaction already open there is verified; before the coordinator's answer arrives, the
    client aborts (a same-epoch ABORT marker); the verified append would now open a
    transaction the coordinator does not know, and is refused. The next transaction's own
    first TxnOffsetCommit is verified afresh and holds."""
    table = ProducerStateTable("__consumer_offsets-0")
    table.update(txn_batch(7, 0, -1, base_offset=10))  # an earlier commit of the transaction
    before = table.entry(7)
    assert not needs_verification(before, 0)  # open at the epoch (Kafka would not even ask)
    table.update(
        marker_batch(7, 0, base_offset=11), EndTxnMarker(aborted=True, coordinator_epoch=0)
    )
    assert not still_verified(before, table.entry(7), 0, GENERIC)
    # The next transaction asks afresh; nothing lands meanwhile: it holds.
    before = table.entry(7)
    assert needs_verification(before, 0)
    assert still_verified(before, table.entry(7), 0, GENERIC)
    # Transaction version 2 (v5, an add): the epoch-0 transaction's COMMIT marker at the
    # bumped epoch 1 lands while epoch 1's first commit is added: it still holds.
    table.update(txn_batch(7, 0, -1, base_offset=20))
    before = table.entry(7)
    table.update(
        marker_batch(7, 1, base_offset=21), EndTxnMarker(aborted=False, coordinator_epoch=0)
    )
    assert still_verified(before, table.entry(7), 1, ADD)
    # ... and a marker ending epoch 1's own transaction (epoch 2) does not.
    assert not still_verified(before, entry(2), 1, ADD)


def test_a_reload_of_the_producer_state_between_verify_and_append_keeps_it() -> None:
    """The partition's producer state rebuilt from its log (a replay: new, equal entries)
    while the coordinator answers the first batch of the producer's next transaction:
    nothing ended it, so the verification holds; a marker replayed with it does end it."""
    table = ProducerStateTable("t-0")
    done = [
        (txn_batch(7, 0, -1, base_offset=10), None),
        (marker_batch(7, 0, base_offset=11), EndTxnMarker(aborted=False, coordinator_epoch=0)),
    ]
    table.replay(done)
    before = table.entry(7)
    assert needs_verification(before, 0)
    table.replay(done)
    assert table.entry(7) is not before
    for op in (DEFAULT, GENERIC, ADD):
        assert still_verified(before, table.entry(7), 0, op)
    abort = (marker_batch(7, 0, base_offset=12), EndTxnMarker(aborted=True, coordinator_epoch=1))
    table.replay([*done, abort])
    assert not still_verified(before, table.entry(7), 0, GENERIC)


def test_verification_is_on_unless_the_strongest_level_turns_it_off() -> None:
    assert VERIFICATION_ENABLE == "transaction.partition.verification.enable"
    assert verification_enabled([]) is True  # Kafka's default
    assert verification_enabled([{}, {VERIFICATION_ENABLE: "FALSE"}, {}]) is False
    # This broker's level over the cluster default over server.properties.
    broker, cluster, static = {VERIFICATION_ENABLE: "true"}, {VERIFICATION_ENABLE: "false"}, {}
    assert verification_enabled([broker, cluster, static]) is True
    assert verification_enabled([{}, cluster, {VERIFICATION_ENABLE: "true"}]) is False
    # Off, only the clients that merely verify skip it; an add is asked regardless.
    assert [skips_verification(False, op) for op in (DEFAULT, GENERIC, ADD)] == [
        True,
        True,
        False,
    ]
    assert not any(skips_verification(True, op) for op in (DEFAULT, GENERIC, ADD))
    check_static_verification({VERIFICATION_ENABLE: " True "})
    check_static_verification({})
    with pytest.raises(ConfigError, match=r"transaction\.partition\.verification\.enable='yes'"):
        check_static_verification({VERIFICATION_ENABLE: "yes"})


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
