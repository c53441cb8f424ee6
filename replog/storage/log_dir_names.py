"""The names of partition directories: `<topic>-<partition>` for a live one, Kafka's
`<topic>-<partition>.<id>-delete` and `...-stray` for one renamed aside.

Rules: pure functions over names, no file is touched; a renamed name's id is random, from the
caller's seeded `random.Random` when given (a simulation's), and the whole name fits in the
255 bytes common file systems allow.
"""

from __future__ import annotations

import os
import random
import uuid

_NOT_PLAIN_NAMES = ("", ".", "..")  # a path ending in a separator, `.` or `..`
# A deleted partition's directory ends with this until its files are removed (Kafka's name).
DELETE_DIR_SUFFIX = "-delete"
# A stray log's directory (a partition of a deleted topic, or one this broker no longer holds,
# found at start-up) ends with this; it is kept for an operator, never opened (Kafka's name).
STRAY_DIR_SUFFIX = "-stray"
RENAMED_DIR_SUFFIXES = (DELETE_DIR_SUFFIX, STRAY_DIR_SUFFIX)
_DIR_NAME_BYTES_MAX = 255  # a file name's limit on common file systems


def parse_topic_partition(directory: str) -> tuple[str, int] | None:
    """(topic, partition) from a `<topic>-<partition>` directory name, or None."""
    name = directory.rpartition(os.sep)[2]  # as below, a few times faster, for a plain path
    if name in _NOT_PLAIN_NAMES:
        name = os.path.basename(os.path.normpath(directory))
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


def renamed_dir_name(
    directory: str, suffix: str = DELETE_DIR_SUFFIX, *, rng: random.Random | None = None
) -> str:
    """Kafka's name for a partition's directory renamed aside: `<topic>-<partition>.<id>-delete`
    for a deleted one, `...-stray` for a stray one (`RENAMED_DIR_SUFFIXES`), the id unique (so
    a re-created partition can be renamed aside again before the first one is gone; 128 random
    bits, from `rng` when given, a simulation's seeded one) and the topic cut short where the
    whole name would not fit in 255 bytes."""
    if suffix not in RENAMED_DIR_SUFFIXES:
        raise ValueError(f"{suffix!r} is not one of {RENAMED_DIR_SUFFIXES}")
    name = os.path.basename(os.path.normpath(directory))
    topic, _, partition = name.rpartition("-")
    unique = uuid.uuid4().hex if rng is None else f"{rng.getrandbits(128):032x}"
    ending = f"-{partition}.{unique}{suffix}"
    room = _DIR_NAME_BYTES_MAX - len(ending.encode())
    kept = topic.encode()[:room].decode(errors="ignore")
    return kept + ending


def renamed_topic_partition(
    directory: str, suffixes: tuple[str, ...] = RENAMED_DIR_SUFFIXES
) -> tuple[str, int] | None:
    """(topic, partition) from a `renamed_dir_name` ending in one of `suffixes` (the topic as
    kept there), or None for any other name."""
    name = os.path.basename(os.path.normpath(directory))
    if not name.endswith(suffixes):
        return None
    return parse_topic_partition(name.rpartition(".")[0])
