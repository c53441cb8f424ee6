"""Kafka's JSON files naming partitions, as the admin commands read and write them.

The formats are those of Kafka's tools, so files written for one work with the other:

- reassignment (`reassign execute|verify|cancel`, written by `reassign generate`):
  `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3]}]}`; an entry may
  carry `"log_dirs"`, which must then be `"any"` for every replica (replog does not move
  replicas between the log directories of one broker);
- topics to move (`reassign generate`): `{"version":1,"topics":[{"topic":"t"}]}`;
- partitions to elect (`elect-leaders --path-to-json-file`):
  `{"partitions":[{"topic":"t","partition":0}]}`;
- offsets to delete before (`delete-records`):
  `{"version":1,"partitions":[{"topic":"t","partition":0,"offset":5}]}` (-1: the high
  watermark, i.e. everything).

Rules: `version`, where present, must be 1. A file that is not JSON, lacks a field, has a
field of the wrong type, names a partition (or topic) twice, or lists a replica twice is a
`ReplogError` whose one-line message names the file and the entry. Partitions come back in
the file's order. Rendering (`reassignment_json`) is compact, one line, as Kafka prints it.
The parsers take the text and its name and do no I/O; `load` reads a file and parses it, an
unreadable file being a one-line `ReplogError` too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

from replog.errors import ReplogError
from replog.record.varint import INT32_MAX, INT32_MIN, INT64_MAX

T = TypeVar("T")

VERSION = 1
ANY_LOG_DIR = "any"


class PartitionReplicas(NamedTuple):
    """One entry of a reassignment file: the replicas a partition should have."""

    topic: str
    partition: int
    replicas: tuple[int, ...]


class PartitionOffset(NamedTuple):
    """One entry of a delete-records file: delete the records before `offset`."""

    topic: str
    partition: int
    offset: int


class FileFormatError(ReplogError):
    """A partition file that cannot be used; the message names the file and what is wrong."""


def load(path: str, option: str, parse: Callable[[str, str], T]) -> T:
    """`parse(text, path)` of the file at `path`, given as `option`."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise ReplogError(f"{option} {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ReplogError(f"{option} {path}: not a UTF-8 text file") from None
    return parse(text, path)


def parse_reassignment(text: str, source: str) -> list[PartitionReplicas]:
    document = _document(text, source)
    entries = _list(document, "partitions", source)
    found: list[PartitionReplicas] = []
    seen: set[tuple[str, int]] = set()
    for index, entry in enumerate(entries):
        where = f"{source}: partitions[{index}]"
        topic, partition = _topic_partition(entry, where)
        replicas = _int_list(entry, "replicas", where)
        if not replicas:
            raise FileFormatError(f"{where} ({topic}-{partition}): replicas is empty")
        if len(set(replicas)) != len(replicas):
            raise FileFormatError(
                f"{where} ({topic}-{partition}): replicas {list(replicas)} name a broker twice"
            )
        if any(r < 0 for r in replicas):
            raise FileFormatError(f"{where} ({topic}-{partition}): a broker id is negative")
        if "log_dirs" in entry:
            log_dirs = entry["log_dirs"]
            if not isinstance(log_dirs, list) or len(log_dirs) != len(replicas):
                raise FileFormatError(
                    f"{where} ({topic}-{partition}): log_dirs must list one directory per replica"
                )
            if any(d != ANY_LOG_DIR for d in log_dirs):
                raise FileFormatError(
                    f'{where} ({topic}-{partition}): log_dirs other than "any" are not '
                    "supported (replog does not move replicas between a broker's directories)"
                )
        _once(seen, (topic, partition), f"{source}: partition {topic}-{partition}")
        found.append(PartitionReplicas(topic, partition, replicas))
    return found


def parse_topics_to_move(text: str, source: str) -> list[str]:
    document = _document(text, source)
    entries = _list(document, "topics", source)
    topics: list[str] = []
    for index, entry in enumerate(entries):
        where = f"{source}: topics[{index}]"
        topic = _field(entry, "topic", str, where)
        if not topic:
            raise FileFormatError(f"{where}: topic is empty")
        if topic in topics:
            raise FileFormatError(f"{source}: topic {topic!r} is listed twice")
        topics.append(topic)
    if not topics:
        raise FileFormatError(f"{source}: names no topic")
    return topics


def parse_election_partitions(text: str, source: str) -> list[tuple[str, int]]:
    document = _document(text, source)
    entries = _list(document, "partitions", source)
    found: list[tuple[str, int]] = []
    seen: set[tuple[str, int]] = set()
    for index, entry in enumerate(entries):
        tp = _topic_partition(entry, f"{source}: partitions[{index}]")
        _once(seen, tp, f"{source}: partition {tp[0]}-{tp[1]}")
        found.append(tp)
    if not found:
        raise FileFormatError(f"{source}: names no partition")
    return found


def parse_offsets(text: str, source: str) -> list[PartitionOffset]:
    document = _document(text, source)
    entries = _list(document, "partitions", source)
    found: list[PartitionOffset] = []
    seen: set[tuple[str, int]] = set()
    for index, entry in enumerate(entries):
        where = f"{source}: partitions[{index}]"
        topic, partition = _topic_partition(entry, where)
        offset = _field(entry, "offset", int, where)
        if offset > INT64_MAX:
            raise FileFormatError(
                f"{where} ({topic}-{partition}): offset {offset}: must be at most {INT64_MAX}"
            )
        if offset < -1:
            raise FileFormatError(
                f"{where} ({topic}-{partition}): offset {offset}: must be >= 0, or -1 for the "
                "high watermark"
            )
        _once(seen, (topic, partition), f"{source}: partition {topic}-{partition}")
        found.append(PartitionOffset(topic, partition, offset))
    if not found:
        raise FileFormatError(f"{source}: names no partition")
    return found


def reassignment_document(assignment: Mapping[tuple[str, int], Sequence[int]]) -> dict[str, Any]:
    """Kafka's reassignment JSON of `assignment`, partitions sorted by topic and index."""
    return {
        "version": VERSION,
        "partitions": [
            {"topic": topic, "partition": partition, "replicas": list(replicas)}
            for (topic, partition), replicas in sorted(assignment.items())
        ],
    }


def reassignment_json(assignment: Mapping[tuple[str, int], Sequence[int]]) -> str:
    return json.dumps(reassignment_document(assignment), separators=(",", ":"))


# --- reading JSON ---------------------------------------------------------------------------


def _document(text: str, source: str) -> dict[str, Any]:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FileFormatError(
            f"{source}: not valid JSON: {exc.msg} (line {exc.lineno} column {exc.colno})"
        ) from None
    if not isinstance(document, dict):
        raise FileFormatError(f"{source}: expected a JSON object, found {_kind(document)}")
    if "version" in document and (
        type(document["version"]) is not int or document["version"] != VERSION
    ):
        raise FileFormatError(
            f"{source}: version {document['version']!r} is not supported (only {VERSION})"
        )
    return document


def _list(document: Mapping[str, Any], key: str, source: str) -> list[Any]:
    if key not in document:
        raise FileFormatError(f'{source}: no "{key}" list')
    value = document[key]
    if not isinstance(value, list):
        raise FileFormatError(f'{source}: "{key}" must be a list, found {_kind(value)}')
    return value


def _topic_partition(entry: Any, where: str) -> tuple[str, int]:
    topic = _field(entry, "topic", str, where)
    partition = _field(entry, "partition", int, where)
    if not topic:
        raise FileFormatError(f"{where}: topic is empty")
    if partition < 0:
        raise FileFormatError(f"{where}: partition {partition} is negative")
    if partition > INT32_MAX:
        raise FileFormatError(f"{where}: partition {partition} is above {INT32_MAX}")
    return topic, partition


def _field(entry: Any, key: str, kind: type[Any], where: str) -> Any:
    if not isinstance(entry, dict):
        raise FileFormatError(f"{where}: expected an object, found {_kind(entry)}")
    if key not in entry:
        raise FileFormatError(f'{where}: no "{key}"')
    value = entry[key]
    # bool is an int in Python, not in JSON: `"partition": true` is a mistake.
    if type(value) is not kind:
        raise FileFormatError(f'{where}: "{key}" must be {_kind_name(kind)}, found {_kind(value)}')
    return value


def _int_list(entry: Mapping[str, Any], key: str, where: str) -> tuple[int, ...]:
    value = _field(entry, key, list, where)
    if any(type(item) is not int for item in value):
        raise FileFormatError(f'{where}: "{key}" must be a list of whole numbers')
    if any(not INT32_MIN <= item <= INT32_MAX for item in value):
        raise FileFormatError(f'{where}: "{key}" holds a number outside the int32 range')
    return tuple(value)


def _once(seen: set[tuple[str, int]], item: tuple[str, int], what: str) -> None:
    if item in seen:
        raise FileFormatError(f"{what} is listed twice")
    seen.add(item)


def _kind(value: Any) -> str:
    return _kind_name(type(value))


def _kind_name(kind: type[Any]) -> str:
    names = {
        str: "a string",
        int: "a whole number",
        list: "a list",
        dict: "an object",
        bool: "true/false",
        float: "a number with a fraction",
        type(None): "null",
    }
    return names.get(kind, kind.__name__)
