"""replog/config.py: the properties parser's integer readers and their errors; integers are
read as Kafka reads them (Java's Long.parseLong after a trim)."""

from __future__ import annotations

import re

import pytest

from replog.config import (
    integer_setting,
    integer_settings,
    parse_integer,
    port_setting,
    positive_setting,
)
from replog.errors import ConfigError


def test_positive_setting_reads_the_key_or_falls_back_to_the_default() -> None:
    assert positive_setting({"a.b.ms": "250"}, "a.b.ms", 9) == 250
    assert positive_setting({}, "a.b.ms", 9) == 9


@pytest.mark.parametrize(
    ("text", "message"),
    [("ten", "a.b.ms='ten': must be an integer"), ("0", "a.b.ms=0: must be positive")],
)
def test_positive_setting_names_the_key_it_refuses(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        positive_setting({"a.b.ms": text}, "a.b.ms", 9)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("-1", "controller.quorum.fetch.port=-1: must be 0 or more"),
        ("65536", "controller.quorum.fetch.port=65536: must be a port, 0 to 65535"),
    ],
)
def test_port_setting_takes_0_to_65535_and_names_the_key_it_refuses(
    text: str, message: str
) -> None:
    assert (
        port_setting({"controller.quorum.fetch.port": "65535"}, "controller.quorum.fetch.port", 0)
        == 65535
    )
    assert port_setting({}, "controller.quorum.fetch.port", 0) == 0
    with pytest.raises(ConfigError, match=re.escape(message)):
        port_setting({"controller.quorum.fetch.port": text}, "controller.quorum.fetch.port", 0)


def test_integer_settings_maps_dotted_keys_to_fields_and_leaves_unset_ones_out() -> None:
    names = {"x.y.ms": "x_y_ms", "unset.key": "unset"}
    assert integer_settings({"x.y.ms": "-1"}, names) == {"x_y_ms": -1}
    with pytest.raises(ConfigError, match=re.escape("x.y.ms='1.5': must be an integer")):
        integer_settings({"x.y.ms": "1.5"}, names)


@pytest.mark.parametrize(
    ("text", "value"), [("10", 10), (" 10 ", 10), ("-7", -7), ("+7", 7), ("007", 7)]
)
def test_integers_are_read_as_kafka_reads_them(text: str, value: int) -> None:
    assert parse_integer(text) == value
    assert integer_setting("a.b", text) == value


@pytest.mark.parametrize(
    "text", ["1_0", "1_000_000", "\u0661\u0660", "1.0", "0x10", "", " ", "-", "1 0"]
)
def test_what_kafka_refuses_is_no_integer_here(text: str) -> None:
    # Python's int() would read `node.id=1_0` as node 10; Kafka refuses it.
    with pytest.raises(ValueError, match="must be an integer"):
        parse_integer(text)
    with pytest.raises(ConfigError, match=re.escape(f"a.b={text!r}: must be an integer")):
        integer_setting("a.b", text)
    with pytest.raises(ConfigError, match=re.escape(f"a.b={text!r}: must be an integer")):
        integer_settings({"a.b": text}, {"a.b": "a_b"})
