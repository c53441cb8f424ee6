"""Kafka's line-oriented checkpoint text format, shared by every offset and leader-epoch checkpoint.

Grammar (UTF-8; every line, the last one included, ends with ``\\n``)::

    file    = "" | version "\\n" count "\\n" entry{count}
    version = integer                   ; 0 for every checkpoint file Kafka and replog write
    count   = integer                   ; how many entry lines follow, no more and no fewer
    entry   = field (ws field)* "\\n"    ; ws = one or more ASCII whitespace characters
    field   = one or more non-whitespace characters
    integer = ["-"] digit+              ; ASCII digits only

Worked example, a leader-epoch checkpoint holding two entries, as bytes and as parsed::

    b"0\\n2\\n0 0\\n3 1500\\n"

    line 1  "0"        version 0
    line 2  "2"        two entry lines follow
    line 3  "0 0"      EntryLine(line_number=3, fields=("0", "0"))
    line 4  "3 1500"   EntryLine(line_number=4, fields=("3", "1500"))

Rules:
- Empty input is an empty checkpoint (Kafka creates checkpoint files empty).
- A parse returns every entry or raises `CorruptCheckpointError`; it never returns part of a file.
  The message names the file (the `source` the caller passes), the 1-based line and the reason.
- Kafka's reader is laxer in three places and replog is strict on purpose, because a checkpoint
  that parses wrongly moves a recovery point or a high watermark silently:
  a file whose last line lacks its newline is rejected (a torn write of ``170410`` would
  otherwise read as ``17``); a version line with no count line is rejected; a field list with
  leading or trailing whitespace (an empty field) is rejected.
- This module knows lines and fields only; what a field means is the business of the file
  formats built on it (`offset_checkpoint`, `leader_epoch_checkpoint`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from replog.errors import CorruptCheckpointError

CHECKPOINT_VERSION = 0
"""The only version of the offset and leader-epoch checkpoint files."""

INT32_MAX = 2**31 - 1
"""Largest partition index or leader epoch (both are int32 in Kafka)."""

INT64_MAX = 2**63 - 1
"""Largest offset (int64 in Kafka)."""

# Java's `\s` is ASCII whitespace; re.ASCII keeps a Unicode space from splitting a field.
_FIELD_SEPARATOR = re.compile(r"\s+", re.ASCII)
_INTEGER = re.compile(r"-?[0-9]+")
# Nineteen digits hold every int64; a longer token is out of range before it is converted.
_INTEGER_DIGITS_MAX = 19


def corrupt(source: str, line_number: int, reason: str) -> CorruptCheckpointError:
    """The error for a malformed checkpoint, naming the file, the line and the reason."""
    return CorruptCheckpointError(f"{source}: line {line_number}: {reason}")


def range_problem(value: int, name: str, maximum: int) -> str | None:
    """Why `value` cannot be stored as the non-negative field `name`, or None when it can.

    Shared by renderers (which raise ValueError) and parsers (which raise
    CorruptCheckpointError), so what replog writes is exactly what it accepts on reading.
    """
    if value < 0:
        return f"negative {name} {value}"
    if value > maximum:
        return f"{name} {value} is larger than {maximum}"
    return None


def _parse_integer(token: str, name: str) -> int | str:
    """The integer in `token`, or the reason it is not one."""
    if not _INTEGER.fullmatch(token):
        return f"{name} {token!r} is not an integer"
    if len(token.lstrip("-")) > _INTEGER_DIGITS_MAX:
        return f"{name} {token} is out of range"
    return int(token)


@dataclass(frozen=True, slots=True)
class EntryLine:
    """One entry line, split into fields, remembering where it came from for error messages."""

    source: str
    line_number: int
    fields: tuple[str, ...]

    def error(self, reason: str) -> CorruptCheckpointError:
        return corrupt(self.source, self.line_number, reason)

    def int_field(self, index: int, name: str, maximum: int) -> int:
        """Field `index` as an integer in [0, maximum]; otherwise an error naming this line."""
        value = _parse_integer(self.fields[index], name)
        if isinstance(value, str):
            raise self.error(value)
        problem = range_problem(value, name, maximum)
        if problem is not None:
            raise self.error(problem)
        return value


def _decode(source: str, line_number: int, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise corrupt(source, line_number, f"not UTF-8 ({e.reason} at byte {e.start})") from None


def _header_integer(source: str, line_number: int, raw: bytes, name: str) -> int:
    value = _parse_integer(_decode(source, line_number, raw), name)
    if isinstance(value, str):
        raise corrupt(source, line_number, value)
    return value


def parse(
    data: bytes, *, source: str, fields_per_entry: int, version: int = CHECKPOINT_VERSION
) -> list[EntryLine]:
    """Every entry line of a checkpoint file, each with exactly `fields_per_entry` fields.

    `source` names the file in error messages (usually its path).
    """
    if not data:
        return []
    raw_lines = data.split(b"\n")
    # A complete file ends with "\n", so splitting leaves one empty piece after it.
    if raw_lines[-1]:
        raise corrupt(source, len(raw_lines), "last line has no newline: the file is truncated")
    raw_lines.pop()

    found_version = _header_integer(source, 1, raw_lines[0], "version")
    if found_version != version:
        raise corrupt(source, 1, f"unsupported version {found_version}, expected {version}")
    if len(raw_lines) < 2:
        raise corrupt(source, 1, "no entry count follows the version: the file is truncated")
    count = _header_integer(source, 2, raw_lines[1], "entry count")
    if count < 0:
        raise corrupt(source, 2, f"negative entry count {count}")
    found = len(raw_lines) - 2
    if found > count:
        raise corrupt(source, 3 + count, f"unexpected line after the {count} declared entries")
    if found < count:
        raise corrupt(source, 2, f"declares {count} entries but the file holds {found}")

    entries: list[EntryLine] = []
    for line_number, raw in enumerate(raw_lines[2:], start=3):
        fields = tuple(_FIELD_SEPARATOR.split(_decode(source, line_number, raw)))
        if "" in fields:
            reason = "blank line" if fields == ("",) else "leading or trailing whitespace"
            raise corrupt(source, line_number, reason)
        if len(fields) != fields_per_entry:
            raise corrupt(
                source, line_number, f"expected {fields_per_entry} fields, found {len(fields)}"
            )
        entries.append(EntryLine(source, line_number, fields))
    assert len(entries) == count
    return entries


def render(entries: Sequence[Sequence[str | int]], *, version: int = CHECKPOINT_VERSION) -> bytes:
    """The checkpoint file holding `entries`, one line each, fields joined by single spaces.

    Callers validate their values first; a field that would not parse back as one field is a
    bug in the caller, hence an assertion rather than an error.
    """
    lines = [str(version), str(len(entries))]
    for entry in entries:
        fields = [str(field) for field in entry]
        assert fields and all(field and not _FIELD_SEPARATOR.search(field) for field in fields), (
            f"checkpoint entry {fields!r} does not render as whitespace-free fields"
        )
        lines.append(" ".join(fields))
    lines.append("")  # so that the last entry line ends with "\n" too
    return "\n".join(lines).encode("utf-8")


def decode_utf8(data: bytes, *, source: str) -> str:
    """`data` as text; CorruptCheckpointError naming `source` and the first byte that is not
    UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CorruptCheckpointError(
            f"{source}: not UTF-8 ({e.reason} at byte {e.start})"
        ) from None
