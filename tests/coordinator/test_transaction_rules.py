"""The transaction coordinator's decisions, case by case, against Kafka 4.x's answers."""

from __future__ import annotations

import pytest
from txn_coordinator_driver import MAX_TIMEOUT_MS, Driver, add, end, init

from replog.coordinator.transaction_metadata import (
    EPOCH_EXHAUSTED,
    IllegalTransition,
    TxnMetadata,
    TxnState,
    complete,
    prepare_add_partitions,
    prepare_dead,
)
from replog.coordinator.transaction_rules import (
    Answer,
    Append,
    Refuse,
    abort_timed_out,
    add_partitions,
    expired_ids,
    init_producer_id,
    timed_out,
    verify_partitions,
)
from replog.errors import (
    ConcurrentTransactionsError,
    InvalidProducerIdMappingError,
    InvalidRequestError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    ProducerFencedError,
    TransactionAbortableError,
)

TP = ("orders", 0)


@pytest.mark.parametrize("version", [0, 2])
def test_a_committed_transaction_walks_through_every_state(version):
    d = Driver()
    first = init(d, version=version)
    assert first.error is None and first.producer_epoch == 0
    pid = first.producer_id
    assert add(d, pid, 0, version=version).error is None
    assert d.meta.state is TxnState.ONGOING and d.meta.partitions == {TP}
    # partitions already in the transaction: answered without an append
    before = len(d.log)
    assert add(d, pid, 0, version=version).error is None and len(d.log) == before
    done = end(d, pid, 0, True, version=version)
    assert done.error is None
    bumped = 1 if version >= 2 else 0  # transaction version 2 bumps the epoch at every EndTxn
    assert d.markers == [(pid, bumped, True)]
    assert d.meta.state is TxnState.COMPLETE_COMMIT and d.meta.partitions == frozenset()
    assert [r.state for r in d.log] == [
        TxnState.EMPTY,
        TxnState.ONGOING,
        TxnState.PREPARE_COMMIT,
        TxnState.COMPLETE_COMMIT,
    ]
    # the next transaction starts from Complete*
    assert add(d, pid, bumped, version=version).error is None


def test_a_null_transactional_id_gets_a_fresh_producer_id_each_time():
    d = Driver()
    a = d.apply(
        init_producer_id(
            None, None, 1, None, now_ms=0, max_timeout_ms=1, allocate=d.allocate, server_version=2
        )
    )
    b = d.apply(
        init_producer_id(
            None, None, 1, None, now_ms=0, max_timeout_ms=1, allocate=d.allocate, server_version=2
        )
    )
    assert (a.error, a.producer_epoch, b.producer_epoch) == (None, 0, 0)
    assert a.producer_id != b.producer_id and d.log == []


@pytest.mark.parametrize("timeout_ms", [0, -5, MAX_TIMEOUT_MS + 1])
def test_a_timeout_outside_the_brokers_maximum_is_refused_and_named(timeout_ms):
    d = Driver()
    decision = init_producer_id(
        None,
        "t",
        timeout_ms,
        None,
        now_ms=0,
        max_timeout_ms=MAX_TIMEOUT_MS,
        allocate=d.allocate,
        server_version=2,
    )
    assert isinstance(decision, Refuse) and decision.error is InvalidTransactionTimeoutError
    assert str(timeout_ms) in decision.message and "transaction.max.timeout.ms" in decision.message


def test_an_empty_transactional_id_is_an_invalid_request():
    d = Driver(tid="")
    assert init(d).error is InvalidRequestError
    assert add(d, 1, 0).error is InvalidRequestError
    assert end(d, 1, 0, True).error is InvalidRequestError


