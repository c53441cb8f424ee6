"""Scenario scripts (tests/replication/testdata/*.txt): one partition's leader core
(`partition_core`) step by step, with the effects it returns as expected output.

The scripts hold the leader-side cases of docs/design/replication.md#scenarios (S1, S3, S4,
S7) and of the acks, ISR and idempotence rules; `partition_scenario.py` lists the commands
and the invariants checked after each. The `truncation_*` scripts hold the KIP-101 and KIP-279
cases (S1, S2, S3, S6) on replicas' logs modelled as leader epochs per offset, through the
pure fetch and truncation rules (`truncation_scenario.py`). When one fails, rerun with
``REWRITE=1 .venv/bin/pytest tests/replication/test_partition_scenarios.py`` and read the diff
like a code change before keeping it.
"""

from __future__ import annotations

from pathlib import Path

import partition_scenario
import pytest
import truncation_scenario

from tests.scenario_scripts import check_script

TESTDATA = Path(__file__).parent / "testdata"
SCRIPTS = sorted(TESTDATA.glob("*.txt"))


def test_there_are_scripts() -> None:
    assert len(SCRIPTS) >= 5


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda path: path.stem)
def test_scenario(path: Path) -> None:
    if path.stem.startswith("truncation"):
        replicas = truncation_scenario.TruncationScenario()
        check_script(path, lambda line: truncation_scenario.run_command(replicas, line))
    else:
        core = partition_scenario.PartitionScenario()
        check_script(path, lambda line: partition_scenario.run_command(core, line))
