"""`partition.metadata`: the topic id a partition directory belongs to (Kafka's KIP-516 file).

A partition's directory is named after its topic's name, which a deleted topic and a later one
of the same name share; the topic id is what tells them apart. The broker writes this file
when a replica of the topic first takes the log, before anything is appended, and reads it to
recognise a log left behind by a deleted topic.

Grammar (UTF-8), as Kafka writes it (no newline after the last line; a reader takes one)::

    file = "version: 0\\n" "topic_id: " id ["\\n"]
    id   = the 16 bytes of the UUID in URL-safe base64 without padding (22 characters)

Worked example: the topic id 7cdf2a61-5b8e-4a06-9f2b-2d9f0bd0f4e1 is written as the 43 bytes
``version: 0\\ntopic_id: fN8qYVuOSgafKy2fC9D04Q``.

Rules:
- Each line is `key: value` (one or more spaces after the colon, as Kafka's reader allows);
  exactly the keys version and topic_id, in that order; version 0 only.
- Anything else (no file content, another key, an id that is not 16 bytes of base64) raises
  `CorruptCheckpointError` naming the file; the caller decides what a log with an unreadable
  file is (`Log.topic_id` makes it a KafkaStorageError, which stops the broker until the file
  is fixed or removed, as Kafka takes such a log dir offline).
"""

from __future__ import annotations

import base64
import binascii
import re
import uuid

from replog.checkpoints.text_format import decode_utf8
from replog.common.ids import topic_id_text
from replog.errors import CorruptCheckpointError

PARTITION_METADATA = "partition.metadata"
PARTITION_METADATA_VERSION = 0

_LINE = re.compile(r"([a-z_]+): +(\S+)")


def render_partition_metadata(topic_id: uuid.UUID) -> bytes:
    text = topic_id_text(topic_id)
    return f"version: {PARTITION_METADATA_VERSION}\ntopic_id: {text}".encode("ascii")


def parse_partition_metadata(data: bytes, *, source: str) -> uuid.UUID:
    """The topic id a `partition.metadata` file holds; `source` names the file in errors."""

    def corrupt(reason: str) -> CorruptCheckpointError:
        return CorruptCheckpointError(f"{source}: {reason}")

    text = decode_utf8(data, source=source)
    lines = text.removesuffix("\n").split("\n")
    fields = []
    for number, line in enumerate(lines, start=1):
        matched = _LINE.fullmatch(line)
        if matched is None:
            raise corrupt(f"line {number}: expected 'key: value', found {line!r}")
        fields.append(matched.groups())
    keys = [key for key, _ in fields]
    if keys != ["version", "topic_id"]:
        raise corrupt(f"expected the keys version and topic_id, found {keys}")
    version, topic_id = fields[0][1], fields[1][1]
    if version != str(PARTITION_METADATA_VERSION):
        raise corrupt(f"unsupported version {version!r}, expected 0")
    try:
        raw = base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4))
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 16:
        raise corrupt(f"topic_id {topic_id!r} is not 16 bytes of URL-safe base64")
    return uuid.UUID(bytes=raw)