@pytest.mark.parametrize("version", [0, 2])
def test_a_new_producer_fences_the_zombie_and_aborts_its_transaction(version):
    d = Driver()
    zombie = init(d, version=version)
    pid = zombie.producer_id
    add(d, pid, 0, version=version)
    newcomer = init(d, version=version)
    # the coordinator aborts the zombie's transaction and asks the newcomer to retry
    assert newcomer.error is ConcurrentTransactionsError
    assert d.meta.state is TxnState.COMPLETE_ABORT
    ((marker_pid, marker_epoch, commit),) = d.markers
    assert (marker_pid, commit) == (pid, False) and marker_epoch >= 1
    retried = init(d, version=version)
    assert retried.error is None and retried.producer_epoch > marker_epoch
    # the zombie can do nothing any more
    assert add(d, pid, 0, version=version).error is ProducerFencedError
    assert end(d, pid, 0, True, version=version).error is ProducerFencedError
    # the newcomer can
    assert add(d, pid, retried.producer_epoch, version=version).error is None


def test_init_while_the_previous_transaction_completes_is_concurrent_transactions():
    d = Driver()
    pid = init(d).producer_id
    add(d, pid, 0)
    end(d, pid, 0, True, write_markers=False)
    assert d.meta.state is TxnState.PREPARE_COMMIT
    assert init(d).error is ConcurrentTransactionsError
    assert add(d, pid, 1).error is ConcurrentTransactionsError
    assert ConcurrentTransactionsError.retriable


@pytest.mark.parametrize("version", [0, 2])
@pytest.mark.parametrize("first_commit", [True, False])
@pytest.mark.parametrize("then_commit", [True, False])
def test_end_txn_while_the_previous_ones_markers_are_written_waits(
    version, first_commit, then_commit
):
    # Kafka (KAFKA-18464): a pending transition is CONCURRENT_TRANSACTIONS before the epoch is
    # looked at; with version 2 the next EndTxn carries the epoch the previous one bumped to
    d = Driver()
    pid = init(d, version=version).producer_id
    add(d, pid, 0, version=version)
    first = end(d, pid, 0, first_commit, version=version, write_markers=False)
    assert first.error is None
    bumped = first.producer_epoch
    assert bumped == (1 if version >= 2 else 0)
    for epoch in (bumped, 0):  # the next transaction's EndTxn, and a retry of the first
        waits = end(d, pid, epoch, then_commit, version=version)
        assert waits.error is ConcurrentTransactionsError, (epoch, waits)
    assert d.meta.producer_epoch == bumped and len(d.markers) == 0
    d.finish_markers()
    after = end(d, pid, bumped, False, version=version)  # the abort the client retries
    if version >= 2:  # an abort with no partition: one more bump
        assert after.error is None and after.producer_epoch == bumped + 1
    elif first_commit:  # version 1: nothing to abort after a commit
        assert after.error is InvalidTxnStateError
    else:  # version 1: the repeated abort is answered
        assert after.error is None
    assert end(d, pid + 1, bumped, False, version=version).error is (InvalidProducerIdMappingError)


def test_a_producer_id_the_coordinator_does_not_hold_is_a_mapping_error():
    d = Driver()
    assert add(d, 5, 0).error is InvalidProducerIdMappingError  # no state at all
    pid = init(d).producer_id
    assert add(d, pid + 1, 0).error is InvalidProducerIdMappingError
    assert end(d, pid + 1, 0, False).error is InvalidProducerIdMappingError


def test_kip_360_an_expected_producer_id_of_someone_else_is_fenced():
    d = Driver()
    pid = init(d).producer_id
    assert init(d, expected=(pid + 7, 0)).error is ProducerFencedError
    ok = init(d, expected=(pid, 0))
    assert ok.error is None and ok.producer_epoch == 1
    # the same request retried after its answer was lost: the same epoch, not a second bump
    again = init(d, expected=(pid, 0))
    assert again.error is None and again.producer_epoch == 1


