"""How `replog produce` turns one input line into a record: kafka-console-producer.sh's line reader.

Pure: bytes in, (headers, key, value) out, or a one-line `ReplogError` naming the line.

Rules (Kafka's `LineMessageReader` properties, given with `--property NAME=VALUE`):
- By default the whole line (without its `\\n` or `\\r\\n`) is the value, and there is no key.
- `parse.key=true`: the line is `KEY<key.separator>VALUE`, split at the first separator
  (default TAB). A line without the separator is an error naming its number, or with
  `ignore.error=true` the whole line is the value and the key is null.
- `parse.headers=true`: the line starts with headers, ended by `headers.delimiter` (default
  TAB): `K1<headers.key.separator>V1<headers.separator>K2...`, with `headers.separator` ","
  and `headers.key.separator` ":" by default. A header without the key separator has a null
  value; an empty header section has no headers. Headers come first, then the key, then the
  value: `h1:v1,h2:v2<TAB>key<TAB>value`. A missing delimiter is an error, or with
  `ignore.error=true` the line has no headers.
- `null.marker=M`: a key, value or header value equal to M is null; a header key equal to it is
  an error (header keys cannot be null). The marker may not equal any separator, and
  `headers.separator` may not equal `headers.key.separator` (Kafka's checks).
- Values are taken byte for byte; separators and header keys are UTF-8 (header keys are
  strings on the wire).
- An unknown property is an error naming it and the known ones (Kafka ignores them silently;
  a typo here would otherwise change what is sent).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from replog.errors import ReplogError

PROPERTIES = (
    "parse.key",
    "key.separator",
    "parse.headers",
    "headers.delimiter",
    "headers.separator",
    "headers.key.separator",
    "null.marker",
    "ignore.error",
)

Header = tuple[str, bytes | None]


@dataclass(frozen=True)
class LineRecord:
    headers: tuple[Header, ...]
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True)
class LineReaderConfig:
    parse_key: bool = False
    key_separator: bytes = b"\t"
    parse_headers: bool = False
    headers_delimiter: bytes = b"\t"
    headers_separator: bytes = b","
    headers_key_separator: bytes = b":"
    null_marker: bytes | None = None
    ignore_error: bool = False

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> LineReaderConfig:
        unknown = sorted(set(properties) - set(PROPERTIES))
        if unknown:
            raise ReplogError(f"--property {unknown[0]}: unknown; known: {', '.join(PROPERTIES)}")

        def flag(name: str) -> bool:
            text = properties.get(name, "false").strip().lower()
            if text not in ("true", "false"):
                raise ReplogError(f"--property {name}={properties[name]}: must be true or false")
            return text == "true"

        def separator(name: str, default: bytes) -> bytes:
            if name not in properties:
                return default
            value = properties[name].encode()
            if not value:
                raise ReplogError(f"--property {name}: may not be empty")
            return value

        marker = properties.get("null.marker")
        config = cls(
            parse_key=flag("parse.key"),
            key_separator=separator("key.separator", b"\t"),
            parse_headers=flag("parse.headers"),
            headers_delimiter=separator("headers.delimiter", b"\t"),
            headers_separator=separator("headers.separator", b","),
            headers_key_separator=separator("headers.key.separator", b":"),
            null_marker=None if marker is None else marker.encode(),
            ignore_error=flag("ignore.error"),
        )
        config.check()
        return config

    def check(self) -> None:
        """Kafka's checks: separators that would make a line ambiguous."""
        if self.headers_separator == self.headers_key_separator:
            raise ReplogError(
                "--property headers.separator and headers.key.separator may not be equal"
            )
        if self.null_marker is None:
            return
        for name, value in (
            ("key.separator", self.key_separator),
            ("headers.delimiter", self.headers_delimiter),
            ("headers.separator", self.headers_separator),
            ("headers.key.separator", self.headers_key_separator),
        ):
            if value == self.null_marker:
                raise ReplogError(f"--property null.marker and {name} may not be equal")


def strip_newline(line: bytes) -> bytes:
    if line.endswith(b"\r\n"):
        return line[:-2]
    if line.endswith(b"\n"):
        return line[:-1]
    return line


def parse_line(line: bytes, number: int, config: LineReaderConfig) -> LineRecord:
    """One record from one line (already without its newline); `number` counts from 1."""
    rest = line
    headers: tuple[Header, ...] = ()
    if config.parse_headers:
        section, found, after = rest.partition(config.headers_delimiter)
        if found:
            headers = _headers(section, config)
            rest = after
        elif not config.ignore_error:
            raise ReplogError(f"No headers delimiter found on line number {number}: {_show(line)}")
    key: bytes | None = None
    if config.parse_key:
        head, found, after = rest.partition(config.key_separator)
        if found:
            key, rest = _nullable(head, config), after
        elif not config.ignore_error:
            raise ReplogError(f"No key separator found on line number {number}: {_show(line)}")
    return LineRecord(headers, key, _nullable(rest, config))


def _headers(section: bytes, config: LineReaderConfig) -> tuple[Header, ...]:
    if not section:
        return ()
    headers: list[Header] = []
    for item in section.split(config.headers_separator):
        raw_key, found, raw_value = item.partition(config.headers_key_separator)
        if config.null_marker is not None and raw_key == config.null_marker:
            raise ReplogError(
                f"Header keys should not be equal to the null marker {_show(config.null_marker)} "
                "as they can't be null"
            )
        value = _nullable(raw_value, config) if found else None
        headers.append((raw_key.decode("utf-8", errors="replace"), value))
    return tuple(headers)


def _nullable(value: bytes, config: LineReaderConfig) -> bytes | None:
    return None if config.null_marker is not None and value == config.null_marker else value


def _show(line: bytes) -> str:
    return repr(line.decode("utf-8", errors="replace"))
