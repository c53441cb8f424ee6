"""Scenario scripts: classic group interactions (tests/coordinator/testdata/groups/*.txt, the
commands in `group_scenario.py`) and consumer-protocol ones (testdata/consumer_groups/*.txt,
`consumer_group_scenario.py`), with the output they must print. They specify the
coordinator's observable behaviour: when one fails, rerun with ``REWRITE=1`` and read the diff
like a code change before keeping it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from consumer_group_scenario import ConsumerGroupScenario
from group_scenario import GroupScenario, diff, run

TESTDATA = Path(__file__).parent / "testdata"
SCRIPTS = sorted((TESTDATA / "groups").glob("*.txt"))
CONSUMER_SCRIPTS = sorted((TESTDATA / "consumer_groups").glob("*.txt"))


def test_there_are_scripts() -> None:
    assert len(SCRIPTS) >= 8
    assert len(CONSUMER_SCRIPTS) >= 8


@pytest.mark.parametrize(
    "path",
    SCRIPTS + CONSUMER_SCRIPTS,
    ids=lambda path: f"{path.parent.name}/{path.stem}",
)
def test_scenario(path: Path) -> None:
    new = ConsumerGroupScenario if path.parent.name == "consumer_groups" else GroupScenario
    expected, actual = run(path, new)
    if os.environ.get("REWRITE"):
        if actual != expected:
            path.write_text(actual)
        return
    if actual != expected:
        pytest.fail(
            f"{path.name} differs; REWRITE=1 regenerates it\n{diff(path, expected, actual)}",
            pytrace=False,
        )
