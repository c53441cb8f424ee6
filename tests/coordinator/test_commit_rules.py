"""The commit rules: group ids, per-partition refusals in Kafka's order, and what a failed
append of a commit means to the committer."""

from __future__ import annotations

import pytest

from replog.coordinator.commit_rules import (
    append_error,
    commit_errors,
    group_append_error,
    group_id_problem,
    java_string_length,
)
from replog.coordinator.messages import CommitEntry
from replog.errors import (
    CoordinatorNotAvailableError,
    IllegalGenerationError,
    InvalidCommitOffsetSizeError,
    InvalidFetchSizeError,
    InvalidGroupIdError,
    KafkaError,
    KafkaStorageError,
    MessageSizeTooLargeError,
    NotCoordinatorError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetMetadataTooLargeError,
    RecordBatchTooLargeError,
    RequestTimedOutError,
    UnknownMemberIdError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)


def exists(topic: str, partition: int) -> bool:
    return topic == "t" and 0 <= partition < 3


def test_group_ids() -> None:
    error = group_id_problem("")
    assert isinstance(error, InvalidGroupIdError) and "empty" in str(error)
    assert group_id_problem("g") is None
    assert group_id_problem("é" * 16383) is None  # 32766 bytes
    too_long = group_id_problem("é" * 16384)
    assert isinstance(too_long, InvalidGroupIdError) and "32768 UTF-8 bytes" in str(too_long)


def test_a_commit_without_membership_is_accepted() -> None:
    entries = [CommitEntry("t", 0, 5), CommitEntry("t", 2, 0, 3, "m" * 4096)]
    assert commit_errors("g", -1, "", entries, partition_exists=exists) == {}


def test_per_partition_refusals_in_kafkas_order() -> None:
    entries = [
        CommitEntry("t", 0, 5, metadata="x" * 4097),
        CommitEntry("t", 7, 5),
        CommitEntry("gone", 0, 5),
        CommitEntry("t", -1, 5),
        CommitEntry("t", 1, 5),
    ]
    refused = commit_errors("g", -1, "", entries, partition_exists=exists)
    assert sorted(refused) == [0, 1, 2, 3]
    assert isinstance(refused[0], OffsetMetadataTooLargeError)
    assert "4097 characters" in str(refused[0]) and "offset.metadata.max.bytes is 4096" in str(
        refused[0]
    )
    for index in (1, 2, 3):
        assert isinstance(refused[index], UnknownTopicOrPartitionError)
    assert "t-7" in str(refused[1]) and "gone-0" in str(refused[2])


def test_membership_refusals_name_the_generation_and_member() -> None:
    entries = [CommitEntry("t", 0, 5), CommitEntry("nope", 0, 1)]
    refused = commit_errors("g", 4, "", entries, partition_exists=exists)
    assert isinstance(refused[0], IllegalGenerationError) and "generation 4" in str(refused[0])
    # An unknown partition is reported as such before the membership (Kafka's order).
    assert isinstance(refused[1], UnknownTopicOrPartitionError)
    refused = commit_errors("g", -1, "member-1", entries[:1], partition_exists=exists)
    assert isinstance(refused[0], UnknownMemberIdError) and "'member-1'" in str(refused[0])
    # A generation >= 0 wins over the member, as in Kafka (no such generation at all).
    refused = commit_errors("g", 0, "member-1", entries[:1], partition_exists=exists)
    assert isinstance(refused[0], IllegalGenerationError)


def test_metadata_is_measured_as_java_does() -> None:
    assert java_string_length("\U0001f600") == 2  # one character, two UTF-16 code units
    refused = commit_errors(
        "g",
        -1,
        "",
        [CommitEntry("t", 0, 1, metadata="\U0001f600" * 3)],
        partition_exists=exists,
        metadata_max_bytes=5,
    )
    assert isinstance(refused[0], OffsetMetadataTooLargeError)
    assert (
        commit_errors(
            "g",
            -1,
            "",
            [CommitEntry("t", 0, 1, metadata="\U0001f600" * 2)],
            partition_exists=exists,
            metadata_max_bytes=4,
        )
        == {}
    )


@pytest.mark.parametrize(
    ("cause", "expected"),
    [
        (UnknownTopicOrPartitionError, CoordinatorNotAvailableError),
        (NotEnoughReplicasError, CoordinatorNotAvailableError),
        (NotEnoughReplicasAfterAppendError, CoordinatorNotAvailableError),
        (NotLeaderOrFollowerError, NotCoordinatorError),
        (KafkaStorageError, NotCoordinatorError),
        (MessageSizeTooLargeError, InvalidCommitOffsetSizeError),
        (RecordBatchTooLargeError, InvalidCommitOffsetSizeError),
        (InvalidFetchSizeError, InvalidCommitOffsetSizeError),
        (RequestTimedOutError, RequestTimedOutError),
    ],
)
def test_append_errors_map_as_kafkas_coordinator_maps_them(
    cause: type[KafkaError], expected: type[KafkaError]
) -> None:
    mapped = append_error(cause("__consumer_offsets-3: the cause"), "group 'g'")
    assert type(mapped) is expected
    assert "the cause" in str(mapped)


@pytest.mark.parametrize(
    ("cause", "expected"),
    [
        (RequestTimedOutError, CoordinatorNotAvailableError),
        (NotEnoughReplicasError, CoordinatorNotAvailableError),
        (NotLeaderOrFollowerError, NotCoordinatorError),
        (MessageSizeTooLargeError, UnknownServerError),
    ],
)
def test_group_append_errors_map_as_kafkas_group_coordinator_maps_them(
    cause: type[KafkaError], expected: type[KafkaError]
) -> None:
    mapped = group_append_error(cause("__consumer_offsets-3: the cause"), "groups ['g']")
    assert type(mapped) is expected
    assert "the cause" in str(mapped)
