"""Kafka-style `.properties` files: the one parser for every node and tool configuration.

Grammar (the subset of Java properties that Kafka configs use): one `key=value` (or
`key: value`) per line; blank lines and lines starting with `#` or `!` are comments; whitespace
around keys and values is dropped. A repeated key or a line without a separator is an error
naming the file and line. `integer_settings` reads a config dataclass's integer fields from
parsed properties and `positive_setting` one positive integer: the one place their "must be an
integer" error is worded.

Integers (`parse_integer`, every node setting and the controller's topic and broker configs):
Kafka's reading, which is Java's `Long.parseLong` after a trim: optional whitespace around, an
optional sign, ASCII digits and nothing else. Python's `int` also takes `1_000` and non-ASCII
digits; a value Kafka refuses must not mean a number here (`node.id=1_0` is not node 10).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from replog.errors import ConfigError

_INTEGER = re.compile(r"[+-]?[0-9]+")


def parse_integer(text: str) -> int:
    """The integer `text` spells the way Kafka reads one (module docstring); `ValueError`
    otherwise, for the caller to name the key."""
    stripped = text.strip()
    if not _INTEGER.fullmatch(stripped):
        raise ValueError("must be an integer")
    return int(stripped)


# Java's `Double.parseDouble` of a decimal (no hex form, no NaN or Infinity: a setting needs a
# finite number), with its optional float/double suffix.
_DOUBLE = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?", re.ASCII)


def parse_double(text: str) -> float:
    """The finite number `text` spells the way Kafka reads a double; `ValueError` otherwise,
    for the caller to name the key."""
    stripped = text.strip()
    if not _DOUBLE.fullmatch(stripped):
        raise ValueError("must be a number")
    value = float(stripped.rstrip("fFdD"))
    if value in (float("inf"), float("-inf")):
        raise ValueError("must be a finite number")
    return value


def integer_setting(key: str, text: str) -> int:
    """`parse_integer` of the value of `key`, or a ConfigError naming the key."""
    try:
        return parse_integer(text)
    except ValueError:
        raise ConfigError(f"{key}={text!r}: must be an integer") from None


def parse_properties(text: str, *, source: str = "<properties>") -> dict[str, str]:
    properties: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        separators = [i for i in (line.find("="), line.find(":")) if i > 0]
        if not separators:
            raise ConfigError(f"{source}:{number}: expected key=value, got {raw!r}")
        cut = min(separators)
        key, value = line[:cut].strip(), line[cut + 1 :].strip()
        if key in properties:
            raise ConfigError(f"{source}:{number}: {key} is set twice")
        properties[key] = value
    return properties


def render_properties(properties: dict[str, str], header: str = "") -> str:
    lines = [f"# {line}" for line in header.splitlines()]
    lines += [f"{key}={value}" for key, value in properties.items()]
    return "\n".join(lines) + "\n"


def integer_settings(properties: Mapping[str, object], names: Mapping[str, str]) -> dict[str, int]:
    """The integer values of the dotted keys in `names` that `properties` sets, by field name.

    `names` maps Kafka's dotted key to the config dataclass's field; keys left unset are left
    out, so the dataclass default applies. A value that is not an integer is a ConfigError
    naming the key.
    """
    values: dict[str, int] = {}
    for key, attribute in names.items():
        if key in properties:
            values[attribute] = integer_setting(key, str(properties[key]))
    return values


def positive_setting(properties: Mapping[str, str], key: str, default: int) -> int:
    """The positive integer `properties` sets for `key`, or `default` when unset; a ConfigError
    naming the key otherwise."""
    return _bounded_setting(properties, key, default, 1, "positive")


def non_negative_setting(properties: Mapping[str, str], key: str, default: int) -> int:
    """The integer >= 0 `properties` sets for `key`, or `default` when unset; a ConfigError
    naming the key otherwise."""
    return _bounded_setting(properties, key, default, 0, "0 or more")


def port_setting(properties: Mapping[str, str], key: str, default: int) -> int:
    """The port (0 to 65535; 0: any free port) `properties` sets for `key`, or `default` when
    unset; a ConfigError naming the key otherwise."""
    port = _bounded_setting(properties, key, default, 0, "0 or more")
    if port > 65535:
        raise ConfigError(f"{key}={port}: must be a port, 0 to 65535")
    return port


def _bounded_setting(
    properties: Mapping[str, str], key: str, default: int, least: int, what: str
) -> int:
    text = properties.get(key)
    if text is None:
        return default
    value = integer_setting(key, text)
    if value < least:
        raise ConfigError(f"{key}={value}: must be {what}")
    return value
