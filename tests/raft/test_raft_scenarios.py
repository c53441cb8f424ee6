"""Scenario scripts (tests/raft/testdata/*.txt): readable Raft interactions with expected output.

Each script is a sequence of commands (see `scenario.py`), each followed by ``----`` and the
output it must print. The scripts are the specification of the core's observable behaviour:
when one fails, rerun with ``REWRITE=1 .venv/bin/pytest tests/raft`` and read the diff like a
code change before keeping it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from raft_scenario import ScenarioEnv, run_command

from tests.scenario_scripts import check_script

TESTDATA = Path(__file__).parent / "testdata"
SCRIPTS = sorted(TESTDATA.glob("*.txt"))


def test_there_are_scripts() -> None:
    assert len(SCRIPTS) >= 5


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda path: path.stem)
def test_scenario(path: Path) -> None:
    env = ScenarioEnv()
    check_script(path, lambda line: run_command(env, line))
