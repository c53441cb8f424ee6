"""The transactional producer's state machine (replog/client/transaction_manager.py): Kafka's
transitions, misuse refused by name, answers classified as Kafka's handlers classify them,
the partitions to add under transaction versions 1 and 2, the epoch bump after abortable
errors; and a Hypothesis walk of random calls and answers against the rules."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.client.transaction_manager import Outcome, TransactionManager, TxnState, classify
from replog.common import TopicPartition
from replog.errors import (
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    KafkaError,
    KafkaTimeoutError,
    NotCoordinatorError,
    NotEnoughReplicasError,
    OperationNotAttemptedError,
    ProducerFencedError,
    ReplogError,
    TransactionAbortableError,
    TransactionStateError,
    UnknownMemberIdError,
    UnknownProducerIdError,
    UnknownTopicOrPartitionError,
    error_for_code,
)

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def ready(version2: bool = False) -> TransactionManager:
    tm = TransactionManager("tx", 60_000)
    tm.version2 = version2
    tm.begin_init()
    tm.on_producer_id(7, 0)
    return tm


def test_a_version_1_transaction_adds_each_partition_before_its_first_batch() -> None:
    tm = ready()
    assert tm.state is TxnState.READY and (tm.producer_id, tm.epoch) == (7, 0)
    tm.begin_transaction()
    tm.check_send(T0)
    tm.check_send(T1)
    assert not tm.can_send(T0)
    assert tm.partitions_to_add() == [T0, T1]
    assert tm.on_partitions_added({T0: None, T1: ConcurrentTransactionsError()}) is Outcome.RETRY
    assert tm.can_send(T0) and not tm.can_send(T1)
    assert tm.partitions_to_add() == [T1]
    assert tm.on_partitions_added({T1: None}) is Outcome.DONE
    tm.check_send(T0)  # already in: nothing more to add
    assert tm.partitions_to_add() == []
    assert tm.needs_add_offsets()
    tm.on_offsets_added()
    assert not tm.needs_add_offsets()
    tm.begin_commit()
    assert tm.needs_end_txn()
    assert tm.on_end_txn() is True
    assert tm.state is TxnState.READY and tm.epoch == 0
    assert not tm.can_send(T0) and tm.needs_add_offsets()  # the next transaction starts empty


def test_version_2_sends_at_once_and_takes_the_epoch_endtxn_answers() -> None:
    tm = ready(version2=True)
    tm.begin_transaction()
    tm.check_send(T0)
    assert tm.can_send(T0) and tm.partitions_to_add() == []
    assert not tm.needs_add_offsets()
    tm.begin_commit()
    assert tm.on_end_txn(7, 1) is True
    assert (tm.producer_id, tm.epoch) == (7, 1)


def test_a_commit_or_abort_called_again_resumes_the_one_under_way() -> None:
    tm = ready()
    tm.begin_transaction()
    tm.begin_commit()
    tm.begin_commit()  # after a timeout: the same commit goes on
    assert tm.state is TxnState.COMMITTING_TRANSACTION
    with pytest.raises(TransactionStateError, match="abort_transaction needs"):
        tm.begin_abort()
    tm.on_end_txn()
    tm.begin_transaction()
    tm.begin_abort()
    tm.begin_abort()
    assert tm.on_end_txn() is True


def test_an_empty_transaction_needs_no_endtxn() -> None:
    tm = ready()
    tm.begin_transaction()
    tm.begin_commit()
    assert not tm.needs_end_txn()
    assert tm.on_end_txn() is True


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda tm: tm.check_send(T0), "send needs state IN_TRANSACTION, not READY"),
        (lambda tm: tm.begin_commit(), "commit_transaction needs state IN_TRANSACTION"),
        (lambda tm: tm.begin_abort(), "abort_transaction needs state IN_TRANSACTION"),
        (lambda tm: tm.check_send_offsets(), "send_offsets_to_transaction needs"),
        (lambda tm: tm.begin_init(), "init_transactions is not allowed in state READY"),
    ],
)
def test_misuse_is_a_typed_error_naming_the_call_and_the_state(call, words: str) -> None:  # type: ignore[no-untyped-def]
    tm = ready()
    with pytest.raises(TransactionStateError, match=words) as raised:
        call(tm)
    assert "'tx'" in str(raised.value)
    assert tm.state is TxnState.READY  # nothing changed


def test_begin_before_init_and_twice_are_refused() -> None:
    tm = TransactionManager("tx", 60_000)
    with pytest.raises(TransactionStateError, match="begin_transaction needs state READY"):
        tm.begin_transaction()
    tm = ready()
    tm.begin_transaction()
    with pytest.raises(TransactionStateError, match="not IN_TRANSACTION"):
        tm.begin_transaction()


def test_an_abortable_error_allows_only_abort_then_the_producer_goes_on() -> None:
    tm = ready(version2=True)
    tm.begin_transaction()
    tm.check_send(T0)
    error = NotEnoughReplicasError("t-0")
    assert tm.fail(error) is Outcome.ABORTABLE
    assert tm.state is TxnState.ABORTABLE_ERROR
    for call in (lambda: tm.check_send(T1), tm.begin_commit, tm.check_send_offsets):
        with pytest.raises(NotEnoughReplicasError):
            call()
    assert tm.fail(TransactionAbortableError("later")) is Outcome.ABORTABLE
    assert tm.last_error is error  # the first cause is kept
    tm.begin_abort()
    assert tm.on_end_txn(7, 1) is True and tm.state is TxnState.READY
    tm.begin_transaction()


def test_version_1_abort_after_a_lost_sequence_bumps_the_epoch_with_init_producer_id() -> None:
    tm = ready()
    tm.begin_transaction()
    tm.check_send(T0)
    tm.on_partitions_added({T0: None})
    assert tm.fail(UnknownProducerIdError("t-0")) is Outcome.ABORTABLE
    assert tm.epoch_bump_required
    tm.begin_abort()
    assert tm.on_end_txn() is False
    assert tm.state is TxnState.INITIALIZING
    tm.on_producer_id(7, 1)
    assert tm.state is TxnState.READY and tm.epoch == 1 and not tm.epoch_bump_required


def test_version_2_abort_takes_the_bumped_epoch_from_endtxn() -> None:
    tm = ready(version2=True)
    tm.begin_transaction()
    tm.check_send(T0)
    tm.fail(KafkaTimeoutError("t-0 expired on the wire"))
    tm.begin_abort()
    assert tm.on_end_txn(7, 1) is True and tm.epoch == 1


@pytest.mark.parametrize(
    "error", [ProducerFencedError("x"), InvalidProducerEpochError("x")], ids=lambda e: e.error_name
)
def test_fencing_is_fatal_and_every_later_call_raises_it(error: KafkaError) -> None:
    tm = ready()
    tm.begin_transaction()
    assert tm.fail(error, "EndTxn") is Outcome.FATAL
    assert tm.state is TxnState.FATAL_ERROR
    for call in (tm.begin_abort, tm.begin_commit, tm.begin_transaction, tm.begin_init):
        with pytest.raises(type(error)):
            call()
    assert not tm.can_send(T0)


@pytest.mark.parametrize(
    ("code", "outcome"),
    [
        (ProducerFencedError.code, Outcome.FATAL),
        (53, Outcome.FATAL),  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        (31, Outcome.FATAL),  # CLUSTER_AUTHORIZATION_FAILED
        (InvalidProducerEpochError.code, Outcome.ABORTABLE),  # KIP-588: a bumped epoch
        (NotEnoughReplicasError.code, Outcome.ABORTABLE),
    ],
)
def test_a_failed_batch_is_fatal_only_by_kafkas_rule_for_batches(
    code: int, outcome: Outcome
) -> None:
    tm = ready()
    tm.begin_transaction()
    assert tm.fail(error_for_code(code, "t-0")) is outcome


def test_an_error_while_aborting_leaves_batches_aborted_but_a_failed_endtxn_is_fatal() -> None:
    tm = ready()
    tm.begin_transaction()
    tm.begin_abort()
    assert tm.fail(NotEnoughReplicasError("t-0")) is Outcome.ABORTABLE
    assert tm.state is TxnState.ABORTING_TRANSACTION
    assert tm.fail(InvalidTxnStateError("end"), "EndTxn") is Outcome.FATAL


@pytest.mark.parametrize(
    ("api", "error", "outcome"),
    [
        ("EndTxn", None, Outcome.DONE),
        ("EndTxn", NotCoordinatorError(), Outcome.FIND_COORDINATOR),
        ("InitProducerId", CoordinatorLoadInProgressError(), Outcome.RETRY),
        ("AddPartitionsToTxn", ConcurrentTransactionsError(), Outcome.RETRY),
        ("AddPartitionsToTxn", UnknownTopicOrPartitionError(), Outcome.RETRY),
        ("AddPartitionsToTxn", error_for_code(29), Outcome.ABORTABLE),
        ("AddPartitionsToTxn", UnknownProducerIdError(), Outcome.ABORTABLE),
        ("AddOffsetsToTxn", error_for_code(30), Outcome.ABORTABLE),
        ("TxnOffsetCommit", UnknownMemberIdError(), Outcome.ABORTABLE),
        ("TxnOffsetCommit", error_for_code(7), Outcome.FIND_COORDINATOR),  # REQUEST_TIMED_OUT
        ("EndTxn", TransactionAbortableError(), Outcome.ABORTABLE),
        ("EndTxn", ProducerFencedError(), Outcome.FATAL),
        ("EndTxn", InvalidTxnStateError(), Outcome.FATAL),
        ("InitProducerId", UnknownProducerIdError(), Outcome.FATAL),
        ("InitProducerId", error_for_code(53), Outcome.FATAL),
        ("EndTxn", error_for_code(87), Outcome.FATAL),  # a code EndTxn does not name
    ],
)
def test_answers_are_classified_as_kafkas_handlers_do(
    api: str, error: KafkaError | None, outcome: Outcome
) -> None:
    assert classify(api, error) is outcome


def test_operation_not_attempted_waits_for_the_partition_that_failed() -> None:
    tm = ready()
    tm.begin_transaction()
    tm.check_send(T0)
    tm.check_send(T1)
    result = tm.on_partitions_added(
        {T0: OperationNotAttemptedError(), T1: error_for_code(29)}  # TOPIC_AUTHORIZATION
    )
    assert result is Outcome.ABORTABLE and tm.state is TxnState.ABORTABLE_ERROR
    assert not tm.can_send(T0)


# --- a random walk ----------------------------------------------------------------------------

CALLS = ["init", "answer_init", "begin", "send", "add", "commit", "abort", "end", "fail", "fence"]


@settings(max_examples=400, deadline=None)
@given(st.booleans(), st.lists(st.tuples(st.sampled_from(CALLS), st.booleans()), max_size=40))
def test_random_calls_keep_the_rules(version2: bool, steps: list[tuple[str, bool]]) -> None:
    tm = TransactionManager("tx", 60_000)
    tm.version2 = version2
    fatal: ReplogError | None = None
    began = False  # a transaction began and has not ended
    for call, flag in steps:
        before = tm.state
        tp = T0 if flag else T1
        try:
            if call == "init":
                tm.begin_init()
            elif call == "answer_init":
                tm.on_producer_id(7, tm.epoch + 1)
            elif call == "begin":
                tm.begin_transaction()
                began = True
            elif call == "send":
                tm.check_send(tp)
                assert began and tm.state is TxnState.IN_TRANSACTION
                assert tm.can_send(tp) == (version2 or tp in tm.in_transaction)
            elif call == "add":
                tm.on_partitions_added({p: None for p in tm.partitions_to_add()})
                assert tm.partitions_to_add() == []
            elif call == "commit":
                tm.begin_commit()
                assert before in (TxnState.IN_TRANSACTION, TxnState.COMMITTING_TRANSACTION)
            elif call == "abort":
                tm.begin_abort()
                assert before in (
                    TxnState.IN_TRANSACTION,
                    TxnState.ABORTABLE_ERROR,
                    TxnState.ABORTING_TRANSACTION,
                )
            elif call == "end":
                ready_now = tm.on_end_txn(7, tm.epoch + 1)
                began = False
                assert not tm.in_transaction and not tm.pending_add
                assert ready_now == (tm.state is TxnState.READY)
            elif call == "fail":
                tm.fail(UnknownProducerIdError("t-0") if flag else NotEnoughReplicasError("t"))
            else:
                tm.fail(ProducerFencedError("another producer"))
                fatal = tm.last_error
        except TransactionStateError:
            assert tm.state is before and before is not TxnState.FATAL_ERROR
        except KafkaError as raised:
            # Only an error state raises its cause.
            assert before in (TxnState.FATAL_ERROR, TxnState.ABORTABLE_ERROR)
            assert raised is tm.last_error
        if fatal is not None:
            assert tm.state is TxnState.FATAL_ERROR and tm.last_error is fatal
        if tm.state is not TxnState.IN_TRANSACTION:
            assert not tm.pending_add or tm.state in (
                TxnState.COMMITTING_TRANSACTION,
                TxnState.ABORTING_TRANSACTION,
                TxnState.ABORTABLE_ERROR,
                TxnState.FATAL_ERROR,
            )
