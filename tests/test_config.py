"""replog/config.py: the properties parser's integer readers and their errors."""

from __future__ import annotations

import re

import pytest

from replog.config import integer_settings, positive_setting
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


def test_integer_settings_maps_dotted_keys_to_fields_and_leaves_unset_ones_out() -> None:
    names = {"x.y.ms": "x_y_ms", "unset.key": "unset"}
    assert integer_settings({"x.y.ms": "-1"}, names) == {"x_y_ms": -1}
    with pytest.raises(ConfigError, match=re.escape("x.y.ms='1.5': must be an integer")):
        integer_settings({"x.y.ms": "1.5"}, names)
