"""The suite's scheduler (tests/grouped_scheduling.py): the last groups come after every other
unit, in the order given; when a worker dies, the run ends, the test the worker died on is
reported as failed by name and not run again, every other test runs once;
and the worker's watch (tests/worker_watch.py) says how it died: a test whose memory runs away is
stopped at the limit, a worker killed by a signal is named with the test it ran and its size.
Each test runs a small pytest session of its own with two xdist workers, as a subprocess."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUN_TIMEOUT_S = 90
XDIST = ("-n", "2", "--dist", "loadgroup")

CONFTEST = """
from tests.grouped_scheduling import grouped_scheduler

pytest_plugins = ("tests.worker_watch",)

def pytest_xdist_make_scheduler(config, log):
    return grouped_scheduler(config, log, group_of, last=("late",))

def group_of(nodeid):
    if nodeid.startswith("test_group.py"):
        return "group"
    if nodeid in SECOND:
        return "second"
    if nodeid in LATE:
        return "late"
    return None

SECOND = {f"test_free.py::test_free_{n}" for n in range(20, 24)}
LATE = {f"test_free.py::test_free_{n}" for n in range(4)}
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
# 8 MiB more every 5 ms, each byte written (so resident), until something stops it.
RUNAWAY = (
    "    hog = []\n    while True:\n        hog.append(b'x' * 2**23)\n        time.sleep(0.005)\n"
)
# Killed a moment into its test, as by the OOM killer (the watch samples every 0.5 s).
SIGKILL = "    import signal\n    time.sleep(1.2)\n    os.kill(os.getpid(), signal.SIGKILL)\n"
LIMIT_MB = 400


def session(
    tmp_path: Path,
    group: tuple[int, str] | None,
    free: tuple[int, str] | None,
    timeout_s: int = 4,
) -> str:
    """Run 4 grouped and 24 free tests (the first 4 of them a group handed out last, the last 4
    a second group) on two workers, test number n of a module ending with the line given for it
    (an exit, a hang); the session's output."""
    # The suite's own timeout settings (pyproject.toml), with a shorter timeout.
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nasyncio_default_fixture_loop_scope = function\n"
        f"timeout = {timeout_s}\ntimeout_method = thread\nworker_rss_limit_mb = {LIMIT_MB}\n"
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


@pytest.mark.parametrize(
    ("group", "free", "crashed", "ended"),
    [
        (None, (5, RUNAWAY), "test_free.py::test_free_5", "exit code 1"),
        ((1, SIGKILL), None, "test_group.py::test_group_1", "killed by SIGKILL"),
    ],
    ids=["a test's memory runs away", "a worker is killed"],
)
def test_a_dead_workers_report_names_its_test_its_size_and_how_it_ended(
    tmp_path: Path,
    group: tuple[int, str] | None,
    free: tuple[int, str] | None,
    crashed: str,
    ended: str,
) -> None:
    # The runaway is stopped by the memory limit, not by the timeout: a worker at the suite's
    # low priority beside busy cores may take many seconds to fill the limit's pages.
    out = session(tmp_path, group, free, timeout_s=4 if free is None else 300)
    assert "1 failed, 27 passed" in out, out
    assert f"crashed while running '{crashed}'" in out, out
    # Printed when the worker goes down, and again in the crashed test's report.
    line = rf"worker gw\d ended \({ended}\); last seen: gw\d: \D*(\d+) MiB .*{re.escape(crashed)}"
    seen = re.findall(line, out)
    assert len(seen) == 2, out
    if free is not None:  # the runaway: stopped at the limit, with its stack
        assert f"is over worker_rss_limit_mb ({LIMIT_MB}) while running {crashed}" in out, out
        assert "in test_free_5" in out, out  # the runaway thread's stack names its test
        assert int(seen[0]) > LIMIT_MB


def test_each_group_runs_in_order_on_one_worker(tmp_path: Path) -> None:
    out = session(tmp_path, None, None)
    assert "28 passed" in out, out
    ran = runs(tmp_path)
    grouped = [(test, worker) for test, worker in ran if test.startswith("group")]
    assert [test for test, _ in grouped] == [f"group_{n}" for n in range(4)], ran
    assert len({worker for _, worker in grouped}) == 1, ran
    second = [f"free_{n}" for n in range(20, 24)]
    in_second = [(test, worker) for test, worker in ran if test in second]
    assert [test for test, _ in in_second] == second, ran
    assert len({worker for _, worker in in_second}) == 1, ran
    assert len({worker for _, worker in ran}) == 2, ran
    assert len(ran) == 28
    # The late group, first in the collection, is handed out after every other unit: when it
    # starts, the other worker holds two tests at most, the one it runs included.
    late = [f"free_{n}" for n in range(4)]
    in_late = [(test, worker) for test, worker in ran if test in late]
    assert [test for test, _ in in_late] == late, ran
    assert len({worker for _, worker in in_late}) == 1, ran
    after_late = [test for test, _ in ran[ran.index(in_late[0]) :] if test not in late]
    assert len(after_late) <= 2, ran


class _Worker:
    """A worker as the scheduler sees one: it is sent test indexes and is never shutting down."""

    shutting_down = False

    def __init__(self) -> None:
        self.sent: list[list[int]] = []

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.sent.append(indexes)


def test_the_last_groups_are_handed_out_after_every_other_unit_in_the_order_given() -> None:
    class Config:
        option = SimpleNamespace(loadscopereorder=True)  # xdist's default: largest unit first

        def getvalue(self, name: str) -> object:
            return ["1*popen"] if name == "tx" else None

    from tests.grouped_scheduling import grouped_scheduler

    def group_of(nodeid: str) -> str | None:
        return nodeid.split("::")[0] if nodeid.startswith("last_") else None

    collection = [
        "last_b.py::test_1",
        "free.py::test_1",
        "last_a.py::test_1",
        "last_a.py::test_2",
        "last_c.py::test_1",
        "free.py::test_2",
    ]
    scheduler = grouped_scheduler(
        Config(), None, group_of, last=("last_c.py", "last_a.py", "last_b.py")
    )
    worker = _Worker()
    scheduler.add_node(worker)
    scheduler.add_node_collection(worker, collection)
    scheduler.schedule()
    while scheduler.workqueue:
        scheduler._assign_work_unit(worker)
    handed = [collection[index].split("::")[0] for batch in worker.sent for index in batch]
    assert handed == ["free.py", "free.py", "last_c.py", "last_a.py", "last_a.py", "last_b.py"]
