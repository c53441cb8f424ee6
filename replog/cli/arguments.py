"""Argument parsing the `replog` commands share: actions under a command, whole-number and
seconds types and `KEY=VALUE` lists."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from replog.cli.commands import command_help
from replog.errors import ReplogError

# Spelled out, not imported from replog.record: that package loads the batch codec, which a
# command's argument parser does not need (`replog --help` stays fast).
INT32_MAX = 2**31 - 1

Action = Callable[[str, str, Any], argparse.ArgumentParser]


def add_documented_command(commands: Any, name: str, doc: str | None) -> argparse.ArgumentParser:
    """Add `replog NAME` to `commands`, summed up as `replog --help` lists it, its `--help`
    showing `doc` (a module docstring) as written."""
    parser: argparse.ArgumentParser = commands.add_parser(
        name,
        help=command_help(name),
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser


def add_command(commands: Any, name: str, doc: str | None, *, headed: bool) -> Action:
    """Add `replog NAME ACTION ...` (described by `doc`) to `commands`; returns
    `action(name, help_text, run)`, which adds an ACTION that runs `run(args)`, described by
    `doc` too (after its own help text when `headed`)."""
    parser = add_documented_command(commands, name, doc)
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    def action(name: str, help_text: str, run: Any) -> argparse.ArgumentParser:
        sub: argparse.ArgumentParser = actions.add_parser(
            name,
            help=help_text,
            description=f"{help_text}.\n\n{doc}" if headed else doc,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        sub.set_defaults(run=run)
        return sub

    return action


def deferred(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    """A command's `run` that imports `module` when it runs and calls its `name`: a command
    whose actions need the node's runtime or gRPC builds its parser (and prints `--help`)
    without loading them."""

    def run(args: argparse.Namespace) -> int:
        code: int = getattr(importlib.import_module(module), name)(args)
        return code

    return run


def at_least(minimum: int, maximum: int = INT32_MAX) -> Callable[[str], int]:
    """An argparse type: a whole number in [`minimum`, `maximum`] (int32 unless the field is
    wider on the wire: a larger number is a usage error, not a traceback from the encoder)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text!r}: must be at least {minimum}")
        if value > maximum:
            raise argparse.ArgumentTypeError(f"{text!r}: must be at most {maximum}")
        return value

    return parse


def positive_seconds(text: str) -> float:
    """An argparse type: a number of seconds above 0."""
    return _positive(text, float, "seconds")


def positive_ms(text: str) -> int:
    """An argparse type: a whole number of milliseconds above 0."""
    return _positive(text, int, "milliseconds")


N = TypeVar("N", int, float)


def _positive(text: str, parse: Callable[[str], N], unit: str) -> N:
    try:
        value = parse(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of {unit}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be more than 0")
    return value


def parse_key_values(
    items: Sequence[str] | None, option: str, *, strip_values: bool
) -> dict[str, str]:
    """`KEY=VALUE` arguments of `option` -> a dict; a malformed or repeated key is a one-line
    error. Keys are stripped of white space, values too when `strip_values`."""
    found: dict[str, str] = {}
    for item in items or ():
        key, equals, value = item.partition("=")
        key = key.strip()
        if not equals or not key:
            raise ReplogError(f"{option} {item!r}: expected KEY=VALUE")
        if key in found:
            raise ReplogError(f"{option} {key}: given twice")
        found[key] = value.strip() if strip_values else value
    return found