def test_end_txn_version_1_rules():
    d = Driver()
    pid = init(d, version=0).producer_id
    assert end(d, pid, 0, True, version=0).error is InvalidTxnStateError  # no transaction
    add(d, pid, 0, version=0)
    assert end(d, pid, 0, True, version=0).error is None
    assert end(d, pid, 0, True, version=0).error is None  # a repeated commit is answered
    assert end(d, pid, 0, False, version=0).error is InvalidTxnStateError
    assert end(d, pid, 1, True, version=0).error is ProducerFencedError  # no bump in version 1


# Kafka's table for transaction version 2 in Empty and Complete*: a retry is the caller's epoch
# one below the stored one; "EB" an epoch bump (an abort with no partition), "NONE" answered.
V2_TABLE = {
    (TxnState.EMPTY, False, True): ProducerFencedError,
    (TxnState.EMPTY, False, False): "EB",
    (TxnState.EMPTY, True, True): ProducerFencedError,
    (TxnState.EMPTY, True, False): InvalidTxnStateError,
    (TxnState.COMPLETE_ABORT, False, True): "NONE",
    (TxnState.COMPLETE_ABORT, False, False): "EB",
    (TxnState.COMPLETE_ABORT, True, True): InvalidTxnStateError,
    (TxnState.COMPLETE_ABORT, True, False): InvalidTxnStateError,
    (TxnState.COMPLETE_COMMIT, False, True): InvalidTxnStateError,
    (TxnState.COMPLETE_COMMIT, False, False): "EB",
    (TxnState.COMPLETE_COMMIT, True, True): "NONE",
    (TxnState.COMPLETE_COMMIT, True, False): InvalidTxnStateError,
}


def _driver_in(state: TxnState) -> tuple[Driver, int]:
    d = Driver()
    pid = init(d).producer_id
    init(d)  # epoch 1, so that "one below" exists in Empty too
    if state is not TxnState.EMPTY:
        add(d, pid, 1)
        end(d, pid, 1, state is TxnState.COMPLETE_COMMIT)
    assert d.meta.state is state
    return d, pid


@pytest.mark.parametrize(("state", "commit", "retry"), sorted(V2_TABLE, key=str))
def test_end_txn_version_2_table(state, commit, retry):
    d, pid = _driver_in(state)
    epoch = d.meta.producer_epoch - (1 if retry else 0)
    before = d.meta.producer_epoch
    outcome = end(d, pid, epoch, commit)
    expected = V2_TABLE[(state, commit, retry)]
    if expected == "EB":
        assert outcome.error is None and d.meta.state is TxnState.COMPLETE_ABORT
        assert d.meta.producer_epoch == before + 1
    elif expected == "NONE":
        assert outcome.error is None and (outcome.producer_id, outcome.producer_epoch) == (
            pid,
            before,
        )
        assert d.meta.producer_epoch == before
    else:
        assert outcome.error is expected and d.meta.producer_epoch == before


def test_an_exhausted_epoch_rotates_to_a_new_producer_id():
    d = Driver()
    first = init(d)
    d.meta = TxnMetadata(d.tid, first.producer_id, producer_epoch=EPOCH_EXHAUSTED, last_update_ms=0)
    rotated = init(d, expected=(first.producer_id, EPOCH_EXHAUSTED))
    assert rotated.error is None and rotated.producer_epoch == 0
    assert rotated.producer_id != first.producer_id
    # the retry of that rotation (its answer lost) is recognised by the previous producer id
    again = init(d, expected=(first.producer_id, EPOCH_EXHAUSTED))
    assert again.error is None


def test_version_2_end_txn_at_an_exhausted_epoch_hands_over_a_new_producer_id():
    d = Driver()
    pid = init(d).producer_id
    d.meta = TxnMetadata(d.tid, pid, producer_epoch=EPOCH_EXHAUSTED, last_update_ms=0)
    add(d, pid, EPOCH_EXHAUSTED)
    done = end(d, pid, EPOCH_EXHAUSTED, True)
    assert done.error is None
    assert d.meta.state is TxnState.COMPLETE_COMMIT
    assert d.meta.producer_id != pid and d.meta.producer_epoch == 0
    # the markers went out under the old producer id at the last epoch
    assert d.markers[-1][:2] == (pid, EPOCH_EXHAUSTED + 1)
    # a retry of that EndTxn (the old id at the exhausted epoch) is answered, not fenced
    assert end(d, pid, EPOCH_EXHAUSTED, True).error is None


