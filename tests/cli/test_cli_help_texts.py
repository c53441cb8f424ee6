"""Every `replog ... --help` speaks to users: it names commands, flags, settings and docs, never
the source files or functions behind them (`local_cluster`, `known_properties`,
`record_formatter.py`, `line_reader.py` were named once)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

from replog.cli.main import build_parser

# A source file, a path inside the package, or a backquoted snake_case identifier.
INTERNAL = re.compile(r"\b\w+\.py\b|replog/(cli|server|client|storage)/|`[a-z]+(_[a-z]+)+`")
# Snake-case names a user does type: none so far; add one here only if users write it.
USER_FACING: frozenset[str] = frozenset()


def help_texts(parser: argparse.ArgumentParser, name: str) -> Iterator[tuple[str, str]]:
    yield name, parser.format_help()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from help_texts(sub, f"{name} {sub_name}")


def test_no_help_text_names_internal_files() -> None:
    texts = dict(help_texts(build_parser(), "replog"))
    assert len(texts) > 30  # every command and action was walked
    leaks = {
        name: found
        for name, text in texts.items()
        if (found := sorted({m.group(0) for m in INTERNAL.finditer(text)} - USER_FACING))
    }
    assert leaks == {}
