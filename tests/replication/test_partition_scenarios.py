"""Scenario scripts (tests/replication/testdata/*.txt): one partition's leader core
(`partition_core`) step by step, with the effects it returns as expected output.

The scripts hold the leader-side cases of docs/design/replication.md#scenarios (S1, S3, S4,
S7) and of the acks, ISR and idempotence rules; `partition_scenario.py` lists the commands
and the invariants checked after each. When one fails, rerun with
``REWRITE=1 .venv/bin/pytest tests/replication/test_partition_scenarios.py`` and read the diff
like a code change before keeping it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from partition_scenario import PartitionScenario, run_command

from tests.scenario_scripts import check_script

TESTDATA = Path(__file__).parent / "testdata"
SCRIPTS = sorted(TESTDATA.glob("*.txt"))


def test_there_are_scripts() -> None:
    assert len(SCRIPTS) >= 5


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda path: path.stem)
def test_scenario(path: Path) -> None:
    env = PartitionScenario()
    check_script(path, lambda line: run_command(env, line))
