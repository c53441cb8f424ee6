"""replog's error classes carry Kafka's wire codes, checked against kafka-python's table."""

from __future__ import annotations

import kafka.errors as kafka_errors
import pytest

from replog import errors


def wire_classes() -> list[type[errors.KafkaError]]:
    return list(errors.wire_error_classes().values())


def kafka_python_codes() -> dict[int, type]:
    table: dict[int, type] = {}
    pending = list(kafka_errors.BrokerResponseError.__subclasses__())
    while pending:
        cls = pending.pop()
        pending += cls.__subclasses__()
        if isinstance(getattr(cls, "errno", None), int) and cls.errno != 0:
            table[cls.errno] = cls
    return table


# Kafka's protocol error codes (Errors.java, Kafka 4.x): -1 and 1..133.
KAFKA_CODES = {-1, *range(1, 134)}
# The codes whose Java exception is a RetriableException.
KAFKA_RETRIABLE = {
    2, 3, 5, 6, 7, 9, 13, 14, 15, 16, 19, 20, 41, 51, 56, 70, 71, 72, 74, 75, 78, 80, 83, 84,
    88, 89, 100, 103, 106, 122, 123, 133,
}  # fmt: skip
# kafka-python marks CORRUPT_MESSAGE not retriable; Kafka's CorruptRecordException is.
KAFKA_PYTHON_RETRIABLE_DIFFERS = {2}


# Codes kafka-python names differently from Kafka's Errors enum (old names before a rename,
# or its own spelling); replog uses Kafka's names.
KAFKA_PYTHON_OLD_NAMES = {
    -1: "UNKNOWN",
    6: "NOT_LEADER_FOR_PARTITION",
    10: "MESSAGE_SIZE_TOO_LARGE",
    17: "INVALID_TOPIC",
    39: "INVALID_REPLICATION_ASSIGNMENT",
}


def test_every_wire_code_matches_kafka_python() -> None:
    theirs = kafka_python_codes()
    mismatches = []
    checked = 0
    for cls in wire_classes():
        if cls.code in theirs:
            expected = KAFKA_PYTHON_OLD_NAMES.get(cls.code, cls.error_name)
            if theirs[cls.code].message != expected:
                mismatches.append((cls.code, cls.error_name, theirs[cls.code].message))
            checked += 1
    assert not mismatches
    assert checked == len(theirs)  # every code kafka-python knows, replog knows


def test_every_kafka_code_has_exactly_one_class() -> None:
    table = errors.wire_error_classes()
    assert set(table) == KAFKA_CODES
    assert len({cls.error_name for cls in table.values()}) == len(table)
    assert len(set(table.values())) == len(table)
    for code, cls in table.items():
        assert cls.code == code
        assert issubclass(cls, errors.KafkaError)
        assert cls.__name__.endswith("Error")


def test_retriable_flags_are_kafkas() -> None:
    table = errors.wire_error_classes()
    assert {code for code, cls in table.items() if cls.retriable} == KAFKA_RETRIABLE


def test_retriable_flags_agree_with_kafka_python() -> None:
    theirs = kafka_python_codes()
    differ = {
        code
        for code, cls in errors.wire_error_classes().items()
        if code in theirs and cls.retriable != bool(theirs[code].retriable)
    }
    assert differ == KAFKA_PYTHON_RETRIABLE_DIFFERS


def test_new_classes_carry_kafka_python_names() -> None:
    theirs = kafka_python_codes()
    for code, cls in errors.wire_error_classes().items():
        if code in theirs:
            # replog's own name, or kafka-python's kept as an alias
            assert getattr(errors, theirs[code].__name__, cls) is cls, theirs[code].__name__


@pytest.mark.parametrize(
    "cls",
    [
        errors.NotLeaderOrFollowerError,
        errors.NotEnoughReplicasError,
        errors.RequestTimedOutError,
        errors.FencedLeaderEpochError,
        errors.NotControllerError,
        errors.KafkaStorageError,
        errors.CoordinatorLoadInProgressError,
        errors.NotCoordinatorError,
        errors.UnknownTopicIdError,
        errors.ThrottlingQuotaExceededError,
        errors.ElectionNotNeededError,
    ],
)
def test_retriable_errors_are_marked(cls: type[errors.KafkaError]) -> None:
    assert cls.retriable


@pytest.mark.parametrize(
    "cls",
    [
        errors.UnknownServerError,
        errors.OffsetOutOfRangeError,
        errors.MessageSizeTooLargeError,
        errors.OutOfOrderSequenceNumberError,
        errors.UnknownProducerIdError,
        errors.IllegalGenerationError,
        errors.UnknownMemberIdError,
        errors.TopicAuthorizationFailedError,
        errors.RebootstrapRequiredError,
    ],
)
def test_fatal_errors_are_not_retriable(cls: type[errors.KafkaError]) -> None:
    assert not cls.retriable


def test_kafka_python_aliases_are_the_same_classes() -> None:
    assert errors.NotLeaderForPartitionError is errors.NotLeaderOrFollowerError
    assert errors.KafkaConfigurationError is errors.ConfigError
    assert errors.NoBrokersAvailable is errors.NoBrokersAvailableError


def test_error_for_code_round_trips() -> None:
    for cls in wire_classes():
        err = errors.error_for_code(cls.code, "topic-0: detail")
        assert type(err) is cls
        assert str(err) == "topic-0: detail"
    assert isinstance(errors.error_for_code(12345), errors.UnknownServerError)


def test_local_storage_errors_keep_a_wire_code() -> None:
    assert errors.UnexpectedAppendOffsetError.code == -1
    assert errors.LogClosedError.code == errors.KafkaStorageError.code
