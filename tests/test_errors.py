"""replog's error table and classes carry Kafka's wire codes, checked against kafka-python's."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import kafka.errors as kafka_errors
import pytest

from replog import errors
from replog.error_codes import ERRORS_BY_CODE, KAFKA_ERRORS


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


def test_answer_error_names_the_code_what_was_asked_and_the_peers_message() -> None:
    assert errors.answer_error(0, "ignored") is None
    found = errors.answer_error(
        errors.NotCoordinatorError.code, "moved", "from the coordinator at h:1 for group 'g'"
    )
    assert type(found) is errors.NotCoordinatorError
    assert str(found) == "NOT_COORDINATOR from the coordinator at h:1 for group 'g': moved"
    # The peer's message alone when the caller names nothing more; Kafka's name when neither
    # says anything, or the peer said only the name again.
    assert str(errors.answer_error(errors.NotCoordinatorError.code, "moved")) == "moved"
    assert str(errors.answer_error(errors.NotCoordinatorError.code)) == "NOT_COORDINATOR"
    named = errors.answer_error(errors.NotCoordinatorError.code, "NOT_COORDINATOR", "for g")
    assert str(named) == "NOT_COORDINATOR for g"
    # A code outside Kafka's table stays UnknownServerError, its number named.
    unknown = errors.answer_error(9999, "what", "for Fetch")
    assert type(unknown) is errors.UnknownServerError
    assert str(unknown) == "unknown error code 9999 for Fetch: what"
    assert str(errors.answer_error(9999, "what")) == "unknown error code 9999: what"
    assert str(errors.answer_error(-1)) == "UNKNOWN_SERVER_ERROR"


def test_local_storage_errors_keep_a_wire_code() -> None:
    assert errors.UnexpectedAppendOffsetError.code == -1
    assert errors.LogClosedError.code == errors.KafkaStorageError.code


def test_table_codes_and_names_are_unique_and_in_order() -> None:
    codes = [spec.code for spec in KAFKA_ERRORS]
    assert codes == sorted(codes)
    assert set(codes) == KAFKA_CODES and len(codes) == len(KAFKA_CODES)
    names = [spec.name for spec in KAFKA_ERRORS]
    assert len(set(names)) == len(names)
    assert all(spec.message.endswith(".") and spec.message[0].isupper() for spec in KAFKA_ERRORS)


def test_table_retriable_flags_are_kafkas() -> None:
    assert {spec.code for spec in KAFKA_ERRORS if spec.retriable} == KAFKA_RETRIABLE


def test_every_class_takes_its_name_and_flag_from_the_table() -> None:
    for code, cls in errors.wire_error_classes().items():
        spec = ERRORS_BY_CODE[code]
        assert (cls.code, cls.error_name, cls.retriable) == (code, spec.name, spec.retriable)


def named_wire_classes() -> dict[str, type[errors.KafkaError]]:
    return {
        name: value
        for name, value in vars(errors).items()
        if isinstance(value, type)
        and name == value.__name__  # not one of kafka-python's aliases
        and issubclass(value, errors.KafkaError)
        and value.code in errors.wire_error_classes()
        and errors.wire_error_classes()[value.code] is value
    }


def test_codes_without_a_named_class_get_a_generic_one() -> None:
    named = {cls.code for cls in named_wire_classes().values()}
    assert {-1, 6, 56, 108} <= named
    for code, cls in errors.wire_error_classes().items():
        if code in named:
            assert not issubclass(cls, errors.GenericKafkaError), cls
            continue
        assert issubclass(cls, errors.GenericKafkaError), cls
        assert not hasattr(errors, cls.__name__), cls.__name__
        assert cls.__doc__ == ERRORS_BY_CODE[code].message
    err = errors.error_for_code(57, "no such dir")
    assert isinstance(err, errors.GenericKafkaError)
    assert (err.code, err.error_name) == (57, "LOG_DIR_NOT_FOUND")
    assert not err.retriable
    assert type(err).__name__ == "LogDirNotFoundError"
    assert str(errors.error_for_code(89)) == "THROTTLING_QUOTA_EXCEEDED"
    assert not errors.error_for_code(129).retriable  # REBOOTSTRAP_REQUIRED


def test_generic_errors_pickle_by_code() -> None:
    err = errors.error_for_code(90, "fenced: producer 7")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err) and str(back) == "fenced: producer 7"


def test_named_classes_are_the_ones_replog_uses_by_name() -> None:
    # A named class whose name nothing outside replog/errors.py and this test mentions is one
    # the table's generic classes should carry instead.
    root = Path(__file__).resolve().parent.parent
    texts = [
        path.read_text(encoding="utf-8")
        for pattern in ("replog/**/*.py", "quorum/**/*.py", "tests/**/*.py", "bench/**/*.py",
                        "docs/**/*.md", "*.md", "*.py")
        for path in root.glob(pattern)
        if path.name not in ("errors.py", "test_errors.py") and ".venv" not in path.parts
    ]  # fmt: skip
    unused = [
        name
        for name in named_wire_classes()
        if not any(re.search(rf"\b{name}\b", text) for text in texts)
    ]
    assert unused == []


def test_a_second_class_for_a_code_is_refused() -> None:
    with pytest.raises(TypeError, match="error code 6 has two classes"):

        class _Twice(errors.KafkaError, code=6): ...
