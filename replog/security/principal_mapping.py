"""The principal of a TLS client: its certificate's subject mapped by
`ssl.principal.mapping.rules` (Kafka's SslPrincipalMapper and DefaultKafkaPrincipalBuilder).

Rules:
- The rules are a comma-separated list, tried in order; the first that maps the subject names
  the user. `DEFAULT` maps a subject to itself (the default rules are just `DEFAULT`).
  `RULE:pattern/replacement/` maps a subject the pattern matches whole to the replacement
  (`$1`... for its groups, `\\x` for a literal x; a `$N` beyond the pattern's groups is kept as
  text), then `/L` or `/U` lower- or upper-cases it. Empty entries are skipped; an entry that is
  none of these, a pattern that does not compile, or a replacement Java would fail on when
  applied (a `$` naming no group) is a `ConfigError` naming it.
- A subject no rule maps raises `NoMatchingPrincipalRuleError`. A client without a certificate
  is `User:ANONYMOUS`; one with a certificate is `User:<mapped subject>`, the subject as
  `distinguished_name.subject_name` prints it.
- Patterns are Python regular expressions: Java's syntax in the forms rules use (groups,
  classes, anchors, lazy quantifiers); Kafka 4.4.0's answers are in `tests/security/gold`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from replog.errors import ConfigError, NoMatchingPrincipalRuleError
from replog.security.distinguished_name import subject_name
from replog.security.principal import ANONYMOUS, USER_TYPE, KafkaPrincipal

RULES_KEY = "ssl.principal.mapping.rules"
_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_PARSER = re.compile(_RULE)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "L", "U" or ""

    def apply(self, subject: str) -> str | None:
        if self.pattern is None:
            return subject
        if self.pattern.fullmatch(subject) is None:
            return None
        replacement = _literal_back_references(self.replacement, self.pattern.groups)
        mapped = self.pattern.sub(lambda m: _expand(replacement, m), subject)
        return (
            mapped.lower() if self.case == "L" else mapped.upper() if self.case == "U" else mapped
        )


def _literal_back_references(replacement: str, groups: int) -> str:
    """Kafka's: `$N` naming no group of the pattern stays text (its longest prefix that names
    a group is the reference: `$12` with 1 group is group 1 then "2")."""
    if groups == 0:
        return replacement
    value = replacement
    for found in list(_BACK_REFERENCE.finditer(replacement))[::-1]:
        digits = found.group(1)
        if digits.startswith("0"):
            continue
        index = int(digits)
        while index > groups and index >= 10:
            index //= 10
        if index > groups:
            value = value[: found.start()] + "\\" + value[found.start() :]
    return value


def _expand(replacement: str, match: re.Match[str]) -> str:
    """Java's `Matcher.appendReplacement` text for `match`: `\\x` is x, `$N` group N (as many
    digits as still name a group), `${name}` a named group."""
    out, i, groups = [], 0, match.re.groups
    while i < len(replacement):
        c = replacement[i]
        if c == "\\":  # the rule grammar takes backslashes in pairs: one escapes the next
            out.append(replacement[i + 1])
            i += 2
        elif c == "$" and replacement[i + 1 : i + 2] == "{":
            end = replacement.find("}", i)
            name = replacement[i + 2 : end]
            out.append(match.group(name) or "")
            i = end + 1
        elif c == "$" and replacement[i + 1 : i + 2].isdigit():
            index, i = int(replacement[i + 1]), i + 2
            while i < len(replacement) and replacement[i].isdigit():
                longer = index * 10 + int(replacement[i])
                if longer > groups:
                    break
                index, i = longer, i + 1
            out.append(match.group(index) or "")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _check_replacement(rule: str, replacement: str, pattern: re.Pattern[str]) -> None:
    """Refuse now what Java's replacement would fail on when first applied: a `$` naming no
    group, a `${name}` the pattern does not have. (A backslash always escapes a character: the
    rule grammar takes them in pairs.)"""
    i = 0
    while i < len(replacement):
        c, following = replacement[i], replacement[i + 1 : i + 2]
        if c == "$" and following == "{":
            end = replacement.find("}", i)
            if end < 0 or replacement[i + 2 : end] not in pattern.groupindex:
                raise ConfigError(f"{RULES_KEY}: rule `{rule}`: no group named in {replacement!r}")
        elif c == "$" and not following.isdigit():
            raise ConfigError(f"{RULES_KEY}: rule `{rule}`: `$` names no group in {replacement!r}")
        i += 2 if c == "\\" else 1


class PrincipalMapper:
    __slots__ = ("rules",)

    def __init__(self, rules: tuple[_Rule, ...]) -> None:
        self.rules = rules

    @classmethod
    def from_rules(cls, text: str = "DEFAULT") -> PrincipalMapper:
        parsed = []
        for found in _SPLITTER.finditer(text.strip()):
            rule = found.group(1)
            matched = _PARSER.match(rule)
            assert matched is not None  # the last alternative matches anything
            if matched.end() != len(rule):
                raise ConfigError(
                    f"{RULES_KEY}: invalid rule `{rule}`, unmatched substring "
                    f"`{rule[matched.end() :]}`"
                )
            if matched.group(1) is not None:
                parsed.append(_Rule(None))
            elif matched.group(2) is not None:
                try:
                    pattern = re.compile(matched.group(2))
                except re.error as exc:
                    raise ConfigError(f"{RULES_KEY}: rule `{rule}`: {exc}") from None
                _check_replacement(rule, matched.group(4), pattern)
                parsed.append(_Rule(pattern, matched.group(4), matched.group(6)))
        return cls(tuple(parsed))

    def name(self, subject: str) -> str:
        for rule in self.rules:
            mapped = rule.apply(subject)
            if mapped is not None:
                return mapped
        raise NoMatchingPrincipalRuleError(
            f"no rule of {RULES_KEY} maps the certificate subject {subject!r}"
        )


def tls_principal(certificate: bytes | None, mapper: PrincipalMapper) -> KafkaPrincipal:
    """The principal of a TLS client whose certificate (DER) is `certificate`, None: none."""
    if certificate is None:
        return ANONYMOUS
    return KafkaPrincipal(USER_TYPE, mapper.name(subject_name(certificate)))
