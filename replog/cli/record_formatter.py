"""How `replog consume` prints a record: kafka-console-consumer.sh's default formatter.

Pure: a record in, the bytes of its output line out.

Rules (Kafka's `DefaultMessageFormatter` properties, given with `--property NAME=VALUE`):
- Fields in Kafka's fixed order, each only when asked for: `print.timestamp`
  (`CreateTime:<ms>` or `LogAppendTime:<ms>`; `NO_TIMESTAMP` for -1), `print.partition`
  (`Partition:<n>`; default: as `print.offset`, so an offset never prints without its
  partition, unlike Kafka), `print.offset` (`Offset:<n>`), `print.headers` (`k1:v1,k2:v2` joined by
  `headers.separator`, `NO_HEADERS` when there are none), `print.key`, then `print.value`
  (default true). Fields are separated by `key.separator` (default TAB) and the line ends with
  `line.separator` (default `\\n`); a line of no field at all is empty (Kafka prints nothing
  then, not even the line separator).
- A null key, value or header value prints as `null.literal` (default `null`). Keys, values and
  header values are printed byte for byte (Kafka decodes them as UTF-8 and encodes them back,
  which is the same for text).
- An unknown property is an error naming it and the known ones; a `print.*` value must be true
  or false.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from replog.client.records import TIMESTAMP_TYPE_LOG_APPEND_TIME
from replog.errors import ReplogError

PRINT_FLAGS = (
    "print.timestamp",
    "print.partition",
    "print.offset",
    "print.headers",
    "print.key",
    "print.value",
)
PROPERTIES = (*PRINT_FLAGS, "key.separator", "line.separator", "headers.separator", "null.literal")
NO_TIMESTAMP = -1


@dataclass(frozen=True)
class FormatterConfig:
    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    print_key: bool = False
    print_value: bool = True
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    headers_separator: bytes = b","
    null_literal: bytes = b"null"

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> FormatterConfig:
        unknown = sorted(set(properties) - set(PROPERTIES))
        if unknown:
            raise ReplogError(f"--property {unknown[0]}: unknown; known: {', '.join(PROPERTIES)}")

        def flag(name: str, default: bool) -> bool:
            if name not in properties:
                return default
            text = properties[name].strip().lower()
            if text not in ("true", "false"):
                raise ReplogError(f"--property {name}={properties[name]}: must be true or false")
            return text == "true"

        def text(name: str, default: bytes) -> bytes:
            return properties[name].encode() if name in properties else default

        return cls(
            print_timestamp=flag("print.timestamp", False),
            # An offset alone is ambiguous (every partition has an offset 0): the partition is
            # printed with it unless turned off (Kafka prints it only when asked).
            print_partition=flag("print.partition", flag("print.offset", False)),
            print_offset=flag("print.offset", False),
            print_headers=flag("print.headers", False),
            print_key=flag("print.key", False),
            print_value=flag("print.value", True),
            key_separator=text("key.separator", b"\t"),
            line_separator=text("line.separator", b"\n"),
            headers_separator=text("headers.separator", b","),
            null_literal=text("null.literal", b"null"),
        )


def format_record(
    config: FormatterConfig,
    *,
    partition: int,
    offset: int,
    timestamp: int,
    timestamp_type: int,
    headers: Sequence[tuple[str, bytes | None]],
    key: bytes | None,
    value: bytes | None,
) -> bytes:
    """The output of one record (module docstring); empty when no field is printed."""
    fields: list[bytes] = []
    if config.print_timestamp:
        if timestamp == NO_TIMESTAMP:
            fields.append(b"NO_TIMESTAMP")
        else:
            kind = (
                "LogAppendTime"
                if timestamp_type == TIMESTAMP_TYPE_LOG_APPEND_TIME
                else "CreateTime"
            )
            fields.append(f"{kind}:{timestamp}".encode())
    if config.print_partition:
        fields.append(f"Partition:{partition}".encode())
    if config.print_offset:
        fields.append(f"Offset:{offset}".encode())
    if config.print_headers:
        if headers:
            fields.append(
                config.headers_separator.join(
                    k.encode() + b":" + _or_null(v, config) for k, v in headers
                )
            )
        else:
            fields.append(b"NO_HEADERS")
    if config.print_key:
        fields.append(_or_null(key, config))
    if config.print_value:
        fields.append(_or_null(value, config))
    if not fields:
        return b""
    return config.key_separator.join(fields) + config.line_separator


def _or_null(data: bytes | None, config: FormatterConfig) -> bytes:
    return config.null_literal if data is None else data
