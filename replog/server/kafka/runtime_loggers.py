"""A node's Python loggers as Kafka's BROKER_LOGGER config resource (type 8, KIP-412): their
levels described and changed at run time, as Kafka's `RuntimeLoggerManager` does for log4j.

Rules (Kafka's `ConfigHelper`, `ConfigAdminManager` and `RuntimeLoggerManager`):
- The resource is named by the node's id: empty is INVALID_REQUEST ("Broker id must not be
  empty"), a name that is not an integer or another node's id is INVALID_REQUEST naming both.
- The loggers are every name in the process's logger hierarchy (placeholders of dotted
  parents included) and `root`, each with its effective level in Kafka's names: the least
  severe of TRACE, DEBUG, INFO, WARN, ERROR, FATAL that the Python level lets through (OFF
  above CRITICAL). Levels belong to the process: nodes sharing one process share them.
- SET takes one of Kafka's `LogLevelConfig.VALID_LOG_LEVELS` (TRACE, DEBUG, INFO, WARN,
  ERROR, FATAL; exact case, as Kafka checks) else INVALID_CONFIG; DELETE unsets the level, so
  the logger inherits its parent's, and is INVALID_REQUEST for `root`. A logger that does not
  exist is INVALID_CONFIG ("Logger X does not exist!"); APPEND and SUBTRACT, an unknown
  operation, a key named twice or a SET without a value are INVALID_REQUEST.
- A resource's operations are all checked before any is applied; `validate_only` applies none.
  Changes are not persisted: a restarted node starts at its configured levels.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Collection, Sequence

from replog.errors import InvalidConfigError, InvalidRequestError

BROKER_LOGGER = 8
ROOT_LOGGER = "root"
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
# Kafka's level names, least severe first, at the Python level each stands for. Python has no
# TRACE: it sits below DEBUG, where nothing replog logs reaches.
LEVELS: dict[str, int] = {
    "TRACE": 5,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
}
OFF = "OFF"
_OPERATIONS = {APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

log = logging.getLogger("replog.server.kafka")


def kafka_level(level: int) -> str:
    """The Kafka name of a Python level: the least severe Kafka level it lets through."""
    for name, value in LEVELS.items():
        if level <= value:
            return name
    return OFF


class RuntimeLoggers:
    """The BROKER_LOGGER resource of node `node_id`, over `manager`'s logger hierarchy (the
    process's own unless given)."""

    def __init__(self, node_id: int, manager: logging.Manager | None = None) -> None:
        self.node_id = node_id
        self._manager = manager if manager is not None else logging.Logger.manager

    def loggers(self) -> dict[str, str]:
        """Every logger's effective level in Kafka's names, by logger name."""
        # A copy: other threads may add loggers meanwhile.
        names = list(self._manager.loggerDict)
        named = {name: kafka_level(self._effective(name)) for name in names}
        named[ROOT_LOGGER] = kafka_level(self._manager.root.level)
        return dict(sorted(named.items()))

    def describe(self, resource_name: str, keys: Collection[str] | None) -> list[tuple[str, str]]:
        """(logger, level) of each logger, or of those among `keys` when any are given."""
        if not resource_name:
            raise InvalidRequestError("Broker id must not be empty")
        self._check_node(
            resource_name,
            "Broker id",
            "Unexpected broker id, expected {expected} but received {received}",
        )
        return [(name, level) for name, level in self.loggers().items() if not keys or name in keys]

    def alter(
        self,
        resource_name: str,
        operations: Sequence[tuple[str, int, str | None]],
        validate_only: bool = False,
    ) -> None:
        """Apply (logger, operation, value) each, after checking them all."""
        names = [name for name, _, _ in operations]
        if len(set(names)) != len(names):
            raise InvalidRequestError("Error due to duplicate config keys")
        null = [name for name, op, value in operations if op != DELETE and value is None]
        if null:
            raise InvalidRequestError("Null value not supported for : " + ", ".join(null))
        self._check_node(
            resource_name,
            "Node id",
            "Unexpected node id. Expected {expected}, but received {received}",
        )
        for name, op, value in operations:
            self._check(name, op, value)
        if validate_only:
            return
        for name, op, value in operations:
            target = self._manager.root if name == ROOT_LOGGER else self._manager.getLogger(name)
            if op == SET:
                assert value is not None
                target.setLevel(LEVELS[value])
                log.warning("Updated the log level of %s to %s", name, value)
            else:
                target.setLevel(logging.NOTSET)
                log.warning("Unset the log level of %s", name)

    def _check(self, name: str, op: int, value: str | None) -> None:
        if op in _OPERATIONS:
            raise InvalidRequestError(
                f"{_OPERATIONS[op]} operation is not allowed for the BROKER_LOGGER resource"
            )
        if op not in (SET, DELETE):
            raise InvalidRequestError(
                f"Unknown operation type {op} is not allowed for the BROKER_LOGGER resource"
            )
        if name != ROOT_LOGGER and name not in self._manager.loggerDict:
            raise InvalidConfigError(f"Logger {name} does not exist!")
        if op == DELETE and name == ROOT_LOGGER:
            raise InvalidRequestError(
                f"Removing the log level of the {ROOT_LOGGER} logger is not allowed"
            )
        if op == SET and value not in LEVELS:
            raise InvalidConfigError(
                f"Cannot set the log level of {name} to {value} as it is not a supported log "
                f"level. Valid log levels are {', '.join(sorted(LEVELS))}"
            )

    def _check_node(self, resource_name: str, what: str, mismatch: str) -> None:
        """INVALID_REQUEST unless `resource_name` is this node's id (`mismatch` formatted
        with `expected` and `received`: Kafka words it one way for each API)."""
        # Java's Integer.parseInt: a sign and digits, nothing else (Python's int() also takes
        # spaces and underscores).
        if re.fullmatch(r"[+-]?\d+", resource_name) is None:
            raise InvalidRequestError(f"{what} must be an integer, but it is: {resource_name}")
        if int(resource_name) != self.node_id:
            raise InvalidRequestError(
                mismatch.format(expected=self.node_id, received=int(resource_name))
            )

    def _effective(self, name: str) -> int:
        """The level a logger of `name` would act at: its own, else its nearest ancestor's
        (placeholders have none of their own)."""
        while True:
            found = self._manager.loggerDict.get(name)
            if isinstance(found, logging.Logger) and found.level != logging.NOTSET:
                return found.level
            if "." not in name:
                return self._manager.root.level
            name = name.rsplit(".", 1)[0]
