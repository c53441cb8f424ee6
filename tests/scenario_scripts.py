"""Data-driven scenario scripts (etcd-raft's datadriven format): commands, each followed by
``----`` and the output it must print, separated by blank lines; ``#`` lines are comments.

`run_script` runs each command through `run_command(line) -> lines` (`dispatch` gives an
interpreter's `cmd_*` methods that shape) and `check_script` compares
the rendered result with the file, or rewrites the file when ``REWRITE=1`` is set (read the diff
like a code change before keeping it). Used by tests/raft and tests/replication.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

SEPARATOR = "----"


@dataclass(frozen=True)
class Block:
    comments: tuple[str, ...]
    command: str
    expected: tuple[str, ...]
    line_number: int


def parse_script(text: str) -> list[Block]:
    """Blocks of (comment lines, command line, ----, expected lines up to a blank line)."""
    blocks: list[Block] = []
    lines = text.splitlines()
    index = 0
    comments: list[str] = []
    while index < len(lines):
        line = lines[index]
        if not line.strip() or line.startswith("#"):
            comments.append(line)
            index += 1
            continue
        command, line_number = line, index + 1
        index += 1
        if index >= len(lines) or lines[index] != SEPARATOR:
            raise ValueError(f"line {line_number}: expected {SEPARATOR!r} after {command!r}")
        index += 1
        expected: list[str] = []
        while index < len(lines) and lines[index].strip():
            expected.append(lines[index])
            index += 1
        blocks.append(Block(tuple(comments), command, tuple(expected), line_number))
        comments = []
    return blocks


def render(blocks: Iterable[Block], outputs: Iterable[list[str]]) -> str:
    parts: list[str] = []
    for block, output in zip(blocks, outputs, strict=True):
        parts.extend(block.comments)
        parts.extend([block.command, SEPARATOR, *output])
    text = "\n".join(parts)
    return text.rstrip("\n") + "\n"


def parse_command(line: str) -> tuple[str, list[str], dict[str, str]]:
    """(name, positional arguments, key=value options) of one command line."""
    words = line.split()
    args = [w for w in words[1:] if "=" not in w]
    options = dict(w.split("=", 1) for w in words[1:] if "=" in w)
    return words[0], args, options


def dispatch(env: Any, line: str) -> list[str]:
    """Run `line` as `env.cmd_<name>(args, options)` (dashes in the name as underscores),
    with `env.out` collecting what it says; then `env.check_invariants()`, where `env` has one.
    What it said, or ``ok``."""
    name, args, options = parse_command(line)
    handler: Callable[[list[str], dict[str, str]], None] | None = getattr(
        env, "cmd_" + name.replace("-", "_"), None
    )
    if handler is None:
        raise ValueError(f"unknown command {name!r}")
    env.out = []
    handler(args, options)
    check = getattr(env, "check_invariants", None)
    if check is not None:
        check()
    return env.out or ["ok"]


def run_script(
    path: Path, run_command: Callable[[str], list[str]]
) -> tuple[list[Block], list[list[str]]]:
    blocks = parse_script(path.read_text())
    outputs = []
    for block in blocks:
        try:
            outputs.append(run_command(block.command))
        except Exception as e:
            raise AssertionError(f"{path.name}:{block.line_number}: {block.command}: {e!r}") from e
    return blocks, outputs


def check_script(path: Path, run_command: Callable[[str], list[str]]) -> None:
    """Run `path` and compare its output with the file (module docstring)."""
    blocks, outputs = run_script(path, run_command)
    actual = render(blocks, outputs)
    expected = path.read_text()
    if os.environ.get("REWRITE"):
        if actual != expected:
            path.write_text(actual)
        return
    if actual != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                actual.splitlines(keepends=True),
                fromfile=f"{path.name} (expected)",
                tofile=f"{path.name} (actual)",
            )
        )
        pytest.fail(f"{path.name} differs; REWRITE=1 regenerates it\n{diff}", pytrace=False)
