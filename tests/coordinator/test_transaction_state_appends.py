"""What a failed append to `__transaction_state` answers (Kafka's appendTransactionToLog)."""

from __future__ import annotations

import pytest

from replog.coordinator.transaction_rules import state_append_error
from replog.errors import (
    CoordinatorNotAvailableError,
    KafkaError,
    KafkaStorageError,
    MessageSizeTooLargeError,
    NotCoordinatorError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RecordBatchTooLargeError,
    RequestTimedOutError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)


@pytest.mark.parametrize(
    ("failure", "answer"),
    [
        (UnknownTopicOrPartitionError, CoordinatorNotAvailableError),
        (NotEnoughReplicasError, CoordinatorNotAvailableError),
        (NotEnoughReplicasAfterAppendError, CoordinatorNotAvailableError),
        (RequestTimedOutError, CoordinatorNotAvailableError),
        (NotLeaderOrFollowerError, NotCoordinatorError),
        (KafkaStorageError, NotCoordinatorError),
        (MessageSizeTooLargeError, UnknownServerError),
        (RecordBatchTooLargeError, UnknownServerError),
    ],
)
def test_the_answer_names_where_and_why(failure: type[KafkaError], answer: type) -> None:
    error = state_append_error(failure("2 of 3 in sync"), "transactional id 'tx'")
    assert type(error) is answer
    assert str(error) == (
        f"transactional id 'tx': the transaction state could not be written: "
        f"{failure.error_name}: 2 of 3 in sync"
    )
