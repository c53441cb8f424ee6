"""`replog bench`'s meter of the servers' CPU: /proc readings of running processes, a gone
process left out, and cores counted only over the processes read both times."""

from __future__ import annotations

import os
import subprocess
import sys

from replog.cli.bench.server_cpu import cores_between, cpu_seconds


def test_a_busy_process_is_metered_and_a_gone_one_left_out() -> None:
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    before = cpu_seconds([os.getpid(), int(gone.stdout)])
    assert list(before) == [os.getpid()]
    sum(i * i for i in range(2_000_000))  # some CPU of our own
    after = cpu_seconds([os.getpid()])
    assert after[os.getpid()] > before[os.getpid()]


def test_cores_count_only_the_processes_read_both_times() -> None:
    before = {1: 10.0, 2: 5.0}
    after = {1: 12.0, 3: 99.0}  # 2 was killed, 3 restarted: neither counts
    assert cores_between(before, after, 4.0) == 0.5
    assert cores_between(before, after, 0.0) == 0.0
