"""Scenario scripts (tests/raft/testdata/*.txt): readable Raft interactions with expected output.

Each script is a sequence of commands (see `scenario.py`), each followed by ``----`` and the
output it must print. The scripts are the specification of the core's observable behaviour:
when one fails, rerun with ``REWRITE=1 .venv/bin/pytest tests/raft`` and read the diff like a
code change before keeping it.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest
from raft_scenario import render, run_script

TESTDATA = Path(__file__).parent / "testdata"
SCRIPTS = sorted(TESTDATA.glob("*.txt"))


def test_there_are_scripts() -> None:
    assert len(SCRIPTS) >= 5


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda path: path.stem)
def test_scenario(path: Path) -> None:
    blocks, outputs = run_script(path)
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
