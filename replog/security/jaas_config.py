"""A `sasl.jaas.config` value read as Kafka's JaasConfig reads it: one login module, its
control flag and its options.

Grammar: `<class name> <flag> [<key>=<value> ...];` with the flag one of required, requisite,
sufficient, optional; a value is a double-quoted string (a backslash escapes the next
character) or a bare word; entries are separated by white space.

Rules:
- Exactly one login module (Kafka's rule for a listener's `sasl.jaas.config`); a value that
  does not follow the grammar raises `ConfigError` naming the key and what was wrong, never an
  option's value (it may be a password).
- `plain_users` gives PlainLoginModule's `user_NAME="password"` options as {NAME: password},
  what Kafka's PlainServerCallbackHandler checks a PLAIN client against.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from replog.errors import ConfigError

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")
USER_PREFIX = "user_"

_TOKEN = re.compile(
    r'\s*(?:(?P<quoted>"(?:[^"\\]|\\.)*")|(?P<end>;)|(?P<word>[^\s=;"]+)|(?P<eq>=))', re.S
)


@dataclass(frozen=True, slots=True)
class JaasConfig:
    login_module: str
    control_flag: str
    options: dict[str, str]

    def __repr__(self) -> str:
        return (
            f"JaasConfig({self.login_module!r}, {self.control_flag!r}, "
            f"options={sorted(self.options)})"
        )

    def plain_users(self) -> dict[str, str]:
        return {
            key.removeprefix(USER_PREFIX): value
            for key, value in self.options.items()
            if key.startswith(USER_PREFIX) and len(key) > len(USER_PREFIX)
        }


def _tokens(text: str, key: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    position = 0
    while text[position:].strip():
        match = _TOKEN.match(text, position)
        if match is None:
            raise ConfigError(f"{key}: unexpected text at character {position + 1}")
        kind = match.lastgroup
        assert kind is not None
        value = match.group(kind)
        if kind == "quoted":
            value = re.sub(r"\\(.)", r"\1", value[1:-1], flags=re.S)
        tokens.append((kind, value))
        position = match.end()
    return tokens


def parse_jaas_config(text: str, key: str) -> JaasConfig:
    """The single login module of `text`, the value of setting `key`."""
    tokens = _tokens(text, key)
    if not tokens:
        raise ConfigError(f"{key}: empty; expected '<login module> required [options];'")
    modules = sum(1 for kind, _ in tokens if kind == "end")
    if modules != 1 or tokens[-1][0] != "end":
        raise ConfigError(
            f"{key}: JAAS config property contains {modules} login modules, should be 1 "
            "module, ended by ';'"
        )
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "word":
        raise ConfigError(f"{key}: expected '<login module> <control flag> [options];'")
    module, flag = tokens[0][1], tokens[1][1].lower()
    if flag not in CONTROL_FLAGS:
        raise ConfigError(
            f"{key}: login module control flag {tokens[1][1]!r} is not one of "
            f"{', '.join(CONTROL_FLAGS)}"
        )
    options: dict[str, str] = {}
    rest = tokens[2:-1]
    if len(rest) % 3:
        raise ConfigError(f"{key}: options must be key=value pairs")
    for index in range(0, len(rest), 3):
        (name_kind, name), (eq_kind, _), (value_kind, value) = rest[index : index + 3]
        if name_kind != "word" or eq_kind != "eq" or value_kind not in ("word", "quoted"):
            raise ConfigError(f"{key}: option {index // 3 + 1} is not key=value")
        options[name] = value
    return JaasConfig(module, flag, options)
