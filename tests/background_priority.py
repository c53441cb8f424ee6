"""The in-process tests run at a lower CPU priority than the process tests' two lanes.

The process tests (tests/process_tests.py) run in groups, each on a worker of its own, one test
after another; they time failovers and timeouts in seconds and spend much of their time waiting on
their nodes. The in-process tests are pure CPU and time nothing. The scheduler
(tests/grouped_scheduling.py) hands out the largest units first, the clusters' and single nodes'
groups, so with three workers (pyproject.toml) the third starts with in-process tests, and the other
two take them once their group is done; the groups of LAST_GROUPS (Spark's and the late clusters')
come after every other unit. A worker lowers its priority to nice `BACKGROUND_NICE`, every thread of
it, at its first test outside the two lanes' groups and keeps it (raising it back would need a
privilege a CI machine may not grant): the in-process tests and the last groups then use what the
two lanes leave idle of the cores, instead of slowing their nodes. A lane's group handed to a
lowered worker (after its own worker died) runs lowered, slower but the same.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.process_tests import LAST_GROUPS, worker_group

BACKGROUND_NICE = 10
# The group a test module's tests form (None: none); a session of its own may name others.
group_of_module = worker_group
# The groups that run lowered, as the tests of no group do.
lowered_groups = LAST_GROUPS

_lowered = False


def lower_every_thread(nice: int) -> None:
    """This process's threads to nice `nice` at least (Linux's nice is per thread; a thread
    started later takes its starter's)."""
    tasks = Path("/proc/self/task")
    thread_ids = [int(tid) for tid in os.listdir(tasks)] if tasks.is_dir() else [0]
    for thread_id in thread_ids:
        try:
            current = os.getpriority(os.PRIO_PROCESS, thread_id)
            os.setpriority(os.PRIO_PROCESS, thread_id, max(nice, current))
        except ProcessLookupError:
            continue  # a thread that ended meanwhile


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    global _lowered
    if _lowered or not hasattr(item.config, "workerinput"):
        return
    group = group_of_module(item.path)
    if group is None or group in lowered_groups:
        lower_every_thread(BACKGROUND_NICE)
        _lowered = True
