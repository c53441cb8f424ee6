"""replog's error classes carry Kafka's wire codes, checked against kafka-python's table."""

from __future__ import annotations

import kafka.errors as kafka_errors
import pytest

from replog import errors


def wire_classes() -> list[type[errors.KafkaError]]:
    return list(errors.wire_error_classes().values())


def kafka_python_codes() -> dict[int, type]:
    table = {}
    for cls in kafka_errors.BrokerResponseError.__subclasses__():
        if isinstance(getattr(cls, "errno", None), int):
            table[cls.errno] = cls
    return table


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
    assert checked >= 45


@pytest.mark.parametrize(
    "cls",
    [
        errors.NotLeaderOrFollowerError,
        errors.NotEnoughReplicasError,
        errors.RequestTimedOutError,
        errors.FencedLeaderEpochError,
        errors.NotControllerError,
        errors.KafkaStorageError,
    ],
)
def test_retriable_errors_are_marked(cls: type[errors.KafkaError]) -> None:
    assert cls.retriable


def test_error_for_code_round_trips() -> None:
    for cls in wire_classes():
        err = errors.error_for_code(cls.code, "topic-0: detail")
        assert type(err) is cls
        assert str(err) == "topic-0: detail"
    assert isinstance(errors.error_for_code(12345), errors.UnknownServerError)


def test_local_storage_errors_keep_a_wire_code() -> None:
    assert errors.UnexpectedAppendOffsetError.code == -1
    assert errors.LogClosedError.code == errors.KafkaStorageError.code
