"""A node's Python loggers as Kafka's BROKER_LOGGER resource (`runtime_loggers`): Python's
levels in Kafka's names, effective levels through placeholders, the process's own hierarchy by
default. The Kafka handlers' use of it is in test_kafka_admin_apis."""

from __future__ import annotations

import logging
import re

import pytest

from replog.errors import InvalidRequestError
from replog.server.kafka.runtime_loggers import LEVELS, RuntimeLoggers, kafka_level


@pytest.mark.parametrize(
    ("level", "name"),
    [
        (logging.NOTSET, "TRACE"),
        (5, "TRACE"),
        (logging.DEBUG, "DEBUG"),
        (15, "INFO"),  # lets INFO through, not DEBUG
        (logging.INFO, "INFO"),
        (logging.WARNING, "WARN"),
        (logging.ERROR, "ERROR"),
        (logging.CRITICAL, "FATAL"),
        (logging.CRITICAL + 1, "OFF"),
    ],
)
def test_python_levels_in_kafkas_names(level: int, name: str) -> None:
    assert kafka_level(level) == name


def test_every_kafka_level_set_reads_back_as_itself() -> None:
    manager = logging.Manager(logging.RootLogger(logging.INFO))
    manager.getLogger("a.b")
    loggers = RuntimeLoggers(7, manager)
    for name in LEVELS:
        loggers.alter("7", [("a.b", 0, name), ("root", 0, name)])
        assert loggers.loggers() == {"a": name, "a.b": name, "root": name}


def test_a_placeholder_takes_its_nearest_ancestors_level_and_can_be_set() -> None:
    manager = logging.Manager(logging.RootLogger(logging.ERROR))
    manager.getLogger("a").setLevel(logging.INFO)
    leaf = manager.getLogger("a.b.c")
    loggers = RuntimeLoggers(1, manager)
    assert loggers.loggers() == {"a": "INFO", "a.b": "INFO", "a.b.c": "INFO", "root": "ERROR"}
    loggers.alter("1", [("a.b", 0, "DEBUG")])
    assert leaf.getEffectiveLevel() == logging.DEBUG
    loggers.alter("1", [("a.b", 1, None), ("a", 1, None)])
    assert leaf.getEffectiveLevel() == logging.ERROR


def test_the_process_loggers_are_served_by_default() -> None:
    logging.getLogger("replog.tests.runtime_loggers_probe")
    assert "replog.tests.runtime_loggers_probe" in RuntimeLoggers(1).loggers()


@pytest.mark.parametrize("name", [" 1", "1_0", "one", "1.0"])
def test_a_resource_name_java_would_not_read_as_an_int_is_refused(name: str) -> None:
    with pytest.raises(
        InvalidRequestError, match=re.escape(f"must be an integer, but it is: {name}")
    ):
        RuntimeLoggers(1).describe(name, None)
