"""The README's two set-up commands are what they claim to be, and CI runs both of them.

- Command 1 installs replog with the `spark` extra and runs the main job, `replog demo`, which
  tests/test_main_job.py runs (default arguments) as a subprocess; the ports and directory the
  README names are the demo's defaults.
- Command 2 is the test command, and `.ci/run` runs exactly it.
- The five-minute tour stops its cluster only after the last block that uses it (kcat,
  confluent-kafka, Spark and replog's client all talk to the running cluster).
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

from replog.cli import demo, demo_command

ROOT = Path(__file__).resolve().parent.parent
MAIN_JOB = (
    "python3 -m venv .venv && .venv/bin/pip install -q -e '.[spark]' && .venv/bin/replog demo"
)
TEST_COMMAND = (
    "python3 -m venv .venv && .venv/bin/pip install -q -e '.[dev]' && .venv/bin/python -m pytest"
)


def quick_start() -> str:
    text = (ROOT / "README.md").read_text()
    return text.split("## Quick start", 1)[1].split("\n## ", 1)[0]


def readme_commands() -> list[str]:
    return re.findall(r"```sh\n(.+?)\n```", quick_start())


def test_readme_has_exactly_two_setup_commands() -> None:
    assert readme_commands() == [MAIN_JOB, TEST_COMMAND]


def test_the_main_job_installs_what_the_demo_needs() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert any(d.startswith("pyspark") for d in extras["spark"])
    assert any(d.startswith("pyarrow") for d in extras["spark"])
    text = " ".join(quick_start().split())
    assert "Java 17+" in text  # the demo refuses to start without it


def test_the_readme_names_the_demos_defaults() -> None:
    text = " ".join(quick_start().split())
    first, last = demo_command.DEFAULT_BASE_PORT, demo_command.DEFAULT_BASE_PORT + 2
    assert f"ports {first}-{last}" in text
    assert f"`./{demo_command.DEFAULT_DATA_DIR.replace(os.sep, '/')}`" in text
    assert f"{demo.PARTITIONS} partitions" in text
    assert f"min.insync.replicas={demo.MIN_INSYNC_REPLICAS}" in text


def test_the_main_job_test_runs_the_readme_command() -> None:
    test = (ROOT / "tests" / "test_main_job.py").read_text()
    assert MAIN_JOB.endswith(".venv/bin/replog demo")
    assert 'Path(sys.executable).parent / "replog"' in test  # the installed command
    assert '"demo"' in test


def test_ci_runs_the_readme_test_command() -> None:
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert readme_commands()[1] in ci_lines


def tour_blocks() -> list[str]:
    """The code blocks of the five-minute tour, in order."""
    text = (ROOT / "README.md").read_text()
    tour = text.split("## A five-minute tour", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```(?:sh|python)\n(.+?)\n```", tour, re.S)


# What talks to the cluster: a Kafka or gRPC listener, a replog command other than the one
# that starts it again, a client of any kind.
USES_THE_CLUSTER = re.compile(
    r"localhost:9092|127\.0\.0\.1:\d+|bootstrap|kcat |^replog (?!cluster start)|Producer|Consumer",
    re.M,
)


def test_no_tour_block_after_the_stop_uses_the_cluster() -> None:
    blocks = tour_blocks()
    stops = [i for i, block in enumerate(blocks) if "replog cluster stop" in block]
    assert stops, "the tour stops its cluster"
    stop = stops[-1]
    after = blocks[stop].split("replog cluster stop", 1)[1]
    for block in [after, *blocks[stop + 1 :]]:
        assert not USES_THE_CLUSTER.search(block), block
    assert any(USES_THE_CLUSTER.search(block) for block in blocks[:stop])
