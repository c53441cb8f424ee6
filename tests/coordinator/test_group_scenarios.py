"""Scenario scripts (tests/coordinator/testdata/groups/*.txt): classic group interactions with
the output they must print (the commands are in `group_scenario.py`). They specify the
coordinator's observable behaviour: when one fails, rerun with ``REWRITE=1`` and read the diff
like a code change before keeping it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from group_scenario import diff, run

SCRIPTS = sorted((Path(__file__).parent / "testdata" / "groups").glob("*.txt"))


def test_there_are_scripts() -> None:
    assert len(SCRIPTS) >= 8


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda path: path.stem)
def test_scenario(path: Path) -> None:
    expected, actual = run(path)
    if os.environ.get("REWRITE"):
        if actual != expected:
            path.write_text(actual)
        return
    if actual != expected:
        pytest.fail(
            f"{path.name} differs; REWRITE=1 regenerates it\n{diff(path, expected, actual)}",
            pytrace=False,
        )