def test_a_failed_fence_append_does_not_bump_the_epoch_twice():
    d = Driver()
    pid = init(d, version=0).producer_id
    add(d, pid, 0, version=0)
    failed = init(d, version=0, append_ok=False)
    assert failed.error is not None and d.meta.failed_epoch_fence
    bumped = d.meta.producer_epoch
    assert init(d, version=0).error is ConcurrentTransactionsError
    assert d.markers[-1] == (pid, bumped, False)  # the second fence used the same epoch


def test_a_timed_out_transaction_is_fenced_and_aborted_by_the_coordinator():
    d = Driver()
    pid = init(d, timeout_ms=1000).producer_id
    add(d, pid, 0, now_ms=5)
    assert timed_out([d.meta], now_ms=1005) == []
    (late,) = timed_out([d.meta], now_ms=1006)
    decision = abort_timed_out(late, now_ms=1006, server_version=2, allocate=d.allocate)
    assert isinstance(decision, Append) and decision.fence
    assert d.apply(decision).error is None
    assert d.meta.state is TxnState.COMPLETE_ABORT
    assert add(d, pid, 0).error is ProducerFencedError


def test_verification_names_partitions_outside_the_transaction():
    d = Driver()
    pid = init(d).producer_id
    add(d, pid, 0)
    other = ("orders", 1)
    assert verify_partitions(d.meta, d.tid, pid, 0, [TP, other]) == {
        TP: None,
        other: TransactionAbortableError,
    }
    assert verify_partitions(d.meta, d.tid, pid, 9, [TP]) == {TP: ProducerFencedError}
    assert verify_partitions(None, d.tid, pid, 0, [TP]) == {TP: InvalidProducerIdMappingError}


def test_a_second_transition_while_one_is_pending_is_a_bug_not_an_answer():
    d = Driver()
    pid = init(d).producer_id
    decision = add_partitions(d.meta, d.tid, pid, 0, [TP], now_ms=0, version=2)
    assert isinstance(decision, Append)
    # the rules answer CONCURRENT_TRANSACTIONS while the append is in flight ...
    again = add_partitions(decision.pending, d.tid, pid, 0, [("x", 0)], now_ms=0, version=2)
    assert isinstance(again, Refuse) and again.error is ConcurrentTransactionsError
    # ... and the state machine refuses to prepare a second one
    with pytest.raises(IllegalTransition):
        prepare_add_partitions(decision.pending, frozenset({("x", 0)}), 0, 2)
    # completing with a record of another state is refused too
    with pytest.raises(IllegalTransition):
        complete(decision.pending, d.meta)


def test_answer_without_append_carries_no_record():
    d = Driver()
    pid = init(d).producer_id
    add(d, pid, 0)
    decision = add_partitions(d.meta, d.tid, pid, 0, [TP], now_ms=0, version=2)
    assert decision == Answer(pid, 0)


def test_idle_ids_expire_but_not_one_in_a_transaction():
    d = Driver()
    pid = init(d, now_ms=0).producer_id
    assert expired_ids([d.meta], now_ms=999, expiration_ms=1000) == []
    assert expired_ids([d.meta], now_ms=1000, expiration_ms=1000) == [d.meta]
    add(d, pid, 0, now_ms=5)
    assert expired_ids([d.meta], now_ms=10**9, expiration_ms=1000) == []  # Ongoing
    end(d, pid, 0, False, now_ms=6)
    (idle,) = expired_ids([d.meta], now_ms=1006, expiration_ms=1000)
    pending, tombstone = prepare_dead(idle)
    assert tombstone.state is TxnState.DEAD and pending.pending is TxnState.DEAD
