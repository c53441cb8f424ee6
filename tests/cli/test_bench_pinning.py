"""`replog bench --server-cpus/--driver-cpus`: taskset's lists are read, a CPU this process may
not use is refused before anything starts, and a pinned block restores the thread's set."""

from __future__ import annotations

import os

import pytest

from replog.cli.bench.pinning import check_cpus, parse_cpus, pinned, taskset
from replog.errors import BenchSystemError


def test_taskset_lists_are_read() -> None:
    assert parse_cpus("0") == [0]
    assert parse_cpus("3,0-1, 1") == [0, 1, 3]
    assert taskset("0,1") == ["taskset", "-c", "0,1"] and taskset(None) == []


@pytest.mark.parametrize("text", ["", "a", "1-", "2-1", "0;1"])
def test_a_malformed_list_is_refused_naming_the_flag(text: str) -> None:
    with pytest.raises(BenchSystemError, match="--driver-cpus"):
        check_cpus(text, "--driver-cpus")


def test_a_cpu_this_process_may_not_use_is_refused() -> None:
    outside = max(os.sched_getaffinity(0)) + 1
    with pytest.raises(BenchSystemError, match=f"--server-cpus {outside}: CPU {outside}"):
        check_cpus(str(outside), "--server-cpus")
    assert check_cpus(None, "--server-cpus") is None


def test_a_pinned_block_pins_the_thread_and_restores_its_set() -> None:
    before = os.sched_getaffinity(0)
    first = min(before)
    with pinned(str(first)):
        assert os.sched_getaffinity(0) == {first}
    assert os.sched_getaffinity(0) == before
    with pinned(None):
        assert os.sched_getaffinity(0) == before
