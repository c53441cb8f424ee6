"""The suite's scheduler (tests/grouped_scheduling.py) when a worker dies: the run ends, the test
the worker died on is reported as failed by name and not run again, every other test runs once.
Each test runs a small pytest session of its own with two xdist workers, as a subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUN_TIMEOUT_S = 90
XDIST = ("-n", "2", "--dist", "loadgroup")

CONFTEST = """
from tests.grouped_scheduling import grouped_scheduler

def pytest_xdist_make_scheduler(config, log):
    return grouped_scheduler(config, log, lambda nodeid: nodeid.startswith("test_group.py"))
"""

# Every test notes that it ran (one line per run), so a test run twice shows.
RAN = """
import os, time
from pathlib import Path

def ran(name):
    with open(Path(__file__).parent / "ran.txt", "a") as f:
        f.write(name + " " + os.environ["PYTEST_XDIST_WORKER"] + "\\n")
    time.sleep(0.05)
"""


EXIT = "    os._exit(3)\n"
HANG = "    time.sleep(3600)\n"


def session(tmp_path: Path, group: tuple[int, str] | None, free: tuple[int, str] | None) -> str:
    """Run 4 grouped and 24 free tests on two workers, test number n of a module ending with the
    line given for it (an exit, a hang); the session's output."""
    # The suite's own timeout settings (pyproject.toml), with a shorter timeout.
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nasyncio_default_fixture_loop_scope = function\n"
        "timeout = 4\ntimeout_method = thread\n"
    )
    (tmp_path / "conftest.py").write_text(CONFTEST)

    def module(prefix: str, count: int, trouble: tuple[int, str] | None) -> str:
        tests = [RAN]
        for n in range(count):
            last = trouble[1] if trouble is not None and trouble[0] == n else ""
            tests.append(f"def test_{prefix}_{n}():\n    ran('{prefix}_{n}')\n{last}")
        return "\n".join(tests)

    (tmp_path / "test_group.py").write_text(module("group", 4, group))
    (tmp_path / "test_free.py").write_text(module("free", 24, free))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", *XDIST, "-p", "no:cacheprovider"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    return result.stdout + result.stderr


def runs(tmp_path: Path) -> list[tuple[str, str]]:
    """(test, worker) for every run of a test, in the order they ran."""
    lines = (tmp_path / "ran.txt").read_text().splitlines()
    return [(test, worker) for test, worker in (line.split() for line in lines)]


@pytest.mark.parametrize(
    ("group", "free", "crashed"),
    [
        ((1, EXIT), None, "test_group.py::test_group_1"),
        (None, (17, EXIT), "test_free.py::test_free_17"),
        ((2, HANG), None, "test_group.py::test_group_2"),
    ],
    ids=["a grouped test exits", "another test exits", "a grouped test hangs"],
)
def test_a_dead_worker_fails_its_test_by_name_and_the_run_goes_on_to_its_end(
    tmp_path: Path, group: tuple[int, str] | None, free: tuple[int, str] | None, crashed: str
) -> None:
    out = session(tmp_path, group, free)
    assert "replacing crashed worker" in out, out
    assert f"crashed while running '{crashed}'" in out, out
    assert "1 failed, 27 passed" in out, out
    ran = [test for test, _ in runs(tmp_path)]
    assert len(ran) == len(set(ran)) == 28, f"not every test ran exactly once: {ran}"


def test_the_group_runs_in_order_on_one_worker(tmp_path: Path) -> None:
    out = session(tmp_path, None, None)
    assert "28 passed" in out, out
    ran = runs(tmp_path)
    grouped = [(test, worker) for test, worker in ran if test.startswith("group")]
    assert [test for test, _ in grouped] == [f"group_{n}" for n in range(4)], ran
    assert len({worker for _, worker in grouped}) == 1, ran
    assert len({worker for _, worker in ran}) == 2, ran
    assert len(ran) == 28
