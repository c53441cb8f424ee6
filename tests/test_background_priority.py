"""tests/background_priority.py: every thread of a process is lowered and never raised back;
and in a pytest session of three workers, the two lanes' groups run at the session's priority
on workers of their own while the third worker runs the other tests lowered, and a last group
runs lowered too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUN_TIMEOUT_S = 90

LOWER_THREADS = """
import os, threading
from tests.background_priority import lower_every_thread

def nice_of_every_thread():
    return {os.getpriority(os.PRIO_PROCESS, int(t)) for t in os.listdir("/proc/self/task")}

base = os.getpriority(os.PRIO_PROCESS, 0)
parked = threading.Event()
started = threading.Thread(target=parked.wait)
started.start()
lower_every_thread(base + 3)
print(sorted(nice_of_every_thread()))
later = []
thread = threading.Thread(target=lambda: later.append(os.getpriority(os.PRIO_PROCESS, 0)))
thread.start(); thread.join()
print(later)
lower_every_thread(base + 1)  # never raised back
print(sorted(nice_of_every_thread()))
parked.set(); started.join()
"""


def test_every_thread_is_lowered_a_later_thread_too_and_none_raised_back() -> None:
    base = os.getpriority(os.PRIO_PROCESS, 0)
    run = subprocess.run(
        [sys.executable, "-c", LOWER_THREADS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lowered = base + 3
    assert run.stdout.split("\n")[:3] == [f"[{lowered}]", f"[{lowered}]", f"[{lowered}]"]


CONFTEST = """
import tests.background_priority
from tests.grouped_scheduling import grouped_scheduler

def group_of(module):
    return module.removesuffix(".py") if "group" in module else None

tests.background_priority.BACKGROUND_NICE = 19  # above whatever this session started at
tests.background_priority.group_of_module = lambda path: group_of(path.name)
LAST = {"test_late_group"}
tests.background_priority.lowered_groups = LAST
pytest_plugins = ("tests.background_priority",)

def pytest_xdist_make_scheduler(config, log):
    return grouped_scheduler(config, log, lambda nodeid: group_of(nodeid.split("::")[0]), LAST)
"""

RAN = """
import os, time
from pathlib import Path

def ran(name):
    nice = os.getpriority(os.PRIO_PROCESS, 0)
    with open(Path(__file__).parent / "ran.txt", "a") as f:
        f.write(f"{name} {os.environ['PYTEST_XDIST_WORKER']} {nice}\\n")
    time.sleep(0.05)
"""


def test_the_groups_keep_their_priority_on_workers_of_their_own_the_others_are_lowered(
    tmp_path: Path,
) -> None:
    # This session's lanes are its two `test_group_*` modules, larger than any other unit, and
    # its last group `test_late_group`, which runs lowered.
    modules = {
        "test_group_a.py": 6,
        "test_group_b.py": 4,
        "test_free.py": 12,
        "test_late_group.py": 3,
    }
    for module, count in modules.items():
        prefix = module.removesuffix(".py").removeprefix("test_")
        tests = "".join(
            f"def test_{prefix}_{n}():\n    ran('{prefix}_{n}')\n\n" for n in range(count)
        )
        (tmp_path / module).write_text(RAN + "\n" + tests)
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nasyncio_default_fixture_loop_scope = function\n"
    )
    base = os.getpriority(os.PRIO_PROCESS, 0)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-n",
            "3",
            "--dist",
            "loadgroup",
            "-p",
            "no:cacheprovider",
        ],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    ran = [line.split() for line in (tmp_path / "ran.txt").read_text().splitlines()]
    assert len(ran) == 25
    workers = {
        group: {worker for test, worker, _ in ran if test.startswith(group)}
        for group in ("group_a", "group_b")
    }
    assert all(len(used) == 1 for used in workers.values()), ran
    assert workers["group_a"] != workers["group_b"], ran
    assert {int(nice) for test, _, nice in ran if test.startswith("group")} == {base}, ran
    free = [(worker, int(nice)) for test, worker, nice in ran if test.startswith("free")]
    assert {nice for _, nice in free} == {19}, ran
    late = [(worker, int(nice)) for test, worker, nice in ran if test.startswith("late")]
    assert len({worker for worker, _ in late}) == 1 and {nice for _, nice in late} == {19}, ran
    third = {worker for worker, _ in free} - workers["group_a"] - workers["group_b"]
    assert third, f"no worker ran only the other tests: {ran}"
